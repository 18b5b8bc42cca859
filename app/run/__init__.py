"""The Run tab's parts: engine controller, live plots, log console, chat and load panels."""

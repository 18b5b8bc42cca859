"""The client side of a running engine: its process, start-up log, metrics, chat, load and demo profiles."""

"""Launch rules: what an engine (ours, or SGLang by version) accepts, predicted before the launch."""

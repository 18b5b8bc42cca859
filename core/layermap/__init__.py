"""The layer map: its vocabulary (mixers, FFNs, layers), folding of repeats and pipeline stages."""

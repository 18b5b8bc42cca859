"""Where a model comes from: config files, folders, the catalogue, the hub and the bundled default."""

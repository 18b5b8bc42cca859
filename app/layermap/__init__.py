"""The layer map widget: state, layout, painting, the view, the details panel and highlights."""

"""Two runs, one answer: A/B agreement between two servers on the same prompts (agreement.py,
verdict.py, ab.py), and where two settings of our engine part, block by block and step by step
(trace.py, divergence.py, layer_ab.py)."""

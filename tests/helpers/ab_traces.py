"""Two small layer-A/B traces (the shape compare/trace.py saves) where run B's conv state of layer 0
goes wrong after the prefill and block 0's output parts in the next step, and B's own expert
choice then differs at blocks 3 and 10: for the views of a comparison (report, Compare tab)."""

from __future__ import annotations

BLOCKS = 12


def parted_traces() -> tuple[dict, dict]:
    import torch

    gen = torch.Generator().manual_seed(0)

    def step(kind, tokens):
        return {"kind": kind, "sampled": 7, "own_sample": 7,
                "blocks": {i: torch.randn(tokens, 8, generator=gen) for i in range(BLOCKS)},
                "conv": {0: torch.randn(4, 3, generator=gen)}, "ssm": {0: torch.randn(2, 4, generator=gen)}, "flips": {}}

    a = {"steps": [step("prefill", 5), step("decode", 1)], "dtype": "float32",
         "layers": [(i, "mamba2" if i == 0 else "attention", "moe" if i in (3, 10) else "none") for i in range(BLOCKS)]}
    b = {**a, "steps": [{**s, "blocks": dict(s["blocks"]), "conv": dict(s["conv"])} for s in a["steps"]]}
    b["steps"][0]["conv"][0] = a["steps"][0]["conv"][0] + 1.0
    b["steps"][1]["blocks"] = {i: x * 1.5 for i, x in a["steps"][1]["blocks"].items()}
    b["steps"][1]["flips"] = {10: 2, 3: 1}
    return a, b

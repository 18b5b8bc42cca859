"""A closer look at one place where two traces part, from the tensors both runs kept whole there
(`--full STEP:BLOCK`, or `--full first`: the place the digests found): the exact error, and where
inside the tensor it sits (which tokens, which channels), so a wrong kernel's pattern shows (one
head, the last token, every channel a little).
"""

from __future__ import annotations

TOP = 5


def _top(values, n: int = TOP) -> list[list]:
    import torch

    k = min(n, values.numel())
    v, i = torch.topk(values, k)
    return [[int(j), float(x)] for j, x in zip(i.tolist(), v.tolist())]


def look_into(a, b, *, what: str = "output") -> dict:
    """a, b: the two runs' tensors (float32). Rows are tokens for a block output; a state is read as
    [its first dimension (channels or heads), the rest]."""
    import torch

    a, b = a.double(), b.double()
    if a.shape != b.shape:
        return {"what": what, "error": f"shapes differ: {tuple(a.shape)} and {tuple(b.shape)}"}
    rows_a = a.reshape(a.shape[0], -1) if a.dim() >= 2 else a.reshape(1, -1)
    diff = (b - a).reshape(rows_a.shape)
    scale = torch.linalg.vector_norm(a).item() or 1.0
    row_err = torch.linalg.vector_norm(diff, dim=1) / torch.linalg.vector_norm(rows_a, dim=1).clamp_min(1e-30)
    col_share = torch.linalg.vector_norm(diff, dim=0) / scale
    flat = diff.abs().reshape(-1)
    worst = int(flat.argmax().item()) if flat.numel() else 0
    cols = rows_a.shape[1]
    return {
        "what": what, "shape": list(a.shape),
        "rel_err": torch.linalg.vector_norm(diff).item() / scale,
        "max_abs_diff": float(flat.max().item()) if flat.numel() else 0.0,
        "max_at": [worst // cols, worst % cols],
        "worst_rows": _top(row_err),  # [row, that row's own relative error]
        "worst_columns": _top(col_share),  # [column, its share of the whole error norm]
        "rows_over_half": int((row_err > 0.5 * row_err.max()).sum().item()) if row_err.numel() else 0,
    }


def look_at(trace_a: dict, trace_b: dict, step: int, block: int) -> list[dict]:
    """The block output and, for a state layer, its conv and SSM states at that step, where both kept them."""
    out = []
    sa, sb = trace_a["steps"][step], trace_b["steps"][step]
    for kind, what in (("blocks", "output"), ("conv", "conv state"), ("ssm", "ssm state")):
        da, db = sa.get(kind, {}).get(block), sb.get(kind, {}).get(block)
        if da is not None and db is not None and da.full is not None and db.full is not None:
            out.append({"step": step, "block": block} | look_into(da.full, db.full, what=what))
    return out

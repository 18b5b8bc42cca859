"""The logprobs a traced step gives the token the run goes on with, for the layer-level A/B's verdict
on the answer itself: B reads A's tokens, so every step's logprob of the same token is compared
(no parting ends the comparison, as it does between two servers' own answers)."""

from __future__ import annotations

TOP = 5  # alternatives kept per step, as `bringup ab` asks the servers for


def token_logprobs(logits, token: int, top: int = TOP) -> dict:
    """One row of logits [vocab] -> the logprob of `token`, the top alternatives, and the largest
    |logit| (rounding in a dtype moves a logit in proportion to its size: precision.py)."""
    import torch

    row = logits.float()
    lp = torch.log_softmax(row, dim=-1)
    values, ids = lp.topk(min(top, lp.shape[-1]))
    return {"token": int(token), "logprob": float(lp[token]), "top": list(zip(ids.tolist(), values.tolist())),
            "logit_scale": float(row.abs().max())}


def answer_diffs(a: dict, b: dict) -> list[float]:
    """|A's logprob - B's| of the token each step goes on with, where both traces kept it and read the
    same token (a dump, or a step where B did not read A's token, gives none)."""
    out = []
    for sa, sb in zip(a["steps"], b["steps"]):
        la, lb = sa.get("logprobs"), sb.get("logprobs")
        if la and lb and la["token"] == lb["token"]:
            out.append(abs(la["logprob"] - lb["logprob"]))
    return out


def answer_text(diffs: list[float], floor: float, noise_name: str) -> str:
    """The answer's own logprobs against the precision's floor (verdict.py's, for servers): said
    beside the block view, which decides (a wrong scale of 2% moves a tiny model's logprobs by
    thousandths of a nat, below bf16's rounding, while its block output shows it)."""
    if not diffs:
        return ""
    worst = max(diffs)
    where = "within" if worst <= floor else "past"
    return (f"the answer's logprobs (A's token at each of {len(diffs)} steps) differ by up to {worst:.4f} nats, "
            f"{where} the {noise_name} floor {floor:.3f}")

"""MoE routing: which experts each token goes to, and with what weight.

`route_sigmoid_grouped` is DeepSeek-V3's "noaux_tc" router as NemotronH configures it: sigmoid
scores; the selection uses scores + e_score_correction_bias (a load-balancing bias that must not
change the weights), restricted to the best `topk_group` of `n_group` expert groups (a group
scores the sum of its two best); the weights are the plain sigmoid scores of the chosen experts,
optionally renormalised, times routed_scaling_factor.
`route_softmax` is the Mixtral / Qwen-MoE router: softmax, top-k, optional renormalisation.
"""

from __future__ import annotations

import torch


def route_sigmoid_grouped(
    router_logits: torch.Tensor,
    correction_bias: torch.Tensor | None,
    top_k: int,
    n_group: int = 1,
    topk_group: int = 1,
    norm_topk_prob: bool = True,
    routed_scaling_factor: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [T, E]. Returns (weights [T, top_k] float32, expert ids [T, top_k] int64)."""
    T, E = router_logits.shape
    scores = router_logits.float().sigmoid()
    choice = scores if correction_bias is None else scores + correction_bias.float()
    if n_group > 1:
        per_group = choice.view(T, n_group, E // n_group)
        group_score = per_group.topk(min(2, E // n_group), dim=-1).values.sum(-1)  # [T, n_group]
        keep_groups = group_score.topk(topk_group, dim=-1).indices
        group_mask = torch.zeros_like(group_score, dtype=torch.bool).scatter_(1, keep_groups, True)
        expert_mask = group_mask[:, :, None].expand(T, n_group, E // n_group).reshape(T, E)
        choice = choice.masked_fill(~expert_mask, float("-inf"))
    ids = choice.topk(top_k, dim=-1).indices
    weights = scores.gather(1, ids)
    if norm_topk_prob:
        weights = weights / (weights.sum(-1, keepdim=True) + 1e-20)
    return weights * routed_scaling_factor, ids


def route_softmax(router_logits: torch.Tensor, top_k: int, norm_topk_prob: bool = True,
                  weights_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """router_logits [T, E]. Returns (weights [T, top_k] float32, or rounded to weights_dtype as
    transformers' Qwen-MoE routers round them to the model's dtype; expert ids [T, top_k] int64)."""
    probs = torch.softmax(router_logits.float(), dim=-1)
    weights, ids = probs.topk(top_k, dim=-1)
    if norm_topk_prob:
        weights = weights / weights.sum(-1, keepdim=True)
    return (weights if weights_dtype is None else weights.to(weights_dtype)), ids


def router_logits(hidden: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The router's scores before routing, in float32 whatever the model's dtype: hidden [T, H],
    weight [E, H] -> [T, E]."""
    return torch.nn.functional.linear(hidden.float(), weight.float())

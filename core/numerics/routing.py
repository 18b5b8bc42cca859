"""MoE routing in a numerics run: which experts each token chose at each MoE block, and forcing a run
to another run's choices.

In half precision a token whose k-th and (k+1)-th expert scores are nearly tied can pick another
expert than the float32 reference does (a routing flip). That token's block output then differs by a
whole expert, which is not a kernel being wrong; it would make `compare` call the block divergent.
So the reference follows the device's routing (its own choice is kept to count the flips), and the
flips are reported apart from the error.

The router ops (`route_*` in the op namespace) return (weights [T, k], expert ids [T, k]); the
forced weights are the op's own formula at the forced ids (kernels/reference/moe_routing.py).
"""

from __future__ import annotations

import inspect

import torch

ROUTE_PREFIX = "route_"


def flipped_tokens(a: torch.Tensor, b: torch.Tensor) -> int:
    """Tokens whose expert *set* differs (the order of the k choices does not matter)."""
    if a.shape != b.shape:
        raise ValueError(f"expert ids of shape {tuple(a.shape)} and {tuple(b.shape)} do not match")
    return int((a.long().sort(-1).values != b.long().sort(-1).values).any(-1).sum().item())


def _bound(op: str, args, kwargs) -> dict:
    from bringup.kernels.reference import moe_routing

    reference = getattr(moe_routing, op)
    bound = inspect.signature(reference).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def forced_weights(op: str, args, kwargs, ids: torch.Tensor) -> torch.Tensor:
    """The routing weights `op` gives when the experts `ids` are chosen (float32, on the logits' device)."""
    a = _bound(op, args, kwargs)
    logits = a["router_logits"].float()
    ids = ids.to(logits.device, torch.long)
    if op == "route_sigmoid_grouped":
        w = logits.sigmoid().gather(1, ids)
        if a["norm_topk_prob"]:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        return w * a["routed_scaling_factor"]
    if op == "route_softmax":
        w = torch.softmax(logits, dim=-1).gather(1, ids)
        return w / w.sum(-1, keepdim=True) if a["norm_topk_prob"] else w
    raise KeyError(op)


def forceable(op: str) -> bool:
    return op in ("route_sigmoid_grouped", "route_softmax")


class RoutingRecorder:
    """Wraps the router ops of `model.ops` and tells the block by a pre-hook on each decoder layer.

    `routing[layer]`: the expert ids the run used, [tokens, k] over every forward, in order.
    With `forced` ({layer: ids over the same tokens}) the run uses those ids instead, and
    `flips[layer]` counts the tokens whose own choice differed."""

    def __init__(self, model, forced: dict[int, torch.Tensor] | None = None):
        self.model, self.forced = model, forced or {}
        self.current: int | None = None
        self.routing: dict[int, list[torch.Tensor]] = {}
        self.weights: dict[int, list[torch.Tensor]] = {}
        self.logits: dict[int, list[torch.Tensor]] = {}
        self.flips: dict[int, int] = {}
        self.offset: dict[int, int] = {}
        self.unforceable: set[str] = set()
        self._undo = []

    def __enter__(self) -> "RoutingRecorder":
        ops = self.model.ops
        for op in [name for name in ops.implementations if name.startswith(ROUTE_PREFIX)]:
            original = getattr(ops, op)
            setattr(ops, op, self._wrap(op, original))
            self._undo.append(lambda op=op, original=original: setattr(ops, op, original))
        for layer in self.model.decoder.layers:
            handle = layer.register_forward_pre_hook(lambda module, _args: setattr(self, "current", module.index))
            self._undo.append(handle.remove)
        return self

    def __exit__(self, *exc) -> None:
        for undo in reversed(self._undo):
            undo()

    def _wrap(self, op, original):
        def route(*args, **kwargs):
            weights, ids = original(*args, **kwargs)
            layer = self.current
            if layer is None:
                return weights, ids
            if layer in self.forced:
                start = self.offset.get(layer, 0)
                forced = self.forced[layer][start:start + ids.shape[0]]
                self.offset[layer] = start + ids.shape[0]
                if forced.shape != ids.shape:
                    raise ValueError(f"block {layer}: the routing to follow has expert ids {tuple(forced.shape)} "
                                     f"for a call of {tuple(ids.shape)}; the two runs did not read the same tokens")
                if not forceable(op):
                    self.unforceable.add(op)
                else:
                    self.flips[layer] = self.flips.get(layer, 0) + flipped_tokens(ids.cpu(), forced)
                    weights = forced_weights(op, args, kwargs, forced).to(weights.dtype)
                    ids = forced.to(ids.device, ids.dtype)
            self.routing.setdefault(layer, []).append(ids.detach().cpu())
            self.weights.setdefault(layer, []).append(weights.detach().float().cpu())
            logits = args[0] if args else kwargs.get("router_logits")
            if isinstance(logits, torch.Tensor):
                self.logits.setdefault(layer, []).append(logits.detach().float().cpu())
            return weights, ids

        return route

    def result(self) -> dict[int, torch.Tensor]:
        """Expert ids per MoE block, [tokens, k]."""
        return {layer: torch.cat(parts) for layer, parts in self.routing.items()}

    def details(self) -> dict[int, tuple[torch.Tensor, torch.Tensor | None]]:
        """(weights [tokens, k], router logits [tokens, experts]) per MoE block."""
        return {layer: (torch.cat(w), torch.cat(self.logits[layer]) if layer in self.logits else None)
                for layer, w in self.weights.items()}

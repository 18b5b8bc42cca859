"""MoE routing in a numerics run: which experts each token chose at each MoE block, and forcing a run
to another run's choices.

In half precision a token whose k-th and (k+1)-th expert scores are nearly tied can pick another
expert than the float32 reference does (a routing flip). That token's block output then differs by a
whole expert, which is not a kernel being wrong; it would make `compare` call the block divergent.
So the reference follows the device's routing (its own choice is kept to count the flips), and the
flips are reported apart from the error.

A router is seen by what it returns, not by its name: the recorder wraps every kernel function of
the model's op namespace (which every MoE block routes through: `route_softmax`, gpt-oss's
`router_topk_softmax`, any router added later) and takes a call that returns (weights [T, k]
floating, expert ids [T, k] integer) for a routing. Following another run's experts needs the op's
own formula for the weights at those ids (ROUTERS below: the formula of each router reference in
kernels/reference); a router seen without one is recorded, and a run asked to follow it is refused.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .kernel_calls import kernel_functions


def flipped_tokens(a: torch.Tensor, b: torch.Tensor) -> int:
    """Tokens whose expert *set* differs (the order of the k choices does not matter)."""
    if a.shape != b.shape:
        raise ValueError(f"expert ids of shape {tuple(a.shape)} and {tuple(b.shape)} do not match")
    return int((a.long().sort(-1).values != b.long().sort(-1).values).any(-1).sum().item())


def is_routing(result) -> bool:
    """(weights [T, k] floating, ids [T, k] integer): what every router returns, and no other op."""
    if not (isinstance(result, tuple) and len(result) == 2 and all(isinstance(t, torch.Tensor) for t in result)):
        return False
    weights, ids = result
    return (weights.dim() == 2 and weights.shape == ids.shape and weights.is_floating_point()
            and not ids.is_floating_point() and ids.dtype != torch.bool)


def _sigmoid_grouped_at(a: dict, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    w = logits.sigmoid().gather(1, ids)
    if a["norm_topk_prob"]:
        w = w / (w.sum(-1, keepdim=True) + 1e-20)
    return w * a["routed_scaling_factor"]


def _softmax_at(a: dict, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    w = torch.softmax(logits, dim=-1).gather(1, ids)
    return w / w.sum(-1, keepdim=True) if a["norm_topk_prob"] else w


def _topk_softmax_at(a: dict, logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    return torch.softmax(logits.gather(1, ids), dim=-1)  # softmax over the k chosen logits


def _biased_logits(a: dict) -> torch.Tensor:
    bias = a["bias"]
    return F.linear(a["hidden"].float(), a["weight"].float(), None if bias is None else bias.float())


@dataclass(frozen=True)
class Router:
    logits: Callable[[dict], torch.Tensor]  # the op's bound arguments -> router logits [T, E], float32
    weights_at: Callable[[dict, torch.Tensor, torch.Tensor], torch.Tensor]  # (arguments, logits, ids) -> [T, k]


ROUTERS = {
    "route_sigmoid_grouped": Router(lambda a: a["router_logits"].float(), _sigmoid_grouped_at),
    "route_softmax": Router(lambda a: a["router_logits"].float(), _softmax_at),
    "router_topk_softmax": Router(_biased_logits, _topk_softmax_at),
}


def _bound(op: str, args, kwargs) -> dict:
    from bringup.kernels.reference import OPS

    bound = inspect.signature(OPS[op]).bind(*args, **kwargs)
    bound.apply_defaults()
    return bound.arguments


def forced_weights(op: str, args, kwargs, ids: torch.Tensor) -> torch.Tensor:
    """The routing weights `op` gives when the experts `ids` are chosen (float32, on the logits' device)."""
    a = _bound(op, args, kwargs)
    logits = ROUTERS[op].logits(a)
    return ROUTERS[op].weights_at(a, logits, ids.to(logits.device, torch.long))


def router_logits_of(op: str, args, kwargs) -> torch.Tensor | None:
    return ROUTERS[op].logits(_bound(op, args, kwargs)) if op in ROUTERS else None


def forceable(op: str) -> bool:
    return op in ROUTERS


def _owned_modules(layers) -> dict:
    """Each decoder layer and every module inside it that no other layer shares -> that layer's index.
    The parts are hooked too: without a block hook the model runs a layer's parts itself, not the layer."""
    owners: dict = {}
    for layer in layers:
        for module in layer.modules():
            owners.setdefault(module, set()).add(layer.index)
    return {module: next(iter(i)) for module, i in owners.items() if len(i) == 1}


class RoutingRecorder:
    """Wraps the kernel functions of `model.ops` (a call returning a routing is a router's) and tells
    the block by pre-hooks on each decoder layer and its own parts.

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
        for op in kernel_functions(ops):
            original = getattr(ops, op)
            setattr(ops, op, self._wrap(op, original))
            self._undo.append(lambda op=op, original=original: setattr(ops, op, original))
        for module, index in _owned_modules(self.model.decoder.layers).items():
            handle = module.register_forward_pre_hook(lambda _m, _args, index=index: setattr(self, "current", index))
            self._undo.append(handle.remove)
        return self

    def __exit__(self, *exc) -> None:
        for undo in reversed(self._undo):
            undo()

    def _wrap(self, op, original):
        def route(*args, **kwargs):
            result = original(*args, **kwargs)
            layer = self.current
            if layer is None or not is_routing(result):
                return result
            weights, ids = result
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
            logits = router_logits_of(op, args, kwargs)
            if logits is not None:
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

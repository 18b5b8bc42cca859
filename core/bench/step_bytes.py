"""The bytes one decode step must move, for any family the engine runs: the floor under its time.

A decode step of B requests, each with `context` tokens behind it, reads at least
- every weight but the routed experts (the embedding: only the B rows looked up, unless it is tied
  to the LM head, which reads it whole);
- the routed experts the B tokens pick: per MoE layer E * (1 - (1 - k/E)^B) distinct experts on
  average under uniform routing, each expert's tensors (its slice of every stacked [E, ...] tensor);
- each request's recurrent state, read and written once per state layer (the map's conv and SSM
  elements at the pools' dtypes);
- each request's KV, once per KV layer: the map's K+V elements per token over the context (a
  sliding layer's over its window only).
bench/nano_full.py states the same for Nemotron-3-Nano alone; bench/families.py uses this for all.
"""

from __future__ import annotations


def _routed(name: str, shape: tuple, experts: int) -> bool:
    """A slice-per-expert tensor of a MoE layer: stacked [E, ...] experts and their biases (not the router)."""
    return len(shape) >= 2 and shape[0] == experts and (len(shape) == 3 or "experts" in name)


def step_bytes(model, batch: int, context: int, *, kv_bytes: int = 2, conv_bytes: int = 2, ssm_bytes: int = 4) -> dict:
    """{weights, experts, experts_touched (mean per MoE layer), state, kv, total} in bytes for one decode step."""
    layer_map = model.layer_map
    embedding = model.input_embedding.weight
    weights = experts = 0
    touched_sum, moe_layers = 0.0, 0
    counted: set[int] = set()
    for layer, module in zip(layer_map.layers, model.decoder.layers):
        moe = layer.moe
        routed = 0
        for name, p in module.named_parameters():
            counted.add(id(p))
            size = p.numel() * p.element_size()
            if moe is not None and _routed(name, tuple(p.shape), moe.experts):
                routed += size
            else:
                weights += size
        if moe is not None and routed:
            k = min(moe.top_k or moe.experts, moe.experts)
            touched = moe.experts * (1 - (1 - k / moe.experts) ** batch)
            experts += routed / moe.experts * touched
            touched_sum, moe_layers = touched_sum + touched, moe_layers + 1
    for p in {id(p): p for p in model.parameters()}.values():  # outside the layers (shared blocks included once)
        if id(p) in counted:
            continue
        if p is embedding and not model.tied:
            weights += batch * p.shape[1] * p.element_size()  # only the rows looked up
        else:
            weights += p.numel() * p.element_size()
    state = kv = 0
    for layer in layer_map.layers:
        state += batch * 2 * (layer.conv_state_elems * conv_bytes + layer.ssm_state_elems * ssm_bytes)
        if layer.is_kv:
            window = layer.attention.window if layer.mixer == "sliding_attention" and layer.attention else None
            kv += batch * min(context, window or context) * layer.kv_elems_per_token * kv_bytes
    return {"weights": round(weights), "experts": round(experts),
            "experts_touched": touched_sum / moe_layers if moe_layers else 0.0, "state": state, "kv": kv,
            "total": round(weights + experts + state + kv)}

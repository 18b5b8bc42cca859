"""A transformers model holding the same weights as an engine model (the baseline of a benchmark
run on `--load-format dummy` weights, which exist nowhere on disk).

The transformers model is built on the meta device from the same config, allocated on the target
device, and every tensor of its state dict is copied from the engine parameter that the engine's
own checkpoint-name mapping (`map_weight_name`) puts it in, so both run the same function.
"""

from __future__ import annotations

import torch

from bringup.core.errors import UserError


def transformers_config(config: dict):
    from transformers import AutoConfig

    fields = {k: v for k, v in config.items() if k not in ("model_type", "auto_map", "architectures")}
    try:
        return AutoConfig.for_model(config["model_type"], **fields)
    except (KeyError, ValueError) as err:
        raise UserError(f"transformers cannot build a {config.get('model_type')!r} config: {err}") from None


@torch.no_grad()
def transformers_twin(model, config: dict, device, dtype: torch.dtype):
    """The transformers CausalLM of `config` on `device` with `model`'s weights."""
    from transformers import AutoModelForCausalLM

    cfg = transformers_config(config)
    with torch.device("meta"):
        twin = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    twin.to_empty(device=device)
    params = dict(model.named_parameters())
    persistent = twin.state_dict()
    for name, dest in persistent.items():
        target = model.map_weight_name(name)
        if target is None:
            if name == "lm_head.weight" and model.tied:
                dest.copy_(params["backbone.embeddings.weight"] if "backbone.embeddings.weight" in params
                           else model.input_embedding.weight)
                continue
            raise UserError(f"transformers' {name} has no counterpart in the engine's model")
        pname, index = target
        src = params.get(pname)
        if src is None:
            raise UserError(f"transformers' {name} maps to {pname}, which the engine's model lacks")
        src = src if index is None else src[index]
        if tuple(src.shape) != tuple(dest.shape):
            raise UserError(f"transformers' {name} is {list(dest.shape)}, the engine's {pname} {list(src.shape)}")
        dest.copy_(src)
    stray = [n for n, _ in twin.named_buffers() if n not in persistent]
    if stray:  # non-persistent buffers (rotary tables) would be garbage after to_empty
        raise UserError(f"transformers' model has buffers that are not in its state dict ({stray[:3]}); "
                        "the twin cannot be built from the meta device")
    return twin.eval()


@torch.no_grad()
def transformers_same_shapes(config: dict, device, dtype: torch.dtype):
    """The transformers CausalLM of `config` on `device` with transformers' own random weights: the same
    work as the engine's model, not the same function. For families the twin cannot copy (the engine
    fuses, shares or rescales their checkpoint tensors at load, or transformers derives buffers the
    meta device cannot hold)."""
    from transformers import AutoModelForCausalLM

    with torch.device(device):
        model = AutoModelForCausalLM.from_config(transformers_config(config), dtype=dtype)
    return model.eval()

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
    # A model whose in-memory transformers names differ from its checkpoint's (fused experts, norms
    # stored another way) says what each such tensor holds.
    own = getattr(model, "twin_tensor", None)
    buffers = {n for n, _ in twin.named_buffers()}
    # Buffers the engine does not load (rotary tables, MiniMax's decay tables, Gemma's embed_scale) are
    # computed again first: a module rebuilt through transformers' own initialisation also draws its
    # parameters, which the copy below then overwrites with the engine's.
    wanted = {n for n in buffers if n not in persistent or _engine_lacks(model, own, n)}
    stray = sorted(wanted - _rebuild_buffers(twin, wanted, device))
    if stray:  # computed buffers would be garbage after to_empty
        raise UserError(f"transformers' model has buffers the engine's weights do not give ({stray[:3]}) and "
                        "that cannot be computed again from its config; the twin cannot be built")
    for name, dest in persistent.items():
        if name in wanted:
            continue
        value = own(name) if own is not None else None
        if value is not None:
            if tuple(value.shape) != tuple(dest.shape):
                raise UserError(f"transformers' {name} is {list(dest.shape)}, the engine's {list(value.shape)}")
            dest.copy_(value)
            continue
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
    return twin.eval()


def _engine_lacks(model, own, name: str) -> bool:
    """A persistent buffer of transformers' model that the engine's weights do not give."""
    return (own is None or own(name) is None) and model.map_weight_name(name) is None


def _rebuild_buffers(twin, names: set[str], device) -> set[str]:
    """Buffers computed from the config, not learnt (rotary tables, MiniMax's decay tables), hold
    garbage after to_empty: a module holding some of `names` is built again on the CPU from its
    config (and its layer index, where it takes one) and those buffers copied in. Returns the names
    so restored."""
    done: set[str] = set()
    for mod_name, module in twin.named_modules():
        prefix = f"{mod_name}." if mod_name else ""
        own = [n for n, _ in module.named_buffers(recurse=False) if prefix + n in names]
        config = getattr(module, "config", None) or twin.config  # a module may not keep its config
        if not own:
            continue
        fresh = None
        for args in ((config,), (config, getattr(module, "layer_idx", None))):
            if args[-1] is None:
                continue
            try:
                fresh = type(module)(*args)
                break
            except Exception:  # noqa: BLE001 - not rebuildable this way: the caller names what is left
                continue
        if fresh is None:
            done |= _initialise_in_place(twin, module, own, prefix)
            continue
        for n in own:
            getattr(module, n).copy_(getattr(fresh, n).to(device))
            done.add(prefix + n)
    return done


def _initialise_in_place(twin, module, own: list[str], prefix: str) -> set[str]:
    """A module that cannot be built from the config alone (Gemma's scaled embedding takes its sizes and
    scale as arguments) through transformers' own initialisation of it: the buffers are filled with NaN
    first, so only those it really computed count as restored."""
    init = getattr(twin, "_init_weights", None)
    if init is None:
        return set()
    for n in own:
        getattr(module, n).fill_(float("nan"))
    try:
        init(module)
    except Exception:  # noqa: BLE001 - not initialisable this way: the caller names what is left
        return set()
    return {prefix + n for n in own if not getattr(module, n).isnan().any()}


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

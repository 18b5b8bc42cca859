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

    # (a model whose load folds config factors into its weights says how the twin must not apply them)
    cfg = transformers_config(model.twin_config(config) if hasattr(model, "twin_config") else config)
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
    tied = _tied_copies(twin)  # transformers' tied copies (Zamba2's shared block per use): tied again below
    unmatched = []
    for name, dest in persistent.items():
        if name in wanted or name in tied:
            continue
        value = own(name) if own is not None else None
        if value is not None:
            if tuple(value.shape) != tuple(dest.shape):
                raise UserError(f"transformers' {name} is {list(dest.shape)}, the engine's {list(value.shape)}")
            dest.copy_(value)
            continue
        target = model.map_weight_name(name)
        if target is None and name == "lm_head.weight" and model.tied:
            dest.copy_(params["backbone.embeddings.weight"] if "backbone.embeddings.weight" in params
                       else model.input_embedding.weight)
            continue
        src = _engine_tensor(params, target)
        if src is None or tuple(src.shape) != tuple(dest.shape):
            unmatched.append(name)  # named otherwise in memory than in the checkpoint (fused experts...)
            continue
        dest.copy_(src)
    if unmatched:
        _fill_through_checkpoint_names(twin, model, params, {n: persistent[n] for n in unmatched})
    if tied:
        twin.tie_weights()
    return twin.eval()


def _engine_tensor(params: dict, target) -> torch.Tensor | None:
    """The engine's tensor a checkpoint name maps to ((parameter, index) or None), or None."""
    if target is None or target[0] not in params:
        return None
    src = params[target[0]]
    return src if target[1] is None else src[target[1]]


def _tied_copies(twin) -> set[str]:
    """Names transformers ties to another tensor of the model (its `tie_weights` makes them one)."""
    expand = getattr(twin, "get_expanded_tied_weights_keys", None)
    if expand is None:
        return set()
    ties = expand(all_submodels=True)
    if not getattr(twin.config, "tie_word_embeddings", False):
        ties = {t: s for t, s in ties.items() if not t.endswith("lm_head.weight")}
    return set(ties)


def _fill_through_checkpoint_names(twin, model, params: dict, dests: dict[str, torch.Tensor]) -> None:
    """Fill tensors whose in-memory transformers names the engine does not know (transformers 5 fuses
    and renames checkpoint tensors at load: Granite-MoE's and Jamba's experts) through transformers'
    own reversal of that conversion: each element's position is sent through it as an index, so every
    checkpoint-named tensor says which elements it holds, and the engine's tensor of that checkpoint
    name fills them."""
    try:
        from transformers.core_model_loading import revert_weight_conversion
    except ImportError:
        revert_weight_conversion = None
    first, where, start = {}, {}, 0
    for name, dest in dests.items():
        first[name] = start
        where[name] = torch.arange(start, start + dest.numel(), dtype=torch.int64).view(dest.shape)
        start += dest.numel()
    reverted = revert_weight_conversion(twin, dict(where)) if revert_weight_conversion is not None else where
    values = torch.empty(start, dtype=next(iter(dests.values())).dtype, device=next(iter(dests.values())).device)
    seen = torch.zeros(start, dtype=torch.bool)
    for ckpt_name, index in reverted.items():
        src = _engine_tensor(params, model.map_weight_name(ckpt_name))
        if src is None:
            raise UserError(f"transformers' {ckpt_name} (checkpoint name) has no counterpart in the engine's model")
        if tuple(src.shape) != tuple(index.shape):
            raise UserError(f"transformers' {ckpt_name} is {list(index.shape)}, the engine's {list(src.shape)}")
        flat = index.reshape(-1)
        values[flat.to(values.device)] = src.reshape(-1).to(values.dtype)
        seen[flat] = True
    if not bool(seen.all()):
        missing = [n for n in dests if not bool(seen[first[n]:first[n] + dests[n].numel()].all())]
        raise UserError(f"transformers' {missing[:3]} are not all given by the engine's weights; the twin cannot be built")
    for name, dest in dests.items():
        dest.copy_(values[first[name]:first[name] + dest.numel()].view(dest.shape))


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
        # (a module built alone may lack a buffer its parent registers on it: Falcon-H1's mup_vector)
        if fresh is None or not all(n in dict(fresh.named_buffers(recurse=False)) for n in own):
            done |= _initialise_in_place(twin, mod_name, own, prefix)
            continue
        for n in own:
            getattr(module, n).copy_(getattr(fresh, n).to(device))
            done.add(prefix + n)
    return done


def _initialise_in_place(twin, mod_name: str, own: list[str], prefix: str) -> set[str]:
    """Buffers of a module that cannot be built from the config alone (Gemma's scaled embedding takes
    its sizes and scale as arguments), computed through transformers' own initialisation: of the module,
    else of its parents in turn (Falcon-H1's model sets each mixer's mup_vector). The buffers are filled
    with NaN first, so only those really computed count as restored."""
    init = getattr(twin, "_init_weights", None)
    if init is None:
        return set()
    module = twin.get_submodule(mod_name)
    for n in own:
        getattr(module, n).fill_(float("nan"))
    parts = mod_name.split(".") if mod_name else []
    for depth in range(len(parts), -1, -1):
        try:
            init(twin.get_submodule(".".join(parts[:depth])))
        except Exception:  # noqa: BLE001 - not initialisable this way: a parent may be
            continue
        if not any(getattr(module, n).isnan().any() for n in own):
            break
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

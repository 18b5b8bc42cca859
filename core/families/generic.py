"""Any model_type the installed transformers knows, read through transformers itself.

The config class is built from config.json (no weights, no remote code), the decoder is built on
the meta device (no memory), and the map is read off both: layer kinds from `layer_types` /
`mlp_layer_types` where the config class has them (it fills its own defaults), otherwise from the
modules each layer holds; parameters per layer from the modules; KV geometry from the attention
projections; experts and top-k from the expert modules and the config. Every map from here carries
`provenance` saying so. Only this module imports torch and transformers, and only when called.
"""

from __future__ import annotations

import contextlib
import io
import logging
import warnings

from bringup.core.errors import UserError
from bringup.core.families._assemble import FamilyResult, LayerSpec
from bringup.core.families._blocks import Part
from bringup.core.families._view import MAX_DIM, ConfigView
from bringup.core.families.layer_types import hybrid_family
from bringup.core.layermap.layer_geometry import (
    AttentionGeometry,
    GatedDeltaNetGeometry,
    KimiDeltaGeometry,
    LatentKV,
    LightningGeometry,
    Mamba2Geometry,
    MambaGeometry,
    MoEGeometry,
    ShortConvGeometry,
)

MODEL_TYPES: tuple[str, ...] = ()
# Larger stacks would take minutes to build even on the meta device; no real model comes close.
MAX_GENERIC_LAYERS = 512
MAX_EXPERTS = 4096
_SIZE_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
_EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
_TOP_K_KEYS = ("num_experts_per_tok", "top_k_experts", "moe_topk", "num_experts_per_token", "moe_k", "top_k")

# transformers' layer_types vocabulary (configuration_utils.ALLOWED_ATTN_LAYER_TYPES) -> our mixer;
# None = decided from the layer's modules (a "linear_attention" may be Mamba, DeltaNet or lightning).
LAYER_TYPE_MIXERS: dict[str, str | None] = {
    "full_attention": "attention",
    "attention": "attention",
    "sliding_attention": "sliding_attention",
    "chunked_attention": "sliding_attention",
    "window_attention": "sliding_attention",
    "reference_sliding_attention": "sliding_attention",
    "indexed_attention": "sparse_attention",
    "deepseek_sparse_attention": "sparse_attention",
    "compressed_sparse_attention": "sparse_attention",
    "heavily_compressed_attention": "sparse_attention",
    "minimax_m3_sparse": "sparse_attention",
    "linear_attention": None,
    "mamba": None,
    "conv": "short_conv",
    "hybrid": None,  # attention with a recurrent part beside it: Mamba2 (Falcon-H1, Zamba2) or something else
    "hybrid_sliding": None,
    "moe": "none",  # NemotronH: a block that is only an FFN
    "mlp": "none",
}
_FFN_TYPES = {"sparse": "moe", "dense": "mlp"}


def knows(model_type) -> bool:
    """Whether the installed transformers has a config class for `model_type` (False without transformers)."""
    if not isinstance(model_type, str) or not model_type:
        return False
    try:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except Exception:  # transformers missing or broken: the generic path is simply not there
        return False
    return model_type in CONFIG_MAPPING_NAMES


@contextlib.contextmanager
def _quiet():
    """transformers logs and warns freely while building; the map's notes say what matters."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
            warnings.simplefilter("ignore")
            logging.disable(logging.WARNING)
            yield
    finally:
        logging.disable(logging.NOTSET)
        hf_logging.set_verbosity(level)


def _why(err: BaseException) -> str:
    """The exception in one line: its type and its first lines (strict validators put the cause on line 2)."""
    lines = [line.strip() for line in str(err).strip().splitlines() if line.strip()]
    text = " ".join(lines[:3])
    return f"{type(err).__name__}: {text[:400]}" if text else type(err).__name__


def _precheck(view: ConfigView) -> None:
    """Refuse sizes that would make the meta build run for minutes before transformers sees them."""
    for key in _SIZE_KEYS:
        if view.has(key):
            view.int(key, minimum=1, maximum=MAX_GENERIC_LAYERS)
    for key in _EXPERT_KEYS:
        if view.has(key):
            view.int(key, minimum=0, maximum=MAX_EXPERTS)
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size"):
        if view.has(key):
            view.int(key, minimum=0, maximum=MAX_DIM)
    for key in ("layer_types", "mlp_layer_types"):
        if view.has(key):
            view.list(key, item=str, max_len=MAX_GENERIC_LAYERS)


def hf_config(config: dict, label: str):
    """transformers' config object for the decoder of `config` (wrappers give their text config)."""
    from transformers import AutoConfig

    kwargs = {k: v for k, v in config.items() if k not in ("auto_map", "model_type")}
    model_type = config.get("model_type")
    try:
        with _quiet():
            full = AutoConfig.for_model(model_type, **kwargs)
            text = full.get_text_config(decoder=True)
    except Exception as err:  # the config class validates in its own way: report it, don't crash
        raise UserError(
            f"{label}: transformers' config class for model_type {model_type!r} rejects this config ({_why(err)}). "
            "Fix the field it names in config.json"
        ) from None
    return full, text


def _meta_model(text_cfg, label: str):
    import torch
    from transformers import AutoModel, AutoModelForCausalLM

    errors = []
    for factory in (AutoModelForCausalLM, AutoModel):
        try:
            with _quiet(), torch.device("meta"):
                return factory.from_config(text_cfg)
        except Exception as err:  # try the next factory; report all if none builds
            errors.append(_why(err))
    raise UserError(
        f"{label}: transformers could not build {type(text_cfg).__name__} on the meta device ({'; '.join(errors)}). "
        "The config may be inconsistent; fix the field named there, or add a family module under core/families/"
    )


def _decoder_layers(model, n: int):
    """The ModuleList holding the decoder layers: n entries, the most parameters among such lists."""
    import torch

    best, best_size = None, -1
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n and name.split(".")[-1] in ("layers", "h", "blocks", "layer"):
            size = sum(p.numel() for p in module.parameters())
            if size > best_size:
                best, best_size = module, size
    return best


def _per_layer(text_cfg, i: int):
    if getattr(text_cfg, "is_heterogeneous", False):
        return text_cfg.per_layer_config[i]
    return text_cfg


def _get(cfg, keys, default=None):
    for key in keys:
        try:
            value = getattr(cfg, key)
        except Exception:  # heterogeneous configs raise on ambiguous globals
            continue
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return default


# -- reading one layer's modules --------------------------------------------------------------------


def _children(layer):
    return [(name, m) for name, m in layer.named_modules() if name]


def _is_expert_name(name: str) -> bool:
    last = name.split(".")[-1]
    return last.endswith("experts") and "shared" not in last


def _experts(layer) -> list:
    """Routed expert containers in a layer (shared experts excluded)."""
    found = [m for name, m in _children(layer) if _is_expert_name(name)]
    return [m for m in found if not any(m is not o and any(c is m for c in o.modules()) for o in found)]


def _ffn_from_modules(layer) -> str:
    if _experts(layer):
        return "moe"
    for name, m in _children(layer):
        last = name.split(".")[-1]
        if last in ("mlp", "feed_forward", "ffn", "shared_mlp") or type(m).__name__.endswith("MLP"):
            return "mlp"
    return "none"


_RECURRENT_NAMES = (
    ("GatedDeltaNet", "gated_delta_net"),
    ("DeltaNet", "gated_delta_net"),
    ("KimiDelta", "kimi_delta_attention"),
    ("DeltaAttention", "kimi_delta_attention"),
    ("Lightning", "lightning_attention"),
    ("ShortConv", "short_conv"),
)


def _recurrent_mixer(layer) -> tuple[str | None, object | None]:
    """(mixer, module) of a layer's recurrent token mixer, or (None, None)."""
    for _, m in _children(layer):
        cls = type(m).__name__
        for fragment, mixer in _RECURRENT_NAMES:
            if fragment in cls:
                return mixer, m
    for _, m in _children(layer):
        # A selective-scan mixer: A_log per channel and state (Mamba1) or per head (Mamba2).
        a_log = getattr(m, "A_log", None)
        if a_log is not None and (hasattr(m, "ssm_state_size") or "Mamba" in type(m).__name__):
            return ("mamba" if a_log.dim() == 2 else "mamba2"), m
    return None, None


def _attention_module(layer):
    for _, m in _children(layer):
        if any(hasattr(m, p) for p in ("q_proj", "q_a_proj", "q_b_proj", "qkv_proj", "query_key_value", "Wqkv", "c_attn")):
            return m
    return None


def _mixer_from_modules(layer, text_cfg, layer_type: str | None = None) -> tuple[str, str | None]:
    """(mixer, note) from the modules a layer holds; `layer_type` is the config's word for it, if any."""
    recurrent, module = _recurrent_mixer(layer)
    attn = _attention_module(layer)
    if module is not None and attn is not None and any(attn is m for m in module.modules()):
        attn = None  # the recurrent mixer itself has q/k/v projections (lightning, DeltaNet)
    if recurrent and attn is not None:
        if recurrent == "mamba2":
            return "attention+mamba2", None
        kind = "sliding_attention" if layer_type and "sliding" in layer_type else "attention"
        # The vocabulary has no attention+<other recurrent> mixer: draw the attention, say what is beside it.
        return kind, f"{layer_type or 'hybrid'} layers also run a {recurrent} part whose state is not counted"
    if recurrent:
        return recurrent, None
    if attn is not None:
        if getattr(attn, "indexer", None) is not None:
            return "sparse_attention", None
        # Without layer_types, a window on the module or on the config (Mistral) applies to every layer.
        window = getattr(attn, "sliding_window", None)
        if not isinstance(window, int):
            window = _get(text_cfg, ("sliding_window",))
        return ("sliding_attention" if isinstance(window, int) and window > 0 else "attention"), None
    return "none", None


def _own_params(stack) -> list[int]:
    """Parameters of each layer; weights that several layers share (Zamba2's shared blocks) count outside."""
    holders: dict[int, int] = {}
    for layer in stack:
        for p in {id(p): p for p in layer.parameters()}.values():
            holders[id(p)] = holders.get(id(p), 0) + 1
    return [sum(p.numel() for p in {id(p): p for p in layer.parameters()}.values() if holders[id(p)] == 1) for layer in stack]


def _expert_part(layer, layer_cfg, params: int) -> Part:
    """Routed experts: their count, top-k, and what a token touches."""
    containers = _experts(layer)
    routed = sum(sum(p.numel() for p in c.parameters()) for c in containers)
    experts = 0
    for c in containers:
        n = len(c) if hasattr(c, "__len__") else getattr(c, "num_experts", 0)
        if not n:
            shapes = [p.shape[0] for p in c.parameters(recurse=False) if p.dim() >= 3]
            n = shapes[0] if shapes else 0
        experts = max(experts, int(n or 0))
    experts = experts or _get(layer_cfg, _EXPERT_KEYS, 0)
    top_k = _get(layer_cfg, _TOP_K_KEYS, experts) or experts
    if not experts:
        return Part(params=params)
    active = params - routed + routed // experts * min(top_k, experts)
    return Part(params=params, active=active, moe=MoEGeometry(experts=experts, top_k=top_k))


def _width(module) -> int | None:
    """Output width of a projection: a Linear, or a wrapper around one (Gemma 4's clippable linears)."""
    import torch

    if module is None:
        return None
    out = getattr(module, "out_features", None)
    if isinstance(out, int):
        return out
    weight = getattr(module, "weight", None)
    if isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0])
    inner = [m for m in module.modules() if isinstance(m, torch.nn.Linear)]
    return inner[0].out_features if len(inner) == 1 else None


def _kv_part(attn, layer_cfg, mixer: str) -> Part:
    """KV elements per token at TP 1 from the attention module's projections, and its geometry."""
    heads = _get(layer_cfg, ("num_attention_heads", "n_head"))
    kv_heads = _get(layer_cfg, ("num_key_value_heads", "num_kv_heads"), heads)
    head_dim = _get(layer_cfg, ("head_dim",))
    kv, v_head_dim, latent = 0, None, None
    mla = _width(getattr(attn, "kv_a_proj_with_mqa", None))
    k = _width(getattr(attn, "k_proj", None))
    if mla:
        # MLA keeps the compressed latent and the rope key (kv_lora_rank + qk_rope_head_dim), as SGLang does.
        kv = mla
        rope, nope = _get(layer_cfg, ("qk_rope_head_dim",)), _get(layer_cfg, ("qk_nope_head_dim",))
        rank = _get(layer_cfg, ("kv_lora_rank",))
        latent = LatentKV(kv_lora_rank=rank, qk_rope_head_dim=rope, q_lora_rank=_get(layer_cfg, ("q_lora_rank",), 0))
        head_dim = _get(layer_cfg, ("qk_head_dim",), rope + nope if rope and nope else None)
        kv_heads = None  # the latent cache has no KV heads
    elif k:
        v = _width(getattr(attn, "v_proj", None))
        kv = k + (v or k)  # K = V projection (no v_proj) still caches both
        # The module knows its own shape where layers differ (Gemma 4's global layers, MiMo's SWA heads).
        module_dim = getattr(attn, "head_dim", None)
        if isinstance(module_dim, int) and module_dim > 0 and k % module_dim == 0:
            head_dim, kv_heads = module_dim, k // module_dim
        if v and kv_heads and v != k:
            v_head_dim = v // kv_heads
    elif kv_heads and head_dim:
        kv = 2 * kv_heads * head_dim
    indexer = getattr(attn, "indexer", None) if attn is not None else None
    wk = _width(getattr(indexer, "wk", None)) if indexer is not None else None
    if wk:
        # The lightning indexer caches one key per token too (index_head_dim), beside the MLA latent.
        kv += wk
    window = _get(layer_cfg, ("sliding_window", "attention_chunk_size")) if mixer == "sliding_attention" else None
    geometry = AttentionGeometry(
        heads=heads or None, kv_heads=kv_heads or None, head_dim=head_dim or None, v_head_dim=v_head_dim,
        window=window or None, sinks=attn is not None and getattr(attn, "sinks", None) is not None, latent=latent,
        indexer_head_dim=wk or None, index_topk=_get(layer_cfg, ("index_topk",)) if wk else None,
    )
    return Part(kv_elems=kv, attention=geometry)


def _state_part(module, mixer: str) -> Part:
    """Conv and recurrent state elements per request from the mixer's modules and attributes."""
    import torch

    if module is None:
        return Part()
    conv, kernel = 0, None
    for m in module.modules():
        if isinstance(m, torch.nn.Conv1d):
            conv += m.weight.shape[0] * (m.kernel_size[0] - 1)
            kernel = m.kernel_size[0]

    def attr(*names):
        for n in names:
            v = getattr(module, n, None)
            if isinstance(v, int) and not isinstance(v, bool):
                return v
        return None

    def known(*values) -> bool:
        return None not in values

    ssm, geometry = 0, {}
    if mixer in ("mamba2", "attention+mamba2"):
        heads, dim, d_state = attr("num_heads", "n_heads"), attr("head_dim"), attr("ssm_state_size", "d_state")
        ssm = heads * dim * d_state if known(heads, dim, d_state) else 0
        # The sizes the planner needs to split this state over TP ranks as SGLang does.
        groups, m_kernel = attr("n_groups", "ngroups"), attr("conv_kernel_size", "d_conv") or kernel
        if known(heads, dim, groups, d_state, m_kernel):
            geometry["mamba2"] = Mamba2Geometry(heads=heads, head_dim=dim, groups=groups, d_state=d_state,
                                                conv_kernel=m_kernel, chunk_size=attr("chunk_size"))
    elif mixer == "mamba":
        inner, d_state = attr("intermediate_size"), attr("ssm_state_size")
        ssm = inner * d_state if known(inner, d_state) else 0
        geometry["mamba"] = MambaGeometry(inner=inner, d_state=d_state, conv_kernel=kernel,
                                          dt_rank=attr("time_step_rank", "dt_rank"))
    elif mixer == "gated_delta_net":
        nk, nv, dk, dv = attr("num_k_heads"), attr("num_v_heads"), attr("head_k_dim"), attr("head_v_dim")
        ssm = nv * dk * dv if known(nv, dk, dv) else 0
        if known(nk, nv, dk, dv, kernel):
            geometry["gated_delta_net"] = GatedDeltaNetGeometry(key_heads=nk, value_heads=nv, key_head_dim=dk,
                                                                value_head_dim=dv, conv_kernel=kernel)
    elif mixer in ("kimi_delta_attention", "lightning_attention"):
        heads, dim = attr("num_heads", "num_attention_heads"), attr("head_dim")
        ssm = heads * dim * dim if known(heads, dim) else 0
        if mixer == "lightning_attention" and known(heads, dim):
            geometry["lightning"] = LightningGeometry(heads=heads, head_dim=dim)
        elif mixer == "kimi_delta_attention" and known(heads, dim, kernel):
            geometry["kda"] = KimiDeltaGeometry(heads=heads, head_dim=dim, conv_kernel=kernel)
    elif mixer == "short_conv" and kernel:
        geometry["short_conv"] = ShortConvGeometry(channels=conv // (kernel - 1) if kernel > 1 else 0,
                                                   conv_kernel=kernel)
    return Part(conv_elems=conv, ssm_elems=ssm, **geometry)


def _kv_sources(text_cfg, attns, kinds) -> list[int | None]:
    """KV sharing (Gemma 3n / 4): which earlier layer each layer reads its KV from."""
    n = len(kinds)
    try:
        modes = list(getattr(text_cfg, "kv_sharing_modes"))
    except Exception:  # no KV sharing in this config class
        modes = None
    shared = [m == "reuse" for m in modes] if modes and len(modes) == n else [
        bool(getattr(a, "is_kv_shared_layer", False)) for a in attns]
    sources: list[int | None] = []
    for i in range(n):
        if not shared[i]:
            sources.append(None)
            continue
        index = getattr(attns[i], "kv_shared_layer_index", None)
        if not isinstance(index, int):
            earlier = [j for j in range(n) if not shared[j] and j < i and kinds[j] == kinds[i]]
            index = earlier[-1] if earlier else None
        sources.append(index)
    return sources


def build_from_config(config: dict, label: str) -> FamilyResult:
    """The map's facts for a (possibly nested) config.json, read through transformers."""
    import transformers

    text_view = ConfigView(config.get("text_config") if isinstance(config.get("text_config"), dict) else config, label)
    _precheck(text_view)
    full_cfg, text_cfg = hf_config(config, label)
    n = _get(text_cfg, _SIZE_KEYS)
    if not n or n > MAX_GENERIC_LAYERS:
        raise text_view.bad("num_hidden_layers", n, f"an integer between 1 and {MAX_GENERIC_LAYERS}")
    model = _meta_model(text_cfg, label)
    stack = _decoder_layers(model, n)
    if stack is None:
        raise UserError(
            f"{label}: transformers built {type(model).__name__} but no list of {n} decoder layers was found in it; "
            "this model_type needs a family module under core/families/"
        )
    try:
        return _read(config, text_cfg, model, stack, n)
    except UserError:
        raise
    except Exception as err:  # modules of every shape pass through here: report, never crash the window
        raise UserError(
            f"{label}: the generic reader could not read {type(model).__name__}'s layers ({_why(err)}); "
            "this model_type needs a family module under core/families/"
        ) from None


def _read(config: dict, text_cfg, model, stack, n: int) -> FamilyResult:
    import transformers

    notes: list[str] = []
    layer_types = getattr(text_cfg, "layer_types", None)
    mlp_types = getattr(text_cfg, "mlp_layer_types", None)
    layer_types = list(layer_types) if isinstance(layer_types, (list, tuple)) and len(layer_types) == n else None
    mlp_types = list(mlp_types) if isinstance(mlp_types, (list, tuple)) and len(mlp_types) == n else None

    params = _own_params(stack)
    kinds, ffns, attns = [], [], []
    for i, layer in enumerate(stack):
        mixer = LAYER_TYPE_MIXERS.get(layer_types[i]) if layer_types else None
        if mixer is None:
            mixer, note = _mixer_from_modules(layer, text_cfg, layer_types[i] if layer_types else None)
            if note:
                notes.append(note)
        ffn = _FFN_TYPES.get(mlp_types[i]) if mlp_types else None
        ffn = ffn or _ffn_from_modules(layer)
        if layer_types and layer_types[i] in ("moe", "mlp"):
            ffn = "moe" if layer_types[i] == "moe" else "mlp"
        kinds.append(mixer)
        ffns.append(ffn)
        attns.append(_attention_module(layer))
    total = sum(p.numel() for p in model.parameters())
    sources = _kv_sources(text_cfg, attns, kinds)

    specs = []
    for i, layer in enumerate(stack):
        layer_cfg = _per_layer(text_cfg, i)
        part = _expert_part(layer, layer_cfg, params[i]) if ffns[i] == "moe" else Part(params=params[i])
        if kinds[i] in ("attention", "sliding_attention", "sparse_attention", "attention+mamba2"):
            part = part + _kv_part(attns[i], layer_cfg, kinds[i])
        if kinds[i] not in ("attention", "sliding_attention", "sparse_attention", "none"):
            part = part + _state_part(_recurrent_mixer(layer)[1], kinds[i])
            if not part.ssm_elems and kinds[i] not in ("short_conv",):
                notes.append(f"the recurrent state size of the {kinds[i]} layers is not known to the generic reader")
        part.params = params[i]
        specs.append(LayerSpec(kinds[i], ffns[i], part, kv_shared_from=sources[i]))
    mtp = _get(text_cfg, ("num_nextn_predict_layers", "mtp_num_hidden_layers", "num_mtp_layers"), 0)
    if mtp:
        notes.append(f"{mtp} multi-token-prediction layer(s) in the config are not built by transformers and not counted")
    compressed = sorted({t for t in layer_types or () if t in ("compressed_sparse_attention", "heavily_compressed_attention")})
    if compressed:
        notes.append(f"{' and '.join(compressed)} layers: KV per token is counted uncompressed, an upper bound")
    shared = [i for i, s in enumerate(sources) if s is not None]
    if shared:
        notes.append(f"layers {shared[0]}-{shared[-1]} reuse the KV cache of earlier layers and keep none of their own")
    provenance = {
        "path": "transformers",
        "reader": f"transformers {transformers.__version__}: {type(text_cfg).__name__}, {type(model).__name__} on the meta device",
        "layer kinds": "config.layer_types" if layer_types else "the layer modules",
        "ffn kinds": "config.mlp_layer_types" if mlp_types else "the layer modules",
        "parameters": "the meta-device build (sum of numel)",
        "KV cache": "the attention projections' widths",
        "experts": "the expert modules and the config's top-k",
    }
    return FamilyResult(
        layers=specs,
        hybrid_family=hybrid_family(kinds),
        outside=Part(params=total - sum(params)),
        notes=list(dict.fromkeys(notes)),
        provenance=provenance,
    )

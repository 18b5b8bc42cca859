"""A checkpoint's weight quantization: config -> one weight scheme per module, and per layer.

Quantized checkpoints say how their weights are stored in one of a handful of dialects, each read
here into the same `WeightScheme` (weight dtype, scale layout, activation handling, bits per weight):

- `fp8` (transformers' FineGrainedFP8, DeepSeek-V3 / Qwen3 FP8 / MiMo): `fmt`, `weight_block_size`
  ([128, 128]: one fp32 `weight_scale_inv` per 128x128 block), `activation_scheme`, and the
  `modules_to_not_convert` kept in the model dtype;
- `compressed-tensors` (llm-compressor): `config_groups` of `targets` with `weights` /
  `input_activations` arguments (num_bits, type, strategy tensor|channel|group|block, group_size,
  block_structure), and an `ignore` list (`re:` regexes or names);
- `modelopt` (NVIDIA Model Optimizer, also as hf_quant_config.json's `quantization`): `quant_algo`
  (FP8, FP8_PB_WO, NVFP4, W4A8_AWQ, MIXED_PRECISION), `group_size`, `exclude_modules` (globs), and for
  MIXED_PRECISION a `quantized_layers` table {module: {quant_algo, group_size}};
- `mxfp4` (gpt-oss), `gptq` / `awq` (int4 groups), `bitsandbytes`;
- MLX (`quantization`: {group_size, bits} and per-module overrides, false = not quantized);
- GGUF: each tensor's own ggml type (core/sources/gguf_file.py puts them in config["gguf"]).

Module names are matched as the dialects do: `re:` prefixes a regular expression
(compressed-tensors), `*` globs (modelopt, `model.layers.*.self_attn`), and a plain name matches the
module, its children, and (as transformers' `modules_to_not_convert` does) any name containing it.
NemotronH checkpoints name the stack `backbone.` where transformers says `model.`: both are tried.
Torch-free: the map, the planner and Validate read it without loading the engine.
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass, field

from bringup.core.errors import UserError


@dataclass(frozen=True)
class WeightScheme:
    """How one module's weight is stored, and what the matmul reads."""

    key: str  # stable id: "dense", "fp8_block", "fp8_channel", "fp8_tensor", "nvfp4", "mxfp4", "int4_group", "gguf_q4_k"...
    weight_dtype: str  # "bfloat16", "fp8_e4m3", "fp4_e2m1", "int4", "int8", "Q4_K"...
    bits: float  # bits per weight, scales included
    scales: str = ""  # "fp32 per 128x128 block", "fp8_e4m3 per 16 + fp32 per tensor", ...
    activations: str = "model dtype"  # "fp8_e4m3 per token (dynamic)", ...
    method: str = ""  # the dialect that said so
    block: tuple[int, int] | None = None
    group_size: int | None = None

    @property
    def quantized(self) -> bool:
        return self.key != "dense"

    @property
    def label(self) -> str:
        """What to call it on screen: 'fp8_e4m3, fp32 per 128x128 block'."""
        if not self.quantized:
            return self.weight_dtype
        return f"{self.weight_dtype}, {self.scales}" if self.scales else self.weight_dtype

    def weight_bytes(self, params: int) -> int:
        return int(round(params * self.bits / 8))

    def to_json(self) -> dict:
        doc = {"key": self.key, "weight_dtype": self.weight_dtype, "bits": round(self.bits, 4),
               "scales": self.scales, "activations": self.activations, "method": self.method}
        if self.block:
            doc["block"] = list(self.block)
        if self.group_size:
            doc["group_size"] = self.group_size
        return doc


def dense(dtype: str = "bfloat16") -> WeightScheme:
    from .dtypes import DTYPE_BYTES

    return WeightScheme("dense", dtype, 8.0 * DTYPE_BYTES.get(dtype, 2))


@dataclass(frozen=True)
class ModelQuantization:
    """The checkpoint's quantization: a default scheme, what it leaves out, per-module exceptions."""

    method: str  # fp8 | compressed-tensors | modelopt | mxfp4 | gptq | awq | bitsandbytes | mlx | gguf
    default: WeightScheme
    dtype: str = "bfloat16"  # what unquantized modules hold
    excluded: tuple[str, ...] = ()  # patterns of modules kept in `dtype`
    # (pattern, scheme) tried in order before the default (modelopt MIXED_PRECISION, MLX overrides,
    # compressed-tensors groups, GGUF tensors by exact name).
    modules: tuple[tuple[str, WeightScheme], ...] = ()
    source: str = "config.json quantization_config"
    raw: dict = field(default_factory=dict, compare=False, repr=False)

    def scheme_for(self, module: str) -> WeightScheme:
        """The scheme of the weight of `module` ("model.layers.3.mlp.down_proj")."""
        names = _aliases(module)
        for pattern, scheme in self.modules:
            if any(matches(pattern, n) for n in names):
                return scheme
        if any(matches(p, n) for p in self.excluded for n in names):
            return dense(self.dtype)
        return self.default

    def schemes(self) -> list[WeightScheme]:
        """Every distinct scheme the checkpoint uses, the default first."""
        out = [self.default]
        for _, s in self.modules:
            if s not in out:
                out.append(s)
        return out

    def to_json(self) -> dict:
        return {"method": self.method, "source": self.source, "default": self.default.to_json(),
                "excluded": list(self.excluded), "schemes": [s.to_json() for s in self.schemes()]}


def _aliases(module: str) -> tuple[str, ...]:
    for a, b in (("backbone.", "model."), ("model.", "backbone.")):
        if module.startswith(a):
            return module, b + module[len(a):]
    return (module,)


def matches(pattern: str, module: str) -> bool:
    """Does a dialect's module pattern name `module` (or a module above it)?"""
    if pattern.startswith("re:"):
        return re.match(pattern[3:], module) is not None
    if any(c in pattern for c in "*?["):
        return fnmatch.fnmatchcase(module, pattern) or fnmatch.fnmatchcase(module, pattern + ".*")
    return module == pattern or module.startswith(pattern + ".") or pattern in module


@dataclass(frozen=True)
class LayerSchemes:
    """The weight schemes of one layer of the map: its mixer's weights and its FFN's."""

    index: int
    mixer: WeightScheme | None  # None: the layer has no mixer (an FFN-only block)
    ffn: WeightScheme | None

    def to_json(self) -> dict:
        return {"index": self.index, "mixer": self.mixer.key if self.mixer else None,
                "ffn": self.ffn.key if self.ffn else None}

    @property
    def label(self) -> str:
        parts = [s.label for s in (self.mixer, self.ffn) if s is not None]
        return parts[0] if len(set(parts)) == 1 else " / ".join(parts)


# Reading the dialects ---------------------------------------------------------------------------

def quantization_config(config: dict) -> dict | None:
    """The raw quantization table of a config (its own, or its text_config's), or None."""
    for cfg in (config, config.get("text_config") or {}):
        for key in ("quantization_config", "quantization"):
            value = cfg.get(key)
            if isinstance(value, dict) and value:
                return value
    return None


def read_quantization(config: dict) -> ModelQuantization | None:
    """The checkpoint's quantization from its config.json (or a GGUF file's tensor types), None for
    a dense checkpoint. A quantization table in a dialect not known here is a UserError naming it."""
    from .dtypes import model_dtype

    dtype = model_dtype(config)
    gguf = config.get("gguf")
    if isinstance(gguf, dict) and gguf.get("tensor_types"):
        return _gguf(gguf["tensor_types"])
    raw = quantization_config(config)
    if raw is None:
        return None
    if "quantization" in raw and isinstance(raw["quantization"], dict) and "quant_algo" in raw["quantization"]:
        raw = {"quant_method": "modelopt", **raw["quantization"]}  # hf_quant_config.json's shape
    method = str(raw.get("quant_method") or ("mlx" if "bits" in raw and "group_size" in raw else "")).lower()
    reader = _READERS.get(method)
    if reader is None:
        known = ", ".join(sorted(_READERS))
        raise UserError(f"config.json's quantization_config has quant_method {method or '(none)'!r}, which the "
                        f"workbench does not read (it reads {known}); check the checkpoint's model card")
    try:
        quant = reader(raw, dtype)
    except (TypeError, ValueError, KeyError, AttributeError, IndexError) as err:  # a field of the wrong kind
        raise UserError(f"config.json's quantization_config ({method}) has a field of the wrong kind "
                        f"({type(err).__name__}: {str(err)[:120]}); compare it with the checkpoint's model card") from None
    return ModelQuantization(quant.method, quant.default, dtype, quant.excluded, quant.modules, quant.source, raw)


def _names(raw: dict, *keys: str) -> tuple[str, ...]:
    """The module names or patterns under the first of `keys` that is set: a list of strings."""
    for key in keys:
        value = raw.get(key)
        if not value:
            continue
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise UserError(f"config.json's quantization_config field {key} is {value!r}; expected a list of "
                            "module names or patterns; check the checkpoint's config")
        return tuple(value)
    return ()


def _fp8_block(block, method: str, activations: str) -> WeightScheme:
    bm, bk = (int(block[0]), int(block[1]))
    return WeightScheme("fp8_block", "fp8_e4m3", 8 + 32 / (bm * bk), f"fp32 per {bm}x{bk} block", activations,
                        method, block=(bm, bk))


def _fp8(raw: dict, dtype: str) -> ModelQuantization:
    fmt = str(raw.get("fmt", "e4m3")).lower()
    if fmt not in ("e4m3", "float8_e4m3fn"):
        raise UserError(f"fp8 quantization_config fmt {fmt!r} is not read; only e4m3 weights are")
    act = raw.get("activation_scheme", "dynamic")
    activations = "fp8_e4m3 per token group (dynamic)" if act == "dynamic" else f"fp8_e4m3 per tensor ({act})"
    block = raw.get("weight_block_size")
    if block:
        default = _fp8_block(block, "fp8", activations)
    else:  # per-tensor weight scales (AutoFP8 style)
        default = WeightScheme("fp8_tensor", "fp8_e4m3", 8.0, "fp32 per tensor", activations, "fp8")
    excluded = _names(raw, "modules_to_not_convert", "ignored_layers")
    return ModelQuantization("fp8", default, dtype, excluded)


def _ct_scheme(group: dict) -> WeightScheme:
    w = group.get("weights") or {}
    a = group.get("input_activations") or {}
    bits, kind = int(w.get("num_bits", 8)), str(w.get("type", "int"))
    strategy = str(w.get("strategy", "tensor"))
    activations = "model dtype"
    if a:
        activations = f"{a.get('type', 'int')}{a.get('num_bits', 8)} per {a.get('strategy', 'tensor')}" + \
                      (" (dynamic)" if a.get("dynamic") else " (static)")
    scale_of = {"float": "fp32", "int": "model dtype"}.get(kind, "fp32")
    if kind == "float" and bits == 8:
        if strategy == "block":
            return _fp8_block(w.get("block_structure") or [128, 128], "compressed-tensors", activations)
        key = {"channel": "fp8_channel", "tensor": "fp8_tensor"}.get(strategy, f"fp8_{strategy}")
        return WeightScheme(key, "fp8_e4m3", 8.0, f"fp32 per {strategy}", activations, "compressed-tensors")
    if kind == "float" and bits == 4:  # compressed-tensors' nvfp4: e2m1 in groups of 16 with fp8 scales
        group_size = int(w.get("group_size") or 16)
        return WeightScheme("nvfp4", "fp4_e2m1", 4 + 8 / group_size, f"fp8_e4m3 per {group_size} + fp32 per tensor",
                            activations, "compressed-tensors", group_size=group_size)
    group_size = int(w.get("group_size") or 0) or None
    per = f"per {group_size}" if strategy == "group" and group_size else f"per {strategy}"
    extra = 16 / group_size if group_size else 0.0
    zero = "" if w.get("symmetric", True) else " with zero points"
    return WeightScheme(f"int{bits}_{strategy}", f"int{bits}", bits + extra, f"{scale_of} {per}{zero}", activations,
                        "compressed-tensors", group_size=group_size)


def _compressed_tensors(raw: dict, dtype: str) -> ModelQuantization:
    groups = raw.get("config_groups") or {}
    if not groups:
        raise UserError("compressed-tensors quantization_config has no config_groups; the checkpoint's config is incomplete")
    modules: list[tuple[str, WeightScheme]] = []
    default = None
    for group in groups.values():
        scheme = _ct_scheme(group)
        for target in group.get("targets") or ["Linear"]:
            if target == "Linear":  # the class name: every linear layer not named elsewhere
                default = default or scheme
            else:
                modules.append((target, scheme))
    if default is None:
        default = modules[0][1]
    return ModelQuantization("compressed-tensors", default, dtype, _names(raw, "ignore"), tuple(modules))


def _modelopt_scheme(algo: str, group_size) -> WeightScheme:
    algo = str(algo).upper()
    if algo == "FP8":
        return WeightScheme("fp8_tensor", "fp8_e4m3", 8.0, "fp32 per tensor", "fp8_e4m3 per tensor (static)", "modelopt")
    if algo == "FP8_PER_CHANNEL_PER_TOKEN":
        return WeightScheme("fp8_channel", "fp8_e4m3", 8.0, "fp32 per channel", "fp8_e4m3 per token (dynamic)", "modelopt")
    if algo in ("FP8_PB_WO", "FP8_PB"):
        return _fp8_block((128, 128), "modelopt", "model dtype")
    if algo in ("NVFP4", "NVFP4_AWQ"):
        g = int(group_size or 16)
        return WeightScheme("nvfp4", "fp4_e2m1", 4 + 8 / g, f"fp8_e4m3 per {g} + fp32 per tensor",
                            f"fp4_e2m1 per {g} (dynamic)", "modelopt", group_size=g)
    if algo == "MXFP8":
        return WeightScheme("mxfp8", "fp8_e4m3", 8 + 8 / 32, "e8m0 per 32", "fp8_e4m3 per 32", "modelopt", group_size=32)
    if algo in ("W4A8_AWQ", "W4A16_AWQ", "INT4_AWQ"):
        g = int(group_size or 128)
        return WeightScheme("int4_group", "int4", 4 + 16 / g, f"model dtype per {g}",
                            "fp8_e4m3 per tensor" if algo == "W4A8_AWQ" else "model dtype", "modelopt", group_size=g)
    raise UserError(f"modelopt quant_algo {algo!r} is not read; the workbench reads FP8, FP8_PER_CHANNEL_PER_TOKEN, "
                    "FP8_PB_WO, NVFP4, MXFP8, W4A8_AWQ and MIXED_PRECISION")


def _modelopt(raw: dict, dtype: str) -> ModelQuantization:
    algo = str(raw.get("quant_algo") or "").upper()
    excluded = _names(raw, "exclude_modules", "ignore")
    if algo == "MIXED_PRECISION":
        layers = raw.get("quantized_layers") or {}
        if not layers:
            raise UserError("modelopt MIXED_PRECISION quantization_config lists no quantized_layers; the config is incomplete")
        modules = tuple((name, _modelopt_scheme(spec.get("quant_algo"), spec.get("group_size")))
                        for name, spec in layers.items())
        # Modules not listed are not quantized: the default is the model dtype.
        return ModelQuantization("modelopt", dense(dtype), dtype, excluded, modules)
    return ModelQuantization("modelopt", _modelopt_scheme(algo, raw.get("group_size")), dtype, excluded)


def _mxfp4(raw: dict, dtype: str) -> ModelQuantization:
    scheme = WeightScheme("mxfp4", "fp4_e2m1", 4 + 8 / 32, "e8m0 per 32", "model dtype", "mxfp4", group_size=32)
    return ModelQuantization("mxfp4", scheme, dtype, _names(raw, "modules_to_not_convert"))


def _int_groups(method: str):
    def read(raw: dict, dtype: str) -> ModelQuantization:
        bits, g = int(raw.get("bits", 4)), int(raw.get("group_size", 128) or 0)
        per = f"per {g}" if g > 0 else "per channel"
        extra = (16 + bits) / g if g > 0 else 0.0  # a scale and a packed zero point per group
        scheme = WeightScheme(f"int{bits}_group", f"int{bits}", bits + extra, f"model dtype {per} with zero points",
                              "model dtype", method, group_size=g if g > 0 else None)
        return ModelQuantization(method, scheme, dtype, _names(raw, "modules_to_not_convert"))
    return read


def _bitsandbytes(raw: dict, dtype: str) -> ModelQuantization:
    if raw.get("load_in_4bit"):
        kind = str(raw.get("bnb_4bit_quant_type", "fp4"))
        scheme = WeightScheme(f"bnb_{kind}", kind, 4 + 32 / 64, "fp32 per 64", "model dtype", "bitsandbytes", group_size=64)
    else:
        scheme = WeightScheme("int8_channel", "int8", 8.0, "fp32 per channel", "int8 per token (LLM.int8)", "bitsandbytes")
    return ModelQuantization("bitsandbytes", scheme, dtype, tuple(raw.get("llm_int8_skip_modules") or ()))


def _mlx_scheme(bits: int, group_size: int) -> WeightScheme:
    # MLX's affine quantization: a scale and a bias in the model dtype per group.
    return WeightScheme(f"mlx_int{bits}", f"int{bits}", bits + 32 / group_size, f"bf16 scale + bias per {group_size}",
                        "model dtype", "mlx", group_size=group_size)


def _mlx(raw: dict, dtype: str) -> ModelQuantization:
    default = _mlx_scheme(int(raw.get("bits", 4)), int(raw.get("group_size", 64)))
    modules, excluded = [], []
    for name, value in raw.items():
        if value is False:
            excluded.append(name)
        elif isinstance(value, dict) and "bits" in value:
            modules.append((name, _mlx_scheme(int(value["bits"]), int(value.get("group_size", 64)))))
    return ModelQuantization("mlx", default, dtype, tuple(excluded), tuple(modules), "config.json quantization")


_READERS = {
    "fp8": _fp8,
    "compressed-tensors": _compressed_tensors,
    "modelopt": _modelopt,
    "mxfp4": _mxfp4,
    "gptq": _int_groups("gptq"),
    "awq": _int_groups("awq"),
    "bitsandbytes": _bitsandbytes,
    "mlx": _mlx,
}


# GGUF: one ggml type per tensor -----------------------------------------------------------------

# ggml type -> (weights per block, bytes per block): ggml's own block layouts (gguf-py constants).
GGML_BLOCKS = {
    "F32": (1, 4), "F16": (1, 2), "BF16": (1, 2),
    "Q8_0": (32, 34), "Q4_0": (32, 18), "Q4_1": (32, 20), "Q5_0": (32, 22), "Q5_1": (32, 24),
    "Q2_K": (256, 84), "Q3_K": (256, 110), "Q4_K": (256, 144), "Q5_K": (256, 176), "Q6_K": (256, 210),
    "Q8_K": (256, 292),
}
_GGUF_FLOAT = {"F32": "float32", "F16": "float16", "BF16": "bfloat16"}


def gguf_scheme(type_name: str) -> WeightScheme:
    name = str(type_name).upper()
    if name in _GGUF_FLOAT:
        return dense(_GGUF_FLOAT[name])
    per, size = GGML_BLOCKS.get(name, (0, 0))
    if not per:
        return WeightScheme(f"gguf_{name.lower()}", name, 0.0, "ggml block", "model dtype", "gguf")
    return WeightScheme(f"gguf_{name.lower()}", name, 8 * size / per, f"ggml blocks of {per}", "model dtype", "gguf",
                        group_size=per)


def _gguf(tensor_types: dict) -> ModelQuantization:
    """GGUF: each tensor names its own type; the default is the commonest type of the matrices."""
    from collections import Counter

    modules = tuple((name.removesuffix(".weight"), gguf_scheme(t)) for name, t in tensor_types.items())
    common = Counter(s for _, s in modules if s.quantized).most_common(1)
    default = common[0][0] if common else modules[0][1] if modules else dense("float32")
    return ModelQuantization("gguf", default, "float32", (), modules, "GGUF tensor types")

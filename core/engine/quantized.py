"""Quantized weights in the engine: the checkpoint's scheme runs as it is stored, or is refused.

`apply_weight_scheme(model, quant)` runs on the meta-device model after its dtype is set: every
linear layer whose checkpoint scheme (core/layermap/quantization.py) the engine runs becomes an
`Fp8Linear` (fp8_e4m3 `weight` + float32 `weight_scale_inv`, the checkpoints' own names, so they
load as they are), and NemotronH's stacked experts take fp8 stacks and scale grids
(`up_proj_scale_inv`...). Matmuls go through `ops.fp8_linear` / `ops.moe_experts_fp8`: Triton
W8A16 kernels on GPUs (the dense linears W8A8 for prefill rows where the GPU has FP8 matrix units:
`linear_form` says which, in the label), the dequantising reference on the CPU. A scheme the engine cannot run
(NVFP4, MXFP4, int4 groups, ...) is refused with a message naming it and what runs instead; it is
never run silently as bf16. `--dtype bfloat16` (any explicit dtype) dequantises at load instead:
`dequantised_weights` turns fp8 (and NVFP4) checkpoint tensors into plain ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable, Iterator

import torch
from torch import nn

from bringup.core.errors import UserError
from bringup.core.layermap.quantization import ModelQuantization, WeightScheme
from bringup.kernels.reference.fp8_linear import FP8, PER_TENSOR_BLOCK, dequantize_fp8_block, scale_shape
from bringup.kernels.reference.fp8_w8a8 import w8a8_fits
from bringup.kernels.triton.registration import W8A8_NAME

from .facts import QUANTIZED_MODEL_TYPES, RUNNABLE_WEIGHT_SCHEMES, refused_scheme_message

SCALE_SUFFIX = "_scale_inv"


def kernel_block(scheme: WeightScheme) -> tuple[int, int]:
    """The (rows, cols) a scale covers, as the kernels take it."""
    if scheme.key == "fp8_block":
        return scheme.block
    if scheme.key == "fp8_channel":
        return (1, PER_TENSOR_BLOCK[1])
    return PER_TENSOR_BLOCK


class Fp8Linear(nn.Module):
    """A linear layer holding fp8_e4m3 weights [out, in] and a float32 scale per block."""

    def __init__(self, in_features: int, out_features: int, bias: bool, block: tuple[int, int], ops):
        super().__init__()
        self.in_features, self.out_features, self.block, self.ops = in_features, out_features, tuple(block), ops
        self.weight = nn.Parameter(torch.empty(out_features, in_features, dtype=FP8), requires_grad=False)
        grid = scale_shape((out_features, in_features), (min(block[0], out_features), min(block[1], in_features)))
        self.weight_scale_inv = nn.Parameter(torch.ones(grid, dtype=torch.float32), requires_grad=False)
        self.bias = nn.Parameter(torch.empty(out_features), requires_grad=False) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ops.fp8_linear(x, self.weight, self.weight_scale_inv, self.block, self.bias)

    def extra_repr(self) -> str:
        form = linear_form(getattr(self.ops, "implementations", {}), self.block)
        return f"in={self.in_features}, out={self.out_features}, fp8_e4m3, block={self.block}, {form}"


def linear_form(implementations: dict, block: tuple[int, int]) -> str:
    """What an fp8 linear of scale blocks `block` runs as: W8A8 for prefill rows where the op set
    holds that form (a GPU with FP8 matrix units, BRINGUP_W8A8 not 0) and the blocks fit its
    128-groups; else W8A16 (activations in the model dtype) at every row count."""
    if implementations.get("fp8_linear") == W8A8_NAME and w8a8_fits(block):
        return "W8A8 prefill, W8A16 decode"
    return "W8A16"


def is_quantized(module) -> bool:
    """A layer holding quantized weights, whose own forward must do its product."""
    from .gguf_weights import GgufLinear

    return isinstance(module, (Fp8Linear, GgufLinear))


@dataclass
class RunningScheme:
    """What the model runs, for /server_info, the bench, the log and the report."""

    label: str  # "fp8_e4m3, fp32 per 128x128 block (W8A16)" or "bfloat16"
    method: str = ""  # the checkpoint's dialect ("" for a dense checkpoint)
    quantized_linears: int = 0
    dense_linears: int = 0
    quantized_experts: int = 0  # MoE layers whose experts are fp8
    dequantised_from: str = ""  # an explicit --dtype dequantised this scheme at load
    kernels: dict = field(default_factory=dict)
    # The arithmetic of the quantized products where it is less precise than the model dtype they
    # sit in ("bfloat16": a GGUF model's CPU forms inside float32 activations); "" otherwise.
    products_dtype: str = ""

    def to_json(self) -> dict:
        return {"scheme": self.label, "method": self.method, "quantized_linears": self.quantized_linears,
                "dense_linears": self.dense_linears, "quantized_experts": self.quantized_experts,
                "dequantised_from": self.dequantised_from, "kernels": self.kernels,
                "products_dtype": self.products_dtype}


def _check_runnable(quant: ModelQuantization, model_type: str, scheme: WeightScheme, where: str) -> None:
    if scheme.key not in RUNNABLE_WEIGHT_SCHEMES:
        raise UserError(refused_scheme_message(scheme.label, scheme.key, quant.method, where))
    if model_type not in QUANTIZED_MODEL_TYPES:
        raise UserError(refused_scheme_message(scheme.label, scheme.key, quant.method, where, model_type=model_type))


def _fp8_experts(experts: nn.Module, names: tuple[str, ...], block: tuple[int, int]) -> None:
    for name in names:
        p = getattr(experts, name, None)
        if p is None:
            continue
        E, n, k = p.shape
        setattr(experts, name, nn.Parameter(torch.empty(E, n, k, dtype=FP8), requires_grad=False))
        grid = scale_shape((E, n, k), (min(block[0], n), min(block[1], k)))
        setattr(experts, name + SCALE_SUFFIX, nn.Parameter(torch.ones(grid, dtype=torch.float32), requires_grad=False))
    experts.fp8_block = block


def _expert_stacks(module: nn.Module) -> bool:
    """A module holding routed experts as stacked [E, out, in] matrices (up_proj, down_proj...)."""
    return any(isinstance(getattr(module, n, None), nn.Parameter) and getattr(module, n).dim() == 3
               for n in ("up_proj", "down_proj", "gate_proj", "gate_up_proj"))


def apply_weight_scheme(model: nn.Module, quant: ModelQuantization | None, model_type: str) -> RunningScheme:
    """Swap the linear layers and expert stacks the checkpoint quantized for their fp8 forms (on the
    meta device, before allocation); refuse what the engine cannot run. Returns what runs."""
    dtype_name = str(model.dtype).removeprefix("torch.")
    if quant is None:  # every linear plain (a dequantised checkpoint's too)
        return RunningScheme(dtype_name, dense_linears=sum(isinstance(m, nn.Linear) for m in model.modules()))
    running = RunningScheme(dtype_name, quant.method)
    if quant.method == "gguf":
        from .gguf_weights import keep_gguf_blocks

        keep_gguf_blocks(model, quant, running)
        return running
    impl = getattr(model.ops, "implementations", {})
    skip = ("lm_head", "embed")  # kept in the model dtype (the checkpoints' converters leave them too)
    replaced = []
    for name, module in list(model.named_modules()):
        if isinstance(module, nn.Linear) and not any(s in name for s in skip):
            scheme = quant.scheme_for(name)
            if not scheme.quantized:
                running.dense_linears += 1
                continue
            _check_runnable(quant, model_type, scheme, name)
            block = kernel_block(scheme)
            replaced.append((name, Fp8Linear(module.in_features, module.out_features, module.bias is not None,
                                             block, model.ops)))
            running.label = f"{scheme.label} ({linear_form(impl, block)})"
        elif _expert_stacks(module):
            scheme = quant.scheme_for(f"{name}.0.up_proj")
            if not scheme.quantized:
                continue
            _check_runnable(quant, model_type, scheme, f"{name} (routed experts)")
            if getattr(module, "gate_proj", None) is not None or getattr(module, "gate_up_proj", None) is not None:
                raise UserError(refused_scheme_message(scheme.label, scheme.key, quant.method, f"{name} (gated experts)",
                                                       model_type=model_type))
            _fp8_experts(module, ("up_proj", "down_proj"), kernel_block(scheme))
            running.quantized_experts += 1
    for name, new in replaced:
        parent, _, leaf = name.rpartition(".")
        setattr(model.get_submodule(parent) if parent else model, leaf, new)
    running.quantized_linears = len(replaced)
    running.kernels = {op: impl.get(op, "reference") for op in ("fp8_linear", "moe_experts_fp8", "moe_experts_shared_fp8_unsummed")}
    return running


# Dequantising at load (an explicit --dtype) ------------------------------------------------------


def dequantised_label(quant: ModelQuantization) -> str:
    """The scheme an explicit dtype dequantised, for `dequantised_from`: the checkpoint's; a GGUF
    file's every ggml type (its default is only the commonest: SmolLM2's Q8_0 embedding beside
    its Q4_1 matrices)."""
    if quant.method == "gguf":
        from .gguf_weights import blocks_label

        return blocks_label(s.weight_dtype for s in quant.schemes() if s.quantized)
    return quant.default.label

_E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize_nvfp4(packed: torch.Tensor, scale: torch.Tensor, global_scale: torch.Tensor, group: int = 16):
    """modelopt NVFP4: two e2m1 values a byte (the low nibble first), an fp8_e4m3 scale per `group`
    values and a float32 scale per tensor (`weight_scale_2`)."""
    lut = torch.tensor(_E2M1, dtype=torch.float32, device=packed.device)
    b = packed.to(torch.uint8)
    values = torch.stack([lut[(b & 0x0F).long()], lut[(b >> 4).long()]], dim=-1).reshape(*b.shape[:-1], -1)
    per_group = scale.float().repeat_interleave(group, dim=-1)[..., :values.shape[-1]]
    return values * per_group * global_scale.float()


def dequantised_weights(weights: Iterable[tuple[str, torch.Tensor]], quant: ModelQuantization,
                        dtype: torch.dtype) -> Iterator[tuple[str, torch.Tensor]]:
    """The checkpoint's tensors with its quantized weights turned into `dtype` ones (scales and
    activation scales consumed): what an explicit --dtype loads."""
    pending: dict[str, dict[str, torch.Tensor]] = {}
    parts = {"fp8": ("weight", "weight_scale_inv"), "fp8_ms": ("weight", "weight_scale"),
             "nvfp4": ("weight", "weight_scale", "weight_scale_2")}
    for name, tensor in weights:
        base, _, leaf = name.rpartition(".")
        if leaf in ("input_scale", "k_scale", "v_scale", "input_global_scale"):
            continue
        if leaf not in ("weight", "weight_scale_inv", "weight_scale", "weight_scale_2"):
            yield name, tensor
            continue
        scheme = quant.scheme_for(base)
        if not scheme.quantized or (leaf == "weight" and tensor.is_floating_point() and tensor.element_size() > 1):
            yield name, tensor
            continue
        kind = "nvfp4" if scheme.key == "nvfp4" else ("fp8" if scheme.key == "fp8_block" else "fp8_ms")
        if scheme.key not in ("nvfp4", "fp8_block", "fp8_tensor", "fp8_channel"):
            raise UserError(f"{name}: the {scheme.label} weights of this {quant.method} checkpoint cannot be "
                            "dequantised by the engine; convert the checkpoint to bf16 first")
        got = pending.setdefault(base, {})
        got[leaf] = tensor
        if all(p in got for p in parts[kind]):
            del pending[base]
            w = got["weight"]
            if kind == "nvfp4":
                real = dequantize_nvfp4(w, got["weight_scale"], got["weight_scale_2"], scheme.group_size or 16)
            elif kind == "fp8":
                real = dequantize_fp8_block(w, got["weight_scale_inv"], scheme.block)
            else:
                s = got["weight_scale"].float()
                real = w.float() * (s.reshape(-1, 1) if s.numel() > 1 else s)
            yield f"{base}.weight", real.to(dtype)
    if pending:
        base, got = next(iter(pending.items()))
        raise UserError(f"the checkpoint holds {base}'s {', '.join(sorted(got))} without the rest of its "
                        f"{quant.method} tensors; the download may be incomplete")


_EXPERT_SCALE = re.compile(r"^(.*\.experts)\.(\d+)\.(up_proj|down_proj|gate_proj)\.weight_scale_inv$")


def map_expert_scale(name: str) -> tuple[str, int] | None:
    """A per-expert scale grid's place in the stacked experts: (`...experts.up_proj_scale_inv`, expert)."""
    m = _EXPERT_SCALE.match(name)
    return (f"{m.group(1)}.{m.group(3)}{SCALE_SUFFIX}", int(m.group(2))) if m else None

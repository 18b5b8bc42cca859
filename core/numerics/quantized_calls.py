"""check-kernels' rows for a GGUF model's quantized layers, whose products do not go through the op
namespace (kernel_calls.py) but through each layer's own CPU form (core/engine/gguf_weights.py).

They are recorded here by forward pre-hooks on the GgufLinear / GgufEmbedding layers, one call per
kind: op, phase, ggml type, form and weight shape. Each is replayed through the layer as the engine
runs it and through the plain reference (kernels/reference/gguf_blocks.py, float32) reading that
layer's blocks as the file holds them, from a second load of the file: prepare_for_cpu re-laid and
freed the engine's own blocks, and a reference rebuilt from the re-laid form would check it against
itself (the int4 form's bf16 scales, say, would go unseen).

Tolerance, relative to the output's largest magnitude, by form. The bf16 forms round each activation
and each block's dot product (or the whole sum) to bf16, unit roundoff u = 2^-8: per output at most
about 2u of the magnitudes summed (the kernels' tests bound it per output:
tests/kernels/test_kernels_gguf.py). Against the largest output that measured 2-7e-3 (SmolLM2's
layers and its [49152, 576] Q8_0 head; a tiny Q4_K/Q8_0 model: 2-3e-3). Q8_0's weights are exact in
bf16: 2e-2; the int4 forms also round their scales and zeros to bf16, the Q6_K bf16 copy each
weight: bf16's 3e-2 (kernel_calls.TOLERANCES). The reference form (the blocks' own product: every
layer under BRINGUP_KERNELS=reference) is float32: float32's 1e-4.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from bringup.core.engine.gguf_weights import FORM_PRODUCTS

# form -> (implementation shown in the row, the dtype its arithmetic runs in (the engine's), tolerance)
FORM_TOLERANCES = {"widened": 2e-2, "int4": 3e-2, "blockwise": 2e-2, "bf16 copy": 3e-2, "blocks": 1e-4}
FORMS = {form: (*FORM_PRODUCTS[form], tol) for form, tol in FORM_TOLERANCES.items()}


@dataclass
class QuantizedCall:
    op: str  # "gguf_linear" or "gguf_embedding"
    module: str  # the layer's name in the model
    ggml_type: str
    form: str
    weight_shape: tuple[int, int]  # [N, K] as dequantised
    phase: str
    input: torch.Tensor  # a CPU copy of what the layer was given

    @property
    def variant(self) -> str:
        return f"{self.ggml_type} {self.form} {self.weight_shape[0]}x{self.weight_shape[1]}"

    @property
    def key(self) -> str:
        return f"{self.op}@{self.phase}:{self.variant}"


def _layer_call(name: str, module, x: torch.Tensor, phase: str) -> QuantizedCall | None:
    from bringup.core.engine.gguf_weights import GgufEmbedding, GgufLinear

    if isinstance(module, GgufLinear):
        return QuantizedCall("gguf_linear", name, module.ggml_type, module.form,
                             (module.out_features, module.in_features), phase, x)
    if isinstance(module, GgufEmbedding):
        return QuantizedCall("gguf_embedding", name, module.ggml_type, module.form,
                             (module.num_embeddings, module.embedding_dim), phase, x)
    return None


def record_quantized_calls(model, phase_of) -> tuple[list[QuantizedCall], callable]:
    """Hook every GGUF layer of `model`; returns the list the first call of each kind goes into and
    an undo. `phase_of()` names the current phase (kernel_calls.PhaseTracker's)."""
    from bringup.core.engine.gguf_weights import GgufEmbedding, GgufLinear

    calls: list[QuantizedCall] = []
    seen: set[str] = set()
    handles = []
    for name, module in model.named_modules():
        if not isinstance(module, (GgufLinear, GgufEmbedding)):
            continue

        def hook(mod, args, _name=name):
            call = _layer_call(_name, mod, args[0], phase_of())
            if call.key not in seen:
                seen.add(call.key)
                call.input = args[0].detach().cpu().clone()
                calls.append(call)

        handles.append(module.register_forward_pre_hook(hook))

    def undo():
        for h in handles:
            h.remove()

    return calls, undo


def reference_layers(source):
    """The model of `source` with its GGUF blocks as the file holds them (not re-laid for the CPU):
    where each row's reference reads its layer's weight."""
    from bringup.core.engine.loader import load_model

    return load_model(source, device="cpu", dtype="auto").model


def reference_output(call: QuantizedCall, layer) -> torch.Tensor:
    """The dequantising reference of one call, float32 on the CPU, from the layer's file blocks."""
    from bringup.kernels.reference.gguf_blocks import gguf_embedding, gguf_linear

    if call.op == "gguf_embedding":
        return gguf_embedding(call.input, layer.weight, call.ggml_type, call.weight_shape[1], torch.float32)
    bias = None if layer.bias is None else layer.bias.float()
    return gguf_linear(call.input.float(), layer.weight, call.ggml_type, call.weight_shape[1], bias)


def _timed(fn):
    fn()  # warm: first touch is not the kernel's time
    started = time.perf_counter()
    out = fn()
    return out, (time.perf_counter() - started) * 1000


def replay_quantized(call: QuantizedCall, model, reference_model, device) -> dict:
    """One row: the engine's layer (as the engine runs it) against the reference on the file's blocks."""
    layer = model.get_submodule(call.module)
    implementation, dtype, tol = FORMS[call.form]
    got, ms = _timed(lambda: layer(call.input.to(device)).float().cpu())
    want, ref_ms = _timed(lambda: reference_output(call, reference_model.get_submodule(call.module)))
    if got.shape != want.shape:
        max_abs = float("inf")
    elif torch.isnan(got).any():
        max_abs = float("nan")
    else:
        max_abs = float((got.double() - want.double()).abs().max()) if got.numel() else 0.0
    scale = float(want.abs().max()) if want.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else float("inf"))
    return {"name": call.op, "phase": call.phase, "variant": call.variant, "key": call.key,
            "implementation": implementation, "shape": list(call.input.shape), "dtype": dtype,
            "max_abs_err": max_abs, "max_rel_err": max_rel, "tolerance": tol, "ok": bool(max_rel <= tol),
            "ms": round(ms, 3), "reference_ms": round(ref_ms, 3)}

"""What SGLang does with a quantized checkpoint at load on a CUDA GPU: the compute capability each
quantization method needs, read from each release's wheel.

`model_loader/loader.py` (`_get_quantization_config`) compares the GPU's capability (major * 10 +
minor) with the method's `get_min_capability()` and raises `ValueError: The quantization method M
is not supported for the current GPU. Minimum capability: N. Current capability: C.` below it (NPUs
skip the check). Read in sglang 0.5.17 to 0.5.23 (`pip download --no-deps sglang==X`, every release
read, lines below): `fp8` (Fp8Config, layers/quantization/fp8.py) 80 (100 for its mxfp8 form),
`modelopt_fp8` 89, `modelopt_fp4` 80, `modelopt_mixed` ModelOptFp4Config's (80), `mxfp4` 80.
"""

from __future__ import annotations

from bringup.core.rules.check import Check
from bringup.core.rules.model_facts import ModelFacts

# release -> (loader.py line of the message, {method: (min capability, file:line of its get_min_capability's return)})
_Q = "python/sglang/srt/layers/quantization/"
MIN_CAPABILITY = {
    (0, 5, 17): (291, {"fp8": (80, "fp8.py:298"), "modelopt_fp8": (89, "modelopt_quant.py:421"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1253"), "modelopt_mixed": (80, "modelopt_quant.py:666"),
                       "mxfp4": (80, "mxfp4.py:278")}),
    (0, 5, 18): (299, {"fp8": (80, "fp8.py:299"), "modelopt_fp8": (89, "modelopt_quant.py:418"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1413"), "modelopt_mixed": (80, "modelopt_quant.py:770"),
                       "mxfp4": (80, "mxfp4.py:279")}),
    (0, 5, 19): (251, {"fp8": (80, "fp8.py:308"), "modelopt_fp8": (89, "modelopt_quant.py:434"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1469"), "modelopt_mixed": (80, "modelopt_quant.py:825"),
                       "mxfp4": (80, "mxfp4.py:335")}),
    (0, 5, 20): (254, {"fp8": (80, "fp8.py:322"), "modelopt_fp8": (89, "modelopt_quant.py:454"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1498"), "modelopt_mixed": (80, "modelopt_quant.py:834"),
                       "mxfp4": (80, "mxfp4.py:321")}),
    (0, 5, 21): (257, {"fp8": (80, "fp8.py:328"), "modelopt_fp8": (89, "modelopt_quant.py:454"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1525"), "modelopt_mixed": (80, "modelopt_quant.py:838"),
                       "mxfp4": (80, "mxfp4.py:325")}),
    (0, 5, 22): (258, {"fp8": (80, "fp8.py:333"), "modelopt_fp8": (89, "modelopt_quant.py:462"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1529"), "modelopt_mixed": (80, "modelopt_quant.py:846"),
                       "mxfp4": (80, "mxfp4.py:339")}),
    (0, 5, 23): (262, {"fp8": (80, "fp8.py:339"), "modelopt_fp8": (89, "modelopt_quant.py:463"),
                       "modelopt_fp4": (80, "modelopt_quant.py:1550"), "modelopt_mixed": (80, "modelopt_quant.py:847"),
                       "mxfp4": (80, "mxfp4.py:339")}),
}


def sglang_method(m: ModelFacts) -> str | None:
    """SGLang's quantization method name for the checkpoint's dialect and schemes (None: not read here)."""
    keys = {k for k, _ in m.weight_schemes}
    if m.quant_method == "fp8":
        return "fp8"
    if m.quant_method == "mxfp4":
        return "mxfp4"
    if m.quant_method == "modelopt":
        if len(keys) > 1:
            return "modelopt_mixed"
        return "modelopt_fp4" if "nvfp4" in keys else "modelopt_fp8"
    return None


def check_quantization(c: Check) -> None:
    m, s, profile = c.m, c.s, c.profile
    method = sglang_method(m) if m.weight_schemes else None
    facts = MIN_CAPABILITY.get(tuple(profile.version))
    if method is None or facts is None or s.device != "cuda":
        return
    line, table = facts
    need, where = table[method]
    c.add("SGLANG_QUANT_CAPABILITY", "info",
          f"SGLang {profile.label} loads this {method} checkpoint on CUDA GPUs of compute capability {need // 10}.{need % 10} "
          f"or newer (H100/H200: 9.0; A100: 8.0; L40S: 8.9); on an older GPU it refuses it at load.",
          fix="a GPU of that capability, or a checkpoint in another format",
          engine_message=(f"ValueError: The quantization method {method} is not supported for the current GPU. "
                          f"Minimum capability: {need}. Current capability: <your GPU's>."),
          source=f"{_Q}{where}; python/sglang/srt/model_loader/loader.py:{line}", stage="model load")

"""The CPU transformers reference calls its torch fallbacks even where a kernel package is installed.

Found on the H200: with fla installed, transformers binds fla's Triton kernels at import and its
CPU reference model crashed on CPU tensors. `torch_fallbacks_on_cpu` undoes that choice; this test
drives transformers' own decorator with a package that is always importable (math) standing in
for fla, so it follows transformers' internals wherever they move."""

import math
import sys
import types

from transformers.integrations.hub_kernels import use_kernel_func_from_hub_with_fallback

from engine_helpers import torch_fallbacks_on_cpu


def test_package_kernels_bound_at_import_are_switched_back_to_torch():
    module = types.ModuleType("fake_modeling")

    def sqrt(x):  # the "torch" fallback transformers would keep without the package
        return ("torch", x)

    def own(x):  # not a kernel wrapper: left alone
        return x

    module.sqrt = use_kernel_func_from_hub_with_fallback("sqrt", "math")(sqrt)
    module.own = own
    module.Model = type("Model", (), {"__module__": "fake_modeling"})
    sys.modules["fake_modeling"] = module
    try:
        assert module.sqrt(4.0) == math.sqrt(4.0)  # the package was chosen at import
        assert torch_fallbacks_on_cpu(module.Model()) == ["sqrt"]
        assert module.sqrt(4.0) == ("torch", 4.0) and module.own is own
        assert torch_fallbacks_on_cpu(module.Model()) == []  # nothing left to switch
    finally:
        del sys.modules["fake_modeling"]

"""GPU-only packages the engines import at module level, stood in for inside an oracle environment.

Argument handling never calls into them; their modules only have to import. Each stub module answers
every attribute with a `Stub`, which can be called, used as a decorator, subclassed, indexed and
compared, so `@triton.jit`, `tl.constexpr` and `from sgl_kernel import x` all import. Nothing the
oracle records may come from a stub: `stub_hits()` lists which were touched so a report can say so.

Loaded by the probe (`sitecustomize`-free: the probe calls `install()` first thing).
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
import types

# Top-level names stubbed, and why each is GPU-only (the CPU wheels of torch do not bring them).
STUBBED = {
    "aiter": "AMD's ROCm kernels",
    "triton": "GPU kernel compiler; the CPU torch wheel does not depend on it",
    "sgl_kernel": "sglang-kernel: CUDA kernels",
    "flashinfer": "flashinfer-python: CUDA kernels",
    "flash_attn": "flash-attn: CUDA kernels",
    "deep_gemm": "sgl-deep-gemm: CUDA kernels",
    "deep_ep": "sgl-deep-ep: CUDA/NVSHMEM",
    "cutlass": "nvidia-cutlass-dsl: CUDA",
    "quack": "quack-kernels: CUDA",
    "tilelang": "tilelang: GPU kernel compiler",
    "tvm_ffi": "apache-tvm-ffi: native ABI used by the CUDA kernels",
    "torch_memory_saver": "CUDA memory hooks",
    "pynvml": "nvidia-ml-py: NVIDIA driver queries (the device is faked instead)",
    "vllm_flash_attn": "vLLM's CUDA attention kernels",
    "decord": "video decoding (multimodal only)",
    "torchvision": "image ops (multimodal only); its wheel must match torch exactly",
    "torchaudio": "audio ops (multimodal only); its wheel must match torch exactly",
    "torchao": "quantization kernels; its wheel must match torch exactly",
    "numba": "JIT compiler, imported for kernels only",
    "sgl_deep_gemm": "CUDA kernels",
    "kernels": "Hugging Face kernels hub loader",
    "humming_kernels": "CUDA kernels",
    "tokenspeed_mla": "CUDA kernels",
    "vllm_xpu_kernels": "vLLM's Intel XPU kernels (SYCL); imported by vllm/platforms/xpu.py:11-13 to register ops",
}

# The engine wheel's own compiled CUDA extensions (linked against libcuda, which a CPU machine lacks):
# stood in ahead of the real files, matched by full module name.
NATIVE = {
    "vllm._C": "vLLM's CUDA ops", "vllm._C_stable_libtorch": "vLLM's CUDA ops (stable ABI)",
    "vllm._moe_C": "vLLM's MoE CUDA ops", "vllm._flashmla_C": "FlashMLA", "vllm._flashmla_extension_C": "FlashMLA",
    "vllm.cumem_allocator": "CUDA memory pool", "vllm._rocm_C": "vLLM's ROCm ops",
    "vllm._moe_C_stable_libtorch": "vLLM's MoE CUDA ops (stable ABI)", "vllm._deepselect_C": "CUDA top-k",
    "vllm._flashkda_C": "KDA CUDA kernels", "vllm._qutlass_C": "CUDA quantization", "vllm.fs_io_C": "GPU direct I/O",
    "vllm.spinloop": "CUDA spin loop", "vllm.vllm_flash_attn._vllm_fa2_C": "FlashAttention 2 (CUDA)",
    "vllm.vllm_flash_attn._vllm_fa3_C": "FlashAttention 3 (CUDA)",
}

# Attributes that raise as they do on a machine without the GPU driver (names as reached from the package).
RAISING = {
    "triton.runtime.driver.active": "0 active drivers ([]). There should only be one.",
}

_touched: set[str] = set()


def _maybe_raise(full: str) -> None:
    if full in RAISING:
        raise RuntimeError(RAISING[full])


class _StubMeta(type):
    """Stubs are classes, so `isinstance(x, stub.Thing)` and `class A(stub.Base)` work as with real types."""

    def __getattr__(cls, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        _maybe_raise(f"{cls.__qualname__}.{attr}")
        return _stub(f"{cls.__qualname__}.{attr}")

    def __call__(cls, *args, **kwargs):
        if len(args) == 1 and not kwargs and callable(args[0]) and not isinstance(args[0], _StubMeta):
            return args[0]  # used as a bare decorator: keep the function
        return _stub(f"{cls.__qualname__}()")

    def __getitem__(cls, key):
        return _stub(f"{cls.__qualname__}[]")

    def __iter__(cls):
        return iter(())

    def __bool__(cls) -> bool:
        return False

    def _arith(cls, *_):  # a stub's number (a triton.Config's num_warps) in arithmetic: still a stub
        return _stub(f"{cls.__qualname__}()")

    __mod__ = __rmod__ = __add__ = __radd__ = __mul__ = __rmul__ = __floordiv__ = __truediv__ = __sub__ = _arith

    def __repr__(cls) -> str:
        return f"<gpu stub {cls.__qualname__}>"


def _stub(name: str) -> type:
    """Anything: a callable, a decorator, a class base, a namespace."""
    return _StubMeta(name.rsplit(".", 1)[-1], (), {"__qualname__": name, "__module__": "gpu_stubs"})


Stub = _stub


class _StubModule(types.ModuleType):
    def __getattr__(self, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        _touched.add(self.__name__)
        _maybe_raise(f"{self.__name__}.{attr}")
        return _stub(f"{self.__name__}.{attr}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, names, exact=False) -> None:
        self.names, self.exact = set(names), exact

    def find_spec(self, fullname, path=None, target=None):
        if (fullname if self.exact else fullname.split(".")[0]) in self.names:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+oraclestub"
        return module

    def exec_module(self, module) -> None:
        _touched.add(module.__name__)


def install(names=None) -> None:
    """Stub these top-level packages (default: all of STUBBED) where they are not installed."""
    sys.meta_path.append(_Finder(STUBBED if names is None else names))  # after the real finders: installed wins
    sys.meta_path.insert(0, _Finder(NATIVE, exact=True))  # before them: the real files cannot load here


# Ops of the engine's compiled extensions that its modules call at import time (vLLM 0.33
# quantization/utils/w8a8_utils.py:41 asks _C whether CUTLASS block FP8 is supported; a quantized
# checkpoint's config imports quantization/online/fp8.py, whose class body asks for CUTLASS FP8 at :193,
# w8a8_utils.py:18, _custom_ops.py:777), by torch.ops namespace. Only these answer (with a stub, which is falsy): every other op stays missing, since vLLM
# registers fake kernels only `if hasattr(torch.ops._C, op)` (_custom_ops.py:90) and so must see it absent.
TORCH_OPS = {"_C": ("cutlass_scaled_mm_supports_block_fp8", "cutlass_scaled_mm_supports_fp8")}


# Ops taken as handles (`torch.ops._C.x.default`) by module bodies that vLLM imports only after its own
# import, when TP > 1 sizes the all-reduce fusion (config/vllm.py:2104 _set_compile_ranges ->
# compilation.py:193-199 -> passes/fusion/matcher_utils.py:32-50, rms_quant_fusion.py:156-199; those
# behind `hasattr` there, per_token_group_fp8_quant, scaled_fp4_quant, rms_norm_per_block_quant, stay
# missing): stood in then, after vLLM's fake-kernel registration has seen them absent. The torch.ops.vllm ones there (mrope, flashinfer_rotary_embedding)
# vLLM registers in Python (rotary_embedding/common.py:104), so the probe imports that first.
LATE_TORCH_OPS = {"_C": ("rotary_embedding", "static_scaled_fp8_quant", "dynamic_scaled_fp8_quant",
                         "dynamic_per_token_scaled_fp8_quant", "silu_and_mul", "fused_add_rms_norm",
                         "rms_norm_static_fp8_quant", "fused_add_rms_norm_static_fp8_quant",
                         "rms_norm_dynamic_per_token_quant")}


def triton_with_driver() -> None:
    """On a GPU target the stub triton reports one active driver, as Triton does on that machine: vLLM
    (triton_utils/importing.py:14-94) otherwise swaps in its own placeholder, which no GPU machine runs."""
    import importlib

    backends = importlib.import_module("triton.backends")
    driver = types.SimpleNamespace(is_active=lambda: True)
    backends.backends = {"oracle": types.SimpleNamespace(driver=driver)}


def install_torch_ops(ops=None) -> None:
    """Stand in the listed ops on torch.ops' namespaces (which torch creates lazily and keeps)."""
    import torch

    for namespace, names in (TORCH_OPS if ops is None else ops).items():
        real = getattr(torch.ops, namespace)
        for name in names:
            if ops is not None and hasattr(real, name):
                continue
            real.__dict__[name] = _stub(f"torch.ops.{namespace}.{name}")
            _touched.add(f"torch.ops.{namespace}.{name}")


def stub_hits() -> list[str]:
    return sorted(_touched)

"""How a Triton kernel reads global memory once compiled for a CUDA GPU, found on any machine.

A kernel bound by reading weights is fast only if those reads are wide (16-byte vector loads or
cp.async copies into shared memory, pipelined) and slow if each element is its own 2-byte load: a
difference no interpreter run shows, and the reason gpt-oss's gated up GEMM ran at a tenth of its
byte limit (kernels/triton/gate_up_layout.py). Triton's own passes lower the kernel down to PTX here
without a GPU or ptxas (the PTX version is given, not asked of ptxas); the PTX's load instructions
are counted by kind. Arguments are specialized as Triton's launcher does: an int equal to 1 becomes a
constant, one divisible by 16 (and every pointer) is marked so, unless the kernel says
do_not_specialize. Triton (3.6) with its NVIDIA backend must be importable; the interpreter must be off
while compiling (the caller's process or child sets no TRITON_INTERPRET).
"""

from __future__ import annotations

import inspect
import re
from collections import Counter

LOAD = re.compile(r"\b(ld\.global[.\w]*|cp\.async\.(?:cg|ca)[.\w]*)")


def compile_to_ptx(kernel, args: dict, constexprs: dict, num_warps: int = 4, num_stages: int = 3,
                   capability: int = 90) -> str:
    """PTX of a @triton.jit `kernel` for sm_<capability>. args: each run-time argument by name, pointers as
    their Triton type ('*bf16', '*i32', ...), ints and floats as example values; constexprs by name."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    names = list(inspect.signature(kernel.fn).parameters)
    missing = [n for n in names if n not in args and n not in constexprs]
    if missing:
        raise ValueError(f"compile_to_ptx: give a value or type for {', '.join(missing)}")
    signature, constants, attrs = {}, {}, {}
    for i, name in enumerate(names):
        value = constexprs.get(name, args.get(name))
        if name in constexprs:
            signature[name], constants[(i,)] = "constexpr", value
        elif isinstance(value, str):
            signature[name], attrs[(i,)] = value, [["tt.divisibility", 16]]
        elif isinstance(value, float):
            signature[name] = "fp32"
        elif value == 1 and name not in kernel.do_not_specialize:
            signature[name], constants[(i,)] = "constexpr", 1
        else:
            signature[name] = "i32"
            if value % 16 == 0 and name not in kernel.do_not_specialize:
                attrs[(i,)] = [["tt.divisibility", 16]]
    source = ASTSource(kernel, signature, constants, attrs)
    target = GPUTarget("cuda", capability, 32)
    backend = make_backend(target)
    options = backend.parse_options({"num_warps": num_warps, "num_stages": num_stages, "ptx_version": 84})
    stages: dict = {}
    backend.add_stages(stages, options, source.language)
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    module = source.make_ir(target, options, backend.get_codegen_implementation(options), backend.get_module_map(),
                            context)
    metadata = {"hash": "compiled_loads", "target": target, **options.__dict__}
    for ext, stage in stages.items():
        module = stage(module, metadata)
        if ext == "ptx":
            return module
    raise RuntimeError("compile_to_ptx: this Triton's CUDA backend has no PTX stage")


def load_kinds(ptx: str) -> Counter:
    """Global loads in the PTX by instruction ('ld.global.b16', 'ld.global.v4.b32', 'cp.async.cg.shared.global')."""
    return Counter(m.group(1) for m in LOAD.finditer(ptx))


def narrow_loads(kinds: Counter) -> int:
    """Scalar loads of 2 bytes or less: one per element where a weight tile is read element by element."""
    return sum(n for kind, n in kinds.items() if kind.startswith("ld.global") and kind.split(".")[-1] in
               ("b8", "b16", "u8", "u16", "s8", "s16"))


def wide_loads(kinds: Counter) -> int:
    """16-byte reads: vector loads of 4 words and cp.async copies (16 bytes each at these tiles)."""
    return sum(n for kind, n in kinds.items() if ".v4." in kind or kind.startswith("cp.async"))

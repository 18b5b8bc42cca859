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

`assemble` goes one step further with the ptxas and cuobjdump Triton ships (x86 programs, no GPU
needed): the registers and spills ptxas reports, and the machine code's instructions by opcode, so
that a candidate's loads (LDG.E.128, LDGSTS), matrix ops (HGMMA, HMMA), conversions and shuffles per
K step can be counted before any device time is spent on it.
"""

from __future__ import annotations

import inspect
import os
import re
import subprocess
import tempfile
from collections import Counter
from typing import NamedTuple

LOAD = re.compile(r"\b(ld\.global[.\w]*|cp\.async\.(?:cg|ca)[.\w]*)")


def compile_to_ptx(kernel, args: dict, constexprs: dict, num_warps: int = 4, num_stages: int = 3,
                   capability: int = 90, metadata: dict | None = None) -> str:
    """PTX of a @triton.jit `kernel` for sm_<capability>. args: each run-time argument by name, pointers as
    their Triton type ('*bf16', '*i32', ...), ints and floats as example values; constexprs by name.
    `metadata`, when given, receives the compiler's (its "shared": shared memory bytes a program takes)."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import ASTSource, make_backend

    params = inspect.signature(kernel.fn).parameters
    names = list(params)
    # a constexpr the kernel gives a default (e.g. fp8_linear's SCALED=True) takes it, as a launch would
    constexprs = {**{n: p.default for n, p in params.items() if p.default is not inspect.Parameter.empty
                     and n not in args}, **constexprs}
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
    metadata = {} if metadata is None else metadata
    metadata.update({"hash": "compiled_loads", "target": target, **options.__dict__})
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


class Assembled(NamedTuple):
    registers: int  # per thread
    spill_bytes: int  # spill stores + spill loads (ptxas -v): local memory on the load path when > 0
    sass: Counter  # machine instructions by opcode with modifiers ('LDG.E.128', 'HGMMA.64x16x16.F32.BF16')
    loop: Counter  # the same for the body of the longest loop (a GEMV's K loop): the cost of one K step


_USAGE = re.compile(r"Used (\d+) registers")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_INSTRUCTION = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P[T\d]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_x]+)*)"
                          r"(?:\s+(0x[0-9a-f]+))?", re.M)


def _longest_loop(instructions: list[tuple[int, str, int | None]]) -> Counter:
    """Opcodes between the target of the longest backward branch and the branch (inclusive)."""
    spans = [(target, at) for at, op, target in instructions if op.startswith("BRA") and target is not None
             and target < at]
    if not spans:
        return Counter()
    lo, hi = max(spans, key=lambda s: s[1] - s[0])
    return Counter(op for at, op, _ in instructions if lo <= at <= hi)


def assemble(ptx: str, capability: int = 90) -> Assembled:
    """Run Triton's bundled ptxas on `ptx` for sm_<capability>a and disassemble the result."""
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability
    from triton import knobs

    with tempfile.TemporaryDirectory() as tmp:
        src, obj = os.path.join(tmp, "k.ptx"), os.path.join(tmp, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        log = subprocess.run([get_ptxas(capability).path, "-v", f"--gpu-name={sm_arch_from_capability(capability)}",
                              src, "-o", obj], capture_output=True, text=True, check=True).stderr
        sass = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", obj], capture_output=True, text=True,
                              check=True).stdout
    spills = _SPILLS.search(log)
    instructions = [(int(at, 16), op, int(target, 16) if target else None)
                    for at, op, target in _INSTRUCTION.findall(sass)]
    return Assembled(int(_USAGE.search(log).group(1)), sum(map(int, spills.groups())) if spills else 0,
                     Counter(op for _, op, _ in instructions), _longest_loop(instructions))


def sass_count(sass: Counter, prefix: str) -> int:
    """Instructions whose opcode starts with `prefix` ('LDG.E.128', 'LDGSTS', 'HGMMA', 'FFMA', 'SHFL')."""
    return sum(n for op, n in sass.items() if op.startswith(prefix))


# Hopper's per-SM limits (the CUDA programming guide's table for compute capability 9.0).
SM90_REGISTERS, SM90_SHARED, SM90_THREADS, SM90_PROGRAMS = 65536, 227 * 1024, 2048, 32


def programs_per_sm(registers: int, shared_bytes: int, warps: int) -> int:
    """How many programs of this kernel an sm_90 SM holds at once (registers are allotted per warp in
    units of 256, so a thread's count is rounded up to a multiple of 8)."""
    threads = 32 * warps
    per_program = -(-registers // 8) * 8 * threads
    return max(0, min(SM90_REGISTERS // per_program, SM90_SHARED // max(1, shared_bytes), SM90_THREADS // threads,
                      SM90_PROGRAMS))

"""Kernels of one decode step per module, counted on a CPU with the GPU's op set (as bench/launch_count.py):

    TRITON_INTERPRET=1 python bench/launch_modules.py CONFIG.json [--top 40]

Each launch is charged to the innermost module running (its path with layer numbers as '*', and its
class), so the largest launch sources show where to fuse next.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--dtype", default="bfloat16")
    args = ap.parse_args()
    from bringup.core.bench import launch_count as lc

    lc.use_gpu_ops_on_cpu()
    where: list[str] = ["(runner)"]
    per_module: Counter = Counter()
    original = lc.LaunchCounter.__torch_dispatch__

    def dispatch(self, func, types, args=(), kwargs=None):
        before = self.total
        out = original(self, func, types, args, kwargs)
        if self.total != before:
            per_module[f"{where[-1]}  {func._schema.name.split('::')[-1]}"] += self.total - before
        return out

    lc.LaunchCounter.__torch_dispatch__ = dispatch
    hook = lc.LaunchCounter._triton_hook

    def triton_hook(self):  # charge Triton launches to the module too
        from triton.runtime.interpreter import InterpretedFunction

        cm = hook(self)
        cm.__enter__()
        counted = InterpretedFunction.run

        def run(fn, *a, grid, warmup, **kw):
            if not warmup and not self._in_triton:
                per_module[f"{where[-1]}  triton:{fn.__name__}"] += 1
            return counted(fn, *a, grid=grid, warmup=warmup, **kw)

        InterpretedFunction.run = run

        class _Exit:
            def __enter__(s):
                return s

            def __exit__(s, *exc):
                InterpretedFunction.run = counted
                return cm.__exit__(*exc)
        return _Exit()

    lc.LaunchCounter._triton_hook = triton_hook

    from bringup.core.engine import engine as engine_mod

    built = engine_mod.Engine.__init__

    def init(self, *a, **kw):
        built(self, *a, **kw)
        for name, module in self.runner.model.named_modules():
            path = re.sub(r"\.\d+\.", ".*.", name + ".").rstrip(".")
            label = f"{path} [{type(module).__name__}]"
            module.register_forward_pre_hook(lambda m, i, label=label: where.append(label))
            module.register_forward_hook(lambda m, i, o: (where.pop(), None)[1])

    engine_mod.Engine.__init__ = init
    row = lc.count_config(lc.small_widths(json.loads(Path(args.config).read_text())), dtype=args.dtype, prompt=4)
    print(f"{Path(args.config).stem}: {row['kernels_per_step']:.0f} per step over {row['blocks']} blocks "
          f"({row['kernels_per_50_blocks']:.0f} per 50 blocks)")
    # the prompt and first step were counted too (the hooks see every forward): keep only the counted step
    for key, n in sorted(((k, v) for k, v in per_module.items()), key=lambda kv: -kv[1])[:args.top]:
        print(f"  {n:>5}  {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

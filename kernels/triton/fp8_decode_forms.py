"""Which W8A16 decode forms the engine runs, per row count: the one place that switches them.

The fp8 GEMVs (fp8_linear.py dense, fused_moe_fp8.py routed and shared experts) each have several
forms of the same product (the kernels' comments say how each reads and widens the weights):
- "dot": w tile @ x^T on the matrix units (wgmma), the rows padded to 16;
- "dot_trunc": "dot" with the weights widened through float32 (fp8_widen.py: a third of the
  conversion instructions);
- "mma": x @ w^T tile on the matrix units (mma.sync), the weights in 16-byte cp.async copies and
  widened as "dot_trunc"'s;
- "vec": one row on the vector units;
- "rows": up to 8 rows on the vector units, each weight tile loaded once (fp8_gemv_rows.py).
For a row count, the forms listed here are the ones whose tiles the device times at warm-up
(tile_picker.py), and the fastest tile of any of them runs; where nothing is timed (the interpreter,
a shape first met in a graph capture) the first form's first tile runs. bench/fp8_kernels.py times
every form at 1, 2, 4 and 8 rows beside bf16 and prints the table these should be set from.

"dot_trunc", "mma" and "rows" were written on 2026-12-04 without a GPU: their machine code (compiled here for
sm_90, core/bench/compiled_loads.py; tests/core/bench/test_bench_compiled_loads.py) reads the weights
as intended, but they have not been timed, so the engine does not run them yet. Switching is one line
per table: add the form to the row counts where the bench measured it fastest. To try a table on
the device before editing it, BRINGUP_FP8_FORMS replaces either or both, e.g.
"dense=1:rows,vec/16:dot,mma;moe=4:mma,dot" (bench/fp8_kernels.py prints the one it measured).
"""

from __future__ import annotations

import functools
import os

FORM_CODE = {"dot": 0, "vec": 1, "mma": 2, "rows": 3, "dot_trunc": 4}  # the kernels' FORM constexpr
FORMS = tuple(FORM_CODE)
VECTOR_ROWS_MAX = 8  # "rows" takes up to this many rows (fp8_gemv_rows.ROWS_MAX); "vec" one

# (up to this many rows, forms): the first entry whose bound covers the call's rows applies.
DENSE_FORMS = ((1, ("dot", "vec")), (16, ("dot",)))
# The MoE GEMV's programs take one row each for routed experts and every token's row for a shared
# expert slice, so its forms are by the call's token count.
MOE_FORMS = ((4, ("dot", "vec")),)


ENV = "BRINGUP_FP8_FORMS"


@functools.lru_cache(maxsize=8)
def parse_tables(text: str) -> dict[str, tuple]:
    """"dense=1:dot,vec/16:dot;moe=4:dot" -> {"dense": ((1, ("dot", "vec")), (16, ("dot",))), "moe": ...}."""
    tables = {}
    for part in filter(None, (p.strip() for p in text.split(";"))):
        kind, _, spec = part.partition("=")
        if kind not in ("dense", "moe") or not spec:
            raise ValueError(f"{ENV}: '{part}' is not dense=... or moe=...")
        table = []
        for entry in spec.split("/"):
            bound, _, forms = entry.partition(":")
            names = tuple(f.strip() for f in forms.split(",") if f.strip())
            unknown = [f for f in names if f not in FORM_CODE]
            if unknown or not bound.strip().isdigit() or not names:
                raise ValueError(f"{ENV}: '{entry}' is not ROWS:FORM,... with forms among {', '.join(FORMS)}")
            table.append((int(bound), names))
        tables[kind] = tuple(sorted(table))
    return tables


def format_table(kind: str, table) -> str:
    """The ENV text of one table (parse_tables reads it back)."""
    return f"{kind}=" + "/".join(f"{bound}:{','.join(forms)}" for bound, forms in table)


def table(kind: str) -> tuple:
    """The table in force: ENV's where it gives one, else DENSE_FORMS / MOE_FORMS."""
    return parse_tables(os.environ.get(ENV, "")).get(kind) or {"dense": DENSE_FORMS, "moe": MOE_FORMS}[kind]


def dense_runs(form: str, rows: int) -> bool:
    """Whether the dense GEMV's `form` can take `rows` rows at all (the MoE's forms take any count
    up to its GEMV bound: its vector form runs a shared slice's tokens one after another)."""
    return rows <= {"vec": 1, "rows": VECTOR_ROWS_MAX}.get(form, 1 << 30)


def _forms(table, rows: int) -> tuple[str, ...]:
    return next((forms for bound, forms in table if rows <= bound), ())


def dense_forms(rows: int) -> tuple[str, ...]:
    """The forms fp8_linear's GEMV may run at `rows` rows ("dot" where the table leaves none that
    takes that many: it takes every row count of the GEMV)."""
    return tuple(f for f in _forms(table("dense"), rows) if dense_runs(f, rows)) or ("dot",)


def moe_forms(tokens: int) -> tuple[str, ...]:
    """The forms the fp8 MoE GEMV may run at `tokens` tokens ("dot" where the table lists none)."""
    return _forms(table("moe"), tokens) or ("dot",)

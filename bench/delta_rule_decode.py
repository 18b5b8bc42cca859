"""The delta-rule decode step (issue 29): the Triton kernel (kernels/triton/delta_rule_decode.py) against
flash-linear-attention's (kernels/fla/: fused_recurrent with the pool's slots gathered into float32
and scattered back) and the plain-torch reference, at Qwen3-Next's and Kimi-Linear's shapes:

    python bench/delta_rule_decode.py [--device cuda] [--batches 1 8 32 128] [--state-dtypes float32 bfloat16]
                                      [--tiles 4096] [--json OUT.json]

Qwen3-Next: gated DeltaNet, 16 q/k heads, 32 value heads, dk = dv = 128, a scalar decay per head.
Kimi-Linear: KDA, 32 heads, dk = dv = 128, a decay per key channel. bf16 q/k/v (q and k views of one
product, as the model's split), a state pool in each of --state-dtypes. Each figure is us per call,
50 calls replayed from a CUDA graph (launch gaps as in a graphed decode step), the calls cycling over
enough slot sets to read twice the L2 cache (a decode step finds no layer's state cached); where a
form cannot be captured, eager calls timed with events ("eager" beside it). The bytes a step must
move are the state read and written once, B x Hv x dk x dv x 2 x the pool's element size; its share
of the copy bandwidth measured here is the bound each form reaches. Also the gates (delta_rule_gates,
one launch) against the reference's lines. --tiles: the Triton kernel at other TILE_ELEMENTS
(dk x BLOCK_V per program) too, to choose it. --small: heads / 8 and head dim 16 on the CPU under
TRITON_INTERPRET=1, a few calls, to check the script without a GPU (times meaningless).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (python -P leaves the script's folder out)

MODELS = {  # name: (KDA, q/k heads, value heads, head dim)
    "Qwen3-Next": (False, 16, 32, 128),
    "Kimi-Linear": (True, 32, 32, 128),
}
CALLS = 50


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


def timed_us(fns, dev) -> tuple[float, bool]:
    """(us per call, graphed): CALLS calls cycling over `fns` in one CUDA graph; eager if capture fails."""
    import torch

    if dev.type == "cuda":
        from fp8_kernels import graphed_us

        try:
            return graphed_us(fns), True
        except Exception:  # a form that syncs with the host cannot be captured
            torch.cuda.synchronize(dev)
    from timing import median_ms

    return median_ms(lambda: [fns[i % len(fns)]() for i in range(CALLS)], dev, repeat=5) * 1e3 / CALLS, False


def inputs(kda, B, Hk, Hv, d, state_dtype, copies, dev):
    import torch

    bf = dict(device=dev, dtype=torch.bfloat16)
    mixed = torch.randn(B, 2 * Hk * d, **bf)
    q, k = (x.view(B, Hk, d) for x in mixed.split(Hk * d, dim=-1))
    v = torch.randn(B, Hv, d, **bf)
    g = -torch.rand(B, Hv, d, device=dev) * 0.5 if kda else -torch.rand(B, Hv, device=dev)
    beta = torch.rand(B, Hv, **bf)
    pool = (torch.randn(B * copies, Hv, d, d, device=dev) * 0.05).to(state_dtype)
    slot_sets = [s for s in torch.randperm(B * copies, device=dev).view(copies, B)]
    return q, k, v, g, beta, pool, slot_sets


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda or xpu (default: the current accelerator)")
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8, 32, 128])
    ap.add_argument("--state-dtypes", nargs="+", default=["float32", "bfloat16"])
    ap.add_argument("--tiles", type=int, nargs="*", default=[], help="other TILE_ELEMENTS to time the kernel at")
    ap.add_argument("--json", type=Path, default=None, help="write the rows here")
    ap.add_argument("--small", action="store_true", help="tiny shapes on the CPU under TRITON_INTERPRET=1")
    args = ap.parse_args()
    global CALLS

    import torch

    from bringup.kernels import reference as ref
    from bringup.kernels.dispatch import device_type_of
    from bringup.kernels.triton import availability

    from bringup.kernels.triton.launch import interpreted

    dev = torch.device("cpu" if args.small else args.device or device_type_of(None))
    why = availability.triton_reason(dev.type) if dev.type in availability.GPU_DEVICE_TYPES else \
        f"{dev.type} is no GPU device type ({', '.join(availability.GPU_DEVICE_TYPES)})"
    if args.small:
        why = None if interpreted() else "--small runs the kernels under Triton's interpreter: set TRITON_INTERPRET=1"
        CALLS = 2
        MODELS.update({name: (kda, Hk // 8, Hv // 8, 16) for name, (kda, Hk, Hv, _) in MODELS.items()})
    if why is not None:
        print(f"delta_rule_decode: needs a GPU that Triton can use: {why}", file=sys.stderr)
        return 2
    from bringup.kernels.triton import delta_rule_decode as fast
    from bringup.kernels.triton import delta_rule_gates as fast_gates

    fla_why = availability.fla_reason(dev.type) if dev.type != "cpu" else "no GPU (--small)"
    fla = {}
    if fla_why is None:
        from bringup.kernels.fla import gated_delta_rule as fla_gdr, kda as fla_kda

        fla = {False: fla_gdr.gated_delta_rule_recurrent_inplace, True: fla_kda.kda_recurrent_inplace}
    if dev.type == "cuda":
        from fp8_kernels import copies_beyond_l2
        from nano_full import copy_bandwidth

        bw = copy_bandwidth(dev)
        name = torch.cuda.get_device_name(dev)
    else:
        bw, name = float("nan"), dev.type
        copies_beyond_l2 = lambda nbytes, dev: 4  # noqa: E731
    torch.manual_seed(0)
    print(f"device {name}, torch {torch.__version__}; copy bandwidth (read + write) {bw / 1e12:.2f} TB/s; "
          f"us per call ({CALLS} calls{' in a CUDA graph' if dev.type == 'cuda' else ''}), share of that bandwidth "
          f"for the state bytes")
    if fla_why:
        print(f"fla: not timed ({fla_why})")
    head = (f"{'model':12} {'state':8} {'B':>4} {'state MB':>9} {'triton us':>10} {'share':>6} {'fla us':>12} "
            f"{'share':>6} {'ref us':>12} {'share':>6} {'fla/tri':>8} {'err tri':>8} {'err fla':>8}")
    print(head)
    rows = []
    tile0 = fast.TILE_ELEMENTS
    for model, (kda, Hk, Hv, d) in MODELS.items():
        step_ref = ref.kda_recurrent_inplace if kda else ref.gated_delta_rule_recurrent_inplace
        step_fast = fast.kda_recurrent_inplace if kda else fast.gated_delta_rule_recurrent_inplace
        for sd in args.state_dtypes:
            state_dtype = getattr(torch, sd)
            for B in args.batches:
                nbytes = 2 * B * Hv * d * d * torch.empty((), dtype=state_dtype).element_size()  # read + written
                q, k, v, g, beta, pool, slot_sets = inputs(kda, B, Hk, Hv, d, state_dtype,
                                                           copies_beyond_l2(nbytes // 2, dev), dev)
                # errors: one step from the same states, each form on its own copy of the pool
                s0 = slot_sets[0]
                pools = [pool.clone() for _ in range(3)]
                want = step_ref(q, k, v, g, beta, pools[0], s0)
                got = step_fast(q, k, v, g, beta, pools[1], s0)
                err_t = max(rel_err(got, want), rel_err(pools[1][s0], pools[0][s0]))
                err_f = float("nan")
                if fla:
                    got_f = fla[kda](q, k, v, g, beta, pools[2], s0)
                    err_f = max(rel_err(got_f, want), rel_err(pools[2][s0], pools[0][s0]))
                del pools

                def calls(fn):
                    return [lambda s=s: fn(q, k, v, g, beta, pool, s) for s in slot_sets]

                t_fast, _ = timed_us(calls(step_fast), dev)
                t_fla, fla_graphed = timed_us(calls(fla[kda]), dev) if fla else (float("nan"), True)
                t_ref, ref_graphed = timed_us(calls(step_ref), dev)
                tiles = {}
                for tile in args.tiles:
                    fast.TILE_ELEMENTS = tile
                    tiles[tile] = timed_us(calls(step_fast), dev)[0]
                fast.TILE_ELEMENTS = tile0
                share = (lambda t: nbytes / bw / (t * 1e-6))
                mark = (lambda graphed: " " if graphed else "e")
                print(f"{model:12} {sd:8} {B:>4} {nbytes / 1e6:9.1f} {t_fast:10.1f} {share(t_fast):6.0%} "
                      f"{t_fla:11.1f}{mark(fla_graphed)} {share(t_fla):6.0%} {t_ref:11.1f}{mark(ref_graphed)} "
                      f"{share(t_ref):6.0%} {t_fla / t_fast:8.2f} {err_t:8.1e} {err_f:8.1e}"
                      + "".join(f"  tile {t}: {us:.1f}" for t, us in tiles.items()), flush=True)
                rows.append({"model": model, "state_dtype": sd, "batch": B, "state_bytes": nbytes,
                             "triton_us": t_fast, "fla_us": t_fla, "fla_graphed": fla_graphed, "reference_us": t_ref,
                             "reference_graphed": ref_graphed, "triton_share": share(t_fast),
                             "fla_share": share(t_fla), "err_triton": err_t, "err_fla": err_f,
                             "tiles": tiles, "tile": tile0})
                del q, k, v, g, beta, pool, slot_sets
    print("\n('e': eager calls timed with events, the form could not be captured in a CUDA graph)")
    print(f"\n{'gates':12} {'B':>4} {'triton us':>10} {'ref us':>10} {'max rel err g':>14}")
    gates = []
    for model, (kda, _, H, d) in MODELS.items():
        for B in args.batches:
            D = d if kda else 1
            a = torch.randn(B, H, D, device=dev).bfloat16().squeeze(-1)
            b = torch.randn(B, H, device=dev).bfloat16()
            A_log = torch.randn(1, 1, H, 1, device=dev) if kda else torch.randn(H, device=dev)
            dt_bias = torch.randn(H * D, device=dev)
            beta_dtype = torch.float32 if kda else torch.bfloat16
            t_fast, _ = timed_us([lambda: fast_gates.delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)], dev)
            t_ref, _ = timed_us([lambda: ref.delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)], dev)
            err = rel_err(fast_gates.delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)[0],
                          ref.delta_rule_gates(a, b, A_log, dt_bias, beta_dtype)[0])
            print(f"{model:12} {B:>4} {t_fast:10.1f} {t_ref:10.1f} {err:14.1e}", flush=True)
            gates.append({"model": model, "batch": B, "triton_us": t_fast, "reference_us": t_ref, "err_g": err})
    if args.json:
        args.json.write_text(json.dumps({"device": name, "bandwidth": bw, "fla": fla_why or "timed",
                                         "rows": rows, "gates": gates}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

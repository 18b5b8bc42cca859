"""Time each fast GPU kernel against its plain-torch reference at Nemotron-3-Nano-30B-A3B's shapes.

    python bench/kernels_gpu.py [--device cuda] [--prefill-tokens 8192] [--batch 64] [--context 4096]

Shapes from the model's config: 64 Mamba heads of 64 dims, 8 groups, state 128, conv width 4 over
6144 channels; attention 32 query heads, 2 KV heads of 128 dims, pages of 16 tokens. Prefill is one
Mamba layer over one prompt; decode is one step of a batch. Prints median ms of each, the ratio
reference / fast (above 1 = fast is faster) and the largest error relative to the largest
reference magnitude.
"""

from __future__ import annotations

import argparse

import torch
from timing import median_ms

H, P, G, N = 64, 64, 8, 128  # Mamba heads, head dim, groups, state size
CONV_CHANNELS, CONV_WIDTH = H * P + 2 * G * N, 4
HQ, HKV, HEAD_DIM, PAGE = 32, 2, 128, 16
DTYPE = torch.bfloat16


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


def _scan_case(dev, T):
    return (torch.randn(T, H, P, device=dev).to(DTYPE), (torch.randn(T, H, device=dev) - 2).to(DTYPE),
            -torch.rand(H, device=dev) * 4 - 0.5,
            (torch.randn(T, G, N, device=dev) / N**0.5).to(DTYPE), (torch.randn(T, G, N, device=dev) / N**0.5).to(DTYPE),
            128, torch.randn(H, device=dev), torch.randn(H, device=dev) * 0.5, torch.randn(H, P, N, device=dev))


def _step_case(dev, batch):
    return (torch.randn(batch, H, P, N, device=dev), torch.randn(batch, H, P, device=dev).to(DTYPE),
            torch.randn(batch, H, device=dev).to(DTYPE), -torch.rand(H, device=dev) * 4,
            torch.randn(batch, G, N, device=dev).to(DTYPE), torch.randn(batch, G, N, device=dev).to(DTYPE),
            torch.randn(H, device=dev), torch.randn(H, device=dev))


def _conv_case(dev, batch):
    return (torch.randn(batch, CONV_CHANNELS, device=dev).to(DTYPE),
            torch.randn(batch, CONV_CHANNELS, CONV_WIDTH - 1, device=dev).to(DTYPE),
            torch.randn(CONV_CHANNELS, CONV_WIDTH, device=dev).to(DTYPE), torch.randn(CONV_CHANNELS, device=dev).to(DTYPE),
            "silu")


def _attn_case(dev, batch, context):
    pages_each = -(-context // PAGE)
    num_pages = batch * pages_each
    k = torch.randn(num_pages, PAGE, HKV, HEAD_DIM, device=dev).to(DTYPE)
    v = torch.randn(num_pages, PAGE, HKV, HEAD_DIM, device=dev).to(DTYPE)
    tables = torch.randperm(num_pages, device=dev).view(batch, pages_each).int()
    # Lengths spread over (context/2, context], as a decode batch's are.
    lens = torch.randint(context // 2 + 1, context + 1, (batch,), device=dev, dtype=torch.int32)
    q = torch.randn(batch, HQ, HEAD_DIM, device=dev).to(DTYPE)
    return q, k, v, tables, lens, HEAD_DIM**-0.5


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="cuda or xpu (default: the current accelerator)")
    parser.add_argument("--prefill-tokens", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--context", type=int, default=4096, help="longest context in the decode batch")
    args = parser.parse_args()

    from bringup.kernels import reference as ref
    from bringup.kernels.dispatch import device_type_of, ops_for
    from bringup.kernels.triton import registration

    dev = torch.device(args.device or device_type_of(None))
    ops = ops_for(dev)
    torch.manual_seed(0)
    cases = {
        f"mamba_chunk_scan (prefill {args.prefill_tokens} tokens, one layer)": ("mamba_chunk_scan", _scan_case(dev, args.prefill_tokens)),
        f"mamba_state_update (decode batch {args.batch})": ("mamba_state_update", _step_case(dev, args.batch)),
        f"causal_conv1d_update (decode batch {args.batch})": ("causal_conv1d_update", _conv_case(dev, args.batch)),
        f"paged_attention_decode (batch {args.batch}, context <= {args.context})":
            ("paged_attention_decode", _attn_case(dev, args.batch, args.context)),
    }
    print(f"device {dev} ({torch.accelerator.current_accelerator()}), dtype {DTYPE}, torch {torch.__version__}")
    print(f"{'op':62} {'impl':>9} {'fast ms':>9} {'ref ms':>9} {'ref/fast':>9} {'max rel err':>12}")
    for label, (op, case_args) in cases.items():
        impl = ops.implementations[op]
        if impl == "reference":
            why = registration.skipped.get(dev.type, {}).get(op, "no fast version")
            print(f"{label:62} reference only: {why}")
            continue
        fast, slow = getattr(ops, op), ref.OPS[op]
        out_fast, out_ref = fast(*case_args), slow(*case_args)
        first = lambda o: o[0] if isinstance(o, tuple) else o  # noqa: E731 (y, or the attention output)
        err = rel_err(first(out_fast), first(out_ref))
        if isinstance(out_ref, tuple):
            err = max(err, rel_err(out_fast[1], out_ref[1]))
        t_fast = median_ms(lambda: fast(*case_args), dev, repeat=20, warmup=2)
        t_ref = median_ms(lambda: slow(*case_args), dev, repeat=20, warmup=2)
        print(f"{label:62} {impl:>9} {t_fast:9.3f} {t_ref:9.3f} {t_ref / t_fast:9.1f} {err:12.2e}")


if __name__ == "__main__":
    main()

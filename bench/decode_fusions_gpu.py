"""Each decode-step fusion of issue 29 against the launches it replaces, at real shapes, in one run:

    python bench/decode_fusions_gpu.py [--device cuda] [--small] [--experts]

- gate/up as one GEMM + act_and_mul, against gate, up, act, mul (Qwen3-8B: 4096 -> 12288 SiLU;
  gemma-3-1b: 1152 -> 6912 tanh GELU), the down product left out (the same in both);
- add_rms_norm with Gemma's post norm inside, against rms_norm then add_rms_norm (1152 wide);
- gpt-oss's experts (32 of 2880 x 2880, top 4, interleaved gate/up, biases) at 1, 4, 8, 16, 32 tokens, with
  the bytes the touched experts hold and their time at the H200's bandwidth: the form decode_form chooses
  against the path before (GEMV up to 4 tokens, else the sorted chain: align, gated up GEMM, down GEMM;
  gate/up through their stride-2 views), against each other form (gemv, grouped: expert by expert,
  sorted) with gate/up read as one tensor, and from 8 tokens the grouped form's tile against each of
  moe_gated_grouped.TILE_CHOICES (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); then (CUDA only) each form at
  1, 2, 4, 8, 16 tokens as 50 calls replayed from a CUDA graph over 4 routings (an eager call of two
  launches at 1 token is mostly the host's launch time): us per call, TB/s of the touched experts' bytes;
  and the split form (moe_gated_split.py) with each of SPLIT_TILE_CHOICES and K splits 1 to 8;
- rope_paged_decode against qk_norm_rope_kv_write + paged_attention_decode (Qwen3-8B 32/8 heads of 128
  with q/k norms; gpt-oss 64/8 heads of 64 with sinks and its 128-token window), 1 and 32 requests of
  2,048 tokens.
bf16; median ms of each (timing.median_ms), unfused / fused (above 1: the fusion is faster), and the
largest difference relative to the largest unfused magnitude. --small: shapes cut by 8, float32, a
few requests, one timing each, to check the script on a CPU under TRITON_INTERPRET=1 (times meaningless).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))  # (python -P leaves the script's folder out)

from timing import median_ms  # noqa: E402


def rel_err(a, b):
    return ((a.float() - b.float()).abs().max() / b.float().abs().max().clamp_min(1e-6)).item()


REPEAT = 20  # (--small: 1)


def row(label, fused, unfused, dev):
    a, b = fused(), unfused()
    a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
    t_f, t_u = median_ms(fused, dev, repeat=REPEAT, warmup=1), median_ms(unfused, dev, repeat=REPEAT, warmup=1)
    print(f"{label:58} {t_f:9.3f} {t_u:9.3f} {t_u / t_f:9.2f} {rel_err(a, b):12.2e}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default=None, help="cuda or xpu (default: the current accelerator)")
    ap.add_argument("--small", action="store_true", help="shapes / 8, to check the script (CPU, interpreter)")
    ap.add_argument("--experts", action="store_true", help="only gpt-oss's experts")
    args = ap.parse_args()
    from bringup.kernels import reference as ref
    from bringup.kernels.reference.mlp import activation
    from bringup.kernels.dispatch import device_type_of
    from bringup.kernels.triton import (fused_moe_gated, gate_up_layout, moe_gated_gemv, moe_gated_grouped,
                                        moe_gated_split, norms)
    from bringup.kernels.triton.act_and_mul import act_and_mul
    from bringup.kernels.triton.paged_attention_decode import paged_attention_decode
    from bringup.kernels.triton.qk_norm_rope import qk_norm_rope_kv_write
    from bringup.kernels.triton.rope_paged_decode import rope_paged_decode

    global REPEAT
    dev = torch.device(args.device or device_type_of(None))
    cut = 8 if args.small else 1
    REPEAT = 1 if args.small else REPEAT
    bf = dict(device=dev, dtype=torch.float32 if args.small else torch.bfloat16)  # (the interpreter's bf16 dot)
    torch.manual_seed(0)
    print(f"device {dev}, torch {torch.__version__}")
    print(f"{'fusion':58} {'fused ms':>9} {'unfused':>9} {'ratio':>9} {'max rel err':>12}")
    for name, H, I, act in () if args.experts else (("Qwen3-8B", 4096, 12288, "silu"),
                                                     ("gemma-3-1b", 1152, 6912, "gelu_pytorch_tanh")):
        H, I = H // cut, I // cut
        gate, up = torch.randn(I, H, **bf) / H ** 0.5, torch.randn(I, H, **bf) / H ** 0.5
        gate_up = torch.cat([gate, up])
        for T in (1, 32):
            x = torch.randn(T, H, **bf)
            row(f"gate/up + act_and_mul, {name}, {T} tokens", lambda: act_and_mul(F.linear(x, gate_up), act),
                lambda: activation(act, F.linear(x, gate)) * F.linear(x, up), dev)
    H = 1152 // cut
    w, dw = torch.rand(H, device=dev) + 0.5, torch.rand(H, device=dev) + 0.5
    for T in () if args.experts else (1, 32):
        h, d = torch.randn(T, H, **bf), torch.randn(T, H, **bf)
        row(f"add_rms_norm + post norm, gemma-3-1b, {T} tokens",
            lambda: norms.add_rms_norm(h, d, w, 1e-6, delta_weight=dw),
            lambda: norms.add_rms_norm(h, ref.rms_norm(d, dw, 1e-6, multiply_in_float32=True), w, 1e-6), dev)
    E, H, I, k = 32, 2880 // cut, 2880 // cut, 4
    gu = torch.randn(E, H, 2 * I, **bf) / H ** 0.5
    gub, down, db = torch.randn(E, 2 * I, **bf) * 0.1, torch.randn(E, I, H, **bf) / I ** 0.5, torch.randn(E, H, **bf)
    views = (gu[..., ::2].transpose(1, 2), gu[..., 1::2].transpose(1, 2), down.transpose(1, 2))
    biases = (gub[:, ::2], gub[:, 1::2], db)
    gemv_max = moe_gated_gemv.GEMV_MAX_TOKENS  # the GEMV form was chosen up to this many tokens

    def experts(x, wts, ids, form=None, as_one=True, tile=None, split=None):
        """The experts in one form (None: the one decode_form chooses), gate/up read as one tensor or
        through its two strided views, the expert-by-expert form's tile, the split form's overrides."""
        overrides = (fused_moe_gated.FORM_OVERRIDE, moe_gated_grouped.TILE_OVERRIDE, moe_gated_split.TILE_OVERRIDE)
        saved = [dict(o) for o in overrides]
        fused_moe_gated.FORM_OVERRIDE.update({"form": form} if form else {})
        moe_gated_grouped.TILE_OVERRIDE.update({"all": tile} if tile else {})
        moe_gated_split.TILE_OVERRIDE.update(split or {})
        gate_up_layout.READ_AS_ONE = as_one
        try:
            return fused_moe_gated.moe_gated_experts_unsummed(x, wts, ids, *views, "swiglu_clamped", *biases, 1.702, 7.0)
        finally:
            gate_up_layout.READ_AS_ONE = True
            for live, old in zip(overrides, saved):
                live.clear()
                live.update(old)

    def routed(T):
        return torch.softmax(torch.randn(T, k, device=dev), -1), torch.stack([torch.randperm(E, device=dev)[:k]
                                                                               for _ in range(T)])

    expert_bytes = (3 * H * I + 2 * I + H) * gu.element_size()
    for T in (1, 4, 8, 16, 32):
        x = torch.randn(T, H, **bf)
        wts, ids = routed(T)
        chosen, before = fused_moe_gated.decode_form(T, k, E), ("gemv" if T <= gemv_max else "sorted")
        touched = int(ids.unique().numel())
        print(f"gpt-oss experts, {T} tokens: {touched} experts touched, {touched * expert_bytes / 1e6:.0f} MB to read "
              f"(H200 at 4.8 TB/s: {touched * expert_bytes / 4.8e9:.3f} ms); chosen form {chosen}", flush=True)
        row(f"gpt-oss experts {T} tok: {chosen} vs before ({before}, strided)", lambda: experts(x, wts, ids),
            lambda: experts(x, wts, ids, before, as_one=False), dev)
        for form in fused_moe_gated.FORMS:
            if form != chosen:
                row(f"gpt-oss experts {T} tok: {chosen} vs {form}", lambda: experts(x, wts, ids),
                    lambda: experts(x, wts, ids, form), dev)
        if T >= 8:
            for tile in moe_gated_grouped.TILE_CHOICES:
                if tile != moe_gated_grouped.TILE:
                    row(f"gpt-oss experts {T} tok: grouped {moe_gated_grouped.TILE} vs {tile}",
                        lambda: experts(x, wts, ids, "grouped"), lambda: experts(x, wts, ids, "grouped", tile=tile), dev)
    if dev.type == "cuda":
        graphed_experts(experts, routed, expert_bytes, H, k, **bf)
    context, page = (0 if args.experts else 2048 // cut), 16
    for name, Hq, Hkv, D, extra in (("Qwen3-8B", 32, 8, 128, "norms"), ("gpt-oss", 64, 8, 64, "sinks")):
        for B in (() if args.experts else (1, 4) if args.small else (1, 32)):
            qkv = torch.randn(B, (Hq + 2 * Hkv) * D, **bf)
            q, kk, v = (t.view(B, -1, D) for t in qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1))
            pages = torch.randperm(B * context // page, device=dev).view(B, -1)
            ctx = torch.full((B,), context, device=dev)
            pos = ctx - 1
            slots = pages[:, -1] * page + pos % page
            inv_freq = 1.0 / 1e6 ** (torch.arange(0, D, 2, device=dev).float() / D)
            kc, vc = (torch.randn(B * context // page, page, Hkv, D, **bf) for _ in range(2))
            norm = (torch.rand(D, **bf) + 0.5) if extra == "norms" else None
            sinks = torch.linspace(-1.0, 2.0, Hq, device=dev) if extra == "sinks" else None
            window = 128 if extra == "sinks" else None
            row(f"rope_paged_decode, {name}, {B} requests of {context}",
                lambda: rope_paged_decode(q, kk, v, pos, inv_freq, kc, vc, slots, pages, ctx, D ** -0.5, window,
                                          None, sinks, 1.0, norm, norm),
                lambda: paged_attention_decode(qk_norm_rope_kv_write(q, kk, v, pos, inv_freq, kc, vc, slots, 1.0, norm,
                                                                     norm), kc, vc, pages, ctx, D ** -0.5, window,
                                               None, sinks), dev)


SPLIT_TILE_CHOICES = {"up": ((16, 128, 4, 4), (32, 128, 4, 4), (16, 256, 4, 3), (16, 64, 4, 6), (16, 128, 8, 4)),
                      "down": ((64, 128, 4, 4), (32, 128, 4, 4), (64, 64, 4, 6), (128, 64, 4, 4), (64, 128, 8, 4))}


def graphed_experts(experts, routed, expert_bytes, H, k, device, dtype):
    """Each form's us per call and TB/s, graphed (launch gaps as in a graphed decode step, no host time);
    then the split form's tiles and K splits."""
    from fp8_kernels import graphed_us
    from bringup.kernels.triton import fused_moe_gated, moe_gated_split

    def one(T, **kw):
        cases = [(torch.randn(T, H, device=device, dtype=dtype), *routed(T)) for _ in range(4)]
        touched = sum(int(ids.unique().numel()) for _, _, ids in cases) / len(cases)
        us = graphed_us([lambda c=c: experts(*c, **kw) for c in cases])
        return us, touched * expert_bytes / us / 1e6

    print(f"\ngpt-oss experts, graphed (50 calls over 4 routings; us per call, TB/s of the touched experts):")
    print(f"{'tokens':>6} " + " ".join(f"{form:>16}" for form in fused_moe_gated.FORMS) + f" {'chosen':>8}")
    for T in (1, 2, 4, 8, 16):
        cells = [one(T, form=form) for form in fused_moe_gated.FORMS]
        print(f"{T:>6} " + " ".join(f"{us:8.1f} {tbs:5.2f}TB/s" for us, tbs in cells)
              + f" {fused_moe_gated.decode_form(T, k, 32):>8}", flush=True)
    for T in (1, 4, 8):
        for part, choices in SPLIT_TILE_CHOICES.items():
            for tile in choices:
                us, tbs = one(T, form="split", split={part: tile})
                print(f"split {T} tok, {part} tile {tile}: {us:8.1f} us {tbs:5.2f} TB/s", flush=True)
        for split_k in (1, 2, 4, 8):
            us, tbs = one(T, form="split", split={"split_k": split_k})
            print(f"split {T} tok, down K split {split_k}: {us:8.1f} us {tbs:5.2f} TB/s", flush=True)


if __name__ == "__main__":
    main()

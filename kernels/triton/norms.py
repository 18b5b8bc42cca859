"""RMSNorms in one Triton kernel each (the references take 6 to 10 torch kernels apiece):
`add_rms_norm` (residual add + the next block's norm), `rms_norm` (the same kernel with nothing to
add: Gemma's post-attention and post-MLP norms) and `gated_rms_norm` (Mamba2's group-wise norm gated
by silu(z), KDA's by sigmoid(z) in float32). Statistics in float32; results match the references' rounding order."""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import next_pow2, num_warps


@triton.jit
def _normed(x, w, H, eps, F32_MUL: tl.constexpr, out_ty: tl.constexpr):
    """rms_norm of one row x (float32) by weight w, rounded as the reference rounds, in float32."""
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / H + eps)
    if F32_MUL:
        y = w.to(tl.float32) * (x * inv)
    else:
        y = w.to(tl.float32) * (x * inv).to(out_ty).to(tl.float32)
    return y


@triton.jit
def _add_rms_norm_kernel(h_ptr, d_ptr, r_ptr, g_ptr, w_ptr, dw_ptr, h_out_ptr, y_ptr, H, eps, d_eps, s_h, s_d, s_dk,
                         s_r, s_rk, s_g, s_ho, s_y, HAS_DELTA: tl.constexpr, HAS_SHARED: tl.constexpr,
                         SHARED_K: tl.constexpr, ROUTED_K: tl.constexpr, SHARED_GATE: tl.constexpr,
                         DELTA_NORM: tl.constexpr, F32_MUL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, BLOCK)
    ok = offs < H
    h = tl.load(h_ptr + row * s_h + offs, mask=ok, other=0.0)
    if HAS_DELTA:
        if not HAS_SHARED:  # a MoE without a shared expert: its routed parts only
            d = tl.zeros([BLOCK], dtype=h_out_ptr.dtype.element_ty)
        elif SHARED_K > 0:  # a shared expert in slices: summed in float32, rounded once
            ds = tl.zeros([BLOCK], dtype=tl.float32)
            for j in tl.static_range(SHARED_K):
                ds += tl.load(d_ptr + row * s_d + j * s_dk + offs, mask=ok, other=0.0).to(tl.float32)
            d = ds.to(h_out_ptr.dtype.element_ty)
        else:
            d = tl.load(d_ptr + row * s_d + offs, mask=ok, other=0.0)
        if SHARED_GATE:  # the shared expert times sigmoid(its gate logit), each rounded as unfused
            gate = tl.sigmoid(tl.load(g_ptr + row * s_g).to(tl.float32)).to(h_out_ptr.dtype.element_ty)
            d = (gate.to(tl.float32) * d.to(tl.float32)).to(h_out_ptr.dtype.element_ty)
        if ROUTED_K > 0:  # a MoE's parts: shared + (routed summed over k), each sum rounded as unfused
            r = tl.zeros([BLOCK], dtype=tl.float32)
            for j in tl.static_range(ROUTED_K):
                r += tl.load(r_ptr + row * s_r + j * s_rk + offs, mask=ok, other=0.0).to(tl.float32)
            r = r.to(h_out_ptr.dtype.element_ty)
            if HAS_SHARED:
                d = (d.to(tl.float32) + r.to(tl.float32)).to(h_out_ptr.dtype.element_ty)
            else:
                d = r
        if DELTA_NORM:  # the part's own post norm first (Gemma), rounded to the dtype as unfused
            dw = tl.load(dw_ptr + offs, mask=ok, other=0.0)
            d = _normed(d.to(tl.float32), dw, H, d_eps, F32_MUL, h_out_ptr.dtype.element_ty)
            d = d.to(h_out_ptr.dtype.element_ty)
        h = (h.to(tl.float32) + d.to(tl.float32))
        h = h.to(h_out_ptr.dtype.element_ty)
        tl.store(h_out_ptr + row * s_ho + offs, h, mask=ok)
    w = tl.load(w_ptr + offs, mask=ok, other=0.0)
    y = _normed(h.to(tl.float32), w, H, eps, F32_MUL, y_ptr.dtype.element_ty)
    tl.store(y_ptr + row * s_y + offs, y.to(y_ptr.dtype.element_ty), mask=ok)


def add_rms_norm(hidden, delta, weight, eps, *, multiply_in_float32=True, delta_weight=None, delta_eps=None):
    """Same arguments and results as kernels.reference.add_rms_norm."""
    T, H = hidden.shape
    if delta_weight is not None and (delta is None or isinstance(delta, tuple) or delta_weight.dtype != hidden.dtype
                                     and not multiply_in_float32):
        from ..reference import add_rms_norm as reference  # (a MoE's parts are never post-normed)

        return reference(hidden, delta, weight, eps, multiply_in_float32=multiply_in_float32,
                         delta_weight=delta_weight, delta_eps=delta_eps)
    y = torch.empty_like(hidden)
    h_out = torch.empty_like(hidden) if delta is not None else hidden
    routed, k, s, shared, gate = hidden, 0, 0, True, None
    if isinstance(delta, tuple):
        delta, routed, gate = delta if len(delta) == 3 else (*delta, None)
        shared = delta is not None
        gate = gate if shared else None
        delta = delta if shared else routed  # (only its strides are read then)
        if routed.dim() == 2:
            routed = routed[:, None, :]
        k = routed.shape[1]
        if shared and delta.dim() == 3:  # shared expert slices [T, S, H]
            s = delta.shape[1]
    if T:
        d = delta if delta is not None else hidden
        s_dk = d.stride(1) if s else 0
        r3 = routed if k else hidden[:, None, :]
        d_eps = float(eps if delta_eps is None else delta_eps)
        g = gate if gate is not None else hidden
        _add_rms_norm_kernel[(T,)](hidden, d, r3, g, weight, delta_weight if delta_weight is not None else weight,
                                   h_out, y, H, float(eps), d_eps, hidden.stride(0), d.stride(0), s_dk, r3.stride(0),
                                   r3.stride(1), g.stride(0), h_out.stride(0), y.stride(0), HAS_DELTA=delta is not None,
                                   HAS_SHARED=shared, SHARED_K=s, ROUTED_K=k, SHARED_GATE=gate is not None,
                                   DELTA_NORM=delta_weight is not None,
                                   F32_MUL=bool(multiply_in_float32), BLOCK=next_pow2(H),
                                   num_warps=num_warps(hidden.device.type, 8 if H >= 2048 else 4))
    return h_out, y


def rms_norm(x, weight, eps, *, multiply_in_float32=False):
    """Same arguments and result as kernels.reference.rms_norm, for x whose rows (all dimensions but
    the last) are a view of [N, H] with unit column stride, and a contiguous [H] weight. Others, and
    a weight of another dtype multiplied in x's dtype (the reference then promotes), take the reference."""
    H = x.shape[-1] if x.dim() else 0
    rows = x.reshape(-1, H) if H and x.stride(-1) == 1 else None
    is_view = rows is not None and (rows.numel() == 0 or rows.data_ptr() == x.data_ptr())
    promoted = not multiply_in_float32 and weight.dtype != x.dtype
    if not is_view or promoted or weight.shape != (H,) or weight.stride(0) != 1:
        from ..reference import rms_norm as reference

        return reference(x, weight, eps, multiply_in_float32=multiply_in_float32)
    return add_rms_norm(rows, None, weight, eps, multiply_in_float32=multiply_in_float32)[1].view(x.shape)


@triton.jit
def _gated_rms_norm_kernel(x_ptr, z_ptr, w_ptr, y_ptr, G, eps, s_x, s_z, s_y,
                           BEFORE: tl.constexpr, SIGMOID: tl.constexpr, F32_MUL: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    grp = tl.program_id(1)
    offs = tl.arange(0, BLOCK)
    ok = offs < G
    cols = grp * G + offs
    x = tl.load(x_ptr + row * s_x + cols, mask=ok, other=0.0).to(tl.float32)
    z = tl.load(z_ptr + row * s_z + cols, mask=ok, other=0.0).to(tl.float32)
    if SIGMOID:
        g = tl.sigmoid(z)
    else:
        g = z * tl.sigmoid(z)
    if not BEFORE:
        x = x * g
    inv = 1.0 / tl.sqrt(tl.sum(x * x, axis=0) / G + eps)
    w = tl.load(w_ptr + cols, mask=ok, other=0.0)
    if F32_MUL:  # all in float32, rounded once (KDA's o_norm)
        y = w.to(tl.float32) * (x * inv)
        if BEFORE:
            y = y * g
        y = y.to(y_ptr.dtype.element_ty)
    else:  # the norm rounded to the dtype, then each product (Mamba2's order)
        n = (x * inv).to(y_ptr.dtype.element_ty).to(tl.float32)
        y = (w.to(tl.float32) * n).to(y_ptr.dtype.element_ty)
        if BEFORE:
            y = (y.to(tl.float32) * g.to(y_ptr.dtype.element_ty).to(tl.float32)).to(y_ptr.dtype.element_ty)
    tl.store(y_ptr + row * s_y + cols, y, mask=ok)


def gated_rms_norm(x, gate, weight, eps, group_size, *, norm_before_gate=False, activation="silu",
                   multiply_in_float32=False):
    """Same arguments and results as kernels.reference.gated_rms_norm (2-D x and gate)."""
    if x.dim() != 2 or activation not in ("silu", "sigmoid"):
        from ..reference import gated_rms_norm as ref

        return ref(x, gate, weight, eps, group_size, norm_before_gate=norm_before_gate, activation=activation,
                   multiply_in_float32=multiply_in_float32)
    T, W = x.shape
    if W % group_size:
        raise ValueError(f"gated_rms_norm: width {W} is not a multiple of group size {group_size}")
    y = torch.empty_like(x)
    if T:
        _gated_rms_norm_kernel[(T, W // group_size)](x, gate, weight, y, group_size, float(eps), x.stride(0),
                                                     gate.stride(0), y.stride(0), BEFORE=bool(norm_before_gate),
                                                     SIGMOID=activation == "sigmoid",
                                                     F32_MUL=bool(multiply_in_float32), BLOCK=next_pow2(group_size),
                                                     num_warps=num_warps(x.device.type, 4))
    return y

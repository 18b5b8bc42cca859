"""NemotronH (Nemotron-H, Nemotron-3-Nano): a stack of single-purpose blocks.

Each block is `h = h + mixer(rmsnorm(h))` where the mixer is one of: Mamba2 ("M" in
hybrid_override_pattern, "linear_attention" in layers_block_type), GQA attention without rotary
embeddings ("*", "full_attention"), a relu2 MLP ("-", "mlp"), or a MoE of relu2 experts with a
shared expert and DeepSeek-style grouped sigmoid routing ("E", "moe").
Weights are named as NVIDIA's checkpoints and transformers' save_pretrained name them:
`backbone.layers.N.mixer...`, experts one by one (`mixer.experts.E.up_proj.weight`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..forward_batch import upload
from .attention import paged_attention
from .base import CacheSpec, CausalLM, RMSNormWeight, linear

PATTERN_TO_TYPE = {"M": "linear_attention", "*": "full_attention", "-": "mlp", "E": "moe"}
BLOCK_TYPES = tuple(PATTERN_TO_TYPE.values())


def block_types(cfg) -> list[str]:
    """The per-layer block types from layers_block_type (transformers 5) or hybrid_override_pattern."""
    types = cfg.get("layers_block_type") or cfg.get("layer_types")
    if types:
        bad = sorted(set(types) - set(BLOCK_TYPES))
        if bad:
            raise ValueError(f"NemotronH layers_block_type has unknown block types {bad}; known: {list(BLOCK_TYPES)}")
        return list(types)
    pattern = cfg.get("hybrid_override_pattern")
    if not pattern:
        raise ValueError("NemotronH config has neither layers_block_type nor hybrid_override_pattern")
    bad = sorted(set(pattern) - set(PATTERN_TO_TYPE))
    if bad:
        raise ValueError(f"hybrid_override_pattern has unknown symbols {bad}; known: {sorted(PATTERN_TO_TYPE)}")
    return [PATTERN_TO_TYPE[c] for c in pattern]


def time_step_limit(cfg) -> tuple[float, float]:
    """dt clamp range: the config's time_step_limit (default (0, inf), i.e. none), applied in prefill
    and decode alike, as NVIDIA's Mamba2 code does. (transformers 5.24 instead floors dt at
    time_step_min in its prefill path only; with trained weights dt rarely goes below that floor.)"""
    limit = cfg.get("time_step_limit") or cfg.get("mamba_dt_limit") or (0.0, math.inf)
    lo, hi = (float(v) if not isinstance(v, dict) else float(v.get("__float__", "inf")) for v in limit)
    return lo, hi


@dataclass
class _StatePlan:
    """How a batch's requests meet their Mamba state, worked out once per batch for all layers:
    requests continuing with one token step their state in one batched call; the rest (prompts and
    prompt chunks) run the chunked scan together in one varlen call. Row and slot indices go to the
    device in one copy per batch; a decode-only batch needs none (every row steps, in order)."""

    step_rows: torch.Tensor | None  # token index of each stepping request (None with all_rows_step)
    step_slots: torch.Tensor | None  # None: no request steps
    scan_rows: torch.Tensor | None  # token indices of the scanning requests, back to back
    scan_starts: list[int]  # offsets of each scanning request within scan_rows (n + 1)
    scan_slots: torch.Tensor | None
    scan_has_state: torch.Tensor | None  # [n] bool: the slot holds this request's state
    all_rows_step: bool = False  # every token is a stepping request's, in batch order: no gather needed


def _state_plan(batch, device) -> _StatePlan:
    plan = batch.memo.get("mamba_state_plan")
    if plan is not None:
        return plan
    starts = batch.query_start_loc
    steps, scans = [], []
    for i, (q, has) in enumerate(zip(batch.query_lens_list, batch.has_initial_state_list)):
        (steps if q == 1 and has else scans).append(i)
    if not scans:  # decode only: the batch's own state_slots, rows 0..B-1
        plan = _StatePlan(step_rows=None, step_slots=batch.state_slots, scan_rows=None,
                          scan_starts=[0], scan_slots=None, scan_has_state=None, all_rows_step=True)
        batch.memo["mamba_state_plan"] = plan
        return plan
    slots = batch.state_slots_list
    scan_rows, scan_starts = [], [0]
    for i in scans:
        scan_rows.extend(range(starts[i], starts[i + 1]))
        scan_starts.append(len(scan_rows))
    step_rows, step_slots, scan_rows_d, scan_slots, scan_has = upload(
        [[starts[i] for i in steps], [slots[i] for i in steps], scan_rows, [slots[i] for i in scans],
         [int(batch.has_initial_state_list[i]) for i in scans]], torch.device(device))
    plan = _StatePlan(
        step_rows=step_rows if steps else None,
        step_slots=step_slots if steps else None,
        scan_rows=scan_rows_d,
        scan_starts=scan_starts,
        scan_slots=scan_slots,
        scan_has_state=scan_has.bool(),
    )
    batch.memo["mamba_state_plan"] = plan
    return plan


class Mamba2Mixer(nn.Module):
    def __init__(self, cfg, layer_id: int, ops):
        super().__init__()
        self.layer_id, self.ops = layer_id, ops
        self.num_heads = cfg.mamba_num_heads
        self.head_dim = cfg.mamba_head_dim
        self.n_groups = cfg.get("n_groups", 1)
        self.d_state = cfg.ssm_state_size
        self.kernel = cfg.get("conv_kernel", 4)
        self.chunk_size = cfg.get("chunk_size", 128)
        self.intermediate = self.num_heads * self.head_dim
        self.conv_dim = self.intermediate + 2 * self.n_groups * self.d_state
        self.eps = cfg.get("layer_norm_epsilon", 1e-5)
        self.dt_limit = time_step_limit(cfg)
        if cfg.get("mamba_hidden_act", "silu") != "silu":
            raise ValueError(f"NemotronH mamba_hidden_act {cfg.mamba_hidden_act!r} is not supported; only 'silu'")
        bias = bool(cfg.get("use_bias", False))
        self.in_proj = linear(cfg.hidden_size, self.intermediate + self.conv_dim + self.num_heads, bias)
        self.conv1d = nn.Conv1d(self.conv_dim, self.conv_dim, self.kernel, groups=self.conv_dim,
                                bias=bool(cfg.get("use_conv_bias", True))).requires_grad_(False)
        self.dt_bias = nn.Parameter(torch.zeros(self.num_heads), requires_grad=False)
        self.A_log = nn.Parameter(torch.zeros(self.num_heads), requires_grad=False)
        self.D = nn.Parameter(torch.ones(self.num_heads), requires_grad=False)
        self.norm = RMSNormWeight(self.intermediate, self.eps)
        self.out_proj = linear(self.intermediate, cfg.hidden_size, bias)

    def _A(self) -> torch.Tensor:
        """-exp(A_log) in float32, recomputed only when A_log changes (three kernels less per step)."""
        key = (self.A_log.data_ptr(), self.A_log._version)
        if getattr(self, "_A_key", None) != key:
            self._A_cache, self._A_key = -torch.exp(self.A_log.float()), key
        return self._A_cache

    @property
    def conv_shape(self) -> tuple[int, int]:
        return (self.conv_dim, self.kernel - 1)

    @property
    def ssm_shape(self) -> tuple[int, int, int]:
        return (self.num_heads, self.head_dim, self.d_state)

    def _split_xbc(self, xbc: torch.Tensor):
        gn = self.n_groups * self.d_state
        x, B, C = xbc.split([self.intermediate, gn, gn], dim=-1)
        n = xbc.shape[0]
        return (x.reshape(n, self.num_heads, self.head_dim), B.reshape(n, self.n_groups, self.d_state),
                C.reshape(n, self.n_groups, self.d_state))

    def _step(self, xbc, dt, A, w, b, conv_states, ssm_states, slots) -> torch.Tensor:
        """One token per request: conv and SSM states of `slots` read and updated in the pools."""
        xc = self.ops.causal_conv1d_update_inplace(xbc, conv_states, slots, w, b, "silu")
        xs, Bs, Cs = self._split_xbc(xc)
        return self.ops.mamba_state_update_inplace(ssm_states, slots, xs, dt, A, Bs, Cs, self.D, self.dt_bias,
                                                   True, self.dt_limit)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops = self.ops
        if batch.state_pool is None:
            raise RuntimeError(f"layer {self.layer_id} is a Mamba2 layer but the batch carries no state pool")
        conv_states = batch.state_pool.conv(self.layer_id)  # [slots, conv_dim, K-1]
        ssm_states = batch.state_pool.ssm(self.layer_id)  # [slots, H, P, N]
        z, xbc, dt = self.in_proj(hidden).split([self.intermediate, self.conv_dim, self.num_heads], dim=-1)
        A = self._A()
        w, b = self.conv1d.weight[:, 0, :], self.conv1d.bias
        plan = _state_plan(batch, hidden.device)
        if plan.all_rows_step:  # decode only: no gather of rows, the states updated where they lie
            y = self._step(xbc, dt, A, w, b, conv_states, ssm_states, plan.step_slots)
        else:
            y = torch.empty(hidden.shape[0], self.num_heads, self.head_dim, dtype=hidden.dtype, device=hidden.device)
        if plan.step_rows is not None:
            rows = plan.step_rows
            y[rows] = self._step(xbc[rows], dt[rows], A, w, b, conv_states, ssm_states, plan.step_slots)
        if plan.scan_rows is not None:
            rows, slots, has = plan.scan_rows, plan.scan_slots, plan.scan_has_state
            # A request starting its prompt begins from zeros whatever its slot holds.
            conv0 = torch.where(has[:, None, None], conv_states[slots], 0)
            ssm0 = torch.where(has[:, None, None, None], ssm_states[slots].float(), 0)
            xc, conv_final = ops.causal_conv1d_varlen(xbc[rows], plan.scan_starts, w, b, conv0, "silu")
            conv_states[slots] = conv_final.to(conv_states.dtype)
            xs, Bs, Cs = self._split_xbc(xc)
            ys, ssm_final = ops.mamba_chunk_scan_varlen(xs, dt[rows], A, Bs, Cs, plan.scan_starts, self.chunk_size,
                                                        self.D, self.dt_bias, ssm0, True, self.dt_limit)
            ssm_states[slots] = ssm_final.to(ssm_states.dtype)
            y[rows] = ys
        y = ops.gated_rms_norm(y.reshape(hidden.shape[0], self.intermediate), z, self.norm.weight, self.eps,
                               self.intermediate // self.n_groups, norm_before_gate=False)
        return self.out_proj(y.to(hidden.dtype))


class Attention(nn.Module):
    """GQA attention; NemotronH uses no positional embedding in attention (the Mamba layers order tokens)."""

    def __init__(self, cfg, layer_id: int, ops):
        super().__init__()
        self.layer_id, self.ops = layer_id, ops
        self.num_heads = cfg.num_attention_heads
        self.num_kv_heads = cfg.get("num_key_value_heads", self.num_heads)
        self.head_dim = cfg.get("head_dim") or cfg.hidden_size // self.num_heads
        self.scale = self.head_dim ** -0.5
        bias = bool(cfg.get("attention_bias", False))
        self.q_proj = linear(cfg.hidden_size, self.num_heads * self.head_dim, bias)
        self.k_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias)
        self.v_proj = linear(cfg.hidden_size, self.num_kv_heads * self.head_dim, bias)
        self.o_proj = linear(self.num_heads * self.head_dim, cfg.hidden_size, bias)
        self.sliding_window = cfg.get("sliding_window")

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        T = hidden.shape[0]
        q = self.q_proj(hidden).view(T, self.num_heads, self.head_dim)
        k = self.k_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        v = self.v_proj(hidden).view(T, self.num_kv_heads, self.head_dim)
        out = paged_attention(self.ops, batch, self.layer_id, q, k, v, self.scale, self.sliding_window)
        return self.o_proj(out.reshape(T, -1))


class MLP(nn.Module):
    def __init__(self, cfg, ops, intermediate_size: int | None = None):
        super().__init__()
        self.ops = ops
        self.act = cfg.get("mlp_hidden_act", "relu2")
        bias = bool(cfg.get("mlp_bias", False))
        size = intermediate_size or cfg.intermediate_size
        self.up_proj = linear(cfg.hidden_size, size, bias)
        self.down_proj = linear(size, cfg.hidden_size, bias)

    def forward(self, hidden: torch.Tensor, batch=None) -> torch.Tensor:
        return self.ops.mlp(hidden, self.up_proj.weight, self.down_proj.weight, None, self.act,
                            self.up_proj.bias, self.down_proj.bias)


class Router(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        E = cfg.n_routed_experts
        self.weight = nn.Parameter(torch.zeros(E, cfg.hidden_size), requires_grad=False)
        self.e_score_correction_bias = nn.Parameter(torch.zeros(E), requires_grad=False)


class Experts(nn.Module):
    """All routed experts stacked: up_proj [E, I, H], down_proj [E, H, I]."""

    def __init__(self, cfg):
        super().__init__()
        E, I = cfg.n_routed_experts, cfg.moe_intermediate_size
        width = cfg.get("moe_latent_size") or cfg.hidden_size
        self.up_proj = nn.Parameter(torch.zeros(E, I, width), requires_grad=False)
        self.down_proj = nn.Parameter(torch.zeros(E, width, I), requires_grad=False)


class MoE(nn.Module):
    def __init__(self, cfg, ops):
        super().__init__()
        self.ops = ops
        self.top_k = cfg.num_experts_per_tok
        self.n_group = cfg.get("n_group", 1)
        self.topk_group = cfg.get("topk_group", 1)
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", True))
        self.scaling = float(cfg.get("routed_scaling_factor", 1.0))
        self.act = cfg.get("mlp_hidden_act", "relu2")
        self.gate = Router(cfg)
        self.experts = Experts(cfg)
        self.shared_experts = MLP(cfg, ops, cfg.moe_shared_expert_intermediate_size)
        latent = cfg.get("moe_latent_size")
        if latent:
            bias = bool(cfg.get("mlp_bias", False))
            self.fc1_latent_proj = linear(cfg.hidden_size, latent, bias)
            self.fc2_latent_proj = linear(latent, cfg.hidden_size, bias)
        else:
            self.fc1_latent_proj = self.fc2_latent_proj = None

    def forward(self, hidden: torch.Tensor, batch=None):
        """The shared expert's output [T, H] and the routed sum: [T, H], or, from a fused MoE that
        leaves the sum over k to the next residual add (`ops.moe_experts_unsummed`), [T, k, H]."""
        logits = F.linear(hidden.float(), self.gate.weight.float())
        weights, ids = self.ops.route_sigmoid_grouped(logits, self.gate.e_score_correction_bias, self.top_k,
                                                      self.n_group, self.topk_group, self.norm_topk_prob, self.scaling)
        x = hidden if self.fc1_latent_proj is None else self.fc1_latent_proj(hidden)
        unsummed = getattr(self.ops, "moe_experts_unsummed", None)
        if unsummed is not None and self.fc2_latent_proj is None:
            routed = unsummed(x, weights, ids, self.experts.up_proj, self.experts.down_proj, None, self.act)
        else:
            routed = self.ops.moe_experts(x, weights, ids, self.experts.up_proj, self.experts.down_proj, None, self.act)
        if self.fc2_latent_proj is not None:
            routed = self.fc2_latent_proj(routed)
        return (self.shared_experts(hidden), routed)


class Block(nn.Module):
    def __init__(self, cfg, layer_id: int, block_type: str, ops):
        super().__init__()
        self.block_type = block_type
        self.ops = ops
        self.norm = RMSNormWeight(cfg.hidden_size, cfg.get("layer_norm_epsilon", 1e-5))
        if block_type == "linear_attention":
            self.mixer = Mamba2Mixer(cfg, layer_id, ops)
        elif block_type == "full_attention":
            self.mixer = Attention(cfg, layer_id, ops)
        elif block_type == "mlp":
            self.mixer = MLP(cfg, ops)
        else:
            self.mixer = MoE(cfg, ops)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        x = self.ops.rms_norm(hidden, self.norm.weight, self.norm.eps, multiply_in_float32=True)
        return hidden + _total(self.mixer(x, batch))


def _total(delta):
    """A mixer's output as one [T, H] tensor (a MoE gives (shared, routed [T, H] or [T, k, H]))."""
    if isinstance(delta, tuple):
        shared, routed = delta
        return shared + (routed.sum(1) if routed.dim() == 3 else routed)
    return delta


class Backbone(nn.Module):
    def __init__(self, cfg, types: list[str], ops):
        super().__init__()
        self.embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden_size).requires_grad_(False)
        self.layers = nn.ModuleList(Block(cfg, i, t, ops) for i, t in enumerate(types))
        self.norm_f = RMSNormWeight(cfg.hidden_size, cfg.get("layer_norm_epsilon", 1e-5))


_EXPERT = re.compile(r"^(backbone\.layers\.\d+\.mixer\.experts)\.(\d+)\.(up_proj|down_proj)\.weight$")


class NemotronHForCausalLM(CausalLM):
    keep_float32 = ("mixer.gate.weight", "e_score_correction_bias")  # the router runs in float32

    def __init__(self, config: dict, ops):
        super().__init__(config, ops)
        cfg = self.config
        self.block_types = block_types(cfg)
        self.backbone = Backbone(cfg, self.block_types, ops)
        self.lm_head = linear(cfg.hidden_size, cfg.vocab_size, False)
        self.tie_weights()

    @property
    def input_embedding(self):
        return self.backbone.embeddings

    @property
    def cache_spec(self) -> CacheSpec:
        kv = tuple(i for i, t in enumerate(self.block_types) if t == "full_attention")
        state = tuple(i for i, t in enumerate(self.block_types) if t == "linear_attention")
        attn = self.backbone.layers[kv[0]].mixer if kv else None
        mamba = self.backbone.layers[state[0]].mixer if state else None
        return CacheSpec(
            kv_layer_ids=kv,
            num_kv_heads=attn.num_kv_heads if attn else 0,
            head_dim=attn.head_dim if attn else 0,
            state_layer_ids=state,
            conv_shape=mamba.conv_shape if mamba else (),
            ssm_shape=mamba.ssm_shape if mamba else (),
        )

    def map_weight_name(self, name: str):
        if name.startswith("model."):  # what transformers names the backbone in memory
            name = "backbone." + name[len("model."):]
        if name.startswith(("mtp.", "backbone.mtp")):  # multi-token-prediction layers: speculative decoding only
            return None
        if self.tied and name == "lm_head.weight":
            return None
        m = _EXPERT.match(name)
        if m:
            return f"{m.group(1)}.{m.group(3)}", int(m.group(2))
        return name, None

    def forward(self, batch) -> torch.Tensor:
        # Each block's residual add is done with the next block's norm, in one op (add_rms_norm).
        ops = self.ops
        hidden = self.backbone.embeddings(batch.input_ids)
        delta = None
        for block in self.backbone.layers:
            hidden, x = ops.add_rms_norm(hidden, delta, block.norm.weight, block.norm.eps)
            delta = block.mixer(x, batch)
        norm = self.backbone.norm_f
        last = batch.last_token_hidden(hidden)
        if isinstance(delta, tuple):
            delta = tuple(batch.last_token_hidden(d) for d in delta)
        else:
            delta = batch.last_token_hidden(delta)
        _, last = ops.add_rms_norm(last, delta, norm.weight, norm.eps)
        return self.lm_head(last).float()

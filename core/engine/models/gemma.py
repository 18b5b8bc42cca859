"""Gemma 2 and Gemma 3 (text): sliding-window and full attention layers from the layer map.

What differs from Llama:
- RMSNorm multiplies by (1 + w) in float32. The loader stores 1 + w (kept in float32), so the
  shared norm op runs unchanged with `multiply_in_float32`.
- Sandwich norms: the attention output and the MLP output are each normed again before the
  residual add (`post_attention_layernorm`, `post_feedforward_layernorm`). These are held by the
  attention and MLP modules (`post_norm`), so the generic decoder layer needs no new wiring; where
  the device has a fused add_rms_norm, the post norm runs inside the residual add's kernel.
- Embeddings are scaled by sqrt(hidden_size) (rounded to the model dtype); the MLP is a
  GeGLU (gelu_pytorch_tanh); attention scales by query_pre_attn_scalar ** -0.5.
- Gemma 2 soft-caps attention scores (attn_logit_softcapping) and the final logits
  (final_logit_softcapping): cap * tanh(x / cap).
- Gemma 3 adds a (1 + w) RMSNorm on q and k per head, and a RoPE base per layer kind (sliding:
  rope_local_base_freq, 10k; full: rope_theta, 1M, with any rope_scaling).
Which layers slide and their window come from the layer map (core/families/sliding.py).
"""

from __future__ import annotations

import re

import torch
from torch import nn

from .attention import head_geometry, rotary_attention, window_of
from .base import Config, RMSNormWeight, linear
from .fused_gate_up import FusedGateUp
from .fused_qkv import FusedQKV
from .rope import inv_freq_for
from .stack import Layout, Parts, PostNormed, StackedCausalLM

ROPE_KEYS = {"attention": "rope_full", "sliding_attention": "rope_sliding"}  # batch.memo keys
DEFAULT_THETA = {"gemma2": {"attention": 10000.0, "sliding_attention": 10000.0},
                 "gemma3_text": {"attention": 1_000_000.0, "sliding_attention": 10000.0}}
_HF_KIND = {"attention": "full_attention", "sliding_attention": "sliding_attention"}


def rope_config(cfg: Config, kind: str) -> Config:
    """The RoPE parameters of one layer kind, as `inv_freq_for` reads them."""
    model_type = cfg.get("model_type", "gemma2")
    nested = cfg.get("rope_parameters") or {}
    if isinstance(nested.get(_HF_KIND[kind]), dict):  # transformers 5: one entry per layer kind
        params = dict(nested[_HF_KIND[kind]])
    elif model_type == "gemma2":
        params = {**(cfg.get("rope_scaling") or {}), **nested}
        params.setdefault("rope_theta", cfg.get("rope_theta", DEFAULT_THETA["gemma2"][kind]))
    elif kind == "sliding_attention":  # older Gemma 3 configs: a local base, never scaled
        params = {"rope_type": "default", "rope_theta": cfg.get("rope_local_base_freq", 10000.0)}
    else:
        params = dict(cfg.get("rope_scaling") or {})
        params.setdefault("rope_theta", cfg.get("rope_theta", DEFAULT_THETA["gemma3_text"][kind]))
    params.setdefault("rope_theta", DEFAULT_THETA.get(model_type, DEFAULT_THETA["gemma2"])[kind])
    return Config({"rope_parameters": params})


def softcap(x: torch.Tensor, cap) -> torch.Tensor:
    return x if cap is None else cap * torch.tanh(x / cap)


def post_normed(part, out: torch.Tensor):
    """The part's output through its post norm: left to the residual add's kernel where the device
    has a fused add_rms_norm (stack.PostNormed), else applied here."""
    if getattr(part.ops, "implementations", {}).get("add_rms_norm", "reference") != "reference":
        return PostNormed(out, part.post_norm, part.ops, True)
    return part.ops.rms_norm(out, part.post_norm.weight, part.post_norm.eps, multiply_in_float32=True)


class GemmaAttention(FusedQKV, nn.Module):
    """GQA with RoPE (per layer kind), optional q/k norms (Gemma 3), score soft-capping (Gemma 2)
    and the post-attention norm."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.layer_id, self.ops, self.kind = layer.index, ops, layer.mixer
        self.window = window_of(layer)
        self.num_heads, self.num_kv_heads, self.head_dim = head_geometry(layer)
        self.scale = float(cfg.get("query_pre_attn_scalar", self.head_dim)) ** -0.5
        self.softcap = cfg.get("attn_logit_softcapping")
        bias = bool(cfg.get("attention_bias", False))
        H = cfg.hidden_size
        self.q_proj = linear(H, self.num_heads * self.head_dim, bias)
        self.k_proj = linear(H, self.num_kv_heads * self.head_dim, bias)
        self.v_proj = linear(H, self.num_kv_heads * self.head_dim, bias)
        self.o_proj = linear(self.num_heads * self.head_dim, H, bias)
        eps = cfg.get("rms_norm_eps", 1e-6)
        self.qk_norm = cfg.get("model_type") != "gemma2"
        if self.qk_norm:
            self.q_norm = RMSNormWeight(self.head_dim, eps)
            self.k_norm = RMSNormWeight(self.head_dim, eps)
        self.post_norm = RMSNormWeight(H, eps)

    def forward(self, hidden: torch.Tensor, batch) -> torch.Tensor:
        ops, T = self.ops, hidden.shape[0]
        q, k, v = self.project_qkv(hidden)  # one GEMM on accelerators (fused_qkv.py)
        norms = (self.q_norm, self.k_norm) if self.qk_norm else (None, None)
        out = rotary_attention(ops, batch, self.layer_id, q, k, v, batch.memo[ROPE_KEYS[self.kind]], self.scale,
                               self.window, q_norm=norms[0], k_norm=norms[1], norm_in_float32=True,
                               softcap=self.softcap)
        return post_normed(self, self.o_proj(out.reshape(T, -1)))


class GemmaMLP(FusedGateUp, nn.Module):
    """down(gelu_tanh(gate x) * up x) (gate and up as one product on accelerators: fused_gate_up.py),
    then the post-feed-forward norm."""

    def __init__(self, cfg, layer, ops):
        super().__init__()
        self.ops = ops
        self.act = cfg.get("hidden_activation") or cfg.get("hidden_act") or "gelu_pytorch_tanh"
        H, I = cfg.hidden_size, layer.mlp.intermediate
        self.gate_proj = linear(H, I, False)
        self.up_proj = linear(H, I, False)
        self.down_proj = linear(I, H, False)
        self.post_norm = RMSNormWeight(H, cfg.get("rms_norm_eps", 1e-6))

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return post_normed(self, self.gated_mlp(hidden))


# The two post norms live on the layer in checkpoints; here in the module whose output they norm.
_POST_NORMS = re.compile(r"^(model\.layers\.\d+)\.(post_attention_layernorm|post_feedforward_layernorm)\.weight$")
_POST_TARGET = {"post_attention_layernorm": "self_attn.post_norm", "post_feedforward_layernorm": "mlp.post_norm"}


class GemmaForCausalLM(StackedCausalLM):
    """Gemma 2 and Gemma 3 (text only: model_type gemma3_text)."""

    model_types = ("gemma2", "gemma3_text")
    # Every norm weight holds 1 + w, computed in float32 at load time (see the module docstring).
    keep_float32 = ("norm",)
    norm_weight_offset = 1.0  # what finish_loading adds to a norm weight (dummy weights start at 1 - this)
    parts = Parts(
        family="Gemma",
        mixers={"attention": GemmaAttention, "sliding_attention": GemmaAttention},
        ffns={"mlp": GemmaMLP},
        layout=Layout(root="model", embed="embed_tokens", final_norm="norm",
                      mixer_names={"attention": "self_attn", "sliding_attention": "self_attn"}, ffn_name="mlp",
                      mixer_norm="input_layernorm", ffn_norm="pre_feedforward_layernorm", norm_in_float32=True),
    )

    def __init__(self, config: dict, ops, layer_map):
        super().__init__(config, ops, layer_map)
        self.gemma_embed_scale = float(self.config.hidden_size) ** 0.5
        self.final_softcap = self.config.get("final_logit_softcapping")
        head_dim = self.decoder.layers[0].mixer_module.head_dim
        for kind, key in ROPE_KEYS.items():
            self.register_buffer(key, inv_freq_for(rope_config(self.config, kind), head_dim), persistent=False)

    @property
    def tied(self) -> bool:
        return bool(self.config.get("tie_word_embeddings", True))  # Gemma ties unless told otherwise

    def finish_loading(self) -> None:
        head_dim = self.decoder.layers[0].mixer_module.head_dim
        for kind, key in ROPE_KEYS.items():
            device = getattr(self, key).device
            setattr(self, key, inv_freq_for(rope_config(self.config, kind), head_dim).to(device))
        with torch.no_grad():
            for name, param in self.named_parameters():
                if "norm" in name:
                    param.data = param.data.float() + 1.0

    def begin(self, batch) -> None:
        for key in ROPE_KEYS.values():
            batch.memo[key] = getattr(self, key)

    def forward(self, batch) -> torch.Tensor:
        return softcap(super().forward(batch), self.final_softcap)

    def embed(self, batch) -> torch.Tensor:
        emb = self.input_embedding(batch.input_ids)
        return emb * torch.tensor(self.gemma_embed_scale, dtype=emb.dtype)  # sqrt(H) rounded to the dtype

    def twin_tensor(self, name: str):
        """What transformers' tensor `name` holds (hf_twin.py) where it is not the engine's parameter as
        stored: a norm weight w, which the engine holds as 1 + w. None: the parameter itself."""
        target = self.map_weight_name(name) if "norm" in name else None
        if target is None:
            return None
        return dict(self.named_parameters())[target[0]] - self.norm_weight_offset

    def map_weight_name(self, name: str):
        if name.endswith("rotary_emb.inv_freq") or (self.tied and name == "lm_head.weight"):
            return None
        m = _POST_NORMS.match(name)
        if m:
            return f"{m.group(1)}.{_POST_TARGET[m.group(2)]}.weight", None
        return name, None

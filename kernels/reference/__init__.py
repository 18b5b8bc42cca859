"""Plain-torch reference kernels, one op per file: always correct, on any device torch runs on.

Faster versions (Triton, flash-linear-attention) register themselves in `bringup.kernels.dispatch`
and are tested against these.
"""

from .act_and_mul import act_and_mul
from .add_rms_norm import add_rms_norm
from .causal_conv1d import causal_conv1d
from .causal_conv1d_update import causal_conv1d_update
from .causal_conv1d_update_inplace import causal_conv1d_update_inplace
from .short_conv_update_inplace import short_conv_update_inplace
from .causal_conv1d_varlen import causal_conv1d_varlen, causal_conv1d_varlen_inplace
from .delta_rule_gates import delta_rule_gates
from .gated_delta_rule import gated_delta_rule_chunk, gated_delta_rule_recurrent_inplace
from .gated_rms_norm import gated_rms_norm
from .kda import kda_chunk, kda_recurrent_inplace
from .fp8_linear import fp8_linear
from .kv_cache_write import kv_cache_write
from .linear import linear
from .lightning_attention import lightning_attention_chunk, lightning_attention_recurrent_inplace
from .mamba_chunk_scan import mamba_chunk_scan
from .mamba_chunk_scan_varlen import mamba_chunk_scan_varlen
from .mamba_state_update import mamba_state_update
from .mamba_state_update_inplace import mamba_state_update_inplace
from .mlp import mlp
from .moe_experts import moe_experts
from .moe_experts_fp8 import moe_experts_fp8
from .moe_shared_fp8 import moe_experts_shared_fp8_unsummed
from .moe_gated_experts import moe_gated_experts, router_topk_softmax
from .moe_routing import route_sigmoid_grouped, route_softmax, router_logits
from .paged_attention_decode import paged_attention_decode
from .paged_attention_prefill import paged_attention_prefill
from .qk_norm_rope_kv_write import qk_norm_rope_kv_write
from .rms_norm import rms_norm
from .rope_paged_decode import rope_paged_decode
from .rotary import apply_rotary
from .selective_scan import selective_scan_varlen, selective_state_update, selective_state_update_inplace
from .selective_state_update_lowrank import selective_state_update_lowrank_inplace

OPS = {
    "act_and_mul": act_and_mul,
    "add_rms_norm": add_rms_norm,
    "apply_rotary": apply_rotary,
    "causal_conv1d": causal_conv1d,
    "causal_conv1d_update": causal_conv1d_update,
    "causal_conv1d_update_inplace": causal_conv1d_update_inplace,
    "short_conv_update_inplace": short_conv_update_inplace,
    "causal_conv1d_varlen": causal_conv1d_varlen,
    "causal_conv1d_varlen_inplace": causal_conv1d_varlen_inplace,
    "delta_rule_gates": delta_rule_gates,
    "gated_delta_rule_chunk": gated_delta_rule_chunk,
    "gated_delta_rule_recurrent_inplace": gated_delta_rule_recurrent_inplace,
    "gated_rms_norm": gated_rms_norm,
    "kda_chunk": kda_chunk,
    "kda_recurrent_inplace": kda_recurrent_inplace,
    "fp8_linear": fp8_linear,
    "kv_cache_write": kv_cache_write,
    "linear": linear,
    "lightning_attention_chunk": lightning_attention_chunk,
    "lightning_attention_recurrent_inplace": lightning_attention_recurrent_inplace,
    "mamba_chunk_scan": mamba_chunk_scan,
    "mamba_chunk_scan_varlen": mamba_chunk_scan_varlen,
    "mamba_state_update": mamba_state_update,
    "mamba_state_update_inplace": mamba_state_update_inplace,
    "mlp": mlp,
    "moe_experts": moe_experts,
    "moe_experts_fp8": moe_experts_fp8,
    "moe_experts_shared_fp8_unsummed": moe_experts_shared_fp8_unsummed,
    "moe_gated_experts": moe_gated_experts,
    "route_sigmoid_grouped": route_sigmoid_grouped,
    "route_softmax": route_softmax,
    "router_logits": router_logits,
    "router_topk_softmax": router_topk_softmax,
    "paged_attention_decode": paged_attention_decode,
    "paged_attention_prefill": paged_attention_prefill,
    "qk_norm_rope_kv_write": qk_norm_rope_kv_write,
    "rms_norm": rms_norm,
    "rope_paged_decode": rope_paged_decode,
    "selective_scan_varlen": selective_scan_varlen,
    "selective_state_update": selective_state_update,
    "selective_state_update_inplace": selective_state_update_inplace,
    "selective_state_update_lowrank_inplace": selective_state_update_lowrank_inplace,
}

__all__ = sorted(OPS) + ["OPS"]

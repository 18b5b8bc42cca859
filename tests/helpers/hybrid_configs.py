"""Tiny configs of the Mamba hybrids (transformers config class, model class, kwargs), shared by the
model and engine tests: every variant exercises something the others do not."""

from __future__ import annotations

VOCAB = 96
MAMBA = dict(mamba_n_heads=4, mamba_d_head=16, mamba_n_groups=2, mamba_d_state=8, mamba_chunk_size=4)
GRANITE = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
               intermediate_size=16, shared_intermediate_size=24, num_experts_per_tok=2, **MAMBA,
               layer_types=["mamba", "attention", "mamba", "attention"], embedding_multiplier=3.0,
               residual_multiplier=0.5, attention_multiplier=0.2, logits_scaling=2.5)
VARIANTS = {
    # Granite-4.0-H-Tiny-like: routed experts beside the shared MLP, attention without RoPE.
    "granite_moe": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM", dict(GRANITE, num_local_experts=4)),
    # Granite-4.0-H-Micro-like: no experts (the shared MLP only), with RoPE.
    "granite_dense": ("GraniteMoeHybridConfig", "GraniteMoeHybridForCausalLM",
                      dict(GRANITE, num_local_experts=0, position_embedding_type="rope")),
    # Bamba: attention at layer 1, RoPE over half of each head.
    "bamba": ("BambaConfig", "BambaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=24, attn_layer_indices=[1], **MAMBA)),
    # Falcon-H1: every layer both; muP multipliers all different from 1, no gated norm (as released).
    "falcon_h1": ("FalconH1Config", "FalconH1ForCausalLM",
                  dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       num_key_value_heads=2, head_dim=8, intermediate_size=24, mamba_d_ssm=64, **MAMBA,
                       embedding_multiplier=2.0, lm_head_multiplier=0.5, key_multiplier=0.7,
                       attention_in_multiplier=1.3, attention_out_multiplier=0.8, ssm_in_multiplier=1.25,
                       ssm_out_multiplier=0.6, ssm_multipliers=[0.9, 1.1, 0.8, 1.2, 0.7], mlp_multipliers=[0.9, 0.6])),
    # Falcon-H1 with its optional gated RMSNorm, normalised before the gate.
    "falcon_h1_norm": ("FalconH1Config", "FalconH1ForCausalLM",
                       dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                            num_key_value_heads=2, head_dim=8, intermediate_size=24, mamba_d_ssm=64, **MAMBA,
                            mamba_rms_norm=True, mamba_norm_before_gate=True, projectors_bias=True,
                            key_multiplier=0.7, ssm_multipliers=[0.9, 1.1, 0.8, 1.2, 0.7])),
    # Zamba2: two shared blocks round-robin over three hybrid layers (layer 4 reuses block 0 with its own
    # KV and adapters), q/k/v adapters, RoPE in the shared attention, GELU MLP, tied embeddings.
    "zamba2": ("Zamba2Config", "Zamba2ForCausalLM",
               dict(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4, num_key_value_heads=4,
                    intermediate_size=16, n_mamba_heads=4, mamba_ngroups=2, mamba_d_state=8, chunk_size=4,
                    layers_block_type=["mamba", "hybrid", "hybrid", "mamba", "hybrid"], num_hidden_layers=5,
                    num_mem_blocks=2, adapter_rank=4, use_shared_attention_adapter=True, use_mem_rope=True)),
    # Jamba: Mamba (v1) layers, attention at odd layers, MoE (unnormalised top-2 of 4) at odd layers.
    "jamba": ("JambaConfig", "JambaForCausalLM",
              dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                   intermediate_size=16, num_experts=4, num_experts_per_tok=2, attn_layer_period=2,
                   attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=0, mamba_d_state=8)),
}

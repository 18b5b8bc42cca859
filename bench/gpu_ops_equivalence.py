"""Do the GPU's op set (its Triton kernels under Triton's interpreter, q/k/v and gate/up stacked) and
the reference op set give the same greedy tokens and logprobs (4 decimals) on a tiny float32 dummy
Qwen3-Next, Kimi-Linear, LFM2, MiniMax, Jamba and Falcon-H1? A fusion that changes what the model computes shows here first.

    TRITON_INTERPRET=1 python bench/gpu_ops_equivalence.py [qwen3_next kimi_linear lfm2 minimax jamba falcon_h1]

The configs are the real checkpoints' (../shared/models) cut to a few layers at small widths, every
mixer and FFN kind kept (tests/core/engine/models/test_models_gpu_op_set.py runs this).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MODELS = REPO.parent / "shared" / "models"
LINEAR = dict(linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16)
CONFIGS = {
    # three DeltaNet layers and one gated attention layer; a SwiGLU MLP first, MoE with a shared expert after
    "qwen3_next": ("Qwen__Qwen3-Next-80B-A3B-Instruct", dict(
        num_hidden_layers=4, mlp_only_layers=[0], initializer_range=0.1, **LINEAR)),
    # KDA, KDA, MLA, KDA, MLA; a dense MLP first, MoE with shared experts after
    "kimi_linear": ("moonshotai__Kimi-Linear-48B-A3B-Instruct", dict(
        num_hidden_layers=5, kv_lora_rank=16, qk_nope_head_dim=16, qk_rope_head_dim=8, v_head_dim=16,
        initializer_range=0.1, linear_attn_config={"full_attn_layers": [3, 5], "kda_layers": [1, 2, 4],
                                                   "num_heads": 2, "head_dim": 16, "short_conv_kernel_size": 4})),
    # gated short convs around one attention layer, a SwiGLU MLP after each
    "lfm2": ("LiquidAI__LFM2-2.6B", dict(
        num_hidden_layers=4, layer_types=["conv", "conv", "full_attention", "conv"], block_ff_dim=96,
        initializer_range=0.1)),
    # lightning attention, softmax attention (partial rotary), lightning; the sparse MoE after each
    "minimax": ("MiniMaxAI__MiniMax-M1", dict(num_hidden_layers=3, attn_type_list=[0, 1, 0], initializer_range=0.1)),
    # Mamba, Mamba, attention, Mamba; dense MLPs and MoE layers alternating
    "jamba": ("ai21labs__AI21-Jamba-1.5-Mini", dict(
        num_hidden_layers=4, attn_layer_period=4, attn_layer_offset=2, expert_layer_period=2, expert_layer_offset=1,
        mamba_d_state=8, mamba_dt_rank=8, initializer_range=0.1)),
    # attention (RoPE) beside Mamba2 in every block, muP multipliers folded into the weights
    "falcon_h1": ("tiiuae__Falcon-H1-0.5B", dict(num_hidden_layers=3, initializer_range=0.1)),
}
PROMPTS = [[5, 17, 99, 3, 42, 7, 8], [11, 200, 13]]  # two requests: batched decode rows
NEW_TOKENS = 6
LOGPROB_TOLERANCE = 5e-5  # "the same logprobs to 4 decimals"


def tiny_config(name: str) -> dict:
    from bringup.core.bench.launch_count import small_widths

    stem, extra = CONFIGS[name]
    return {**small_widths(json.loads((MODELS / f"{stem}.json").read_text())), **extra}


def generate(config: dict) -> list[tuple[list[int], list[float]]]:
    """(greedy tokens, their logprobs) per prompt, dummy float32 weights, on the CPU."""
    from bringup.core.engine.config import EngineConfig
    from bringup.core.engine.engine import Engine
    from bringup.core.engine.sampling import SamplingParams

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.json"
        path.write_text(json.dumps(config))
        engine = Engine(EngineConfig(str(path), device="cpu", dtype="float32", load_format="dummy",
                                     cpu_compile=False, warmup=False), log=lambda m: None)
    params = SamplingParams(max_new_tokens=NEW_TOKENS, temperature=0.0, ignore_eos=True, logprobs=0)
    ids = [engine.add_request(p, params, detokenize=False) for p in PROMPTS]
    got: dict[str, tuple[list[int], list[float]]] = {rid: ([], []) for rid in ids}
    while engine.has_unfinished():
        for out in engine.step():
            got[out.request_id][0].extend(out.token_ids)
            got[out.request_id][1].extend(_chosen_logprob(lp) for lp in out.logprobs or [])
    return [got[rid] for rid in ids]


def _chosen_logprob(entry) -> float:
    return float(entry[0] if isinstance(entry, (tuple, list)) else getattr(entry, "logprob", entry))


def main(names: list[str]) -> int:
    from bringup.core.bench.launch_count import gpu_weight_layout, use_gpu_ops_on_cpu

    configs = {name: tiny_config(name) for name in names}
    os.environ["BRINGUP_KERNELS"] = "reference"
    with gpu_weight_layout():
        reference = {name: generate(cfg) for name, cfg in configs.items()}
    del os.environ["BRINGUP_KERNELS"]
    use_gpu_ops_on_cpu()
    failed = 0
    with gpu_weight_layout():
        for name, cfg in configs.items():
            fast = generate(cfg)
            for (rt, rl), (ft, fl) in zip(reference[name], fast):
                worst = max((abs(a - b) for a, b in zip(rl, fl)), default=0.0)
                # (within half a unit of the 4th decimal: rounding both to 4 places flips at a boundary)
                same = rt == ft and len(rl) == len(fl) and worst <= LOGPROB_TOLERANCE
                print(f"{name}: {'same' if same else 'DIFFERENT'} tokens {ft} (reference {rt}), "
                      f"largest logprob difference {worst:.2e}")
                failed += not same
    print("ok" if not failed else f"{failed} requests differ")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or sorted(CONFIGS)))

"""How far rounding alone moves a logprob, by the dtype a run computes in: the noise floor of an A/B
whose two sides run different precisions, taken from the less precise side.

A logit z rounded in a dtype of unit roundoff u moves by up to u·|z|, and a logprob, a logit minus
the log-sum-exp of all of them, by up to about 2·u·|z|. With logits of the size language models give
(tens of nats at the top) and the error a deep stack gathers before the head, ROUNDOFF_NATS units of
roundoff bound the p99 of an honest comparison's logprob differences:

  - bf16 (u = 2^-8): 25 u = 0.098 nats. Measured here: ours on the CPU, float32 against bfloat16,
    tiny NemotronH: p99 0.018 nats over 107 tokens (8 prompts x 16), 0.030 over 18 (3 x 6).
  - SGLang's model tests allow 5e-2 nats between HF and SGLang on every top-5 logprob of every
    position (max, not p99), in float16 (u = 2^-11: about 100 u), 8e-2 for OLMo
    (sgl-project/sglang@e09bb774 test/srt/models/test_generation_models.py:40-41, :57, float16 at
    :60; a later version raised decode to 6e-2 for its issue #8614); the check itself is
    check_close_model_outputs (sglang 0.5.23 wheel, sglang/test/runners.py:938); LoRA cases allow
    1e-1 (sglang/test/lora_utils.py:51-52), its disaggregation parity 0.05 (kits/pd_parity_kit.py:20).
  - vLLM's model tests set no number: a parting passes when each side's token is among the other's
    top logprobs (vllm-project/vllm@9cfdcd89 tests/models/utils.py:77, check_logprobs_close), the
    near-tie rule verdict.py applies with its gap.

float32 and float16 fall under verdict.FLOOR_LOGPROB_DIFF (0.02 nats), which stays the least floor.
"""

from __future__ import annotations

from bringup.core.errors import UserError
from bringup.core.layermap.dtypes import canonical_dtype

UNIT_ROUNDOFF = {"float32": 2.0**-24, "float16": 2.0**-11, "bfloat16": 2.0**-8}
ROUNDOFF_NATS = 25.0  # p99 logprob difference per unit roundoff of the less precise side (see above)
# The layer-level A/B's allowance past the reference kernels' own rounding in the same dtype: a kernel
# of its own may round each output once more in its accumulation and once more on store.
KERNEL_ROUNDOFFS = 2.0
# A recurrent state's allowance: STATE_NOISE_FACTOR times the reference kernels' own distance, where
# that is more. A state is a sum over the prompt's tokens (Mamba2: S = sum_t decay_t dt_t x_t B_t^T),
# kept in float32. The reference scan multiplies its bf16 inputs in float32 (each term rounded twice,
# in x and in B); the fast chunked scan rounds each term twice more before its float32 accumulation:
# v = x dt stored in x's dtype (kernels/fla/mamba_chunk_scan.py:122) and the decay-weighted v again
# before the tensor-core product (fla-core 0.6.0 fla/ops/common/chunk_h.py:126, the dot at :153).
# Rounding a sum's terms moves it by up to u * sum |terms| (Higham, Accuracy and Stability of
# Numerical Algorithms, 4.2): relative to the state, u times the sum's condition number, which the
# traces do not hold and which tokens that cancel make large (the H200's NemotronH layer 25: the bf16
# reference 2.8e-2 = 7 u from float32), so no fixed count of roundoffs bounds it; the reference's own
# distance carries the same condition number. As many independent roundings again give sqrt(2) times
# that distance, 2 when they add up coherently; the second 2 is the spread of one realization.
# Measured: the fast scan's distance over the reference's, 1.39 on the H200 (3.90e-2 vs 2.8e-2); in
# a CPU emulation of fla's roundings, median 1.41, max 1.92 over 120 draws
# (tests/core/compare/test_compare_state_tolerance.py). The same rule as PyTorch's tests of its fused
# attention kernels: a fudge factor times a low-precision reference's error
# (pytorch/pytorch@00030eb8 test/test_transformers.py:105-116, get_tolerances). An off-by-one state
# update moves the state by O(1) (state@0: 1.54 against 0.011 noise), far past 4 x the noise.
STATE_NOISE_FACTOR = 4.0


def dtype_name(text) -> str | None:
    """'torch.bfloat16', 'bf16', 'BFloat16' -> 'bfloat16'; None for 'auto', None or a dtype not known here."""
    if not text:
        return None
    try:
        name = canonical_dtype(text)  # the names people type, as the planner reads them
    except UserError:
        return None
    return name if name in UNIT_ROUNDOFF else None


def less_precise(a, b) -> str | None:
    """The dtype of the two with the larger roundoff; None when either is unknown."""
    a, b = dtype_name(a), dtype_name(b)
    if a is None or b is None:
        return None
    return a if UNIT_ROUNDOFF[a] >= UNIT_ROUNDOFF[b] else b


def rounding_floor(dtype) -> float:
    """The p99 logprob difference rounding in `dtype` alone gives (0.0 for a dtype not known here)."""
    name = dtype_name(dtype)
    return ROUNDOFF_NATS * UNIT_ROUNDOFF[name] if name else 0.0


def roundoff(dtype) -> float:
    name = dtype_name(dtype)
    return UNIT_ROUNDOFF[name] if name else 0.0


def short(dtype) -> str:
    name = dtype_name(dtype)
    return {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}.get(name or "", str(dtype))

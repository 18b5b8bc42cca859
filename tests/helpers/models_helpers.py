"""Shared by the model tests: random-weight checkpoints made with transformers' own classes, a
small driver that runs our model through real pools and ForwardBatches (chunked prefill, greedy
decode, requests joining at different steps), and transformers' greedy reference."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

import torch

from bringup.core.engine.forward_batch import ForwardBatch
from bringup.core.engine.pools import KVPool, StatePool


# The model tests run on CPU; BRINGUP_TEST_DEVICE=cuda (or xpu) runs the same checks on an
# accelerator against transformers on CPU.
DEVICE = os.environ.get("BRINGUP_TEST_DEVICE", "cpu")


def randomize(model: torch.nn.Module, seed: int = 0) -> None:
    """Weights large enough that logits are decisive (transformers' init is near zero), so greedy
    tokens are a real check. Norm weights near 1, biases small, matrices ~ 1/sqrt(fan_in)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                fan_in = p.shape[-1] * (p.shape[-2] if "conv1d" in name else 1)
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(fan_in))
            elif name.endswith("norm.weight") or "layernorm" in name or name.endswith("norm_f.weight"):
                p.copy_(1 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
        for name, buf in model.named_buffers():
            if name.endswith("e_score_correction_bias"):
                buf.copy_(0.5 * torch.rand(buf.shape, generator=g))
        for name, p in model.named_parameters():
            # Mamba: time steps well inside (time_step_min, inf), so transformers' prefill floor on
            # dt never bites; slow-to-moderate decays so the carried state matters.
            if name.endswith("dt_bias"):
                p.copy_(torch.empty(p.shape).uniform_(-1.0, 1.0, generator=g))
            elif name.endswith("A_log"):
                p.copy_(torch.empty(p.shape).uniform_(math.log(0.05), 0.0, generator=g))
            elif name.endswith("mixer.D"):
                p.copy_(torch.randn(p.shape, generator=g))


def gated_norm_reference_problem(hf_model) -> str | None:
    """Why transformers' model is no reference for our Mamba2 gated norm, or None.

    Mamba2's gated RMSNorm normalises each of the n_groups slices of the inner width on its own
    (mamba_ssm's RMSNormGated(group_size=intermediate // ngroups), what the engine does).
    transformers before 5.23 normalised Bamba's and GraniteMoeHybrid's over the whole width,
    ignoring mamba_n_groups: with the tiny configs' 2 groups every logit differs from the first
    token (seen on an H200 host with transformers 5.17). Checked by behaviour, not by version: a
    vector whose groups differ in scale comes out with unit RMS per group only from a grouped norm."""
    norm = next((m for m in hf_model.modules() if type(m).__name__.endswith("RMSNormGated")), None)
    if norm is None:
        return None
    groups = None
    for key in ("mamba_n_groups", "mamba_ngroups", "n_groups"):
        groups = groups or getattr(hf_model.config, key, None)
    width = norm.weight.numel()
    if not groups or groups == 1 or width % groups:
        return None
    scales = torch.arange(1, groups + 1, dtype=torch.float32).repeat_interleave(width // groups)
    with torch.no_grad():
        y = norm(scales[None].to(norm.weight.device, norm.weight.dtype)).float()[0].cpu() / norm.weight.float().cpu()
    rms = y.reshape(groups, -1).pow(2).mean(-1).sqrt()
    if torch.allclose(rms, torch.ones_like(rms), atol=1e-3):
        return None
    import transformers

    return (f"transformers {transformers.__version__}'s {type(norm).__name__} normalises over the whole width, "
            f"ignoring its {groups} groups (fixed in transformers 5.23): not a reference for this "
            f"checkpoint; install transformers>=5.23 to compare")


def save_checkpoint(hf_model, path, **kwargs) -> None:
    hf_model.save_pretrained(str(path), **kwargs)


def hf_greedy(hf_model, prompt: list[int], steps: int) -> tuple[list[int], list[torch.Tensor]]:
    """transformers' greedy continuation by full forward passes (no cache: the plainest reference).

    Returns (tokens, logits of the last position after the prompt and after each new token)."""
    from engine_helpers import torch_fallbacks_on_cpu

    if next(hf_model.parameters()).device.type == "cpu":
        torch_fallbacks_on_cpu(hf_model)
    seq, tokens, logits = list(prompt), [], []
    with torch.no_grad():
        for _ in range(steps + 1):
            out = hf_model(torch.tensor([seq]), use_cache=False).logits[0, -1].float()
            logits.append(out)
            tokens.append(int(out.argmax()))
            seq.append(tokens[-1])
    return tokens[:steps + 1], logits


@dataclass
class Req:
    prompt: list[int]
    chunks: list[int]  # prefill chunk sizes, summing to len(prompt)
    steps: int  # decode steps after the prompt
    start: int = 0  # engine step at which the request joins
    pages: list[int] = field(default_factory=list)
    slot: int | None = None
    done_prefill: int = 0
    chunk_i: int = 0
    tokens: list[int] = field(default_factory=list)
    logits: list[torch.Tensor] = field(default_factory=list)

    def finished(self) -> bool:
        return self.chunk_i == len(self.chunks) and len(self.tokens) == self.steps + 1


def make_pools(model, num_pages=64, page_size=4, num_slots=8, dtype=torch.float32):
    spec = model.cache_spec
    kv = KVPool(num_pages, page_size, spec.kv_layer_ids, spec.num_kv_heads, spec.head_dim, dtype=dtype,
                device=model.device, v_head_dim=spec.v_head_dim or None, latent=spec.latent_kv)
    state = StatePool(num_slots, spec.state_layer_ids, spec.conv_shape, spec.ssm_shape, conv_dtype=dtype,
                      ssm_dtype=torch.float32, device=model.device)
    return kv, state


def run_engine(model, requests: list[Req], *, page_size=4, kv_pool=None, state_pool=None) -> list[Req]:
    """Continuous batching in miniature: each step, every joined request brings its next prefill
    chunk or one greedy decode token; pages and slots come from real pools and go back at the end."""
    if kv_pool is None:
        kv_pool, state_pool = make_pools(model, page_size=page_size)
    spec = model.cache_spec
    has_state = bool(spec.state_layer_ids)
    step = 0
    while not all(r.finished() for r in requests):
        active = [r for r in requests if r.start <= step and not r.finished()]
        step += 1
        if not active:
            continue
        chunks, prefix, tables, slots, has_init = [], [], [], [], []
        for r in active:
            if has_state and r.slot is None:
                r.slot = state_pool.alloc(owner=id(r))
            computed = r.done_prefill + max(0, len(r.tokens) - 1)
            if r.chunk_i < len(r.chunks):
                n = r.chunks[r.chunk_i]
                new = r.prompt[r.done_prefill : r.done_prefill + n]
            else:
                new = [r.tokens[-1]]
            need = kv_pool.pages_for(computed + len(new)) - len(r.pages)
            if need > 0:
                r.pages += kv_pool.alloc(need, owner=id(r))
            chunks.append(new)
            prefix.append(computed)
            tables.append(r.pages)
            slots.append(r.slot)
            has_init.append(computed > 0)
        batch = ForwardBatch.build(token_chunks=chunks, prefix_lens=prefix, block_tables=tables, page_size=page_size,
                                   state_slots=slots, has_initial_state=has_init,
                                   kv_pool=kv_pool if spec.kv_layer_ids else None,
                                   state_pool=state_pool if has_state else None, device=model.device)
        with torch.no_grad():
            logits = model(batch)
        assert logits.shape == (len(active), model.config.vocab_size)
        for r, row in zip(active, logits.cpu()):
            if r.chunk_i < len(r.chunks):
                r.done_prefill += r.chunks[r.chunk_i]
                r.chunk_i += 1
                if r.chunk_i < len(r.chunks):
                    continue  # mid-prompt chunk: its logits are not a prediction anyone uses
            r.logits.append(row)
            r.tokens.append(int(row.argmax()))
    for r in requests:
        kv_pool.free(r.pages)
        if r.slot is not None:
            state_pool.free(r.slot)
    kv_pool.check({})
    state_pool.check({})
    return requests


def kernel_atol() -> float:
    """Logit tolerance for the kernels DEVICE runs: the fp32 reference matches transformers to ~1e-5
    (Zamba2: 1.9e-4);
    the GPU fast kernels (flash-linear-attention, Triton) sum in other orders and took tf32 dots
    until float32 models asked Triton for IEEE dots (kernels/precision.py; with tf32: 2.4e-3 seen on
    an H200, 1.39e-2 for Zamba2), so they get 1e-2. Greedy tokens must match exactly either way;
    BRINGUP_KERNELS=reference checks the GPU at the tight tolerance."""
    from bringup.kernels.dispatch import ops_for

    # The CPU's own ops (kernels/cpu) are float32 torch in another order. Zamba2 sits nearest the
    # line: its logits (1 to 4 in these tests) differ from transformers' by up to 1.9e-4 with the
    # references alone, 2.5e-4 with the CPU's SDPA decode attention (whose output is as close to a
    # float64 computation as the reference's: 1.4e-5 at worst, both), depending on the thread count.
    names = ops_for(DEVICE).implementations.values()
    if any(name not in ("reference", "cpu") for name in names):
        return 1e-2
    return 5e-4 if "cpu" in names else 2e-4


def assert_matches_hf(hf_model, requests: list[Req], atol: float | None = None) -> float:
    """Every request's logits after its prompt and after each decode step equal transformers' (and
    so do the greedy tokens). Returns the largest absolute logit difference seen."""
    atol = kernel_atol() if atol is None else atol
    worst = 0.0
    for i, r in enumerate(requests):
        tokens, logits = hf_greedy(hf_model, r.prompt, r.steps)
        assert r.tokens == tokens, f"request {i}: greedy tokens {r.tokens} != transformers' {tokens}"
        for j, (ours, theirs) in enumerate(zip(r.logits, logits)):
            diff = (ours - theirs).abs().max().item()
            worst = max(worst, diff)
            assert diff < atol, f"request {i} step {j}: logits differ by {diff:.2e} (tolerance {atol})"
    return worst


def standard_requests(vocab: int, seed: int = 1) -> list[Req]:
    """Different lengths, one chunked prompt, one joining late (so prefill and decode share batches)."""
    g = torch.Generator().manual_seed(seed)

    def prompt(n):
        return torch.randint(3, vocab, (n,), generator=g).tolist()

    return [
        Req(prompt(11), [11], steps=4),
        Req(prompt(13), [6, 7], steps=4),  # chunked prefill: second chunk continues the first's state
        Req(prompt(3), [3], steps=5, start=2),  # joins while the others decode
        Req(prompt(1), [1], steps=3, start=1),  # a one-token prompt
    ]


def load_with_fast_op(folder, op: str, fn):
    """The model of `folder` on DEVICE, built while `fn` is registered as the fast `op` for DEVICE's type
    (so the layers take the path a device with that op takes), unless the device already has one.
    Returns (model, whether fn was registered)."""
    from bringup.core.engine.loader import load_model
    from bringup.kernels import dispatch

    device_type = dispatch.device_type_of(DEVICE)
    registered = dispatch.ops_for(DEVICE).implementations[op] == "reference"
    if registered:
        dispatch.register(op, device_type, fn, name="reference as fast")
    try:
        return load_model(folder, device=DEVICE).model, registered
    finally:
        if registered:
            dispatch.unregister(op, device_type)


def hf_checkpoint(config_cls: str, model_cls: str, kwargs: dict, folder):
    """A transformers model of the named classes (eager attention, weights from `randomize`), saved to
    `folder`; returns it."""
    import transformers

    torch.manual_seed(0)
    cfg = getattr(transformers, config_cls)(**kwargs)
    cfg._attn_implementation = "eager"
    hf = getattr(transformers, model_cls)(cfg).eval()
    randomize(hf, seed=1)
    hf.save_pretrained(str(folder))
    return hf

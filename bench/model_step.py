"""Time one batched prefill and one batched decode step of our model against transformers' on the
same checkpoint and device (the model alone: no scheduler, no sampling).

    python bench/model_step.py [CHECKPOINT] [--device cpu] [--batch 8] [--prompt 24] [--threads N]

With no CHECKPOINT it uses the default model (Nemotron-3-Nano's 52-block pattern at small width).
Prints medians in ms and the ratio transformers / ours (above 1 = ours faster), and the tensor ops
one decode step dispatches (each compute op is a kernel launch on a GPU: the host-overhead figure).
"""

from __future__ import annotations

import argparse

import torch
from timing import median_ms, sync


def count_ops(fn) -> int:
    """Tensor operations one call dispatches (views included): on a GPU each compute op is a kernel
    launch, so this is the host overhead of a step in a number that does not depend on the machine."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        n = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            Count.n += 1
            return func(*args, **(kwargs or {}))

    with Count():
        fn()
    return Count.n


def main() -> None:
    from bringup.core.engine.forward_batch import ForwardBatch
    from bringup.core.engine.loader import load_model
    from bringup.core.engine.pools import KVPool, StatePool

    ap = argparse.ArgumentParser()
    ap.add_argument("checkpoint", nargs="?")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--prompt", type=int, default=24)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--profile", action="store_true", help="print torch.profiler's top ops of our prefill and decode")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    folder = args.checkpoint
    if folder is None:
        from bringup.core.sources.default_model import ensure_default_checkpoint

        folder = str(ensure_default_checkpoint())
    loaded = load_model(folder, device=args.device, dtype=args.dtype)
    model, dev, B, L = loaded.model, loaded.device, args.batch, args.prompt
    spec, page = model.cache_spec, 16
    pages_per = -(-(L + 64) // page)
    kv = KVPool(B * pages_per, page, spec.kv_layer_ids, spec.num_kv_heads or 1, spec.head_dim or 1, loaded.dtype, dev)
    st = StatePool(B, spec.state_layer_ids, spec.conv_shape or (1,), spec.ssm_shape or (1,), loaded.dtype, "float32", dev)
    slots = [st.alloc() for _ in range(B)] if spec.state_layer_ids else [None] * B
    tables = [kv.alloc(pages_per) for _ in range(B)]
    prompt = [list(range(5, 5 + L))] * B

    def batch(chunks, prefix):
        return ForwardBatch.build(token_chunks=chunks, prefix_lens=[prefix] * B, block_tables=tables, page_size=page,
                                  state_slots=slots, kv_pool=kv if spec.kv_layer_ids else None,
                                  state_pool=st if spec.state_layer_ids else None, device=dev)

    with torch.no_grad():
        ours_prefill = median_ms(lambda: model(batch(prompt, 0)), dev, repeat=3)
        ours_decode = median_ms(lambda: model(batch([[7]] * B, L)), dev)
        ours_ops = count_ops(lambda: model(batch([[7]] * B, L)))
        if args.profile:
            from torch.profiler import ProfilerActivity, profile

            activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if dev.type == "cuda" else [])
            for what, chunks, prefix in (("prefill", prompt, 0), ("decode", [[7]] * B, L)):
                with profile(activities=activities) as prof:
                    model(batch(chunks, prefix))
                    sync(dev)
                key = "cuda_time_total" if dev.type == "cuda" else "cpu_time_total"
                print(f"--- our {what}, top ops by {key}")
                print(prof.key_averages().table(sort_by=key, row_limit=15, max_name_column_width=40))

        from transformers import AutoModelForCausalLM

        hf = AutoModelForCausalLM.from_pretrained(folder, dtype=loaded.dtype).to(dev).eval()
        ids = torch.tensor(prompt, device=dev)
        hf_prefill = median_ms(lambda: hf(ids, use_cache=True), dev, repeat=3)
        out = hf(ids, use_cache=True)
        cache = getattr(out, "cache", None) or getattr(out, "past_key_values", None)
        step = torch.full((B, 1), 7, device=dev)

        def hf_step():  # the cache grows by one token a step: 11 steps on a prompt of L do not matter
            hf(step, cache=cache, use_cache=True)

        hf_decode = median_ms(hf_step, dev)
        hf_ops = count_ops(hf_step)
    print(f"model_step: {loaded.name} on {dev} ({args.dtype}), batch {B}, prompt {L}, threads {torch.get_num_threads()}")
    print(f"  prefill  ours {ours_prefill:8.1f} ms   transformers {hf_prefill:8.1f} ms   ratio {hf_prefill / ours_prefill:.2f}x")
    print(f"  decode   ours {ours_decode:8.1f} ms   transformers {hf_decode:8.1f} ms   ratio {hf_decode / ours_decode:.2f}x")
    print(f"  decode   ours {ours_ops:8d} ops  transformers {hf_ops:8d} ops  (tensor ops dispatched per step)")


if __name__ == "__main__":
    main()

# sglang snippet: python/sglang/srt/arg_groups/model_hook.py from line 936
def handle_mamba_radix_cache(server_args: Any, hf_config: Any):
    # Resolution moved to the resolution pipeline (arg_groups/overrides.py:
    # _mamba_radix_cache_resolution), invoked here at each legacy call
    # slot; this handler keeps the validation.
    from sglang.srt.arg_groups.mamba_hook import (
        validate_mamba_extra_buffer,
        validate_mamba_no_buffer,
    )

    run_post_process_pass(server_args, _mamba_radix_cache_resolution)
    view = resolved_view(server_args)
    if not view.uses_mamba_radix_cache:
        # auto is arch-gated, so only an explicit strategy reaches a non-mamba
        # arch here, where it would arm the mamba paths and crash at prefill.
        if mamba_extra_buffer_of(view):
            raise ValueError(
                f"--mamba-radix-cache-strategy {view.mamba_radix_cache_strategy} "
                f"needs mamba state, got {hf_config.architectures[0]}."
            )
        return

    if mamba_extra_buffer_of(view):
        validate_mamba_extra_buffer(
            view,
            hf_config,
            mamba_cache_chunk_size_of=lambda: mamba_cache_chunk_size(server_args),
        )
    else:
        validate_mamba_no_buffer(view, hf_config.architectures[0])

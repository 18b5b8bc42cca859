# sglang snippet: python/sglang/srt/mem_cache/kv_cache_configurator.py from line 2743
    def _calculate_mamba_ratio(self) -> int:
        if get_memory().disable_radix_cache:
            return 1

        skip_decode_lock = envs.SGLANG_OPT_MAMBA_SKIP_DECODE_LOCK.get()
        base = MAMBA_CACHE_SIZE_MAX_RUNNING_REQUESTS_RATIO - (
            MAMBA_CACHE_BASE_RATIO_DROP_ON_SKIP if skip_decode_lock else 0
        )

        additional_ratio = 0
        if get_exec().mamba.enable_mamba_extra_buffer:
            if get_schedule().disable_overlap_schedule:
                assert not get_exec().mamba.enable_mamba_extra_buffer_lazy, (
                    "Lazy extra buffer requires overlap schedule (--disable-overlap-schedule is incompatible)"
                )
            additional_ratio = get_mamba_tracking_slots(
                extra_buffer=True,
                overlap=not get_schedule().disable_overlap_schedule,
                lazy=get_exec().mamba.enable_mamba_extra_buffer_lazy,
            )
        elif skip_decode_lock:
            # no_buffer under skip: add the base drop back so effective stays 3,
            # the prefill->decode peak needs ~3 slots/req and this leaf-only mode
            # has no ping-pong to absorb it.
            additional_ratio = MAMBA_CACHE_V2_ADDITIONAL_RATIO_NO_BUFFER

        return base + additional_ratio

# sglang snippet: python/sglang/srt/server_args.py from line 5803
    def _validate_mamba_extra_buffer(self, view, model_arch: str):
        from sglang.srt.arg_groups.overrides import supports_mamba_cache_extra_buffer

        assert supports_mamba_cache_extra_buffer(
            view, model_arch
        ), f"extra_buffer is not supported for {model_arch}; use no_buffer."
        assert (
            is_cuda() or is_musa() or is_npu() or is_hip() or is_xpu()
        ), "extra_buffer needs CUDA/MUSA/NPU/ROCm/XPU (FLA)."
        if view.mamba_radix_cache_strategy == "extra_buffer_lazy":
            # The PD-disagg decode pool is not wired for lazy slots.
            assert view.disaggregation_mode == "null", (
                "extra_buffer_lazy unsupported under PD disaggregation; use "
                "--mamba-radix-cache-strategy extra_buffer."
            )
            # eagle/ngram/dspark/dflash all verify through
            # prepare_mamba_track_for_verify (lazy plan wired); dflash gained
            # the hook in DFlashVerifyInput.prepare_for_verify.
        if view.speculative_num_draft_tokens is not None:
            assert view.mamba_track_interval >= view.speculative_num_draft_tokens
        if view.page_size is not None:
            assert view.mamba_track_interval % view.page_size == 0
            assert self.mamba_cache_chunk_size is not None

            if (
                view.chunked_prefill_size is not None
                and 0 < view.chunked_prefill_size < self.mamba_cache_chunk_size
            ):
                logger.warning(
                    "Mamba radix extra-buffer is enabled with chunked_prefill_size=%s "
                    "smaller than mamba_cache_chunk_size=%s. This can make "
                    "mamba_track_mask false for unfinished chunked-prefill handoff "
                    "and skip Mamba state checkpoints.",
                    view.chunked_prefill_size,
                    self.mamba_cache_chunk_size,
                )

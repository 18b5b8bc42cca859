# sglang snippet: python/sglang/srt/arg_groups/overrides.py from line 1262
@register_post_process
def _intel_xpu_page_constraint(view: Any) -> dict:
    prefill_backend, decode_backend = attention_backends_of(view)
    if "intel_xpu" in (prefill_backend, decode_backend):
        supported_page_sizes = [64, 128]
        msg = "Intel XPU attention backend"
        if use_mla_backend(view):
            supported_page_sizes.extend([16, 32])
            msg = msg + " for MLA"
        if view.page_size not in supported_page_sizes:
            logger.warning(
                f"{msg} only supports page_sizes of {supported_page_sizes}, changing page_size from {view.page_size} to 128."
            )
            return {"page_size": 128}
    return {}

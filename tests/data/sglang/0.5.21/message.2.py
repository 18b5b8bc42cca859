# sglang snippet: python/sglang/srt/arg_groups/validation_hook.py from line 393
            f"--sampling-backend intel_xpu requires --device xpu, got --device {device}"

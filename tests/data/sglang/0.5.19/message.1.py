# sglang snippet: python/sglang/srt/hardware_backend/xpu/attention/xpu_gdn_backend.py from line 34
                "--linear-attn-backend intel_xpu requires the "

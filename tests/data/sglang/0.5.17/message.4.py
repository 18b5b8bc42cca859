# sglang snippet: python/sglang/srt/configs/mamba_utils.py from line 88
                    f"Invalid mamba_ssm_dtype '{config_dtype}' in config. "

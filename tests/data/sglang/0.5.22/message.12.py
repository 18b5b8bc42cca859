# sglang snippet: python/sglang/srt/configs/nemotron_h.py from line 501
                "Pattern must only contain characters 'M', '*', '-' or 'E'. "

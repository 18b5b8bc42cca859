# sglang snippet: python/sglang/srt/hardware_backend/mlx/model_runner_stub.py from line 216
                "max_running_requests was reduced from the requested %d to %d "

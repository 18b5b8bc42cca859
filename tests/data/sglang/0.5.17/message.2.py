# sglang snippet: python/sglang/srt/entrypoints/http_server.py from line 714
        f"Health check failed. Server couldn't get a response from detokenizer for last "

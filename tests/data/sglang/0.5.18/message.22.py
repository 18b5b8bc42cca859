# sglang snippet: python/sglang/srt/mem_cache/memory_pool.py from line 3756
                f"{layer_id=} not in full attention layers: {self.full_attention_layer_id_mapping.keys()}"

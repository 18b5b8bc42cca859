"""SGLang's per-batch log lines, so a log console (ours or one built for SGLang) reads both engines.

  Prefill batch, #new-seq: 2, #new-token: 61, #cached-token: 0, full token usage: 0.01, mamba usage: 0.25,
      #running-req: 2, #queue-req: 0, input throughput (token/s): 812.40
  Decode batch, #running-req: 4, #full token: 192, full token usage: 0.02, mamba num: 4, mamba usage: 0.50,
      cuda graph: False, gen throughput (token/s): 96.10, #queue-req: 0

(one line each). A prefill line comes with every step that computes prompt tokens, a decode line
every `interval` decode-only steps (SGLang's --decode-log-interval, 40), with the throughput over
those steps. A model without state layers gets SGLang's plain `#token: N, token usage: x` form.
"""

from __future__ import annotations

import time


class BatchLog:
    def __init__(self, log, *, interval: int = 40, device_type: str = "cpu", hybrid: bool = True):
        self.log = log
        self.interval = int(interval)
        self.graph_label = "cpu graph" if device_type == "cpu" else "cuda graph"
        self.hybrid = hybrid
        self.restart()

    def restart(self) -> None:
        """Count decode steps and time from now (the engine calls it once start-up, with its compile
        or warm-up, is over: the first line's throughput would count that time otherwise)."""
        self._decode_steps = self._decode_tokens = 0
        self._graphed = False
        self._since = time.monotonic()

    def _usage(self, stats: dict, *, decode: bool) -> str:
        kv_used, kv_total = stats["kv_tokens_used"], stats["kv_tokens_total"]
        kv_usage = kv_used / kv_total if kv_total else 0.0
        if not self.hybrid:
            return f"#token: {kv_used}, token usage: {kv_usage:.2f}" if decode else f"token usage: {kv_usage:.2f}"
        slots, slots_total = stats["state_slots_used"], stats["state_slots_total"]
        mamba = slots / slots_total if slots_total else 0.0
        if decode:
            return f"#full token: {kv_used}, full token usage: {kv_usage:.2f}, mamba num: {slots}, mamba usage: {mamba:.2f}"
        return f"full token usage: {kv_usage:.2f}, mamba usage: {mamba:.2f}"

    def after_step(self, *, new_seqs: int, prefill_tokens: int, decode_tokens: int, seconds: float, stats: dict,
                   graphed: bool = False) -> None:
        """`graphed`: the step replayed a decode graph (CPU: ran the compiled step); the decode line
        says whether its last step did, as SGLang's does."""
        if self.interval <= 0:
            return
        if prefill_tokens:
            self.log(
                f"Prefill batch, #new-seq: {new_seqs}, #new-token: {prefill_tokens}, #cached-token: 0, "
                f"{self._usage(stats, decode=False)}, #running-req: {stats['num_running']}, "
                f"#queue-req: {stats['num_queued']}, input throughput (token/s): {prefill_tokens / max(seconds, 1e-9):.2f}"
            )
            return
        self._decode_steps += 1
        self._graphed = graphed
        self._decode_tokens += decode_tokens
        if self._decode_steps < self.interval:
            return
        now = time.monotonic()
        rate = self._decode_tokens / max(now - self._since, 1e-9)
        self.log(
            f"Decode batch, #running-req: {stats['num_running']}, {self._usage(stats, decode=True)}, "
            f"{self.graph_label}: {self._graphed}, gen throughput (token/s): {rate:.2f}, #queue-req: {stats['num_queued']}"
        )
        self._decode_steps = self._decode_tokens = 0
        self._since = now

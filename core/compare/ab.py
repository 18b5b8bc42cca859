"""A/B on two running servers: the same prompts, greedy, to both; each prompt's agreement; the
verdict against a threshold calibrated on server A with the batch changed.

Each server is asked the richest way it answers: OpenAI completions with top logprobs (ours, vLLM,
SGLang, llama.cpp's server); where logprobs are refused, `/generate` for token ids (SGLang's, and
ours before it answered logprobs); else plain completions, compared as text. The calibration sends A the prompts one at a time and
then all at once: the same engine and weights, only the batch around each prompt differs. When the
two compute in different dtypes (each server's `/server_info` says, or the user), the calibration
runs on the less precise side, and its dtype's rounding floor holds (verdict.py, precision.py).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from bringup.core.client.server_http import split_base_url, why_unreachable
from bringup.core.errors import UserError

from .agreement import Answer, PromptAgreement, compare_answers, distribution
from .precision import dtype_name, less_precise
from .verdict import Threshold, Verdict, calibrate, judge

TOP_LOGPROBS = 5
PROMPTS = (  # short prompts whose continuations are stable at any precision, and a few that are not
    "The capital of France is",
    "def fibonacci(n):",
    "1, 2, 3, 4, 5,",
    "Water boils at a temperature of",
    "The quick brown fox",
    "In the beginning",
    "Translate to French: good morning ->",
    "Once upon a time, there was a",
)


@dataclass
class Server:
    url: str
    api_key: str | None = None
    mode: str | None = None  # "logprobs", "generate" or "text", found on the first request
    model: str | None = None
    timeout: float = 120.0
    dtype: str | None = None  # the precision it computes in: given, or read from /server_info (None: not known)
    dtype_from: str = ""  # where `dtype` came from, as the output says it

    def __post_init__(self) -> None:
        try:
            split_base_url(self.url)
        except ValueError as err:
            raise UserError(str(err)) from None
        self.url = self.url.rstrip("/")
        if self.dtype is not None:
            given = dtype_name(self.dtype)
            if given is None:
                raise UserError(f"dtype {self.dtype!r} of {self.url}: give float32, float16 or bfloat16")
            self.dtype, self.dtype_from = given, self.dtype_from or "given"

    def find_dtype(self) -> str | None:
        """The dtype the server computes in: the one given, else `/server_info`'s (ours says it; SGLang's
        lists its resolved arguments, "auto" there is not known); None when neither tells."""
        if self.dtype is not None:
            return self.dtype
        req = urllib.request.Request(self.url + "/server_info")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (the user's server)
                info = json.loads(resp.read())
        except (OSError, ValueError):  # a server without /server_info (vLLM, llama.cpp): not known
            return None
        self.dtype = dtype_name(info.get("dtype")) if isinstance(info, dict) else None
        self.dtype_from = "/server_info" if self.dtype else ""
        return self.dtype

    def describe(self) -> str:
        return f"{self.url}" + (f" ({self.dtype}, {self.dtype_from})" if self.dtype else "")

    def answer(self, prompt: str, max_tokens: int) -> Answer:
        for mode in ([self.mode] if self.mode else ["logprobs", "generate", "text"]):
            try:
                answer = getattr(self, f"_{mode}")(prompt, max_tokens)
            except _Refused:
                continue
            self.mode = mode
            return answer
        raise UserError(f"{self.url} answers none of /v1/completions (with or without logprobs) and /generate")

    def _post(self, path: str, body: dict) -> dict:
        req = urllib.request.Request(self.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:  # noqa: S310 (the user's server)
                return json.loads(resp.read())
        except urllib.error.HTTPError as err:
            if err.code in (400, 404, 405, 422, 501):
                raise _Refused(err.code) from None
            raise UserError(f"{self.url}{path}: {why_unreachable(err)}") from None
        except OSError as err:
            raise UserError(f"{self.url}: {why_unreachable(err)}") from None
        except ValueError:
            raise UserError(f"{self.url}{path} did not answer JSON; is it an OpenAI-compatible server?") from None

    def _completion_body(self, prompt: str, max_tokens: int) -> dict:
        body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0}
        if self.model:
            body["model"] = self.model
        return body

    def _logprobs(self, prompt: str, max_tokens: int) -> Answer:
        data = self._post("/v1/completions", {**self._completion_body(prompt, max_tokens), "logprobs": TOP_LOGPROBS})
        choice = data["choices"][0]
        lp = choice.get("logprobs") or {}
        if not lp.get("tokens"):
            raise _Refused(200)  # answered, but without logprobs: try the next way
        return Answer(choice.get("text", ""), list(lp["tokens"]), "pieces",
                      [float(x) if x is not None else float("nan") for x in lp["token_logprobs"]],
                      [dict(t or {}) for t in lp.get("top_logprobs") or []])

    def _generate(self, prompt: str, max_tokens: int) -> Answer:
        data = self._post("/generate", {"text": prompt, "sampling_params": {"max_new_tokens": max_tokens,
                                                                           "temperature": 0.0}})
        if "output_ids" not in data:
            raise _Refused(200)
        return Answer(data.get("text", ""), [int(t) for t in data["output_ids"]], "ids")

    def _text(self, prompt: str, max_tokens: int) -> Answer:
        data = self._post("/v1/completions", self._completion_body(prompt, max_tokens))
        return Answer(data["choices"][0].get("text", ""))


class _Refused(Exception):
    """The server does not answer this way; the next way is tried."""


@dataclass
class ABResult:
    a: str
    b: str
    modes: tuple[str, str]
    prompts: list[PromptAgreement]
    threshold: Threshold
    verdict: Verdict
    max_tokens: int
    answers: list[tuple[str, str]] = field(default_factory=list)  # (A's text, B's text) per prompt
    dtypes: tuple[str | None, str | None] = (None, None)  # each side's, where known

    def to_json(self) -> dict:
        rows = []
        for r, (ta, tb) in zip(self.prompts, self.answers):
            d = r.divergence
            rows.append({"prompt": r.prompt, "unit": r.unit, "agreement": r.agreement, "matched": r.matched,
                         "length": r.length, "a_text": ta, "b_text": tb,
                         "divergence": None if d is None else {"position": d.position, "a": d.a, "b": d.b,
                                                                "a_gap": d.a_gap, "b_gap": d.b_gap}})
        diffs = [x for r in self.prompts for x in r.logprob_diffs]
        return {"a": self.a, "b": self.b, "modes": list(self.modes), "dtypes": list(self.dtypes),
                "max_tokens": self.max_tokens,
                "prompts": rows, "logprob_diffs": distribution(diffs), "threshold": self.threshold.to_json(),
                "verdict": {"word": self.verdict.word, "reason": self.verdict.reason,
                            "wrong_prompts": self.verdict.wrong_prompts}}


def answers(server: Server, prompts: list[str], max_tokens: int, *, together: bool = False) -> list[Answer]:
    """Greedy answers, one request at a time, or all at once (one batch, where the server batches)."""
    server.answer(prompts[0], max_tokens)  # finds the server's mode before requests run side by side
    if not together:
        return [server.answer(p, max_tokens) for p in prompts]
    with ThreadPoolExecutor(max_workers=len(prompts)) as pool:
        return list(pool.map(lambda p: server.answer(p, max_tokens), prompts))


def calibrate_on(server: Server, prompts: list[str], max_tokens: int, side: str = "A") -> Threshold:
    alone = answers(server, prompts, max_tokens)
    together = answers(server, prompts, max_tokens, together=True)
    noise = [compare_answers(p, x, y) for p, x, y in zip(prompts, alone, together)]
    return calibrate(noise, f"{side} {server.url} alone against {len(prompts)} at once", server.dtype)


def noisier(a: Server, b: Server) -> tuple[str, Server]:
    """The side whose noise bounds the comparison: the less precise one where both dtypes are known
    and differ; the one whose dtype is known where only one is (the floor is at least its); else A."""
    if a.dtype is None and b.dtype is not None:
        return "B", b
    worse = less_precise(a.dtype, b.dtype)
    return ("B", b) if worse is not None and worse != a.dtype else ("A", a)


def run_ab(a: Server, b: Server, prompts: list[str] | None = None, *, max_tokens: int = 32,
           threshold: Threshold | None = None) -> ABResult:
    prompts = list(prompts or PROMPTS)
    if not prompts:
        raise UserError("no prompts to compare; give a file with one prompt per line")
    a.find_dtype(), b.find_dtype()
    if threshold is None:
        side, server = noisier(a, b)
        threshold = calibrate_on(server, prompts, max_tokens, side)
        unknown = [w for w, s in (("A", a), ("B", b)) if s.dtype is None]
        if unknown:  # a side in bf16 that does not say so would be judged against a finer floor
            threshold.rule += (f"; {' and '.join(unknown)}'s dtype not known ({', '.join('--dtype-' + w.lower() for w in unknown)} "
                               "gives it: a less precise side's noise is larger)")
    got_a, got_b = answers(a, prompts, max_tokens), answers(b, prompts, max_tokens)
    results = [compare_answers(p, x, y) for p, x, y in zip(prompts, got_a, got_b)]
    return ABResult(a.url, b.url, (a.mode or "", b.mode or ""), results, threshold, judge(results, threshold),
                    max_tokens, [(x.text, y.text) for x, y in zip(got_a, got_b)], (a.dtype, b.dtype))


def read_prompts(path) -> list[str]:
    """One prompt per line (blank lines skipped), or a JSON list of strings."""
    from pathlib import Path

    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"--prompts {path}: cannot be read as text ({err})") from None
    if text.lstrip().startswith("["):
        try:
            items = json.loads(text)
        except ValueError as err:
            raise UserError(f"--prompts {path}: not valid JSON ({err})") from None
        if not all(isinstance(p, str) for p in items):
            raise UserError(f"--prompts {path}: a JSON file must hold a list of strings")
        return [p for p in items if p]
    return [line for line in text.splitlines() if line.strip()]

"""`bringup ab` on running servers: two of our engines with the same weights agree (compared token by
token with their OpenAI logprobs), through the function and the command; ours in float32 against
ours in bfloat16 is judged on the logprob differences; a server that answers OpenAI logprobs
(vLLM's and SGLang's response shape) is compared token by token with its logprob gaps; bad input is
refused with a message."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from server_helpers import API_KEY, start_server, tiny_checkpoint

from bringup.core.compare.ab import Server, run_ab
from bringup.core.errors import UserError

PROMPTS = ["The capital of France is", "1, 2, 3,", "Once upon a time"]


@pytest.fixture(scope="module")
def two_engines(tmp_path_factory):
    checkpoint = tiny_checkpoint(tmp_path_factory.mktemp("ab_servers"))
    a = start_server(checkpoint)
    try:
        b = start_server(checkpoint, "--max-running-requests", "2")  # another batch limit, the same weights
    except BaseException:
        a.process.stop()
        raise
    yield a, b
    a.process.stop()
    b.process.stop()


def test_two_of_our_engines_with_the_same_weights_agree(two_engines):
    a, b = two_engines
    result = run_ab(Server(a.base_url, API_KEY), Server(b.base_url, API_KEY), PROMPTS, max_tokens=6)
    assert result.modes == ("logprobs", "logprobs")  # our server answers OpenAI logprobs
    assert [r.agreement for r in result.prompts] == [1.0] * 3 and all(r.length == 6 for r in result.prompts)
    # Float32 on a CPU with the same weights: the same numbers, whatever the batch limit.
    assert [d for r in result.prompts for d in r.logprob_diffs] == [0.0] * 18
    assert result.verdict.word == "agree", result.verdict.reason
    assert result.dtypes == ("float32", "float32") and result.threshold.source.startswith("A ")
    assert "alone against 3 at once" in result.threshold.source and "fp32 rounds finer" in result.threshold.rule


def test_float32_against_bfloat16_is_judged_against_bf16_noise(two_engines):
    """Each of our servers says its dtype in /server_info: the calibration runs on the bf16 side and
    the floor is bf16's, named in the verdict; bf16 rounding moves logprobs by hundredths of a nat,
    within it (a fixed float32 floor of 0.02 called this p99 0.030 "differ")."""
    from bringup.core.compare.verdict import NO_LOGPROBS

    a, _ = two_engines
    b = start_server(a.checkpoint, "--dtype", "bfloat16")
    try:
        result = run_ab(Server(a.base_url, API_KEY), Server(b.base_url, API_KEY), PROMPTS, max_tokens=6)
    finally:
        b.process.stop()
    assert result.modes == ("logprobs", "logprobs") and result.dtypes == ("float32", "bfloat16")
    diffs = [d for r in result.prompts for d in r.logprob_diffs]
    assert len(diffs) == sum(r.matched for r in result.prompts) > 0
    assert 0 < max(diffs) < 0.5  # bf16 rounding moves the logprobs a little (a wrong kernel moves them by nats)
    t = result.threshold
    assert t.dtype == "bfloat16" and t.source.startswith(f"B {b.base_url} alone against 3 at once")
    assert "bf16 side's rounding floor" in t.rule
    assert result.verdict.word in ("agree", "noise"), result.verdict.reason
    assert "within bf16 noise" in result.verdict.reason and NO_LOGPROBS not in result.verdict.reason
    for r in result.prompts:
        if r.divergence is not None:
            assert r.divergence.gap is not None


def test_the_command_prints_the_table_and_json(two_engines, tmp_path):
    a, b = two_engines
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS[:2]) + "\n\n")
    cmd = [sys.executable, "-m", "bringup", "ab", a.base_url, b.base_url, "--prompts", str(prompts), "--max-tokens", "4",
           "--api-key-a", API_KEY, "--api-key-b", API_KEY]
    done = subprocess.run([*cmd, "--json", "--save-calibration", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["verdict"]["word"] == "agree" and len(doc["prompts"]) == 2 and doc["prompts"][0]["divergence"] is None
    again = subprocess.run([*cmd, "--calibration", str(tmp_path / "t.json")], capture_output=True, text=True)
    assert again.returncode == 0 and "verdict: agree" in again.stdout and "100%" in again.stdout


class _LogprobServer(BaseHTTPRequestHandler):
    """A completions endpoint answering in the OpenAI logprobs shape, from a table of answers."""

    answers: dict = {}

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        tokens, logprobs, top = self.answers[body["prompt"]]
        data = {"choices": [{"text": "".join(tokens), "logprobs": {"tokens": tokens, "token_logprobs": logprobs,
                                                                   "top_logprobs": top}}]}
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def log_message(self, *args):
        pass


def _serve(answers: dict) -> HTTPServer:
    handler = type("H", (_LogprobServer,), {"answers": answers})
    server = HTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def test_openai_logprobs_are_compared_token_by_token_with_their_gaps():
    a = _serve({"p": (["A", " sure"], [-0.1, -0.05], [{"A": -0.1}, {" sure": -0.05, " maybe": -6.0}])})
    b = _serve({"p": (["A", " maybe"], [-0.1, -0.02], [{"A": -0.1}, {" maybe": -0.02, " sure": -7.0}])})
    try:
        result = run_ab(Server(f"http://127.0.0.1:{a.server_port}"), Server(f"http://127.0.0.1:{b.server_port}"), ["p"],
                        max_tokens=2)
    finally:
        a.shutdown()
        b.shutdown()
    assert result.modes == ("logprobs", "logprobs")
    d = result.prompts[0].divergence
    assert (d.position, d.a, d.b) == (1, " sure", " maybe") and d.a_gap == pytest.approx(5.95)
    assert result.verdict.word == "differ" and result.verdict.wrong_prompts == ["p"]
    assert result.dtypes == (None, None) and "A and B's dtype not known (--dtype-a, --dtype-b" in result.threshold.rule


def test_a_wrong_kernel_differs_past_the_bf16_floor_the_user_names():
    """Servers that do not say their dtype (vLLM has no /server_info): --dtype-b names it; a kernel
    that moves the shared tokens' logprobs by tenths of a nat is past bf16's floor, a near-tie parting
    (each token second in the other's top list) is not a failure."""
    lps = [-0.5, -1.0, -0.2, -2.0, -0.7, -1.5]
    tokens = ["a", "b", "c", "d", "e", "f"]
    wrong = _serve({"p": (tokens, [x - 0.4 for x in lps], [{t: x - 0.4} for t, x in zip(tokens, lps)])})
    right = _serve({"p": (tokens, lps, [{t: x} for t, x in zip(tokens, lps)])})
    try:
        url = lambda s: f"http://127.0.0.1:{s.server_port}"
        result = run_ab(Server(url(right)), Server(url(wrong), dtype="bf16"), ["p"], max_tokens=6)
        same = run_ab(Server(url(right)), Server(url(right), dtype="bfloat16"), ["p"], max_tokens=6)
    finally:
        wrong.shutdown()
        right.shutdown()
    assert result.dtypes == (None, "bfloat16") and result.threshold.dtype == "bfloat16"
    assert result.verdict.word == "differ" and "past the bf16 noise threshold" in result.verdict.reason
    assert same.verdict.word == "agree" and "within bf16 noise" in same.verdict.reason
    with pytest.raises(UserError, match="give float32, float16 or bfloat16"):
        Server("http://127.0.0.1:9", dtype="fp8")


def test_bad_input_is_refused_with_a_message(tmp_path):
    with pytest.raises(UserError, match="not a server address"):
        Server("localhost:30000")
    with pytest.raises(UserError, match="connection refused|nothing listens"):
        Server("http://127.0.0.1:9").answer("x", 1)
    done = subprocess.run([sys.executable, "-m", "bringup", "ab", "--layers", "default", "--b", "colour=red"],
                          capture_output=True, text=True)
    assert done.returncode == 2 and "KEY=VALUE with KEY one of device" in done.stderr
    done = subprocess.run([sys.executable, "-m", "bringup", "ab", "http://127.0.0.1:9"], capture_output=True, text=True)
    assert done.returncode == 2 and "give two server URLs" in done.stderr

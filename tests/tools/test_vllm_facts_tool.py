"""tools/vllm_facts.py, the maintainer's check of every vLLM fact the workbench cites (file:line), on a
stand-in wheel folder: each probe's text at its cited line passes; a moved line or a changed value is
reported with where it is now, and the exit status says so."""

from __future__ import annotations

import sys
from pathlib import Path

from repo_paths import REPO

ROOT = REPO
sys.path.insert(0, str(ROOT / "tools"))

import vllm_facts  # noqa: E402

# One line of source text per probe, matching its regex (as the 0.33.0 wheel has it).
TEXT = {
    "block size default 16": "    DEFAULT_BLOCK_SIZE: ClassVar[int] = 16",
    "gpu_memory_utilization 0.92": "    gpu_memory_utilization: float = Field(default=0.92, gt=0, le=1)",
    "prefix caching on by default": "    enable_prefix_caching: bool = True",
}


def _wheel(folder: Path, shift: dict[str, int] | None = None, text: dict[str, str] | None = None) -> Path:
    files: dict[str, dict[int, str]] = {}
    for what, rel, line, regex, *_ in vllm_facts.PROBES:
        if line is None:
            continue
        body = (text or {}).get(what) or TEXT.get(what) or regex.replace("\\", "").replace("(?P<v>", "(")
        files.setdefault(rel, {})[line + (shift or {}).get(what, 0)] = body
    for rel, lines in files.items():
        path = folder / "vllm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("\n".join(lines.get(i, "") for i in range(1, max(lines) + 1)) + "\n")
    return folder


def test_every_probe_at_its_cited_line(tmp_path, capsys):
    # the stand-in holds each probe's own text; probes whose regex is not plain text get the 0.33.0 line
    source = vllm_facts.Source(_wheel(tmp_path))
    bad = vllm_facts.check(source, find=False)
    out = capsys.readouterr().out
    assert "gpu_memory_utilization 0.92" in out and "config/cache.py:215 = 0.92" in out
    assert bad == sum(1 for line in out.splitlines() if line.startswith(("LINE", "ABSENT")))


def test_a_moved_line_and_a_changed_value_are_reported(tmp_path, capsys):
    source = vllm_facts.Source(_wheel(tmp_path, shift={"block size default 16": 3},
                                      text={"gpu_memory_utilization 0.92": "    gpu_memory_utilization: float = 0.9"}))
    vllm_facts.check(source, find=False)
    out = capsys.readouterr().out
    assert "LINE     block size default 16                         config/cache.py:188 = 16" in out
    assert "VALUE    gpu_memory_utilization 0.92                   config/cache.py:215 = 0.9   (cited: config/cache.py:215 = 0.92)" in out

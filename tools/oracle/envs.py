"""Oracle environments: one venv per engine release under ~/.cache/bringup/oracle/<engine>-<ver>, with the
released wheel (`--no-deps`), the pure-Python dependencies its argument handling imports (at the
release's own pins, read from the wheel's METADATA) and the CPU build of torch, shared between them
through a .pth file (one 700 MB copy, not one per release).

    python tools/oracle/envs.py sglang 0.5.23     # build (or reuse) the environment; prints its python

GPU-only packages are not installed: gpu_stubs.py stands them in at import time.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path.home() / ".cache" / "bringup" / "oracle"
WHEELS = ROOT / "wheels"
# The CPU torch the oracle runs on. The releases pin the CUDA builds (sglang 0.5.17: torch==2.11.0,
# 0.5.23: torch==2.14.1); pip here reaches only the CPU build 2.13.0 (+cpu), so every oracle
# environment uses it. Argument handling calls no kernel, so the version shows only in dtype names.
TORCH = "torch==2.13.0"
# What `sglang.srt.server_args` and the modules it reaches import at module level (found by importing
# it in 0.5.17 until nothing was missing). Pinned to the release's Requires-Dist where it pins one.
SGLANG_IMPORTS = (
    "numpy", "orjson", "pybase64", "msgspec", "pyzmq", "transformers", "requests", "packaging", "psutil", "pydantic",
    "pillow", "pyyaml", "tqdm", "setproctitle", "uvloop", "aiohttp", "fastapi", "uvicorn", "einops", "xxhash",
    "zstandard", "python-multipart", "prometheus-client", "openai", "partial_json_parser", "interegular", "ipython",
    "dill", "sentencepiece", "compressed-tensors", "gguf", "xgrammar", "apache-tvm-ffi", "tokenizers", "regex",
    "sympy", "networkx", "jinja2", "filelock", "fsspec", "setuptools>=77", "python-dateutil",
)
VLLM_IMPORTS = (
    "numpy", "transformers", "tokenizers", "requests", "packaging", "psutil", "pydantic", "pyyaml", "tqdm", "regex",
    "msgspec", "pyzmq", "cloudpickle", "cachetools", "sentencepiece", "einops", "blake3", "prometheus-client",
    "openai", "fastapi", "uvicorn", "pillow", "aiohttp", "gguf", "compressed-tensors", "partial_json_parser",
    "pybase64", "cbor2", "setproctitle", "diskcache", "lark", "protobuf", "llguidance", "xgrammar", "apache-tvm-ffi",
    "tiktoken", "mistral_common", "openai-harmony", "watchfiles", "python-json-logger", "ijson", "anthropic",
    "depyf", "opencv-python-headless", "scipy", "ninja", "sympy", "networkx", "jinja2", "filelock", "fsspec",
    "setuptools>=77", "py-cpuinfo", "prometheus-fastapi-instrumentator", "outlines_core", "lm-format-enforcer",
    "model-hosting-container-standards", "pydantic-settings", "typing_extensions", "six", "dill", "numba", "uvloop",
)
# Dependencies left out on purpose, and why (GPU-only, or would replace the CPU torch).
LEFT_OUT = {
    "torch": f"CUDA build pinned; {TORCH} (+cpu) from the local index instead",
    "triton": "GPU kernel compiler: stubbed (gpu_stubs.py)",
    "torchvision/torchaudio/torchao/torchcodec": "must match the pinned CUDA torch; multimodal/quantization only: stubbed",
    "flashinfer, sglang-kernel, flash-attn-4, sgl-deep-gemm, quack, cutlass-dsl, tilelang, cuda-python": "CUDA: stubbed",
}


def _sh(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["nice", "-n", "10", *cmd], capture_output=True, text=True, **kw)


def wheel(engine: str, version: str) -> Path:
    """The released wheel, downloaded once (`pip download --no-deps`)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    found = sorted(WHEELS.glob(f"{engine}-{version}-*.whl"))
    if not found:
        done = _sh([sys.executable, "-m", "pip", "download", "--no-deps", "-q", f"{engine}=={version}", "-d", str(WHEELS)])
        found = sorted(WHEELS.glob(f"{engine}-{version}-*.whl"))
        if not found:
            raise SystemExit(f"could not download {engine}=={version}: {done.stderr.strip()[-300:]}\n"
                             f"Check the release number against `python -m pip index versions {engine}`.")
    return found[0]


def pins(whl: Path) -> dict[str, str]:
    """name -> requirement from the wheel's Requires-Dist (no extras, no platform-only lines)."""
    with zipfile.ZipFile(whl) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    out = {}
    for line in text.splitlines():
        if not line.startswith("Requires-Dist:") or "extra ==" in line:
            continue
        req = line.split(":", 1)[1].split(";")[0].strip()
        name = re.split(r"[<>=!~\[ ]", req, 1)[0]
        out[_norm(name)] = req.replace(name, name, 1)
    return out


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirements(engine: str, whl: Path) -> list[str]:
    pinned = pins(whl)
    wanted = SGLANG_IMPORTS if engine == "sglang" else VLLM_IMPORTS
    out = []
    for name in wanted:
        base = _norm(re.split(r"[<>=]", name, 1)[0])
        req = pinned.get(base, name)
        out.append(re.sub(r"\[[^\]]*\]", "", req))  # flashinfer_python[cu13]-style extras dropped
    return out


def torch_dir() -> Path:
    """One CPU torch for every oracle environment (installed with --no-deps into its own folder)."""
    folder = ROOT / TORCH.replace("==", "-")
    if not (folder / "torch").is_dir():
        done = _sh([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-compile", "--target", str(folder), TORCH])
        if done.returncode:
            raise SystemExit(f"could not install {TORCH} (CPU): {done.stderr.strip()[-400:]}")
    return folder


def build(engine: str, version: str) -> Path:
    """The environment's python, built on first use. A release whose deps cannot be met raises SystemExit
    with pip's words (recorded by the caller as that release's limit)."""
    env = ROOT / f"{engine}-{version}"
    python = env / "bin" / "python"
    marker = env / ".oracle-ready"
    if marker.exists():
        return python
    whl = wheel(engine, version)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    site = next(env.glob("lib/python*/site-packages"))
    (site / "zz_oracle_torch.pth").write_text(str(torch_dir()) + "\n")
    done = _sh([str(python), "-m", "pip", "install", "-q", "--no-compile", "--no-deps", str(whl)])
    if done.returncode:
        raise SystemExit(f"{engine} {version}: the wheel did not install: {done.stderr.strip()[-400:]}")
    reqs = requirements(engine, whl)
    done = _sh([str(python), "-m", "pip", "install", "-q", "--no-compile", *reqs])
    if done.returncode:
        raise SystemExit(f"{engine} {version}: its pure-Python deps could not be met: {done.stderr.strip()[-600:]}")
    # Deps may drag in GPU-only packages (xgrammar -> triton): remove them so the stubs stand in.
    _sh([str(python), "-m", "pip", "uninstall", "-q", "-y", "triton", "torchvision", "torchaudio"])
    marker.write_text("\n".join(reqs) + "\n")
    return python


if __name__ == "__main__":
    print(build(sys.argv[1], sys.argv[2]))

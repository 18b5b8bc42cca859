#!/usr/bin/env python3
"""The differential matrix: every cell (tools/oracle/cells.py for SGLang, vllm_cells.py for vLLM) through
`bringup validate` and through the release's own argument handling (probe_sglang.py / probe_vllm.py in
that release's oracle environment), the launch argv Validate builds (core/launch/sglang.py,
core/launch/vllm.py: the Run tab's builders) being what the engine parses. Writes the compact table
tests/data/oracle/<engine>-<ver>.jsonl and prints the counts and every disagreement.

    python tools/oracle/matrix.py sglang 0.5.23            # build the env if needed, run, write the table
    python tools/oracle/matrix.py sglang 0.5.23 --models nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B
    python tools/oracle/matrix.py sglang 0.5.23 --extras run ssm_f32   # only those extras' cells
    python tools/oracle/matrix.py sglang 0.5.23 --diff     # run, and show what changed against the committed table
    python tools/oracle/matrix.py vllm 0.33.0              # vLLM's `vllm serve` parser, engine config, block alignment
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))
import cells  # noqa: E402
import envs  # noqa: E402
import fake_device  # noqa: E402
import vllm_cells  # noqa: E402

MODELS = REPO.parent / "shared" / "models"
TABLES = REPO / "tests" / "data" / "oracle"
PROGRAM = {"sglang": ["python", "-m", "sglang.launch_server"], "vllm": ["vllm", "serve"]}
PROBE = {"sglang": "probe_sglang.py", "vllm": "probe_vllm.py"}
CELLS = {"sglang": cells, "vllm": vllm_cells}


def table_path(engine: str, version: str) -> Path:
    return TABLES / f"{engine}-{version}.jsonl"


def model_folders(names, tmp: Path) -> dict[str, Path]:
    """Each config as a local model folder (config.json only): the engine reads it as it would a checkpoint."""
    out = {}
    for name in names:
        folder = tmp / name
        folder.mkdir()
        (folder / "config.json").write_text((MODELS / f"{name}.json").read_text())
        out[name] = folder
    return out


def memory_of(device: str) -> int | None:
    """The faked device memory in MiB (cpu: the host's own, so its chunked prefill is not compared)."""
    return None if device == "cpu" else fake_device.TARGETS[device].memory_mib


def predict(engine: str, key, layer_map, target, folder: Path) -> tuple[dict, list[str]]:
    from bringup.core.validate import validate

    result = validate(layer_map, target, CELLS[engine].settings_for(key), model_path=str(folder))
    argv = cells.launch_argv(result, key, target.version)
    program = PROGRAM[engine]
    assert argv[:len(program)] == program, argv
    memory = memory_of(key.device)
    pred = (cells.predicted(result, target.profile, memory, key) if engine == "sglang"
            else vllm_cells.predicted(result, memory, key))
    return pred, argv[len(program):] + ["--skip-tokenizer-init"]


def run_oracle(engine: str, python: Path, device: str, jobs: list[tuple[str, list[str]]], timeout: int) -> dict[str, dict]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump({"target": device, "cells": [{"id": i, "argv": a} for i, a in jobs]}, f)
    done = subprocess.run(["nice", "-n", "0", str(python), str(HERE / PROBE[engine]), f.name],
                          capture_output=True, text=True, timeout=timeout)
    Path(f.name).unlink()
    out = {}
    for line in done.stdout.splitlines():
        if line.startswith("ORACLE "):
            row = json.loads(line[len("ORACLE "):])
            out[row.pop("id")] = row
    if not out:
        raise SystemExit(f"the oracle gave no answer on {device}:\n{done.stderr[-2000:]}")
    return out


def _ran_on(cell_id: str, models, devices, extras) -> bool:
    """Whether a committed cell belongs to this run's models, devices and extras (so a cell it no longer has goes)."""
    model, device = cell_id.split("|")[:2]
    return model in models and device in devices and (extras is None or cell_id.rsplit("|", 1)[1] in extras)


def explain(engine: str, version: str, key, seen: dict, pred: dict, diffs: list[str]) -> str | None:
    """The recorded limit that explains a disagreement (limits.py, vllm_limits.py), or None."""
    if engine == "sglang":
        import limits

        return limits.explain(version, key, seen, pred, diffs)
    import vllm_limits

    return vllm_limits.explain(key, seen, pred, diffs)


def load_maps(names):
    from bringup.core.sources.resolve import load_layer_map

    maps, skipped = {}, {}
    for name in names:
        try:
            maps[name] = load_layer_map(str(MODELS / f"{name}.json"))
        except Exception as e:  # a family the project cannot read: said, not hidden
            skipped[name] = f"{type(e).__name__}: {e}"
    return maps, skipped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("engine", choices=("sglang", "vllm"))
    ap.add_argument("version")
    ap.add_argument("--models", nargs="*", help="file names under ../shared/models (default: all)")
    ap.add_argument("--devices", nargs="*", help="oracle targets (default: all of the engine's cells module)")
    ap.add_argument("--extras", nargs="*", help="only the cells of these extras ('' for the plain ones; default: all)")
    ap.add_argument("--diff", action="store_true", help="compare with the committed table; write it only with --write")
    ap.add_argument("--write", action="store_true", help="with --diff: also write the table")
    ap.add_argument("--timeout", type=int, default=3000)
    args = ap.parse_args(argv)
    from bringup.core.rules.targets import parse_target

    target = parse_target(f"{args.engine}=={args.version}")
    if args.engine == "sglang" and target.profile.label != args.version:
        raise SystemExit(f"no rule profile for sglang {args.version}: add it first (tools/sglang_facts.py {args.version} --emit)")
    for finding in target.findings:  # vLLM: a release other than the one the rules were read from
        print(f"note: {finding.message}")
    table = CELLS[args.engine]
    python = envs.build(args.engine, args.version)
    names = args.models or sorted(p.stem for p in MODELS.glob("*.json"))
    maps, skipped = load_maps(names)
    for name, why in skipped.items():
        print(f"skipped {name}: {why}")
    from bringup.core.rules.model_facts import facts_for_pp

    facts = {n: facts_for_pp(m, 1) for n, m in maps.items()}
    hybrid = {n: f.is_hybrid for n, f in facts.items()}
    devices = args.devices or list(table.DEVICES)
    models = hybrid if args.engine == "sglang" else {n: (f.is_hybrid, bool(f.mla)) for n, f in facts.items()}
    keys = [k for k in table.keys_for(models) if k.device in devices and (args.extras is None or k.extra in args.extras)]
    rows = []
    with tempfile.TemporaryDirectory(prefix="oracle-models-") as tmp:
        folders = model_folders(maps, Path(tmp))
        preds, jobs = {}, {}
        for key in keys:
            preds[key.id], a = predict(args.engine, key, maps[key.model], target, folders[key.model])
            jobs.setdefault(key.device, []).append((key.id, a))
        for device, batch in jobs.items():
            print(f"{device}: {len(batch)} cells through {args.engine} {args.version} ...", flush=True)
            seen = run_oracle(args.engine, python, device, batch, args.timeout)
            for key_id, _a in batch:
                key = table.CellKey.parse(key_id)
                engine = table.observed(seen.get(key_id, {"accepted": False, "error": "no answer", "where": ""}))
                if engine.get("error"):  # the temporary model folder, which changes every run
                    engine["error"] = engine["error"].replace(tmp, "<models>")
                diffs = table.disagreements(preds[key_id], engine, hybrid[key.model])
                why = explain(args.engine, args.version, key, engine, preds[key_id], diffs) if diffs else None
                rows.append({"id": key_id, "engine": engine, "diffs": diffs, "limit": why, "argv": table.table_argv(_a)})
    counts = Counter("agree" if not r["diffs"] else "limit" if r["limit"] else "disagree" for r in rows)
    print(f"\n{args.engine} {args.version}: {len(rows)} cells, {counts['agree']} agree, {counts['limit']} explained "
          f"limits, {counts['disagree']} disagree")
    for r in rows:
        if r["diffs"]:
            print(f"  {r['id']}: " + "; ".join(r["diffs"]) + (f"  [limit: {r['limit'][:100]}]" if r["limit"] else ""))
    path = table_path(args.engine, args.version)
    if args.diff and path.exists():
        old = {json.loads(line)["id"]: json.loads(line) for line in path.read_text().splitlines()}
        changed = [r["id"] for r in rows if old.get(r["id"], {}).get("engine") != r["engine"]]
        print(f"\nagainst the committed table: {len(changed)} cells changed, {len(set(old) - {r['id'] for r in rows})} gone")
        for c in changed[:200]:
            print(f"  {c}: {old.get(c, {}).get('engine')} -> {next(r['engine'] for r in rows if r['id'] == c)}")
    if not args.diff or args.write:
        out = [{"id": r["id"], "argv": r["argv"], "engine": r["engine"]} for r in rows]
        if (args.models or args.devices or args.extras is not None) and path.exists():  # a partial run refreshes its own cells only
            ran = {r["id"] for r in rows}
            kept = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
            order = {r["id"]: i for i, r in enumerate(kept)}
            out = [r for r in kept if r["id"] not in ran and not _ran_on(r["id"], maps, devices, args.extras)] + out
            out.sort(key=lambda r: order.get(r["id"], len(order)))  # the committed order, new cells last
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(cells.dumps_row(r) + "\n" for r in out))
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

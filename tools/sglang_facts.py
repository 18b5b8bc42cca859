#!/usr/bin/env python3
"""Maintainer script: read an SGLang release's rule facts from its wheel and set them next to the
profile's values (core/rules/sglang_releases.py), so adding or checking a release is a reviewed diff.

    python tools/sglang_facts.py 0.5.23                       # download (no deps), compare, exit 1 on a difference
    python tools/sglang_facts.py 0.5.24 --emit                # print a profile entry to paste and review
    python tools/sglang_facts.py 0.5.23 --write-fixtures tests/data/sglang/0.5.23
    python tools/sglang_facts.py --wheel path/to/sglang-X.whl  # or an unpacked wheel folder

Only the package index is contacted (`pip download --no-deps`); SGLang itself is never imported.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from sglang_extract import PROBES, WheelSource, catalogue_texts, extract, fixture_text, messages  # noqa: E402


def download(version: str, folder: Path) -> Path:
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", f"sglang=={version}", "-d", str(folder)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(folder.glob(f"sglang-{version}-*.whl"))
    if done.returncode or not wheels:
        raise SystemExit(f"could not download sglang=={version} from the package index:\n{done.stderr.strip()}")
    return wheels[0]


def compare(facts, profile) -> int:
    """Print source vs profile; the number of differences (value or line)."""
    from bringup.core.rules.sglang_profile import FACTS

    bad = 0
    label = profile.label if profile else "-"
    print(f"{'fact':42} {'source (wheel)':58} profile {label}")
    for name in FACTS:
        fact = facts[name]
        mine = getattr(profile, name, None) if profile else None
        where = profile.sources.get(name) if profile else None
        same_value = profile is not None and _norm(mine) == _norm(fact.value)
        same_line = profile is not None and where == fact.where
        mark = "ok" if same_value and same_line else ("LINE" if same_value else "DIFF")
        bad += mark != "ok"
        print(f"{name:42} {fact.where:58} {mark}")
        print(f"    source : {fact.value!r}")
        if mark != "ok":
            print(f"    profile: {mine!r}  at {where}")
    return bad


def compare_messages(found: dict[str, str], profile) -> int:
    """Catalogue messages: where this release prints each, next to the profile's `messages`."""
    mine = profile.messages if profile else {}
    bad = 0
    print(f"\n{'diagnosis message (catalogue source_text)':62} {'source (wheel)':58}")
    for text in catalogue_texts():
        where, had = found.get(text, "absent"), mine.get(text, "absent")
        mark = "ok" if where == had else "DIFF"
        bad += mark != "ok"
        print(f"{text[:60]:62} {where:58} {mark}" + (f"  (profile: {had})" if mark != "ok" else ""))
    return bad


def _norm(v):
    return tuple(_norm(x) for x in v) if isinstance(v, (list, tuple)) else v


def emit(version: str, facts, found: dict[str, str] | None = None) -> str:
    """A `SglangProfile(...)` entry for core/rules/sglang_releases.py (era/where filled from the paths)."""
    from bringup.core.rules.sglang_profile import FACTS

    major = tuple(int(x) for x in version.split(".")[:3])
    validate_path = facts["extra_buffer_platform_message"].path
    era = "server_args" if validate_path.endswith("server_args.py") else "arg_groups"
    lines = [f"    SglangProfile(", f"        version={major!r}, era={era!r}, where={validate_path!r},"]
    for name in FACTS:
        lines.append(f"        {name}={facts[name].value!r},")
    lines.append("        sources={")
    for name in FACTS:
        lines.append(f"            {name!r}: {facts[name].where!r},")
    lines.append("        },")
    if found is not None:
        lines.append("        messages={")
        for text, where in found.items():
            lines.append(f"            {text!r}: {where!r},")
        lines.append("        },")
    lines.append("    ),")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("version", nargs="?", help="an SGLang release, e.g. 0.5.23")
    ap.add_argument("--wheel", help="a downloaded wheel or an unpacked wheel folder instead of downloading")
    ap.add_argument("--emit", action="store_true", help="print a profile entry instead of comparing")
    ap.add_argument("--write-fixtures", metavar="DIR", help="save the probed snippets for the tests")
    args = ap.parse_args(argv)
    if not args.version and not args.wheel:
        ap.error("give a version or --wheel")
    with tempfile.TemporaryDirectory(prefix="sglang-wheel-") as tmp:
        wheel = Path(args.wheel) if args.wheel else download(args.version, Path(tmp))
        version = args.version or wheel.name.split("-")[1]
        src = WheelSource(wheel)
        facts = extract(src)
        if args.write_fixtures:
            out = Path(args.write_fixtures)
            out.mkdir(parents=True, exist_ok=True)
            for probe in PROBES:
                if probe.windows:
                    text = "".join(fixture_text(snippet) for snippet in src.snippets(probe.key))
                    (out / f"{probe.key}.py").write_text(text, encoding="utf-8")
                    continue
                snippet = src.snippet(probe.key)
                if snippet is not None:
                    (out / f"{probe.key}.py").write_text(fixture_text(snippet), encoding="utf-8")
            text = "".join(fixture_text(snippet) for snippet in src.message_windows(catalogue_texts()))
            (out / "messages.py").write_text(text, encoding="utf-8")  # one line per message, with its place
            print(f"wrote {len(list(out.glob('*.py')))} snippets to {out}")
        found = messages(src)
        if args.emit:
            print(emit(version, facts, found))
            return 0
        from bringup.core.rules.profiles import profile_for
        from bringup.core.versions import release

        profile = profile_for(release(version))
        if profile is not None and profile.release != release(version):
            print(f"no profile for sglang {version}; comparing with the nearest earlier one, {profile.label}\n")
        return 1 if compare(facts, profile) + compare_messages(found, profile) else 0


if __name__ == "__main__":
    raise SystemExit(main())

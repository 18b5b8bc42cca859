"""The start-up log's account of Triton compiles (core/engine/compile_cache.py): directories that
appear in the cache during a stage are counted as compiled; a second start that finds them adds none."""

from __future__ import annotations

from bringup.core.engine.compile_cache import cached_kernels, describe_compiles, triton_cache_dir


def test_new_cache_directories_are_the_compiled_kernels(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "cache"))
    assert triton_cache_dir() == tmp_path / "cache"
    assert cached_kernels() == set()  # no cache yet
    (tmp_path / "cache" / "AAA").mkdir(parents=True)
    before = cached_kernels()
    (tmp_path / "cache" / "BBB").mkdir()
    (tmp_path / "cache" / "CCC").mkdir()
    (tmp_path / "cache" / "stray.lock").write_text("")  # not a kernel
    after = cached_kernels()
    assert after == {"AAA", "BBB", "CCC"}
    assert describe_compiles(before, after).startswith("Triton compiled 2 kernels")
    # A second start finds them all: nothing new.
    assert "compiled nothing new" in describe_compiles(after, cached_kernels())
    assert "3 kernels reused" in describe_compiles(after, cached_kernels())


def test_default_cache_follows_triton_home(tmp_path, monkeypatch):
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    monkeypatch.setenv("TRITON_HOME", str(tmp_path))
    assert triton_cache_dir() == tmp_path / ".triton" / "cache"

"""The Monte Carlo disk cache: hits, misses on parameter and code changes, atomic writes."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from attn_lib import Setting, simulate
from attn_lib.book import cache

CALLS: list[dict] = []


def compute(a, b=1.0, arr=None):
    """A module-level function whose calls are counted."""
    CALLS.append({"a": a, "b": b})
    out = {"sum": a + b}
    if arr is not None:
        out["arr"] = np.asarray(arr) * 2
    return out


@pytest.fixture(autouse=True)
def cache_env(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", str(tmp_path / "cache"))
    CALLS.clear()
    return tmp_path / "cache"


def entries(root):
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_cache_dir_from_env(cache_env):
    assert cache.cache_dir() == cache_env


def test_default_cache_dir_is_in_repository(monkeypatch):
    monkeypatch.delenv("ATTN_BOOK_CACHE")
    assert cache.cache_dir() == cache.PACKAGE_DIR.parent / ".cache" / "attn-book"


def test_hit_returns_stored_value_without_recomputing(cache_env):
    first = cache.cached(compute, a=1.0, b=2.0, arr=np.arange(3))
    second = cache.cached(compute, a=1.0, b=2.0, arr=np.arange(3))
    assert len(CALLS) == 1
    assert second["sum"] == first["sum"] == 3.0
    np.testing.assert_array_equal(second["arr"], [0, 2, 4])
    assert len([p for p in entries(cache_env) if p.suffix == ".pkl"]) == 1


def test_keyword_order_does_not_matter():
    cache.cached(compute, a=1.0, b=2.0)
    cache.cached(compute, b=2.0, a=1.0)
    assert len(CALLS) == 1


@pytest.mark.parametrize("changed", [
    {"a": 1.0, "b": 2.0 + 1e-12},
    {"a": 1.0, "b": 3.0},
    {"a": 1.0, "b": 2.0, "arr": np.arange(3)},
    {"a": 1.0, "b": 2.0, "arr": np.arange(3.0)},  # same values, other dtype
])
def test_miss_on_parameter_change(changed):
    cache.cached(compute, a=1.0, b=2.0)
    cache.cached(compute, **changed)
    assert len(CALLS) == 2


def test_miss_on_array_content_change():
    cache.cached(compute, a=1.0, arr=np.array([1.0, 2.0]))
    cache.cached(compute, a=1.0, arr=np.array([1.0, 2.5]))
    assert len(CALLS) == 2


def test_setting_keys():
    k1 = cache.key(compute, {"a": Setting(c=0.5, snr=1.0)})
    assert k1 == cache.key(compute, {"a": Setting(c=0.5, snr=1.0)})
    assert k1 != cache.key(compute, {"a": Setting(c=0.5, snr=1.5)})
    assert k1 != cache.key(compute, {"a": Setting(c=0.5, snr=1.0, f="cos")})


def test_unkeyable_arguments_are_refused():
    with pytest.raises(TypeError, match="callable"):
        cache.key(compute, {"a": lambda t: t})
    with pytest.raises(TypeError, match="object"):
        cache.key(compute, {"a": object()})


def test_miss_on_code_hash_change(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    (pkg / "theory").mkdir(parents=True)
    (pkg / "core.py").write_text("X = 1\n")
    (pkg / "theory" / "more.py").write_text("Y = 2\n")
    (pkg / "book").mkdir()
    (pkg / "book" / "style.py").write_text("COLOR = 'red'\n")
    monkeypatch.setattr(cache, "PACKAGE_DIR", pkg)
    h0 = cache.code_hash()

    cache.cached(compute, a=1.0)
    cache.cached(compute, a=1.0)
    assert len(CALLS) == 1

    (pkg / "book" / "style.py").write_text("COLOR = 'blue'\n")  # presentation only: same key
    assert cache.code_hash() == h0
    cache.cached(compute, a=1.0)
    assert len(CALLS) == 1

    (pkg / "theory" / "more.py").write_text("Y = 3\n")  # library code: new key
    assert cache.code_hash() != h0
    cache.cached(compute, a=1.0)
    assert len(CALLS) == 2


def test_code_hash_covers_the_real_package():
    h = cache.code_hash()
    assert len(h) == 64 and h == cache.code_hash()


def test_interrupted_write_leaves_no_partial_entry(cache_env, monkeypatch):
    real_dump = pickle.dump

    def failing_dump(obj, fh, protocol=None):
        fh.write(b"\x80\x05partial")  # some bytes reach the disk ...
        raise KeyboardInterrupt("interrupted while writing")  # ... then the run is killed

    monkeypatch.setattr(cache.pickle, "dump", failing_dump)
    with pytest.raises(KeyboardInterrupt):
        cache.cached(compute, a=1.0)
    assert entries(cache_env) == []  # neither a partial .pkl nor a leftover temporary file

    monkeypatch.setattr(cache.pickle, "dump", real_dump)
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert len(CALLS) == 2  # recomputed once after the interruption, then read back
    assert [p.suffix for p in entries(cache_env)] == [".pkl"]


def test_corrupt_entry_is_a_miss(cache_env):
    cache.cached(compute, a=1.0)
    (path,) = [p for p in entries(cache_env) if p.suffix == ".pkl"]
    path.write_bytes(b"not a pickle")
    assert cache.cached(compute, a=1.0)["sum"] == 2.0
    assert len(CALLS) == 2


def test_disabled_cache(cache_env, monkeypatch):
    monkeypatch.setenv("ATTN_BOOK_CACHE", "off")
    cache.cached(compute, a=1.0)
    cache.cached(compute, a=1.0)
    assert len(CALLS) == 2
    assert entries(cache_env) == []


def test_memoize_decorator():
    wrapped = cache.memoize(compute)
    assert wrapped(a=2.0)["sum"] == wrapped(a=2.0)["sum"] == 3.0
    assert len(CALLS) == 1
    assert wrapped.__name__ == "compute"


def test_clear(cache_env):
    cache.cached(compute, a=1.0)
    cache.cached(compute, a=2.0)
    assert cache.clear() == 2
    assert [p for p in entries(cache_env) if p.suffix == ".pkl"] == []


def test_simulation_result_round_trip(cache_env):
    kwargs = dict(setting=Setting(c=0.5, snr=1.0), gammas=np.array([1e-2, 1.0]), n=16, trials=2,
                  seed=3)
    fresh = cache.cached(simulate.errors, **kwargs)
    stored = cache.cached(simulate.errors, **kwargs)
    assert isinstance(stored, simulate.SimulationResult)
    assert (stored.n, stored.p) == (fresh.n, fresh.p) == (16, 8)
    np.testing.assert_array_equal(stored.attention.values, fresh.attention.values)
    np.testing.assert_array_equal(stored.ridge.mean, fresh.ridge.mean)
    direct = simulate.errors(**kwargs)
    np.testing.assert_array_equal(stored.ridge.values, direct.ridge.values)
    assert len([p for p in entries(cache_env) if p.suffix == ".pkl"]) == 1

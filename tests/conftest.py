"""Shared setup of the tests: matplotlib off-screen, and the result-cache fixtures of the figures.

``matplotlib.use("Agg")`` is set here, for every test module: this file is imported before any
of them, no test needs a window, and the notebooks run by ``tests/test_build_script.py`` are
separate processes that this does not reach.

The cache fixtures are *not* autouse: a function-scoped autouse fixture would override the
module-scoped caches that other modules set up themselves (``tests/test_atlas.py``), and
``tests/test_cache.py`` tests the cache folder's environment itself. A figure test module asks
for one with ``pytestmark = pytest.mark.usefixtures("book_cache")`` (or ``"book_cache_off"``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest


@pytest.fixture
def book_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A fresh result cache, ``$ATTN_BOOK_CACHE = tmp_path / "cache"``; closes the figures."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("ATTN_BOOK_CACHE", str(folder))
    yield folder
    plt.close("all")


@pytest.fixture(scope="module")
def gpt2_module_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One throw-away cache for a GPT-2 figure module (each layer summary is computed once), with
    the weights read from their default place; closes the figures."""
    from attn_lib.studies import gpt2

    folder = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ATTN_BOOK_CACHE", str(folder))
        mp.delenv(gpt2.ENV_VAR, raising=False)
        yield folder
    plt.close("all")


@pytest.fixture
def book_cache_off(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No result cache, ``$ATTN_BOOK_CACHE = off``; closes the figures."""
    monkeypatch.setenv("ATTN_BOOK_CACHE", "off")
    yield
    plt.close("all")

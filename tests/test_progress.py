"""Progress bars only on a terminal (attn_lib._progress): never under pytest or in a notebook."""

from __future__ import annotations

import io
import sys

from attn_lib import _progress


def test_bars_follow_the_terminal_by_default(monkeypatch):
    assert _progress.enabled(None) is False  # pytest captures stderr: not a terminal
    assert _progress.enabled(True) and not _progress.enabled(False)

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stderr", Terminal())
    assert _progress.enabled(None) is True
    assert list(_progress.bar(range(3), "test", progress=False)) == [0, 1, 2]

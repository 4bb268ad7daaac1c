"""Progress bars for the library's long calls: on a terminal only, after a delay.

A bar (``tqdm``) is shown only when ``progress`` is true, or, by default (``None``), when
standard error is a terminal: never in a notebook (its ``sys.stderr`` is not a terminal) or
under pytest (captured). It appears only after :data:`DELAY` seconds, so a short call prints
nothing.
"""

from __future__ import annotations

import sys
from typing import Iterable, Iterator, TypeVar

from tqdm import tqdm

__all__ = ["DELAY", "enabled", "bar"]

T = TypeVar("T")

#: Seconds a call runs before its bar appears.
DELAY = 3.0


def enabled(progress: bool | None) -> bool:
    """``progress``, or by default whether ``sys.stderr`` is a terminal."""
    if progress is None:
        isatty = getattr(sys.stderr, "isatty", None)
        return bool(isatty is not None and isatty())
    return bool(progress)


def bar(iterable: Iterable[T], desc: str, *, total: int | None = None,
        progress: bool | None = None) -> Iterator[T]:
    """``iterable`` wrapped in a tqdm bar named ``desc`` (shown per :func:`enabled`, after
    :data:`DELAY` seconds, removed when done)."""
    return iter(tqdm(iterable, desc=desc, total=total, disable=not enabled(progress),
                     delay=DELAY, leave=False))

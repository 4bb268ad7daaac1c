"""Disk cache for Monte Carlo results that take more than a few seconds.

A result is stored under a key made of

* the qualified name of the function (``module.qualname``),
* its keyword arguments in a canonical JSON form (floats exactly, by their hexadecimal form;
  arrays by dtype, shape and a hash of their bytes; dataclasses such as
  :class:`~attn_lib.model.setting.Setting` field by field; dictionaries with sorted keys),
* a hash of the ``attn_lib`` source files (:func:`code_hash`) and of the function's own source,

so re-running a chapter after a prose edit reads the stored result, while any change of a
parameter or of the library recomputes it. Entries are pickles (anything picklable works, e.g. a
:class:`~attn_lib.simulation.simulate.SimulationResult`) written atomically: the bytes go to a temporary file
in the same folder, which is then renamed over the final name with :func:`os.replace`, so an
interrupted run never leaves a partial entry under a valid name.

The cache folder is ``$ATTN_BOOK_CACHE`` if set, else ``<repository>/.cache/attn-book``; delete it
(or call :func:`clear`) to start afresh. Setting ``ATTN_BOOK_CACHE=off`` disables the cache.

Examples
--------
>>> from attn_lib import Setting, cache, simulate
>>> res = cache.cached(simulate.errors, setting=Setting(c=0.5, snr=1.0), gammas=[1e-2, 1.0],
...                    n=64, trials=2, seed=0)                      # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import inspect
import json
import math
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np

__all__ = ["cache_dir", "code_hash", "key", "cached", "memoize", "clear"]

T = TypeVar("T")

#: Package folder whose sources enter :func:`code_hash`.
PACKAGE_DIR = Path(__file__).resolve().parents[1]
#: Source files left out of :func:`code_hash`: presentation only, they cannot change a result.
EXCLUDED = frozenset({"book/style.py"})
_FORMAT = 1  # bump when the on-disk layout changes


def cache_dir() -> Path:
    """Folder of the cache: ``$ATTN_BOOK_CACHE`` or ``<repository>/.cache/attn-book``."""
    env = os.environ.get("ATTN_BOOK_CACHE")
    if env:
        return Path(env).expanduser()
    return PACKAGE_DIR.parent / ".cache" / "attn-book"


def _enabled() -> bool:
    return os.environ.get("ATTN_BOOK_CACHE", "").strip().lower() not in {"off", "0", "none"}


def code_hash(package_dir: str | os.PathLike[str] | None = None) -> str:
    """SHA-256 (hex) of the package's ``*.py`` files: relative paths and contents, sorted.

    ``style.py`` is left out (see :data:`EXCLUDED`), as are ``__pycache__`` folders.
    """
    root = Path(package_dir) if package_dir is not None else PACKAGE_DIR
    h = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if "__pycache__" in path.parts or rel in EXCLUDED:
            continue
        h.update(rel.encode())
        h.update(b"\0")
        h.update(path.read_bytes())
        h.update(b"\0")
    return h.hexdigest()


def _canonical(obj: Any) -> Any:
    """A JSON-serialisable, order-independent description of ``obj``.

    Raises
    ------
    TypeError
        For objects without a stable description (lambdas, arbitrary instances).
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        return {"float": x.hex() if math.isfinite(x) else repr(x)}
    if isinstance(obj, np.ndarray):
        arr = np.ascontiguousarray(obj)
        if arr.dtype == object:
            return {"object_array": [_canonical(v) for v in arr.ravel().tolist()],
                    "shape": list(arr.shape)}
        return {"ndarray": arr.dtype.str, "shape": list(arr.shape),
                "sha256": hashlib.sha256(arr.tobytes()).hexdigest()}
    if isinstance(obj, (list, tuple)):
        return {type(obj).__name__: [_canonical(v) for v in obj]}
    if isinstance(obj, dict):
        items = {}
        for k in obj:
            if not isinstance(k, str):
                raise TypeError(f"cache keys need str dictionary keys, got {k!r}")
            items[k] = _canonical(obj[k])
        return {"dict": dict(sorted(items.items()))}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        cls = type(obj)
        fields = {f.name: _canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
        return {"dataclass": f"{cls.__module__}.{cls.__qualname__}", "fields": fields}
    if callable(obj):
        name = getattr(obj, "__qualname__", "")
        module = getattr(obj, "__module__", None)
        if not name or "<lambda>" in name or "<locals>" in name or module is None:
            raise TypeError(f"cannot build a cache key for the callable {obj!r}: pass a registered "
                            "name or a module-level function")
        return {"callable": f"{module}.{name}"}
    raise TypeError(f"cannot build a cache key for an object of type {type(obj).__name__}")


def _func_id(func: Callable[..., Any]) -> str:
    func = inspect.unwrap(func)
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"


def _func_source_hash(func: Callable[..., Any]) -> str:
    """Hash of ``func``'s own source (covers functions defined outside ``attn_lib``)."""
    try:
        src = inspect.getsource(inspect.unwrap(func))
    except (OSError, TypeError):
        src = ""
    return hashlib.sha256(src.encode()).hexdigest()


def key(func: Callable[..., Any], kwargs: dict[str, Any], code: str | None = None) -> str:
    """Hex key of a call ``func(**kwargs)`` (see the module docstring for what enters it)."""
    payload = {
        "format": _FORMAT,
        "func": _func_id(func),
        "func_source": _func_source_hash(func),
        "kwargs": _canonical(dict(kwargs)),
        "code": code_hash() if code is None else code,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _path(func: Callable[..., Any], k: str) -> Path:
    folder = _func_id(func).replace("<", "_").replace(">", "_")
    return cache_dir() / folder / f"{k}.pkl"


def _load(path: Path) -> tuple[bool, Any]:
    try:
        with open(path, "rb") as fh:
            return True, pickle.load(fh)
    except FileNotFoundError:
        return False, None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError, TypeError):
        # An unreadable entry (e.g. written by an incompatible version) counts as a miss.
        return False, None


def _store(path: Path, value: Any) -> None:
    """Pickle ``value`` to ``path`` atomically (temporary file + :func:`os.replace`)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem[:16]}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            pickle.dump(value, fh, protocol=pickle.HIGHEST_PROTOCOL)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def cached(func: Callable[..., T], /, **kwargs: Any) -> T:
    """Return ``func(**kwargs)``, read from the disk cache when the same call was stored.

    Parameters
    ----------
    func : callable
        A module-level function (its ``module.qualname`` names the cache folder).
    **kwargs
        Keyword arguments only, so that the key does not depend on how they were passed.
        Values must be JSON-like (numbers, strings, lists, dicts), NumPy arrays or dataclasses
        of those (such as :class:`~attn_lib.model.setting.Setting`).

    Returns
    -------
    The (possibly cached) result.

    Raises
    ------
    TypeError
        If an argument has no stable description (e.g. a lambda).
    """
    if not _enabled():
        return func(**kwargs)
    path = _path(func, key(func, kwargs))
    hit, value = _load(path)
    if hit:
        return value
    value = func(**kwargs)
    _store(path, value)
    return value


def memoize(func: Callable[..., T]) -> Callable[..., T]:
    """Decorator form of :func:`cached`; the decorated function takes keyword arguments only."""

    @functools.wraps(func)
    def wrapper(**kwargs: Any) -> T:
        return cached(func, **kwargs)

    return wrapper


def clear() -> int:
    """Delete every cache entry; return how many files were removed."""
    root = cache_dir()
    count = 0
    if root.is_dir():
        for path in root.rglob("*.pkl"):
            path.unlink()
            count += 1
        for path in root.rglob("*.tmp"):
            path.unlink()
    return count

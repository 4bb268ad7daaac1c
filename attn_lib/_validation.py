"""Input validation shared by the public functions.

Every check raises immediately (before any heavy computation) with a message that names the
parameter and the allowed range, in the style of scikit-learn's ``check_scalar``: a value of the
wrong type is a :class:`TypeError`, a value of the right type outside its range a
:class:`ValueError`. Each check returns the value in its canonical form (``float``, ``int``,
a float array, ...), so callers write ``x = check_real(x, "x", low=0.0)``.

Scalars: :func:`check_real`, :func:`check_int`, :func:`check_bool`, :func:`check_choice`,
:func:`check_index`, :func:`check_seed`, :func:`check_tokens`, :func:`check_scheduler`.
Arrays: :func:`check_array`, :func:`check_square`, :func:`check_sizes`, :func:`check_gammas`,
:func:`check_gamma`.
Objects: :func:`check_callable`, :func:`check_setting`, :func:`check_settings`.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Iterable, Sequence, TypeAlias, TypeGuard, TypeVar, cast, overload

import numpy as np

if TYPE_CHECKING:
    from .model.setting import Attention, BaseSetting, Setting

# The setting types a caller accepts (``types=``), for the return type of check_setting(s).
_A = TypeVar("_A", bound="BaseSetting")
_B = TypeVar("_B", bound="BaseSetting")
_C = TypeVar("_C", bound="BaseSetting")
_D = TypeVar("_D", bound="BaseSetting")
_Kinds: TypeAlias = "tuple[type[Attention], ...] | None"  # the attention kinds accepted

#: The fewest tokens of a draw: the balanced labels need one token per class.
MIN_TOKENS = 2


# ----------------------------------------------------------------------------- scalars
def check_real(value: object, name: str, *, low: float | None = None,
               high: float | None = None, low_open: bool = False) -> float:
    """Return ``value`` as a finite float, checking ``low <(=) value <= high``.

    Parameters
    ----------
    value : object
        The candidate; booleans and non-real numbers raise ``TypeError``.
    name : str
        Parameter name used in the error message.
    low, high : float, optional
        Bounds of the allowed interval (``None``: unbounded).
    low_open : bool, default False
        Whether the lower bound is excluded.

    Raises
    ------
    TypeError
        If ``value`` is not a real number.
    ValueError
        If ``value`` is not finite or lies outside the interval.
    """
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    x = float(value)
    lo = "-inf" if low is None else f"{low:g}"
    hi = "inf" if high is None else f"{high:g}"
    interval = f"{'(' if low is None or low_open else '['}{lo}, {hi}{')' if high is None else ']'}"
    if not np.isfinite(x):
        raise ValueError(f"{name} must be finite and in {interval}, got {x!r}")
    if low is not None and (x < low or (low_open and x == low)):
        raise ValueError(f"{name} must be in {interval}, got {x!r}")
    if high is not None and x > high:
        raise ValueError(f"{name} must be in {interval}, got {x!r}")
    return x


def _is_int(value: object) -> TypeGuard[numbers.Integral | np.integer[Any]]:
    return not isinstance(value, bool) and isinstance(value, (numbers.Integral, np.integer))


def check_int(value: object, name: str, *, low: int = 1, high: int | None = None) -> int:
    """Return ``value`` as an int in ``low..high``; floats, even integral ones, are refused.

    The message reads ``"{name} must be an integer >= {low}"``, or
    ``"{name} must be an integer in {low}..{high}"`` when ``high`` is given.
    """
    allowed = f">= {low}" if high is None else f"in {low}..{high}"
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer {allowed}, got {type(value).__name__}")
    v = int(value)
    if v < low or (high is not None and v > high):
        raise ValueError(f"{name} must be an integer {allowed}, got {v}")
    return v


def check_tokens(n: object, name: str = "n") -> int:
    """Number of tokens of a draw: an integer ``>= 2`` (:data:`MIN_TOKENS`).

    The labels are balanced (``ceil(n/2)`` tokens of class ``+1``, the rest ``-1``), so one token
    per class needs ``n >= 2``; with one token the interpolation error is ``1`` trivially.
    """
    if not _is_int(n) or int(n) < MIN_TOKENS:
        kind = TypeError if not _is_int(n) else ValueError
        got = int(n) if _is_int(n) else type(n).__name__
        raise kind(f"{name} must be an integer >= {MIN_TOKENS} (at least one token per class), "
                   f"got {got}")
    return int(n)


def check_seed(seed: object, name: str = "seed") -> int:
    """Return a non-negative integer seed for :class:`numpy.random.SeedSequence`."""
    return check_int(seed, name, low=0)


def check_bool(value: object, name: str) -> bool:
    """``value`` if it is a ``bool`` (integers such as ``1`` are refused)."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be bool, got {type(value).__name__}")
    return bool(value)


def check_choice(value: object, name: str, choices: Sequence[Any]) -> Any:
    """``value`` if it is one of ``choices`` (compared with ``==``)."""
    if isinstance(value, np.ndarray) or not any(value == c for c in choices):
        raise ValueError(f"{name} must be one of {tuple(choices)}, got {value!r}")
    return value


def check_index(value: object, name: str, size: int, *, negative: bool = False) -> int:
    """An integer index into ``size`` items: ``0..size-1``, or ``-size..size-1`` if ``negative``."""
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer index, got {type(value).__name__}")
    v = int(value)
    if negative and not -size <= v < size:
        raise ValueError(f"{name} must be in [-{size}, {size - 1}], got {v}")
    if not negative and v < 0:
        raise ValueError(f"{name} must be an index in [0, {size - 1}], got {v}")
    if v >= size:
        raise ValueError(f"{name} must be an index < {size}, got {v}")
    return v


#: Schemes of a ``dask.distributed`` scheduler address accepted by :func:`check_scheduler`.
SCHEDULER_SCHEMES = ("tcp", "tls", "ucx", "ws", "wss", "inproc")


def check_scheduler(value: object, name: str = "scheduler") -> tuple[str, int | str | None]:
    """The mode ``value`` names: ``("serial", None)``, ``("local", N)`` or ``("address", a)``.

    ``"serial"`` runs in-process; ``"local"`` a ``LocalCluster`` with one worker per core
    (``N = None``) and ``"local:N"`` with ``N >= 1`` workers; ``"tcp://host:port"`` (or another
    scheme of :data:`SCHEDULER_SCHEMES`) the scheduler of a running cluster.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {type(value).__name__}")
    text = value.strip()
    allowed = (f"'serial', 'local', 'local:N' (N >= 1 workers) or a scheduler address "
               f"'<scheme>://host:port' ({', '.join(SCHEDULER_SCHEMES)})")
    if text == "serial":
        return "serial", None
    if text == "local":
        return "local", None
    if text.startswith("local:"):
        workers = text[len("local:"):]
        if workers.isdigit() and int(workers) >= 1:
            return "local", int(workers)
    scheme, sep, rest = text.partition("://")
    if sep and scheme in SCHEDULER_SCHEMES and rest and not any(c.isspace() for c in rest):
        return "address", text
    raise ValueError(f"{name} must be {allowed}, got {value!r}")


# ----------------------------------------------------------------------------- arrays
def _float_array(values: object, name: str, what: str) -> np.ndarray:
    """``values`` as a float array; strings and non-numeric arrays are a ``TypeError``."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be {what}, got {type(values).__name__} {values!r}")
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as exc:  # ragged nesting
        raise TypeError(f"{name} must be {what}") from exc
    if arr.dtype.kind not in "iuf":  # bool, complex, strings, objects
        raise TypeError(f"{name} must be {what}, got an array of dtype {arr.dtype}")
    return arr.astype(float, copy=False)


def check_array(values: object, name: str, *, ndim: int = 1, min_size: int = 1,
                finite: bool = True, increasing: bool = False, what: str = "values"
                ) -> np.ndarray:
    """``values`` as a float array of ``ndim`` dimensions and at least ``min_size`` entries.

    Parameters
    ----------
    values : array_like
        Real numbers (strings, booleans and non-numeric arrays raise ``TypeError``).
    name : str
        Parameter name used in the error message.
    ndim : int, default 1
        Number of dimensions, ``>= 1``.
    min_size : int, default 1
        Fewest entries (along the first axis).
    finite : bool, default True
        Refuse NaN and infinite entries.
    increasing : bool, default False
        Require a strictly increasing 1-D array.
    what : str, default "values"
        What the entries are, for the message (``"draws"``, ...).
    """
    arr = _float_array(values, name, f"a {ndim}-D array of real numbers")
    if arr.ndim != ndim or arr.shape[0] < min_size:
        size = (f" of at least {min_size} {what}" if min_size > 1
                else " (non-empty)" if min_size == 1 else "")
        raise ValueError(f"{name} must be a {ndim}-D array{size}, got shape {arr.shape}")
    if finite and not np.all(np.isfinite(arr)):
        raise ValueError(f"{name} must be finite")
    if increasing and np.any(np.diff(arr) <= 0):
        raise ValueError(f"{name} must be strictly increasing")
    return arr


def check_square(A: object, name: str = "A") -> np.ndarray:
    """``A`` as a finite, non-empty square float matrix of shape ``(p, p)``."""
    A = _float_array(A, name, "a square matrix of real numbers")
    if A.ndim != 2 or A.shape[0] != A.shape[1] or A.shape[0] == 0:
        raise ValueError(f"{name} must be a non-empty square matrix, got shape {A.shape}")
    if not np.all(np.isfinite(A)):
        raise ValueError(f"{name} must be finite")
    return A


def check_sizes(values: object, name: str = "n", *, min_size: int = 2) -> np.ndarray:
    """A ladder of sizes: a list, tuple or array of at least ``min_size`` strictly increasing
    integers ``>= 1``, as an int array."""
    if not isinstance(values, (list, tuple, np.ndarray)):
        raise TypeError(f"{name} must be a sequence of integers, got {type(values).__name__}")
    ns = np.array([check_int(k, name) for k in values], dtype=int)
    if ns.size < min_size or np.any(np.diff(ns) <= 0):
        raise ValueError(f"{name} must hold at least {'two' if min_size == 2 else min_size} "
                         f"strictly increasing sizes, got {ns.tolist()}")
    return ns


def check_gammas(gammas: object, name: str = "gammas") -> np.ndarray:
    """Return ``gammas`` as a float array of shape ``()`` or ``(G,)`` with finite positive entries.

    Raises
    ------
    TypeError
        For a string (even ``"0.1"``), booleans or an array that is not numeric.
    ValueError
        For an empty or 2-D array, or entries that are not finite and positive.
    """
    g = _float_array(gammas, name, "a positive float or a 1-D array of them")
    if g.ndim > 1:
        raise ValueError(f"{name} must be a scalar or a 1-D array, got shape {g.shape}")
    if g.size == 0:
        raise ValueError(f"{name} must not be empty")
    if not np.all(np.isfinite(g)):
        raise ValueError(f"{name} must be finite and in (0, inf)")
    if np.any(g <= 0):
        raise ValueError(f"{name} must be in (0, inf), got minimum {g.min()!r}")
    return g


def check_gamma(gamma: object, name: str = "gamma") -> float:
    """A single ridge parameter ``gamma > 0`` (:func:`check_gammas` of shape ``()``)."""
    g = check_gammas(gamma, name)
    if g.ndim != 0:
        raise ValueError(f"{name} must be a single positive number, got shape {g.shape}")
    return float(g)


# ----------------------------------------------------------------------------- objects
def check_callable(value: object, name: str, signature: str) -> Any:
    """``value`` if it is callable; ``signature`` (e.g. ``"(x, y) -> Setting"``) is shown."""
    if not callable(value):
        raise TypeError(f"{name} must be a callable {signature}, got {type(value).__name__}")
    return value


@overload
def check_setting(setting: object, name: str = ..., *, types: None = None,
                  attention: _Kinds = None) -> Setting: ...
@overload
def check_setting(setting: object, name: str = ..., *, types: tuple[type[_A]],
                  attention: _Kinds = None) -> _A: ...
@overload
def check_setting(setting: object, name: str = ..., *, types: tuple[type[_A], type[_B]],
                  attention: _Kinds = None) -> _A | _B: ...
@overload
def check_setting(setting: object, name: str = ..., *,
                  types: tuple[type[_A], type[_B], type[_C]],
                  attention: _Kinds = None) -> _A | _B | _C: ...
@overload
def check_setting(setting: object, name: str = ..., *,
                  types: tuple[type[_A], type[_B], type[_C], type[_D]],
                  attention: _Kinds = None) -> _A | _B | _C | _D: ...
def check_setting(setting: object, name: str = "setting", *,
                  types: tuple[type[BaseSetting], ...] | None = None,
                  attention: tuple[type[Attention], ...] | None = None) -> BaseSetting:
    """``setting`` if it is a setting type and attention kind the caller supports.

    Parameters
    ----------
    setting : object
    name : str, default "setting"
    types : tuple of type, optional
        Accepted setting types (default: :class:`~attn_lib.model.setting.Setting`, the rank-one
        weights ``alpha I + w_K w_Q^T``). A function that supports a later type, such as a
        general key-query matrix, lists it here.
    attention : tuple of type, optional
        Accepted attention kinds (default: :class:`~attn_lib.model.setting.Entrywise`). A
        function that supports a later kind, such as softmax attention, lists it here.

    Raises
    ------
    TypeError
        A wrong type (``ValueError`` for an attention kind the function does not support).
    """
    from .model.setting import Entrywise, Setting  # the model layer imports this module

    types = (Setting,) if types is None else types
    attention = (Entrywise,) if attention is None else attention
    if not isinstance(setting, types):
        names = " or ".join(f"attn_lib.{t.__name__}" for t in types)
        raise TypeError(f"{name} must be an {names}, got {type(setting).__name__}")
    if not isinstance(setting.attention, attention):
        kinds = ", ".join(t.__name__ for t in attention)
        raise ValueError(f"{name}.attention must be one of ({kinds}) here, got "
                         f"{setting.attention!r}")
    return setting


@overload
def check_settings(settings: object, name: str = ..., *, types: None = None,
                   attention: _Kinds = None) -> list[Setting]: ...
@overload
def check_settings(settings: object, name: str = ..., *,
                   types: tuple[type[_A], type[_B], type[_C], type[_D]],
                   attention: _Kinds = None) -> list[_A | _B | _C | _D]: ...
def check_settings(settings: object, name: str = "settings", **kinds: Any) -> list[Any]:
    """``settings`` (one setting or a non-empty sequence of them) as a list.

    Each entry goes through :func:`check_setting` (``kinds``: its ``types`` and ``attention``).
    """
    from .model.setting import BaseSetting

    try:
        out = ([settings] if isinstance(settings, BaseSetting)
               else list(cast("Iterable[object]", settings)))
    except TypeError as exc:
        raise TypeError(f"{name} must be a setting or a sequence of settings, got "
                        f"{type(settings).__name__}") from exc
    if not out:
        raise ValueError(f"{name} must not be empty")
    return [check_setting(s, name, **kinds) for s in out]

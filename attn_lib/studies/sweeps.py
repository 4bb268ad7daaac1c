"""Parameter sweeps: families of nonlinearities, theory and Monte Carlo over many settings.

The book's chapters compare the deterministic equivalents with simulation along one-parameter
families of :class:`~attn_lib.model.setting.Setting` (an SNR sweep, an alignment sweep, ...). This
module holds the pieces those sweeps share:

* :class:`Normalised` -- a registered nonlinearity rescaled to a prescribed variance ``nu``, so
  that different ``f`` are compared at the same output scale;
* :class:`Mixture` -- ``f_theta(t) = cos(theta) t + sin(theta) h(t)``, which moves the linear
  Hermite coefficient ``a1 = cos(theta)`` to 0 at fixed ``nu = 1``;
* :func:`equivalents` -- the attention or ridge deterministic equivalent of many settings, ``(B, G)``;
* :func:`simulations` -- :func:`attn_lib.simulation.simulate.errors` for many settings through the disk
  cache (:mod:`attn_lib.book.cache`), collected in a :class:`SweepResult` that also gives the paired
  difference attention minus ridge of each draw.

Both nonlinearity families are frozen dataclasses: they are hashable (the Hermite coefficients
of a setting are cached) and have a stable description, so settings that use them can be keys
of the disk cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..book import cache
from ..model import hermite
from ..simulation import simulate
from ..simulation.trials import Stats
from .._validation import check_gammas, check_int, check_real, check_seed
from ..model.setting import Setting

__all__ = ["Normalised", "Mixture", "equivalents", "simulations", "SweepResult", "MODELS",
           "check_settings", "check_model"]

#: The models a sweep can compute.
MODELS = ("attention", "ridge")


@dataclass(frozen=True)
class Normalised:
    """A registered nonlinearity rescaled to variance ``nu``: ``t -> sqrt(nu / nu_f) f(t)``.

    Parameters
    ----------
    base : str
        Name in :data:`attn_lib.model.hermite.REGISTRY` (``"tanh"``, ``"cos"``, ...).
    nu : float, default 1.0
        Target variance ``Var f(xi) > 0`` for ``xi ~ N(0, 1)``.

    Notes
    -----
    Rescaling the output multiplies every Hermite coefficient by the same factor, so the ratio
    ``a1^2 / nu`` (the share of the variance carried by the linear part) is unchanged.

    Examples
    --------
    >>> from attn_lib import hermite
    >>> round(hermite.coefficients(Normalised("tanh")).nu, 10)
    1.0
    """

    base: str
    nu: float = 1.0

    def __post_init__(self) -> None:
        hermite.check_registered(self.base, "base")
        object.__setattr__(self, "nu", check_real(self.nu, "nu", low=0.0, low_open=True))
        if hermite.coefficients(self.base).nu <= 0.0:
            raise ValueError(f"base {self.base!r} is constant under N(0, 1); it cannot be normalised")

    @property
    def scale(self) -> float:
        """Output factor ``sqrt(nu / nu_f)``."""
        return float(np.sqrt(self.nu / hermite.coefficients(self.base).nu))

    @property
    def breaks(self) -> tuple[float, ...]:
        """Kinks and jumps of the base function (used by the Hermite quadrature)."""
        return hermite.REGISTRY[self.base][1]

    def __call__(self, t: np.ndarray) -> np.ndarray:
        func = hermite.REGISTRY[self.base][0]
        return self.scale * np.asarray(func(np.asarray(t, dtype=float)), dtype=float)


@dataclass(frozen=True)
class Mixture:
    r"""``f_theta(t) = cos(theta) t + sin(theta) h(t)`` with ``a1 = cos(theta)`` and ``nu = 1``.

    ``h`` is the non-linear part of a registered function ``g``, normalised:
    ``h(t) = (g(t) - a0 - a1 t) / sqrt(nu - a1^2)`` with the Hermite data of ``g``. Then ``h`` is
    centred, uncorrelated with ``t`` (no He1 component) and has unit variance, so for every
    ``theta`` the mixture is centred with ``a1 = cos(theta)``, ``nu = 1`` and
    ``b2 = nu - a1^2 = sin(theta)^2``. ``theta = 0`` is the linear function and
    ``theta = pi/2`` is ``h`` alone (``a1 = 0``).

    Parameters
    ----------
    theta : float
        Mixing angle in ``[0, pi/2]``.
    h : str, default "cos"
        Registered function whose non-linear part is mixed in; for ``"cos"``, ``a1 = 0``
        already and ``h`` is the centred cosine normalised to unit variance.

    Examples
    --------
    >>> from attn_lib import hermite
    >>> c = hermite.coefficients(Mixture(np.pi / 3))
    >>> round(c.a1, 10), round(c.nu, 10)
    (0.5, 1.0)
    """

    theta: float
    h: str = "cos"

    def __post_init__(self) -> None:
        object.__setattr__(self, "theta",
                           check_real(self.theta, "theta", low=0.0, high=float(np.pi / 2)))
        hermite.check_registered(self.h, "h")
        if hermite.coefficients(self.h).b2 <= 1e-12:
            raise ValueError(f"h={self.h!r} is linear under N(0, 1): it has no non-linear part")

    @property
    def a1(self) -> float:
        """Linear Hermite coefficient ``cos(theta)``."""
        return float(np.cos(self.theta))

    @property
    def breaks(self) -> tuple[float, ...]:
        """Kinks and jumps of ``h`` (used by the Hermite quadrature)."""
        return hermite.REGISTRY[self.h][1]

    def __call__(self, t: np.ndarray) -> np.ndarray:
        t = np.asarray(t, dtype=float)
        g = hermite.coefficients(self.h)
        func = hermite.REGISTRY[self.h][0]
        h = (np.asarray(func(t), dtype=float) - g.a0 - g.a1 * t) / np.sqrt(g.b2)
        return np.cos(self.theta) * t + np.sin(self.theta) * h


def check_settings(settings: object) -> list[Setting]:
    """``settings`` (one :class:`Setting` or a non-empty sequence of them) as a list."""
    out = list(settings) if not isinstance(settings, Setting) else [settings]
    if not out:
        raise ValueError("settings must not be empty")
    for s in out:
        if not isinstance(s, Setting):
            raise TypeError(f"settings must be attn_lib.Setting instances, got {type(s).__name__}")
    return out


def check_model(model: object) -> str:
    """``model`` if it is one of :data:`MODELS`."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    return str(model)


def equivalents(settings: Sequence[Setting], gammas: object, model: str = "attention") -> np.ndarray:
    """Deterministic equivalent of the interpolation error for many settings.

    Parameters
    ----------
    settings : sequence of Setting, length B
    gammas : float or array_like of shape (G,)
        Positive ridge parameters, shared by all settings.
    model : {"attention", "ridge"}, default "attention"
        :func:`attn_lib.theory.attention.attention_error_batch` (vectorised across settings)
        or :func:`attn_lib.theory.ridge_error`.

    Returns
    -------
    ndarray of shape ``(B, G)`` (``(B,)`` for a scalar ``gammas``).
    """
    settings = check_settings(settings)
    model = check_model(model)
    g = check_gammas(gammas)
    g1 = np.atleast_1d(g)
    if model == "ridge":
        from ..theory import ridge_error
        out = np.array([ridge_error(s, g1) for s in settings])
    else:
        from ..theory.attention import attention_error_batch
        grid = np.broadcast_to(g1, (len(settings), g1.size)).copy()
        out = np.asarray(attention_error_batch(settings, grid), dtype=float)
    return out[:, 0] if g.ndim == 0 else out


@dataclass(frozen=True)
class SweepResult:
    """Monte Carlo errors of a sweep of ``B`` settings, ``T`` trials and ``G`` values of gamma.

    The per-setting :class:`~attn_lib.simulation.simulate.SimulationResult` curves stacked along a
    first axis; the summaries are those of :class:`~attn_lib.simulation.trials.Stats` over axis 1.

    Attributes
    ----------
    attention, ridge : ndarray of shape (B, T, G)
        Error of each draw; ``attention`` is ``None`` for a ridge-only sweep. Trial ``t`` of every
        setting uses the same seed, so neighbouring settings share their random numbers.
    n, p : ndarray of shape (B,)
        Tokens and dimension of each setting.
    gammas : ndarray of shape (G,)
    """

    attention: np.ndarray | None
    ridge: np.ndarray
    n: np.ndarray
    p: np.ndarray
    gammas: np.ndarray

    def values(self, model: str) -> np.ndarray:
        """Per-draw values ``(B, T, G)`` of ``"attention"``, ``"ridge"``, ``"gap"`` or ``"ratio"``.

        ``gap`` is attention minus ridge and ``ratio`` attention over ridge, both paired: the two
        models see the same tokens in each draw, so their difference fluctuates far less than
        either error.
        """
        if model == "ridge":
            return self.ridge
        if model not in ("attention", "gap", "ratio"):
            raise ValueError(f"model must be 'attention', 'ridge', 'gap' or 'ratio', got {model!r}")
        if self.attention is None:
            raise ValueError("this sweep was run without attention")
        if model == "attention":
            return self.attention
        if model == "gap":
            return self.attention - self.ridge
        return self.attention / self.ridge

    def stats(self, model: str) -> Stats:
        """:class:`~attn_lib.simulation.trials.Stats` over the trials (axis 1) of :meth:`values`."""
        return Stats(self.values(model), axis=1)

    def mean(self, model: str) -> np.ndarray:
        """Mean over trials, shape ``(B, G)``."""
        return self.stats(model).mean

    def std(self, model: str) -> np.ndarray:
        """Standard deviation over trials (``ddof=0``), shape ``(B, G)``."""
        return self.stats(model).std

    def sem(self, model: str) -> np.ndarray:
        """Standard error of the mean over trials (``ddof=1``; zeros for one trial), ``(B, G)``."""
        return self.stats(model).sem


def simulations(settings: Sequence[Setting], gammas: object, n: int | Sequence[int],
                trials: int, seed: int = 0, attention: bool = True,
                use_cache: bool = True) -> SweepResult:
    """Simulate every setting of a sweep (:func:`attn_lib.simulation.simulate.errors`), cached on disk.

    Parameters
    ----------
    settings : sequence of Setting, length B
    gammas : float or array_like of shape (G,)
        Positive ridge parameters (one eigendecomposition per draw gives all of them).
    n : int or sequence of int of length B
        Number of tokens, shared or one per setting (``p = round(c n)``).
    trials : int
        Independent draws per setting.
    seed : int, default 0
        Root seed, the same for every setting (common random numbers along the sweep).
    attention : bool, default True
        ``False`` simulates ridge regression only.
    use_cache : bool, default True
        Read and write each setting's result through :func:`attn_lib.book.cache.cached`.

    Returns
    -------
    SweepResult
    """
    settings = check_settings(settings)
    g = np.atleast_1d(check_gammas(gammas))
    ns = [n] * len(settings) if isinstance(n, (int, np.integer)) and not isinstance(n, bool) else list(n)
    if len(ns) != len(settings):
        raise ValueError(f"n must be an int or have one entry per setting ({len(settings)}), "
                         f"got {len(ns)}")
    ns = [check_int(v, "n") for v in ns]
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    if not isinstance(attention, bool) or not isinstance(use_cache, bool):
        raise TypeError("attention and use_cache must be bool")
    run = cache.memoize(simulate.errors) if use_cache else simulate.errors
    results = [run(setting=s, gammas=g, n=k, trials=trials, seed=seed, attention=attention)
               for s, k in zip(settings, ns)]
    att = np.stack([r.attention.values for r in results]) if attention else None
    ridge = np.stack([r.ridge.values for r in results])
    return SweepResult(attention=att, ridge=ridge, n=np.array([r.n for r in results]),
                       p=np.array([r.p for r in results]), gammas=g)

r"""Phase diagrams: where nonlinear attention beats linear regression.

A phase diagram is the gap ``E_att(gamma) - E_ridge(gamma)`` of the two deterministic equivalents
over a grid of two parameters of a :class:`~attn_lib.model.setting.Setting` (for example the SNR and the
angle between the attention weights and ``mu``). Negative cells are where attention wins. This
module

* computes such a map (:func:`phase_map`), vectorised through
  :func:`attn_lib.theory.attention.attention_error_batch` (the batched attention solver for all
  cells at once; the ridge error, which depends on ``c`` and ``snr`` only, once per distinct
  pair), under the book's scale convention: attention at the same ``gamma / tau`` as ridge's
  ``gamma`` (:func:`attn_lib.studies.sweeps.matched_gamma`), or at the raw ``gamma`` for
  comparison;
* reads it (:class:`PhaseMap`: fraction of cells where attention wins, the zero crossings along
  a row or column, the coherent shift ``delta(n)`` of every cell);
* checks a few of its cells by Monte Carlo (:func:`spot_checks`, through the disk cache of
  :func:`attn_lib.studies.sweeps.simulations`), with the paired difference of each draw.

The alignment geometry used by the book is :func:`symmetric_weights`: ``w_K = w_Q = w`` at angle
``theta`` to ``mu``. Then ``(mu^T w_K)(mu^T w_Q) = snr ||w||^2 cos^2(theta) >= 0`` and ``theta``,
``pi - theta`` give the same model (``w w^T`` is unchanged by ``w -> -w``), so ``[0, pi/2]``
covers every case.

A solver failure is never turned into a missing cell: a
:class:`~attn_lib.theory.ConvergenceError` of any cell propagates out of :func:`phase_map`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ..simulation.trials import standard_error
from . import sweeps
from .._validation import (check_array, check_callable, check_choice, check_gamma, check_index,
                           check_int, check_real, check_seed)
from ..model.nonlinearity import NonlinearityLike
from ..model.setting import Setting

__all__ = ["symmetric_weights", "PhaseMap", "phase_map", "SpotChecks", "spot_checks", "SCALES"]

MakeSetting = Callable[[float, float], Setting]

#: How attention's ridge parameter is set from ridge's ``gamma``: ``"matched"``, the book's
#: convention (the same ``gamma / tau``, :func:`attn_lib.studies.sweeps.matched_gamma`), or
#: ``"raw"`` (the same ``gamma``).
SCALES = ("matched", "raw")


def _attention_gammas(settings: Sequence[Setting], gamma: float, scale: str) -> np.ndarray:
    """Attention's ridge parameter of each setting under ``scale``, shape ``(B,)``."""
    if scale == "raw":
        return np.full(len(settings), gamma)
    return np.array([sweeps.matched_gamma(s, gamma) for s in settings])


def symmetric_weights(c: float, snr: float, norm: float, theta: float,
                      f: NonlinearityLike = "tanh") -> Setting:
    """The setting with ``w_K = w_Q = w``, ``||w|| = norm``, at angle ``theta`` to ``mu``.

    ``W_K^T W_Q = I + w w^T`` and ``(mu^T w_K)(mu^T w_Q) = snr norm^2 cos^2(theta)``.

    Parameters
    ----------
    c, snr : float
        Aspect ratio ``p/n > 0`` and ``||mu||^2 >= 0``.
    norm : float
        ``||w|| >= 0``.
    theta : float
        Angle between ``w`` and ``mu`` in ``[0, pi]``; ``theta`` and ``pi - theta`` give the same
        model.
    f : str or callable, default "tanh"
        Nonlinearity (see :class:`~attn_lib.model.setting.Setting`).

    Returns
    -------
    Setting
    """
    theta = check_real(theta, "theta", low=0.0, high=float(np.pi))
    cos = float(np.clip(np.cos(theta), -1.0, 1.0))
    return Setting(c=c, snr=snr, f=f, wk_norm=norm, wq_norm=norm, cos_mu_wk=cos, cos_mu_wq=cos,
                   cos_wk_wq=1.0)


def _build(make: MakeSetting, xs: Iterable[float], ys: Iterable[float]) -> list[Setting]:
    out = []
    for x, y in zip(xs, ys):
        s = make(float(x), float(y))
        if not isinstance(s, Setting):
            raise TypeError(f"make(x, y) must return an attn_lib.Setting, got {type(s).__name__} "
                            f"at x={x!r}, y={y!r}")
        out.append(s)
    return out


@dataclass(frozen=True)
class PhaseMap:
    """Both deterministic equivalents on a grid ``y x x`` of settings.

    Attributes
    ----------
    x : ndarray of shape (X,)
        Increasing values of the horizontal parameter.
    y : ndarray of shape (Y,)
        Increasing values of the vertical parameter.
    gamma : float
        Ridge regression's ridge parameter, shared by every cell.
    settings : tuple of Setting, length ``Y * X``
        Row-major: cell ``(i, j)`` (``y[i]``, ``x[j]``) is ``settings[i * X + j]``.
    attention, ridge : ndarray of shape (Y, X)
        ``E_att(gamma_att)`` and ``E_ridge(gamma)`` of each cell.
    seconds : float
        Wall-clock time :func:`phase_map` took (settings, both solvers).
    gamma_attention : ndarray of shape (Y, X) or None
        Attention's ridge parameter ``gamma_att`` of each cell (``gamma tau_att / tau_ridge``
        under the ``"matched"`` scale, ``gamma`` under ``"raw"``); ``None`` means ``gamma``.
    scale : {"matched", "raw"}, default "matched"
        The convention that set ``gamma_attention`` (:data:`SCALES`).
    """

    x: np.ndarray
    y: np.ndarray
    gamma: float
    settings: tuple[Setting, ...]
    attention: np.ndarray
    ridge: np.ndarray
    seconds: float
    gamma_attention: np.ndarray | None = None
    scale: str = "matched"

    @property
    def gap(self) -> np.ndarray:
        """``E_att - E_ridge``, shape ``(Y, X)``; negative where attention wins."""
        return self.attention - self.ridge

    def win_fraction(self) -> float:
        """Fraction of the cells where attention wins (``gap < 0``), in ``[0, 1]``."""
        return float(np.mean(self.gap < 0))

    def crossings(self, index: int, axis: str = "x") -> np.ndarray:
        """Where the gap changes sign along one line of the grid.

        Parameters
        ----------
        index : int
            Row ``i`` (fixed ``y[i]``) for ``axis="x"``, column ``j`` (fixed ``x[j]``) for
            ``axis="y"``; negative indices count from the end.
        axis : {"x", "y"}, default "x"
            The parameter that varies along the line.

        Returns
        -------
        ndarray of shape (K,)
            Increasing positions on that axis where the gap is zero, by linear interpolation
            between neighbouring cells of opposite sign (empty when the sign never changes).
        """
        check_choice(axis, "axis", ("x", "y"))
        line, pos = (self.gap, self.x) if axis == "x" else (self.gap.T, self.y)
        index = check_index(index, "index", line.shape[0], negative=True)
        g = line[index]
        k = np.flatnonzero(np.sign(g[:-1]) * np.sign(g[1:]) < 0)
        zeros = pos[g == 0]
        t = g[k] / (g[k] - g[k + 1])
        return np.sort(np.concatenate([pos[k] + t * (pos[k + 1] - pos[k]), zeros]))

    def delta(self, n: int) -> np.ndarray:
        """Coherent shift ``delta`` (:meth:`attn_lib.Setting.delta`) of each cell at ``n`` tokens, ``(Y, X)``."""
        n = check_int(n, "n")
        return np.array([s.delta(n) for s in self.settings]).reshape(self.attention.shape)


def phase_map(make: MakeSetting, x: object, y: object, gamma: object,
              scale: str = "matched") -> PhaseMap:
    """Attention and ridge deterministic equivalents on the grid ``make(x[j], y[i])``.

    Parameters
    ----------
    make : callable ``(x, y) -> Setting``
        The setting of one cell, e.g.
        ``lambda snr, theta: symmetric_weights(0.5, snr, 2.0, theta)``.
    x : array_like of shape (X,)
        Increasing, finite, at least two values.
    y : array_like of shape (Y,)
        Increasing, finite, at least two values.
    gamma : float
        Ridge regression's ridge parameter ``> 0``.
    scale : {"matched", "raw"}, default "matched"
        Attention's ridge parameter in each cell: ``gamma_att = gamma tau_att / tau_ridge``
        (the same ``gamma / tau``, with ``tau = tr(Phi^T Phi / n) / n`` the mean feature
        eigenvalue of :func:`attn_lib.studies.sweeps.feature_scale`: the book's convention) or
        ``gamma_att = gamma`` (``"raw"``).

    Returns
    -------
    PhaseMap
        Maps of shape ``(Y, X)``.

    Raises
    ------
    attn_lib.theory.ConvergenceError
        If the attention fixed point of any cell cannot be solved (no cell becomes NaN).

    Notes
    -----
    All ``Y * X`` attention errors come from one call of the batched solver
    (:func:`attn_lib.theory.attention.attention_error_batch`, one ``gamma_att`` per cell).
    The ridge error depends on ``c`` and ``snr`` only, so it is computed once per distinct
    pair (a 100 x 100 map over SNR and angle needs 100 ridge evaluations).
    """
    make = check_callable(make, "make", "(x, y) -> Setting")
    xa = check_array(x, "x", min_size=2, increasing=True)
    ya = check_array(y, "y", min_size=2, increasing=True)
    g = check_gamma(gamma)
    scale = check_choice(scale, "scale", SCALES)
    from ..theory.attention import attention_error_batch

    t0 = time.perf_counter()
    xx, yy = np.meshgrid(xa, ya)
    settings = _build(make, xx.ravel(), yy.ravel())
    g_att = _attention_gammas(settings, g, scale)
    att = np.asarray(attention_error_batch(settings, g_att), dtype=float)
    pairs = [(s.c, s.snr) for s in settings]
    unique = sorted(set(pairs))
    ridge_unique = sweeps.equivalents([Setting(c=c, snr=snr) for c, snr in unique], g, model="ridge")
    lookup = dict(zip(unique, ridge_unique))
    ridge = np.array([lookup[p] for p in pairs])
    seconds = time.perf_counter() - t0
    shape = (ya.size, xa.size)
    return PhaseMap(x=xa, y=ya, gamma=g, settings=tuple(settings), attention=att.reshape(shape),
                    ridge=ridge.reshape(shape), seconds=seconds,
                    gamma_attention=g_att.reshape(shape), scale=scale)


@dataclass(frozen=True)
class SpotChecks:
    """Monte Carlo gaps at ``S`` cells of a phase map, next to the deterministic equivalent.

    Attributes
    ----------
    x, y : ndarray of shape (S,)
        Coordinates of the cells.
    gamma : float
        Ridge regression's ridge parameter.
    n : int
        Tokens of every draw.
    p : ndarray of shape (S,)
        Dimension ``round(c n)`` of each cell.
    attention_draws, ridge_draws : ndarray of shape (S, T)
        The two errors of each draw (both models see the same tokens; :attr:`gap_draws` is
        their paired difference).
    gap_theory : ndarray of shape (S,)
        ``E_att - E_ridge`` of the deterministic equivalents.
    delta : ndarray of shape (S,)
        Coherent shift :meth:`attn_lib.Setting.delta` at ``n``.
    gamma_attention : ndarray of shape (S,)
        Attention's ridge parameter at each cell (as :attr:`PhaseMap.gamma_attention`).
    """

    x: np.ndarray
    y: np.ndarray
    gamma: float
    n: int
    p: np.ndarray
    attention_draws: np.ndarray
    ridge_draws: np.ndarray
    gap_theory: np.ndarray
    delta: np.ndarray
    gamma_attention: np.ndarray

    @property
    def gap_draws(self) -> np.ndarray:
        """Paired difference ``E_att - E_ridge`` of each draw, shape ``(S, T)``."""
        return self.attention_draws - self.ridge_draws

    @property
    def gap_mean(self) -> np.ndarray:
        """Mean paired gap over draws, shape ``(S,)``."""
        return self.gap_draws.mean(axis=1)

    @property
    def gap_sem(self) -> np.ndarray:
        """Standard error of :attr:`gap_mean` (:func:`attn_lib.simulation.trials.standard_error`), shape ``(S,)``."""
        return standard_error(self.gap_draws, axis=1)

    def resolved(self, z: float = 2.0) -> np.ndarray:
        """Whether the simulated sign is resolved, ``|gap_mean| > z gap_sem``, shape ``(S,)``.

        Never true for a single draw (its standard error is unknown).
        """
        z = check_real(z, "z", low=0.0, low_open=True)
        return (np.abs(self.gap_mean) > z * self.gap_sem) & (self.gap_sem > 0)

    def sign_agrees(self) -> np.ndarray:
        """Whether the simulated mean gap has the sign of the deterministic equivalent, ``(S,)``."""
        return np.sign(self.gap_mean) == np.sign(self.gap_theory)


def spot_checks(make: MakeSetting, points: object, gamma: object, n: int, trials: int,
                seed: int = 0, use_cache: bool = True, scale: str = "matched") -> SpotChecks:
    """Simulate a few cells ``make(x, y)`` of a phase map (:func:`attn_lib.studies.sweeps.simulations`).

    Parameters
    ----------
    make : callable ``(x, y) -> Setting``
        The same function as for :func:`phase_map`.
    points : array_like of shape (S, 2)
        ``(x, y)`` coordinates of the cells (they need not lie on the map's grid).
    gamma : float
        Ridge regression's ridge parameter ``> 0``.
    n : int
        Tokens per draw (``p = round(c n)``).
    trials : int
        Independent draws per cell; the same seeds at every cell (common random numbers).
    seed : int, default 0
        Root seed.
    use_cache : bool, default True
        Read and write each cell through the disk cache (:mod:`attn_lib.cache`).
    scale : {"matched", "raw"}, default "matched"
        Attention's ridge parameter, as in :func:`phase_map`. Each draw gives both models at
        ``gamma`` and ``gamma_att`` (one eigendecomposition), so the gap stays paired.

    Returns
    -------
    SpotChecks
    """
    make = check_callable(make, "make", "(x, y) -> Setting")
    try:
        pts = np.asarray(points, dtype=float)
    except (TypeError, ValueError) as exc:
        raise TypeError("points must be an array of (x, y) pairs") from exc
    if pts.ndim != 2 or pts.shape[1] != 2 or pts.shape[0] == 0:
        raise ValueError(f"points must have shape (S, 2) with S >= 1, got {pts.shape}")
    if not np.all(np.isfinite(pts)):
        raise ValueError("points must be finite")
    g = check_gamma(gamma)
    n = check_int(n, "n")
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    scale = check_choice(scale, "scale", SCALES)
    settings = _build(make, pts[:, 0], pts[:, 1])
    g_att = _attention_gammas(settings, g, scale)
    att, ridge, p = [], [], []
    for s, ga in zip(settings, g_att):
        grid = np.unique([g, ga])  # one draw, both ridge parameters
        mc = sweeps.simulations([s], grid, n=n, trials=trials, seed=seed, use_cache=use_cache)
        att.append(mc.values("attention")[0, :, int(np.searchsorted(grid, ga))])
        ridge.append(mc.values("ridge")[0, :, int(np.searchsorted(grid, g))])
        p.append(int(mc.p[0]))
    from ..theory.attention import attention_error_batch

    gap_th = (np.asarray(attention_error_batch(settings, g_att), dtype=float)
              - sweeps.equivalents(settings, g, model="ridge"))
    return SpotChecks(x=pts[:, 0].copy(), y=pts[:, 1].copy(), gamma=g, n=n, p=np.array(p),
                      attention_draws=np.array(att), ridge_draws=np.array(ridge),
                      gap_theory=gap_th, delta=np.array([s.delta(n) for s in settings]),
                      gamma_attention=g_att)

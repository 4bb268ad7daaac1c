r"""Finite-size convergence of the simulated errors to their deterministic equivalents.

For one setting, one model (attention or ridge) and one ridge parameter ``gamma``, let
``E_n^(1..T_n)`` be the errors of ``T_n`` independent draws at ``n`` tokens (``p = round(c n)``)
and ``E_DE`` the deterministic equivalent, which does not depend on ``n``. Per ``n``:

* **bias** ``b_n = mean_t E_n^(t) - E_DE`` with standard error ``se(b_n) = s_n / sqrt(T_n)``;
* **fluctuation** ``s_n = std_t E_n^(t)`` (``ddof = 1``) with standard error
  ``se(s_n) = s_n / sqrt(2 (T_n - 1))``, exact to leading order for Gaussian draws.

Power laws ``|b_n| ~ A n^beta`` and ``s_n ~ B n^sigma`` are fitted by weighted least squares of
``log v`` on ``log n`` (:func:`fit_power_law`), with the log-scale errors of the delta method,
``se(log v) = se(v) / v``.

**Unresolved biases.** A bias with ``|b_n| < 2 se(b_n)`` (:data:`RESOLUTION` standard errors) is
*unresolved*: its sign is uncertain and ``log |b_n|`` is dominated by noise (the delta-method
error is then >= 50 % and meaningless for a quantity that may be zero). The bias slope is
therefore fitted through the **resolved points only**, and the number of points used is
reported with it (:attr:`PowerLawFit.points`). With fewer than two resolved points there is no
slope (:meth:`Series.bias_fit` returns ``None``), and if the resolved biases do not all have the
same sign a power law in ``|b|`` is not a description either (also ``None``; see
:attr:`Series.same_sign`). Keeping only resolved points favours, at the largest ``n``, draws
whose bias fluctuated upwards, so a slope from resolved points is if anything too shallow;
unresolved points are not discarded from the book but shown as upper bounds
``|b_n| + 2 se(b_n)`` (:attr:`Series.bias_bound`).

:func:`run` simulates a list of settings at a ladder of ``n`` through
:func:`attn_lib.studies.sweeps.simulations` (one disk-cache entry per setting and ``n``) and collects a
:class:`Study`; :meth:`Study.series` gives the :class:`Series` of one model, setting and gamma.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import sweeps
from .._validation import (check_array, check_bool, check_choice, check_gammas, check_index,
                           check_int, check_real, check_seed, check_settings, check_sizes)
from ..model.setting import Setting

__all__ = ["RESOLUTION", "PowerLawFit", "fit_power_law", "Series", "series", "Study", "run"]

#: A bias is resolved when ``|b| >= RESOLUTION * se(b)``.
RESOLUTION = 2.0


@dataclass(frozen=True)
class PowerLawFit:
    """Weighted least-squares fit ``v ~ amplitude * x^slope`` in log-log coordinates.

    Attributes
    ----------
    slope, slope_se : float
        Exponent and its standard error (inflated by ``sqrt(chi2 / dof)`` when that exceeds 1).
    log_amplitude, log_amplitude_se : float
        Intercept ``log A`` of ``log v = log A + slope log x`` and its standard error.
    chi2 : float
        ``sum_i ((log v_i - log A - slope log x_i) / se(log v_i))^2`` at the optimum.
    dof : int
        Degrees of freedom ``points - 2`` (0 for a line through two points).
    points : int
        Number of points used.
    """

    slope: float
    slope_se: float
    log_amplitude: float
    log_amplitude_se: float
    chi2: float
    dof: int
    points: int

    def __call__(self, x: object) -> np.ndarray:
        """The fitted power law ``exp(log_amplitude) * x^slope`` at ``x`` (any shape)."""
        return np.exp(self.log_amplitude) * np.asarray(x, dtype=float) ** self.slope

    def inverse(self, v: float) -> float:
        """Abscissa where the fitted law reaches ``v > 0``: ``x = (v / A)^(1 / slope)``.

        For a bias fitted against ``n`` this is the size at which the extrapolated bias falls
        to ``v`` (an extrapolation: it trusts the power law beyond the fitted range).

        Raises
        ------
        ValueError
            If the slope is zero (the law never changes).
        """
        v = check_real(v, "v", low=0.0, low_open=True)
        if self.slope == 0.0:
            raise ValueError("a power law with slope 0 cannot be inverted")
        return float(np.exp((np.log(v) - self.log_amplitude) / self.slope))


def fit_power_law(x: object, v: object, se: object, use: object = None) -> PowerLawFit:
    r"""Fit ``v ~ A x^slope`` by weighted least squares of ``log v`` on ``log x``.

    Minimises ``chi2 = sum_i (log v_i - a - slope log x_i)^2 / s_i^2`` with
    ``s_i = se_i / v_i`` (delta method). The covariance of ``(a, slope)`` is
    ``(D^T W D)^{-1}`` with ``D = [1, log x]`` and ``W = diag(s^-2)``, multiplied by
    ``chi2 / dof`` when that is larger than 1 (the scatter exceeds the stated errors, e.g. a
    power law that only holds asymptotically); it is left as it is otherwise, so an exact power
    law keeps the error propagated from ``se``.

    Parameters
    ----------
    x, v, se : array_like of shape (m,)
        Abscissae (e.g. ``n``), values (e.g. ``|bias|``) and their standard errors; at the
        points used all three must be finite and positive.
    use : array_like of bool of shape (m,), optional
        Points to fit (default all); at least two, at distinct ``x``.

    Returns
    -------
    PowerLawFit

    Examples
    --------
    >>> fit = fit_power_law([100, 400, 1600], [0.1, 0.05, 0.025], [0.001, 0.001, 0.001])
    >>> round(fit.slope, 12), fit.points
    (-0.5, 3)
    """
    x, v, se = (check_array(a, name, min_size=0, finite=False)
                for a, name in ((x, "x"), (v, "v"), (se, "se")))
    if not x.size == v.size == se.size:
        raise ValueError(f"x, v and se must have the same length, got {x.size}, {v.size}, {se.size}")
    mask = np.ones(x.size, bool) if use is None else np.asarray(use)
    if mask.shape != x.shape or mask.dtype != bool:
        raise ValueError(f"use must be a boolean array of shape {x.shape}")
    for name, arr in (("x", x), ("v", v), ("se", se)):
        if not np.all(np.isfinite(arr[mask])) or np.any(arr[mask] <= 0):
            raise ValueError(f"{name} must be finite and in (0, inf) at the points used")
    if np.unique(x[mask]).size < 2:
        raise ValueError("use must select at least two points with distinct x")
    lx, lv, s = np.log(x[mask]), np.log(v[mask]), se[mask] / v[mask]
    design = np.column_stack([np.ones(lx.size), lx]) / s[:, None]
    coef, *_ = np.linalg.lstsq(design, lv / s, rcond=None)
    cov = np.linalg.inv(design.T @ design)
    chi2 = float(np.sum(((lv - coef[0] - coef[1] * lx) / s) ** 2))
    dof = lx.size - 2
    if dof > 0 and chi2 > dof:
        cov = cov * (chi2 / dof)
    return PowerLawFit(slope=float(coef[1]), slope_se=float(np.sqrt(cov[1, 1])),
                       log_amplitude=float(coef[0]), log_amplitude_se=float(np.sqrt(cov[0, 0])),
                       chi2=chi2, dof=dof, points=int(lx.size))


@dataclass(frozen=True)
class Series:
    """Bias and fluctuation of one model, setting and ``gamma`` along a ladder of ``N`` sizes.

    Attributes
    ----------
    n, trials : ndarray of int, shape (N,)
        Tokens and number of draws at each size.
    theory : float
        Deterministic equivalent ``E_DE`` (independent of ``n``).
    mean, bias, bias_se, fluctuation, fluctuation_se : ndarray of shape (N,)
        ``mean_t E``, ``b = mean - E_DE``, ``s / sqrt(T)``, ``s = std_t E`` (``ddof = 1``) and
        ``s / sqrt(2 (T - 1))``.
    """

    n: np.ndarray
    trials: np.ndarray
    theory: float
    mean: np.ndarray
    bias: np.ndarray
    bias_se: np.ndarray
    fluctuation: np.ndarray
    fluctuation_se: np.ndarray

    @property
    def resolved(self) -> np.ndarray:
        """Boolean ``(N,)``: ``|b| >= RESOLUTION * se(b)`` (and ``se(b) > 0``)."""
        return (np.abs(self.bias) >= RESOLUTION * self.bias_se) & (self.bias_se > 0)

    @property
    def bias_bound(self) -> np.ndarray:
        """Upper bound ``|b| + RESOLUTION * se(b)`` on the size of the bias, shape ``(N,)``."""
        return np.abs(self.bias) + RESOLUTION * self.bias_se

    @property
    def same_sign(self) -> bool:
        """Whether all resolved biases have the same sign (True when none is resolved)."""
        signs = np.sign(self.bias[self.resolved])
        return bool(signs.size == 0 or np.all(signs == signs[0]))

    @property
    def sign(self) -> int:
        """Common sign (+1 or -1) of the resolved biases; 0 if none is resolved or they differ."""
        r = self.resolved
        return int(np.sign(self.bias[r][0])) if r.any() and self.same_sign else 0

    def bias_fit(self, x: object = None) -> PowerLawFit | None:
        """Power law ``|b| ~ A x^slope`` through the resolved points.

        Parameters
        ----------
        x : array_like of shape (N,), optional
            Abscissa, default ``n``; e.g. the coherent shift ``delta(n)`` of the setting
            (:meth:`Study.delta`).

        Returns
        -------
        PowerLawFit or None
            ``None`` when fewer than two points are resolved or their signs differ (see the
            module docstring).
        """
        r = self.resolved
        if r.sum() < 2 or not self.same_sign:
            return None
        x = self.n if x is None else x
        return fit_power_law(x, np.abs(self.bias), self.bias_se, use=r)

    def fluctuation_fit(self) -> PowerLawFit | None:
        """Power law ``s ~ B n^slope`` through every size with ``s > 0`` (``None`` if < 2)."""
        ok = self.fluctuation > 0
        if ok.sum() < 2:
            return None
        return fit_power_law(self.n, self.fluctuation, self.fluctuation_se, use=ok)


def series(values: Sequence[object], n: object, theory: float) -> Series:
    """Bias and fluctuation per size from the draws of each size.

    Parameters
    ----------
    values : sequence of N array_like, the i-th of shape (T_i,)
        Simulated errors at ``n[i]``, ``T_i >= 2`` draws each.
    n : array_like of int, shape (N,)
        Sizes, strictly increasing.
    theory : float
        Deterministic equivalent ``E_DE``.

    Returns
    -------
    Series
    """
    ns = check_sizes(n, "n")
    if len(values) != ns.size:
        raise ValueError(f"values must have one entry per n ({ns.size}), got {len(values)}")
    th = float(theory)
    if not np.isfinite(th):
        raise ValueError("theory must be finite")
    arrays = [check_array(v, f"values[{i}]", min_size=2, what="draws") for i, v in enumerate(values)]
    t = np.array([a.size for a in arrays])
    mean = np.array([a.mean() for a in arrays])
    std = np.array([a.std(ddof=1) for a in arrays])
    return Series(n=ns, trials=t, theory=th, mean=mean, bias=mean - th, bias_se=std / np.sqrt(t),
                  fluctuation=std, fluctuation_se=std / np.sqrt(2 * (t - 1)))


@dataclass(frozen=True)
class Study:
    """Monte Carlo of ``B`` settings at ``N`` sizes and ``G`` values of gamma, with their DEs.

    Attributes
    ----------
    settings : tuple of Setting, length B
    n, trials : ndarray of int, shape (N,)
    gammas : ndarray of shape (G,)
    theory : dict
        ``{"attention": (B, G), "ridge": (B, G)}`` deterministic equivalents.
    runs : tuple of :class:`attn_lib.studies.sweeps.SweepResult`, length N
        The draws at each size (values of shape ``(B, T_i, G)``).
    """

    settings: tuple[Setting, ...]
    n: np.ndarray
    trials: np.ndarray
    gammas: np.ndarray
    theory: dict[str, np.ndarray]
    runs: tuple[sweeps.SweepResult, ...]

    def series(self, model: str, setting: int, gamma: int) -> Series:
        """:class:`Series` of ``model`` ("attention" or "ridge") for ``settings[setting]`` at
        ``gammas[gamma]`` (both indices)."""
        model = check_choice(model, "model", sweeps.MODELS)
        b = self._index(setting)
        k = check_index(gamma, "gamma", self.gammas.size)
        return series([r.values(model)[b, :, k] for r in self.runs], self.n,
                         self.theory[model][b, k])

    def delta(self, setting: int) -> np.ndarray:
        """Coherent shift ``delta(n)`` of ``settings[setting]`` at each size, shape ``(N,)``."""
        s = self.settings[self._index(setting)]
        return np.array([s.delta(int(k)) for k in self.n])

    def _index(self, setting: object) -> int:
        return check_index(setting, "setting", len(self.settings))


def run(settings: Sequence[Setting], n: Sequence[int], trials: int | Sequence[int],
        gammas: object, seed: int = 0, use_cache: bool = True) -> Study:
    """Simulate every setting at every size (attention and ridge on the same draws).

    Parameters
    ----------
    settings : sequence of Setting, length B
    n : sequence of int, length N >= 2
        Sizes, strictly increasing; ``p = round(c n)`` for each setting.
    trials : int or sequence of int of length N
        Draws per size, each ``>= 2`` (fewer at large ``n``: one draw costs ``O(n^2 p)``).
    gammas : float or array_like of shape (G,)
        Positive ridge parameters (one factorisation per draw serves all of them).
    seed : int, default 0
        Root seed of :func:`attn_lib.studies.sweeps.simulations` at every size.
    use_cache : bool, default True
        Read and write each setting and size through :mod:`attn_lib.cache`.

    Returns
    -------
    Study
    """
    settings = tuple(check_settings(settings))
    ns = check_sizes(n, "n")
    if isinstance(trials, (list, tuple, np.ndarray)):
        ts = [check_int(t, "trials", low=2) for t in trials]
        if len(ts) != ns.size:
            raise ValueError(f"trials must be an int or have one entry per n ({ns.size}), "
                             f"got {len(ts)}")
    else:
        ts = [check_int(trials, "trials", low=2)] * ns.size
    g = np.atleast_1d(check_gammas(gammas))
    seed = check_seed(seed)
    use_cache = check_bool(use_cache, "use_cache")
    runs = tuple(sweeps.simulations(settings, g, n=int(k), trials=t, seed=seed,
                                    use_cache=use_cache) for k, t in zip(ns, ts))
    theory = {m: sweeps.equivalents(settings, g, model=m) for m in sweeps.MODELS}
    return Study(settings=settings, n=ns, trials=np.array(ts), gammas=g, theory=theory, runs=runs)

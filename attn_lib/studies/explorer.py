r"""The theory explorer's grid: the error curves of attention and ridge over a grid of settings.

The book's explorer page (``book/explorer.md``, written by :mod:`attn_lib.book.explorer`) lets a
reader move ``c``, the SNR, the weights' alignment with the signal and their norm, and the
nonlinearity, and redraws the theory at once: it only looks curves up in a grid computed here,
at build time, through the result cache (:func:`cached_grid`).

**The settings.** One rank-one :class:`~attn_lib.model.setting.Setting` per point of the grid:
``c``, ``snr = ||mu||^2``, key and query vectors equal, ``w_K = w_Q = w`` of norm ``norm``
(``cos(w_K, w_Q) = 1``) at cosine ``alignment`` with ``mu``, ``alpha = 1``, and the attention
of :func:`setting`: entry-wise with a registered ``f`` (``"tanh"``, ``"relu"``, ...), or
masked softmax at inverse temperature ``beta`` (``"softmax:<beta>"``). The coherent shift is
``delta = snr (1 + alignment^2 norm^2) / sqrt(p)``.

**The scale.** Curves are functions of ``g = gamma / tau``, the book's scale convention
(:func:`attn_lib.studies.sweeps.feature_scale`): each model at its own ``gamma = tau g``, ridge
at ``gamma = c g``. :func:`theory_gammas` gives attention's argument of
:func:`attn_lib.theory.attention_error`: ``tau g`` for entry-wise attention; for softmax at
``n`` tokens the effective ridge parameter ``tau_A g / s_n^2``
(:func:`attn_lib.theory.softmax.effective_gamma`), and in the proportional limit its limit
``g (tau_K + e^{beta^2 (alpha^2 - 1)})`` (``tau_K`` the entry-wise scale of ``f_beta``; the
second term is the limit of ``p / (n (n - 1) s_n^2)``, the mean part of the softmax
features).

**The theories.** Attention: the proportional limit (:func:`attn_lib.theory.attention_error`),
and at each ``n`` of the grid the finite-size theory (``attention_error(..., n=n)``), which keeps
the coherent shift exactly and is the one to use where ``delta`` at that ``n`` is not small.
For softmax the finite-size theory refuses settings with
``2 beta ||M_r|| / sqrt(p) >= 1`` (:func:`attn_lib.theory.softmax.tail`): those points are
marked as not covered. Ridge: :func:`attn_lib.theory.ridge_error`, which depends on ``c`` and
``snr`` only.

* :func:`setting` -- the setting of one point of the grid;
* :func:`theory_gammas` -- attention's ridge parameter at ``g = gamma / tau``;
* :func:`grid` (cached: :func:`cached_grid`) -- every curve of the grid;
* :func:`monte_carlo` -- simulated errors at a few settings, through the cached sweeps
  (:func:`attn_lib.studies.sweeps.simulations`), at the same ``g``.
"""

from __future__ import annotations

import functools
import itertools
from typing import Final, Literal, Sequence, TypedDict

import numpy as np

from .. import cache
from .._validation import check_array, check_gammas, check_int, check_real, check_seed, check_sizes
from ..model.nonlinearity import REGISTRY
from ..model.setting import Setting, Softmax
from ..theory import attention_error_batch, domain, ridge_error, softmax
from . import sweeps

__all__ = ["AXES", "SOFTMAX", "Axis", "Grid", "MonteCarlo", "setting", "theory_gammas", "grid",
           "cached_grid", "monte_carlo"]

#: Name of an axis of the grid.
Axis = Literal["f", "c", "snr", "alignment", "norm"]
#: The axes of the grid, in the order of the arrays of :func:`grid` (then ``g``).
AXES: Final[tuple[Axis, Axis, Axis, Axis, Axis]] = ("f", "c", "snr", "alignment", "norm")
#: Prefix of a softmax nonlinearity: ``"softmax:<beta>"``.
SOFTMAX = "softmax:"


class Grid(TypedDict):
    """:func:`grid`'s result (shapes in its docstring)."""

    f: list[str]
    c: np.ndarray
    snr: np.ndarray
    alignment: np.ndarray
    norm: np.ndarray
    g: np.ndarray
    n: np.ndarray
    attention: np.ndarray
    finite: np.ndarray
    covered: np.ndarray
    ridge: np.ndarray
    delta: np.ndarray


class MonteCarlo(TypedDict):
    """:func:`monte_carlo`'s result (shapes in its docstring)."""

    attention: np.ndarray
    ridge: np.ndarray
    g: np.ndarray
    n: int
    trials: int


def _beta(f: str) -> float | None:
    """``beta`` of a ``"softmax:<beta>"`` label, ``None`` for a registered ``f``; else ValueError."""
    if not isinstance(f, str):
        raise TypeError(f"f must be a str (a registered nonlinearity or 'softmax:<beta>'), "
                        f"got {type(f).__name__}")
    if f.startswith(SOFTMAX):
        try:
            beta = float(f[len(SOFTMAX):])
        except ValueError:
            raise ValueError(f"f={f!r}: the inverse temperature of 'softmax:<beta>' must be a "
                             "number, e.g. 'softmax:0.5'") from None
        return check_real(beta, f"beta of f={f!r}", low=0.0, low_open=True)
    if f not in REGISTRY:
        raise ValueError(f"f must be a registered nonlinearity {tuple(REGISTRY)} or "
                         f"'softmax:<beta>', got {f!r}")
    return None


def setting(f: str, c: float, snr: float, alignment: float, norm: float) -> Setting:
    """The setting of one grid point: ``w_K = w_Q`` of norm ``norm`` at cosine ``alignment`` with ``mu``.

    Parameters
    ----------
    f : str
        A registered nonlinearity (:data:`attn_lib.model.nonlinearity.REGISTRY`), entry-wise
        attention; or ``"softmax:<beta>"``, masked softmax attention at inverse temperature
        ``beta > 0``.
    c : float
        ``p / n > 0``.
    snr : float
        ``||mu||^2 >= 0``.
    alignment : float
        ``cos(mu, w_K) = cos(mu, w_Q)`` in ``[-1, 1]``.
    norm : float
        ``||w_K|| = ||w_Q|| >= 0``.

    Returns
    -------
    Setting
    """
    beta = _beta(f)
    make = functools.partial(Setting, c=c, snr=snr, wk_norm=norm, wq_norm=norm,
                             cos_mu_wk=alignment, cos_mu_wq=alignment, cos_wk_wq=1.0)
    if beta is None:
        return make(f=f)
    return make(attention=Softmax(beta))


def theory_gammas(s: Setting, g: object, n: int | None = None) -> np.ndarray:
    """Attention's argument of :func:`attn_lib.theory.attention_error` at ``g = gamma / tau``.

    Parameters
    ----------
    s : Setting
        Entry-wise or masked softmax attention.
    g : float or array_like of shape (G,)
        Positive ``gamma / tau``.
    n : int, optional
        Tokens: for softmax, the effective ridge parameter of the raw features at ``n``,
        ``feature_scale(s, n=n) g / s_n^2``; without it, its limit
        ``g (tau_K + e^{beta^2 (alpha^2 - 1)})`` (module docstring). Entry-wise attention does
        not use it: ``feature_scale(s) g``.

    Returns
    -------
    ndarray shaped like ``g``.
    """
    g = check_gammas(g, "g")
    if not isinstance(s.attention, Softmax):
        return sweeps.feature_scale(s) * g
    if n is not None:
        return softmax.effective_gamma(s, sweeps.feature_scale(s, n=n) * g, n)
    tau_k = sweeps.feature_scale(softmax.entrywise_equivalent(s))
    mean_part = np.exp(s.attention.beta ** 2 * (s.logit_scale ** 2 - 1.0))
    return (tau_k + mean_part) * g


def _axis(values: object, name: str, low: float, high: float | None = None,
          low_open: bool = False) -> np.ndarray:
    arr = check_array(values, name, increasing=True)
    for v in arr:
        check_real(v, f"each {name}", low=low, high=high, low_open=low_open)
    return arr


def _check(f: object, c: object, snr: object, alignment: object, norm: object, g: object,
           n: object) -> tuple[list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray,
                                np.ndarray, np.ndarray]:
    if isinstance(f, str) or not isinstance(f, (list, tuple)) or not f:
        raise TypeError("f must be a non-empty list of nonlinearities (registered names or "
                        f"'softmax:<beta>'), got {f!r}")
    for name in f:
        _beta(name)
    if len(set(f)) < len(f):
        raise ValueError(f"f must not repeat a nonlinearity, got {list(f)}")
    c = _axis(c, "c", 0.0, low_open=True)
    snr = _axis(snr, "snr", 0.0)
    alignment = _axis(alignment, "alignment", -1.0, 1.0)
    norm = _axis(norm, "norm", 0.0)
    g = check_array(g, "g", increasing=True)
    check_gammas(g, "g")
    ns = (np.array([], dtype=int) if isinstance(n, (list, tuple)) and not n
          else check_sizes(n, "n", min_size=1))
    for k in ns:
        check_int(int(k), "n", low=8)
        if round(float(c[0]) * k) < 8:
            raise ValueError(f"n={k} gives p = round(c n) = {round(float(c[0]) * k)} < 8 at "
                             f"c = {c[0]:g}: the finite-size theory needs p >= 8")
    return list(f), c, snr, alignment, norm, g, ns


def grid(f: Sequence[str], c: object, snr: object, alignment: object, norm: object, g: object,
         n: Sequence[int] = ()) -> Grid:
    """The theory curves of every setting of the grid ``f x c x snr x alignment x norm``.

    Parameters
    ----------
    f : list of str, length F
        Nonlinearities, as for :func:`setting` (``"tanh"``, ``"softmax:0.5"``, ...), no repeats.
    c, snr, alignment, norm : array_like of shape (C,), (S,), (A,), (W,)
        Strictly increasing values: ``c > 0``, ``snr >= 0``, ``alignment`` in ``[-1, 1]``,
        ``norm >= 0``.
    g : array_like of shape (G,)
        Strictly increasing positive ``gamma / tau``.
    n : sequence of int, length N, default ()
        Strictly increasing token counts of the finite-size theory (each with ``p = round(c
        n) >= 8`` at every ``c``); empty: the limit only.

    Returns
    -------
    dict
        ``"f"`` (list), ``"c"``, ``"snr"``, ``"alignment"``, ``"norm"``, ``"g"`` (the axes as
        float arrays) and ``"n"`` (int array), and

        * ``"attention"``: ``(F, C, S, A, W, G)``, the proportional limit at
          :func:`theory_gammas` ``(s, g)``;
        * ``"finite"``: ``(N, F, C, S, A, W, G)``, the finite-size theory at each ``n`` at
          :func:`theory_gammas` ``(s, g, n)``, NaN where ``"covered"`` is False;
        * ``"covered"``: bool ``(N, F, C, S, A, W)``, whether the finite-size theory covers the
          setting (False only for softmax with :func:`attn_lib.theory.softmax.tail` ``>= 1``);
        * ``"ridge"``: ``(C, S, G)``, :func:`attn_lib.theory.ridge_error` at ``gamma = c g``;
        * ``"delta"``: ``(N, C, S, A, W)``, the coherent shift at each ``n``.

    Raises
    ------
    TypeError, ValueError
        For a bad axis (naming it and the allowed range).
    ConvergenceError
        When the theory of any setting cannot be solved.
    """
    f, c, snr, alignment, norm, g, ns = _check(f, c, snr, alignment, norm, g, n)
    shape = (len(f), c.size, snr.size, alignment.size, norm.size)
    settings = [setting(*point) for point in itertools.product(f, c, snr, alignment, norm)]
    # Both theories at every point, inside their domains or not: the page draws both and its note
    # says which applies (the limit where the two agree within attn_lib.book.explorer.AGREE).
    with domain.ignored():
        limit = attention_error_batch(settings, np.array([theory_gammas(s, g) for s in settings]))
    finite = np.full((ns.size, len(settings), g.size), np.nan)
    covered = np.zeros((ns.size, len(settings)), dtype=bool)
    for i, k in enumerate(ns):
        k = int(k)
        covered[i] = [not isinstance(s.attention, Softmax) or softmax.tail(s, k) < 1.0
                      for s in settings]
        todo = np.flatnonzero(covered[i])
        if todo.size:
            with domain.ignored():
                finite[i, todo] = attention_error_batch(
                    [settings[b] for b in todo],
                    np.array([theory_gammas(settings[b], g, k) for b in todo]), n=k)
    ridge = np.array([ridge_error(Setting(c=ci, snr=si), ci * g) for ci in c for si in snr])
    delta = np.array([[setting("tanh", ci, si, ai, wi).delta(int(k))
                       for ci, si, ai, wi in itertools.product(c, snr, alignment, norm)]
                      for k in ns])
    return {"f": f, "c": c, "snr": snr, "alignment": alignment, "norm": norm, "g": g,
            "n": ns.astype(np.int64),
            "attention": limit.reshape(shape + (g.size,)),
            "finite": finite.reshape((ns.size,) + shape + (g.size,)),
            "covered": covered.reshape((ns.size,) + shape),
            "ridge": ridge.reshape(c.size, snr.size, g.size),
            "delta": delta.reshape((ns.size,) + shape[1:])}


def cached_grid(f: Sequence[str], c: object, snr: object, alignment: object, norm: object,
                g: object, n: Sequence[int] = ()) -> Grid:
    """:func:`grid` through the result cache (:func:`attn_lib.cache.cached`), axes as lists."""
    f, c, snr, alignment, norm, g, ns = _check(f, c, snr, alignment, norm, g, n)
    return cache.cached(grid, f=f, c=c.tolist(), snr=snr.tolist(), alignment=alignment.tolist(),
                        norm=norm.tolist(), g=g.tolist(), n=[int(k) for k in ns])


def monte_carlo(settings: Sequence[Setting], g: object, *, n: int, trials: int,
                seed: int = 0) -> MonteCarlo:
    """Simulated errors of attention and ridge at ``g = gamma / tau``, on common draws.

    Each setting is simulated once (:func:`attn_lib.studies.sweeps.simulations`, cached) on the
    ridge parameters ``[tau_att g, c g]``: attention's error on the first half (``tau_att`` =
    :func:`~attn_lib.studies.sweeps.feature_scale` of the setting, at ``n`` for softmax,
    whose raw features ``X A`` the simulator returns) and ridge's on the second, from the same
    tokens. They compare with :func:`grid`'s finite-size theory at ``n``.

    Parameters
    ----------
    settings : sequence of Setting, length P
        Entry-wise or masked softmax attention (e.g. from :func:`setting`).
    g : array_like of shape (G,)
        Positive ``gamma / tau``.
    n, trials, seed : int
        Tokens, draws per setting and root seed (the same for every setting).

    Returns
    -------
    dict
        ``"attention"``, ``"ridge"``: ``(P, trials, G)`` errors of each draw; ``"g"``;
        ``"n"``, ``"trials"``.
    """
    g = np.atleast_1d(check_gammas(g, "g"))
    n, trials, seed = check_int(n, "n", low=8), check_int(trials, "trials"), check_seed(seed)
    att, ridge = [], []
    for s in settings:
        tau = sweeps.feature_scale(s, n=n)
        mc = sweeps.simulations([s], np.concatenate([tau * g, s.c * g]), n=n, trials=trials,
                                seed=seed)
        att.append(mc.values("attention")[0][:, :g.size])
        ridge.append(mc.values("ridge")[0][:, g.size:])
    return {"attention": np.array(att).reshape(len(att), trials, g.size),
            "ridge": np.array(ridge).reshape(len(ridge), trials, g.size),
            "g": g, "n": n, "trials": trials}

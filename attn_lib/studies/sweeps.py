"""Parameter sweeps: theory and Monte Carlo over many settings.

The book's chapters compare the deterministic equivalents with simulation along one-parameter
families of :class:`~attn_lib.model.setting.Setting` (an SNR sweep, an alignment sweep, ...). This
module holds the pieces those sweeps share:

* :func:`equivalents` -- the attention or ridge deterministic equivalent of many settings, ``(B, G)``;
* :func:`simulations` -- :func:`attn_lib.simulation.simulate.errors` for many settings through the disk
  cache (:mod:`attn_lib.cache`), collected in a :class:`SweepResult` that also gives the paired
  difference attention minus ridge of each draw;
* :func:`feature_scale` -- the book's one scale convention for comparing two models: the mean
  eigenvalue of their feature Gram matrix, the unit in which ``gamma`` is measured, and
  :func:`matched_gamma`, attention's ``gamma`` that matches ridge's under it.

The families of nonlinearities swept over (:func:`~attn_lib.model.nonlinearity.normalised`,
:func:`~attn_lib.model.nonlinearity.mixture`) live in :mod:`attn_lib.model.nonlinearity`; they are
hashable and have a stable description, so settings that use them are keys of the disk cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence, cast, overload

import numpy as np

from .. import cache
from ..simulation import simulate
from ..simulation.trials import Stats, run_plans
from .._validation import (check_bool, check_choice, check_gammas, check_int, check_seed,
                           check_setting, check_settings)
from ..model.setting import HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax
from ..theory import softmax

__all__ = ["equivalents", "simulations", "SweepResult", "MODELS", "feature_scale", "matched_gamma"]

#: The models a sweep can compute.
MODELS = ("attention", "ridge")


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
    model = check_choice(model, "model", MODELS)
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


def simulations(settings: Sequence[Setting | RankSetting | MatrixSetting | HeadsSetting], gammas: object, n: int | Sequence[int],
                trials: int, seed: int = 0, attention: bool = True,
                use_cache: bool = True, scheduler: str | None = None) -> SweepResult:
    """Simulate every setting of a sweep (:func:`attn_lib.simulation.simulate.errors`), cached on disk.

    Parameters
    ----------
    settings : sequence of Setting, RankSetting, MatrixSetting or HeadsSetting, length B
        Rank-one or rank-``r`` weights, a given matrix or given heads, entry-wise or softmax attention
        (:data:`attn_lib.simulation.simulate.TYPES`, :data:`~attn_lib.simulation.simulate.KINDS`);
        a softmax setting's attention error is that of the raw features ``X A``.
    gammas : float or array_like of shape (G,)
        Positive ridge parameters (one eigendecomposition per draw gives all of them).
    n : int or sequence of int of length B
        Number of tokens, shared or one per setting (``p = round(c n)``; a ``MatrixSetting``'s
        or ``HeadsSetting``'s ``n`` must give its ``p``, else ``ValueError``).
    trials : int
        Independent draws per setting.
    seed : int, default 0
        Root seed, the same for every setting (common random numbers along the sweep).
    attention : bool, default True
        ``False`` simulates ridge regression only.
    use_cache : bool, default True
        Read and write each setting's result as the cache entry of
        ``simulate.errors(setting=..., gammas=..., n=..., trials=..., seed=..., attention=...)``
        (:func:`attn_lib.cache.entry`), each stored as soon as its trials are done.
    scheduler : str, optional
        Where the trials run (:mod:`attn_lib.simulation.executor`; default
        ``$ATTN_BOOK_SCHEDULER``, else in-process). The trials of every setting not in the cache
        are sent together (``B x T`` tasks in flight); the result is the same in every mode
        (bit for bit at the same BLAS threads per trial, :mod:`attn_lib.simulation.executor`).

    Returns
    -------
    SweepResult
    """
    checked = check_settings(settings, types=simulate.TYPES, attention=simulate.KINDS)
    g = np.atleast_1d(check_gammas(gammas))
    ns = ([n] * len(checked) if isinstance(n, (int, np.integer)) and not isinstance(n, bool)
          else list(cast("Sequence[int]", n)))  # a bool raises TypeError here
    if len(ns) != len(checked):
        raise ValueError(f"n must be an int or have one entry per setting ({len(checked)}), "
                         f"got {len(ns)}")
    ns = [check_int(v, "n") for v in ns]
    for s, k in zip(checked, ns):
        s.p(k)  # before any cache look-up: a MatrixSetting refuses an n that misses its p
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    if not isinstance(attention, bool) or not isinstance(use_cache, bool):
        raise TypeError("attention and use_cache must be bool")
    calls: list[dict[str, Any]] = [
        dict(setting=s, gammas=g, n=k, trials=trials, seed=seed, attention=attention)
        for s, k in zip(checked, ns)]
    found = [cache.entry(simulate.errors, **kw) if use_cache else None for kw in calls]
    results: list[Any] = [e.value if e is not None and e.hit else None for e in found]
    todo = [b for b, r in enumerate(results) if r is None]
    plans = [simulate.errors_plan(**calls[b]) for b in todo]
    for j, res in run_plans(plans, scheduler=scheduler):
        results[todo[j]] = res
        if (e := found[todo[j]]) is not None:
            e.store(res)
    att = np.stack([r.attention.values for r in results]) if attention else None
    ridge = np.stack([r.ridge.values for r in results])
    return SweepResult(attention=att, ridge=ridge, n=np.array([r.n for r in results]),
                       p=np.array([r.p for r in results]), gammas=g)


def feature_scale(setting: Setting, model: str = "attention", keep_diagonal: bool = False,
                  n: int | None = None) -> float:
    r"""Mean eigenvalue ``tau = tr(Phi^T Phi / n) / n`` of a model's features: the unit of ``gamma``.

    **The book's scale convention.** ``E(gamma)`` is not scale free: features ``s Phi`` have
    ``E_{s Phi}(s^2 gamma) = E_Phi(gamma)``. Attention's features ``X K`` and ridge's ``X`` (or
    those of two nonlinearities) have different scales, so a comparison at one raw ``gamma``
    compares them at different effective regularisations. Every cross-model comparison of the
    book therefore puts two models side by side at the same ``gamma / tau`` (each model at its
    own ``gamma = tau g``, ``g`` shared); in the ridgeless limit ``gamma -> 0`` the scale drops
    out and both conventions agree.

    Deterministic equivalent, in the proportional limit with a vanishing coherent shift
    (``delta -> 0``; finite-rank parts of ``X`` and ``K`` change the trace by ``O(1/n)``), with the
    Hermite data ``a1, b2 = nu - a1^2`` of the canonical ``f`` and the moments
    ``tr(S^k) / n -> 1, 1 + 1/c, 1 + 3/c + 1/c^2`` (``k = 1, 2, 3``) of ``S = Z^T Z / p``:

    * ridge, ``Phi = X``: ``tau = c`` (for any attention kind);
    * attention, zero diagonal, ``K ~ a1 (S - I) + sqrt(b2) W / sqrt(p)``:
      ``Phi^T Phi / n ~ c K S K`` and ``tau = a1^2 (1 + 1/c) + b2``;
    * attention with the diagonal kept, linear ``f`` only (``b2 = 0``, ``K = a1 S``):
      ``tau = a1^2 (c + 3 + 1/c)``;
    * masked softmax attention, the raw features ``Phi = X A`` at ``n`` tokens: by the reduction
      of :mod:`attn_lib.theory.softmax`, ``X A = (s X K + X (1 1^T - I) / (n - 1)) D_eps^{-1}``
      with ``K`` the entry-wise kernel of ``f_beta`` and ``s = s_n``
      (:func:`~attn_lib.theory.softmax.scale`). The kernel part gives ``s^2 tau_K`` (``tau_K``
      the entry-wise ``tau`` of ``f_beta``: ``a1 = beta``, ``b2 = e^{beta^2} - 1 - beta^2``
      at ``alpha = 1``); the mean part is the rank-one ``u 1^T``, ``u = X 1 / (n - 1) = Z 1 / (n
      - 1)`` (balanced labels), one eigenvalue ``||u||^2 ~ c`` of ``Phi^T Phi / n`` that adds
      ``||u||^2 / n ~ p / (n (n - 1))`` to the mean; its cross term with the kernel part, the
      ``- X / (n - 1)`` and the fluctuations ``D_eps`` are smaller by ``O(n^{-1/2})``:

          tau = s_n^2 tau_K + p / (n (n - 1))       (~ (c / n) (tau_K + 1)).

      The spike is a fraction ``1 / (tau_K + 1)`` of the trace (0.56 at ``beta = 1/2``, ``c =
      1/2``; 0.07 at ``beta = 3/2``) but, orthogonal to the labels, it does not change the
      error; so at equal ``gamma / tau`` softmax sits at the effective ridge parameter
      ``gamma / s_n^2 = g (tau_K + 1)`` of the entry-wise theory, not at ``g tau_K``.
      Measured on random inputs, ``c = 1/2``, ``n = 2048`` (3 draws): within 0.4 % at ``beta <=
      1`` and 4.2 % too large at ``beta = 3/2`` (a finite-``n`` correction that grows with
      ``nu = e^{beta^2} - 1``: 11 % at ``n = 512``); with a coherent shift or large weights the entry-wise ``tau_K`` misses their
      finite-``n`` contribution (``snr = 3``, ``c = 0.3``, ``beta = 1``: ``tau_K`` 10 % low,
      softmax's ``tau`` 6 % low).

    Parameters
    ----------
    setting : Setting
        Only ``c`` and, for attention, the Hermite data of ``f`` enter (under softmax, ``beta``,
        ``alpha`` and ``n``).
    model : {"attention", "ridge"}, default "attention"
    keep_diagonal : bool, default False
        The attention kernel keeps its diagonal (as ``simulate.errors(..., keep_diagonal=True)``).
    n : int, optional
        Number of tokens: required for softmax attention, whose raw features scale like
        ``sqrt(p) / n``; the entry-wise and ridge scales have an ``n``-free limit and do not
        use it.

    Returns
    -------
    float
        ``tau > 0``.

    Raises
    ------
    ValueError
        For ``keep_diagonal=True`` with a nonlinear ``f`` (its diagonal ``f(||x_i||^2 / sqrt p) /
        sqrt p`` has no universal limit), with ``model="ridge"`` or with softmax attention; for
        ``a1 = b2 = 0``; for softmax attention without ``n`` or without the mask.
    """
    setting = check_setting(setting, attention=simulate.KINDS)
    model = check_choice(model, "model", MODELS)
    keep_diagonal = check_bool(keep_diagonal, "keep_diagonal")
    c = setting.c
    if model == "ridge":
        if keep_diagonal:
            raise ValueError("keep_diagonal applies to model='attention' only")
        return float(c)
    if isinstance(setting.attention, Softmax):
        if keep_diagonal:
            raise ValueError("keep_diagonal applies to entry-wise attention; softmax masks its "
                             "self-pairs (Softmax(beta, mask=True))")
        if n is None:
            raise ValueError("n: the scale of softmax features X A depends on the number of "
                             "tokens (s_n ~ sqrt(p) / n); pass n")
        n = check_int(n, "n", low=2)
        tau_k = feature_scale(softmax.entrywise_equivalent(setting))
        return float(softmax.scale(setting, n) ** 2 * tau_k + setting.p(n) / (n * (n - 1.0)))
    h = setting.hermite
    if keep_diagonal:
        if h.b2 > 1e-12 * max(h.nu, 1e-300):
            raise ValueError(f"keep_diagonal=True has a feature scale only for a linear f "
                             f"(b2 = 0), got b2 = {h.b2:.3g} for {setting.f!r}")
        tau = h.a1 ** 2 * (c + 3.0 + 1.0 / c)
    else:
        tau = h.a1 ** 2 * (1.0 + 1.0 / c) + max(h.b2, 0.0)
    if not tau > 0:
        raise ValueError(f"the features of {setting!r} vanish (a1 = b2 = 0): no scale")
    return float(tau)


@overload
def matched_gamma(setting: Setting, gamma: float, keep_diagonal: bool = False) -> float: ...
@overload
def matched_gamma(setting: Setting, gamma: object, keep_diagonal: bool = False) -> np.ndarray | float: ...
def matched_gamma(setting: Setting, gamma: object, keep_diagonal: bool = False) -> np.ndarray | float:
    r"""Attention's ridge parameter at the same ``gamma / tau`` as ridge regression's ``gamma``.

    ``gamma_att = gamma tau_att / tau_ridge`` (:func:`feature_scale`): the book's convention for
    comparing attention at ``setting`` with ridge regression at ridge parameter ``gamma``, so that
    a comparison quoted "at ``gamma``" keeps ridge's curve and moves attention's.

    Parameters
    ----------
    setting : Setting
    gamma : float or array_like
        Positive ridge parameters of ridge regression.
    keep_diagonal : bool, default False
        As in :func:`feature_scale`.

    Returns
    -------
    float or ndarray shaped like ``gamma``.
    """
    g = check_gammas(gamma)
    ratio = (feature_scale(setting, keep_diagonal=keep_diagonal)
             / feature_scale(setting, "ridge"))
    out = g * ratio
    return float(out) if out.ndim == 0 else out

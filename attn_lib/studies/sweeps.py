"""Parameter sweeps: theory and Monte Carlo over many settings.

The book's chapters compare the deterministic equivalents with simulation along one-parameter
families of :class:`~attn_lib.model.setting.Setting` (an SNR sweep, an alignment sweep, ...). This
module holds the pieces those sweeps share:

* :func:`equivalents` -- the attention or ridge deterministic equivalent of many settings, ``(B, G)``;
* :func:`simulations` -- :func:`attn_lib.simulation.simulate.errors` for many settings through the disk
  cache (:mod:`attn_lib.cache`), collected in a :class:`SweepResult` that also gives the paired
  difference attention minus ridge of each draw.

The families of nonlinearities swept over (:func:`~attn_lib.model.nonlinearity.normalised`,
:func:`~attn_lib.model.nonlinearity.mixture`) live in :mod:`attn_lib.model.nonlinearity`; they are
hashable and have a stable description, so settings that use them are keys of the disk cache.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import cache
from ..simulation import simulate
from ..simulation.trials import Stats
from .._validation import check_choice, check_gammas, check_int, check_seed, check_settings
from ..model.setting import Setting

__all__ = ["equivalents", "simulations", "SweepResult", "MODELS"]

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
        Read and write each setting's result through :func:`attn_lib.cache.cached`.

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

"""Seeded Monte Carlo trials and their one result type.

Every Monte Carlo loop of the package runs through :meth:`Trials.run`: trial ``t`` draws from
``numpy.random.default_rng(SeedSequence(seed).spawn(trials)[t])`` (so fewer trials are a prefix of
more, and a trial's numbers do not depend on how many trials there are), calls a per-trial
function that returns named curves, and stacks each curve over trials into an array of shape
``(trials, *shape)``. :class:`Trials` holds them and gives their summaries (:class:`Stats`):
mean, standard deviation (``ddof=0``) and standard error of the mean (:func:`standard_error`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from numpy.typing import ArrayLike
from tqdm import tqdm

from .._validation import check_int, check_seed

__all__ = ["standard_error", "Stats", "Trials", "TrialFunction"]

#: A trial: draws from the generator it is given and returns named curves (arrays of fixed shape).
TrialFunction = Callable[[np.random.Generator], Mapping[Hashable, ArrayLike]]

R = TypeVar("R", bound="Trials")


def standard_error(values: np.ndarray, axis: int) -> np.ndarray:
    """Standard error of the mean along ``axis``, ``std(ddof=1) / sqrt(T)``; zeros when ``T = 1``.

    Parameters
    ----------
    values : ndarray
        Draws, ``T`` of them along ``axis``.
    axis : int

    Returns
    -------
    ndarray, ``values`` without ``axis``.
    """
    values = np.asarray(values)
    t = values.shape[axis]
    if t < 2:
        return np.zeros_like(values.mean(axis=axis))
    return values.std(axis=axis, ddof=1) / np.sqrt(t)


@dataclass(frozen=True)
class Stats:
    """Summary of one curve over trials.

    Attributes
    ----------
    values : ndarray
        Realised value of each draw, the trials along ``axis``.
    axis : int, default 0
        Axis of the trials (``1`` for the ``(B, T, G)`` arrays of a sweep).
    """

    values: np.ndarray
    axis: int = 0

    @property
    def mean(self) -> np.ndarray:
        """Average over trials: ``values`` without ``axis``."""
        return self.values.mean(axis=self.axis)

    @property
    def std(self) -> np.ndarray:
        """Standard deviation across trials (``ddof=0``: zero for a single trial)."""
        return self.values.std(axis=self.axis)

    @property
    def sem(self) -> np.ndarray:
        """Standard error of the mean (:func:`standard_error` over trials)."""
        return standard_error(self.values, axis=self.axis)


@dataclass(frozen=True, eq=False)
class Trials:
    """Named curves of seeded Monte Carlo trials (the result type of every Monte Carlo loop).

    Attributes
    ----------
    values : dict of name to ndarray of shape ``(trials, *shape)``
        Value of each curve in each trial; names are strings (tuples of strings for nested
        studies, e.g. ``("attention", matrix, direction)``).
    gammas : ndarray of shape (G,) or ()
        Ridge parameters of the curves.
    n, p : int
        Tokens and token dimension.
    """

    values: dict
    gammas: np.ndarray
    n: int
    p: int

    @classmethod
    def run(cls: type[R], trial: TrialFunction, *, trials: int, seed: int, gammas: np.ndarray,
            n: int, p: int, progress: bool = False) -> R:
        """Run ``trial`` on ``trials`` seeded generators and stack its curves.

        Parameters
        ----------
        trial : callable ``rng -> {name: array}``
            One draw; every call must return the same names and shapes.
        trials : int
            Number of trials ``T >= 1``. Trial ``t`` uses
            ``numpy.random.default_rng(SeedSequence(seed).spawn(trials)[t])``, so fewer trials
            are a prefix of more.
        seed : int
            Non-negative root seed.
        gammas : ndarray
            Ridge parameters, stored with the result.
        n, p : int
            Tokens and token dimension, stored with the result.
        progress : bool, default False
            Show a tqdm progress bar over trials.

        Returns
        -------
        Trials (or the subclass it is called on)
            ``values[name]`` of shape ``(T, *shape)``, float64.
        """
        trials = check_int(trials, "trials")
        children = np.random.SeedSequence(check_seed(seed)).spawn(trials)
        values: dict = {}
        for t in tqdm(range(trials), disable=not progress, desc="Monte Carlo"):
            curves = trial(np.random.default_rng(children[t]))
            if t == 0:
                values = {k: np.empty((trials, *np.shape(v))) for k, v in curves.items()}
            for k, v in curves.items():
                values[k][t] = v
        return cls(values=values, gammas=gammas, n=n, p=p)

    @property
    def trials(self) -> int:
        """Number of trials."""
        return next(iter(self.values.values())).shape[0]

    def __getitem__(self, model: Hashable) -> np.ndarray:
        """``values[model]``, shape ``(trials, *shape)``."""
        return self.values[model]

    def stats(self, model: Hashable) -> Stats:
        """:class:`Stats` of the curve ``model`` over trials."""
        if model not in self.values:
            raise ValueError(f"model must be one of {sorted(map(str, self.values))}, got {model!r}")
        return Stats(self.values[model])

    def mean(self, model: Hashable) -> np.ndarray:
        """Mean over trials of the curve ``model``, shape ``shape``."""
        return self.stats(model).mean

    def std(self, model: Hashable) -> np.ndarray:
        """Standard deviation over trials (``ddof=0``) of the curve ``model``."""
        return self.stats(model).std

    def sem(self, model: Hashable) -> np.ndarray:
        """Standard error of the mean (``ddof=1``; zeros for one trial) of the curve ``model``."""
        return self.stats(model).sem

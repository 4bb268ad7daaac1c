"""Seeded Monte Carlo trials and their one result type.

Every Monte Carlo loop of the package runs through :meth:`Trials.run`: trial ``t`` draws from
``numpy.random.default_rng(SeedSequence(seed).spawn(trials)[t])`` (so fewer trials are a prefix of
more, and a trial's numbers do not depend on how many trials there are), calls a per-trial
function that returns named curves, and stacks each curve over trials into an array of shape
``(trials, *shape)``. :class:`Trials` holds them and gives their summaries (:class:`Stats`):
mean, standard deviation (``ddof=0``) and standard error of the mean (:func:`standard_error`).

The trials are independent tasks, each carrying its own child seed: :meth:`Trials.plan` lists
them (a :class:`Plan`), and :func:`run_plans` runs the tasks of many plans together through
:mod:`attn_lib.simulation.executor`, in-process or on a Dask cluster, with the same numbers in
every mode."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

import numpy as np
from numpy.typing import ArrayLike

from .._validation import check_int, check_seed
from . import executor

__all__ = ["standard_error", "Stats", "Trials", "TrialFunction", "Plan", "run_plans"]

#: A trial: draws from the generator it is given and returns named curves (arrays of fixed shape).
#: (Keys ``Any``: a ``Mapping`` is invariant in its keys, so ``Hashable`` would refuse ``dict[str, ...]``.)
TrialFunction = Callable[[np.random.Generator], Mapping[Any, ArrayLike]]

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

    values: dict[Any, np.ndarray]
    gammas: np.ndarray
    n: int
    p: int

    @classmethod
    def plan(cls: type[R], trial: TrialFunction, *, trials: int, seed: int, gammas: np.ndarray,
             n: int, p: int) -> Plan[R]:
        """The tasks of :meth:`run` (one per trial, with its child seed), not yet run."""
        trials = check_int(trials, "trials")
        children = np.random.SeedSequence(check_seed(seed)).spawn(trials)
        return Plan(result=cls, trial=trial, seeds=tuple(children), gammas=gammas, n=n, p=p)

    @classmethod
    def run(cls: type[R], trial: TrialFunction, *, trials: int, seed: int, gammas: np.ndarray,
            n: int, p: int, progress: bool | None = None, scheduler: str | None = None) -> R:
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
        progress : bool or None, default None
            Show a tqdm progress bar over trials; ``None``: when stderr is a terminal and the
            run lasts more than a few seconds (:mod:`attn_lib._progress`).
        scheduler : str, optional
            Where the trials run (:mod:`attn_lib.simulation.executor`): ``"serial"``,
            ``"local:N"`` or a scheduler address; default ``$ATTN_BOOK_SCHEDULER``, else serial.
            The result is the same in every mode (bit for bit at the same number of BLAS
            threads per trial: one on a cluster; see :mod:`~attn_lib.simulation.executor`).

        Returns
        -------
        Trials (or the subclass it is called on)
            ``values[name]`` of shape ``(T, *shape)``, float64.
        """
        plan = cls.plan(trial, trials=trials, seed=seed, gammas=gammas, n=n, p=p)
        return plan.run(progress=progress, scheduler=scheduler)

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


def _draw(trial: TrialFunction, seed: np.random.SeedSequence) -> Mapping[Any, ArrayLike]:
    """One task: the curves of ``trial`` on the generator of its child seed."""
    return trial(np.random.default_rng(seed))


@dataclass(frozen=True, eq=False)
class Plan(Generic[R]):
    """The trials of one :meth:`Trials.run`, not yet run: one task per child seed.

    Attributes
    ----------
    result : type
        The :class:`Trials` subclass to assemble.
    trial : callable ``rng -> {name: array}``
    seeds : tuple of SeedSequence, length T
        ``SeedSequence(seed).spawn(T)``: task ``t`` draws from ``default_rng(seeds[t])``.
    gammas : ndarray
    n, p : int
    """

    result: type[R]
    trial: TrialFunction
    seeds: tuple[np.random.SeedSequence, ...]
    gammas: np.ndarray
    n: int
    p: int

    def assemble(self, curves: Sequence[Mapping[Any, ArrayLike]]) -> R:
        """Stack the tasks' curves (in seed order) into ``values[name]`` of shape ``(T, ...)``."""
        values = {k: np.empty((len(curves), *np.shape(v))) for k, v in curves[0].items()}
        for t, c in enumerate(curves):
            for k, v in c.items():
                values[k][t] = v
        return self.result(values=values, gammas=self.gammas, n=self.n, p=self.p)

    def run(self, progress: bool | None = None, scheduler: str | None = None) -> R:
        """Run the tasks and assemble them (:func:`run_plans` of this plan alone)."""
        ((_, out),) = run_plans([self], progress=progress, scheduler=scheduler)
        return out


def run_plans(plans: Sequence[Plan[R]], progress: bool | None = None,
              scheduler: str | None = None) -> Iterator[tuple[int, R]]:
    """Run the tasks of every plan together; yield ``(i, result of plans[i])`` as each completes.

    Serially the plans complete in order; on a cluster all their tasks are in flight at once
    and the plans complete in any order (:func:`attn_lib.simulation.executor.run`).
    """
    jobs = [(functools.partial(_draw, plan.trial), plan.seeds) for plan in plans]
    for i, curves in executor.run(jobs, scheduler=scheduler, progress=progress):
        yield i, plans[i].assemble(curves)

"""Where the Monte Carlo tasks run: in-process, on a local Dask cluster, or on a remote one.

A *job* is a function and the arguments of its independent calls (for
:meth:`~attn_lib.simulation.trials.Trials.run`: one draw per child seed); :func:`run` runs the
calls of many jobs and yields each job's results, in argument order, once all of them are done.
The mode is chosen by the ``scheduler`` argument, or else by the environment variable
``ATTN_BOOK_SCHEDULER`` (:data:`ENV`):

* unset, empty or ``"serial"`` -- in this process, one call after the other; Dask is not
  imported (it need not be installed);
* ``"local"`` or ``"local:N"`` -- a ``dask.distributed.LocalCluster`` of ``N`` worker processes
  (default: one per core), each with one thread, started on first use and kept for the life of
  the process;
* an address such as ``"tcp://host:8786"`` -- the scheduler of a running cluster
  (``dask scheduler`` and ``dask worker tcp://host:8786 --nthreads 1`` on the machines).

On a cluster the jobs' functions are scattered once (one round trip) and every call is one
task, so all the tasks of all the jobs passed to :func:`run` are in flight together. In every
mode a call runs with one BLAS thread (``threadpoolctl``): on a cluster the worker's one thread
shares the cores with the others, and a serial run must sum the products in the same order as
a worker to give the same bits (a multithreaded BLAS may not: measured up to 3.3e-14 relative,
in 1 of 18 curves of chapter 2's ``c`` sweep at ``n = 256``). A call gets its own arguments (a
trial its own child seed), nothing else is shared between calls, and the results are
reassembled in order, so every mode gives bit-identical results (``tests/test_distributed.py``).
Parallelism comes from the workers, not from BLAS threads inside a trial.

Progress goes to a tqdm bar on stderr with ``progress=True``, and by default (``None``) when
stderr is a terminal and the run lasts more than a few seconds; otherwise, when the environment
variable ``ATTN_BOOK_PROGRESS`` (:data:`PROGRESS`) names a file, every :func:`run` appends its bar
there (``scripts/build_book.py`` sets it for each chapter's kernel and prints its last state
while the chapter runs, so a notebook's own outputs never see it).

Examples
--------
>>> from attn_lib.simulation import executor
>>> [(j, out) for j, out in executor.run([(abs, [-1, 2]), (str, [3])], scheduler="serial")]
[(0, [1, 2]), (1, ['3'])]
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import os
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from tqdm import tqdm

if TYPE_CHECKING:
    from threadpoolctl import ThreadpoolController

from .. import _progress
from .._validation import check_scheduler

__all__ = ["ENV", "PROGRESS", "mode", "client", "run", "shutdown"]

#: Environment variable naming the mode when no ``scheduler`` argument is given.
ENV = "ATTN_BOOK_SCHEDULER"
#: Environment variable naming a file that receives the progress bar of every :func:`run`.
PROGRESS = "ATTN_BOOK_PROGRESS"

#: A job: a function and the arguments of its calls.
Job = tuple[Callable[[Any], Any], Sequence[Any]]

_CLIENTS: dict[tuple[str, int | str | None], Any] = {}
_TRIM = "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_"


def mode(scheduler: str | None = None) -> tuple[str, int | str | None]:
    """The mode ``scheduler`` (or, when it is ``None``, ``$ATTN_BOOK_SCHEDULER``) names.

    Returns
    -------
    ``("serial", None)``, ``("local", N)`` (``N`` workers) or ``("address", address)``.

    Raises
    ------
    TypeError, ValueError
        For anything else, naming ``scheduler`` or the environment variable.
    """
    if scheduler is None:
        value = os.environ.get(ENV, "").strip()
        kind, arg = check_scheduler(value or "serial", ENV)
    else:
        kind, arg = check_scheduler(scheduler, "scheduler")
    if kind == "local" and arg is None:
        arg = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return kind, arg


def client(scheduler: str | None = None) -> Any:
    """The ``dask.distributed.Client`` of the mode (``None`` for serial), made once per mode.

    Raises
    ------
    ImportError
        For a cluster mode when ``dask.distributed`` is not installed.
    """
    key = mode(scheduler)
    kind, arg = key
    if kind == "serial":
        return None
    if key not in _CLIENTS:
        try:
            import dask
            from dask.distributed import Client, LocalCluster
        except ImportError as exc:
            label = f"local:{arg}" if kind == "local" else arg
            raise ImportError(f"the scheduler {label!r} needs dask.distributed: "
                              "pip install 'attn-lib[distributed]'") from exc
        if kind == "local":
            # On loopback only, the HTTP server on a free port (the default 8787 may be taken).
            # Dask's workers trim the heap after every free (MALLOC_TRIM_THRESHOLD_=65536),
            # which makes glibc map and fault in every large temporary anew: a trial took
            # 1.3-1.8x longer on a worker than in-process (measured at n = 1024, under load).
            with dask.config.set({_TRIM: None}):
                cluster = LocalCluster(n_workers=arg, threads_per_worker=1, processes=True,
                                       host="127.0.0.1", dashboard_address="127.0.0.1:0")
            _CLIENTS[key] = Client(cluster, set_as_default=False)
        else:
            _CLIENTS[key] = Client(arg, set_as_default=False)
    return _CLIENTS[key]


@atexit.register
def shutdown() -> None:
    """Close every client made by :func:`client` (and the local clusters it started)."""
    while _CLIENTS:
        _, c = _CLIENTS.popitem()
        cluster = c.cluster
        c.close()
        if cluster is not None:  # a LocalCluster this module started
            cluster.close()


@functools.lru_cache(maxsize=1)
def _blas() -> ThreadpoolController:
    from threadpoolctl import ThreadpoolController
    return ThreadpoolController()


def _call(func: Callable[[Any], Any], arg: Any) -> Any:
    """One call, with one BLAS thread (serial and on a worker alike)."""
    with _blas().limit(limits=1, user_api="blas"):
        return func(arg)


@contextlib.contextmanager
def _bar(total: int, progress: bool | None) -> Iterator[Any]:
    """The progress bar of one :func:`run`: on stderr, in the file ``$ATTN_BOOK_PROGRESS``, or off."""
    path = os.environ.get(PROGRESS) if total else None
    if progress or not path:
        with tqdm(total=total, disable=not _progress.enabled(progress), desc="Monte Carlo",
                  delay=0.0 if progress else _progress.DELAY) as bar:
            yield bar
        return
    # a file another process reads (its last state): every update, in plain text
    with open(path, "a", encoding="utf-8") as out, \
            tqdm(total=total, file=out, mininterval=0, miniters=1,
                 bar_format="Monte Carlo: {n_fmt} of {total_fmt} tasks done "
                            "[{elapsed}<{remaining}]") as bar:
        yield bar


def run(jobs: Sequence[Job], scheduler: str | None = None,
        progress: bool | None = None) -> Iterator[tuple[int, list[Any]]]:
    """Run ``func(arg)`` for every argument of every job; yield ``(j, results of job j)``.

    Parameters
    ----------
    jobs : sequence of ``(func, args)``
        ``func`` is called once per element of ``args``; on a cluster it and the arguments are
        pickled (cloudpickle, so closures work).
    scheduler : str, optional
        The mode (see the module docstring); default ``$ATTN_BOOK_SCHEDULER``, else serial.
    progress : bool or None, default None
        A tqdm progress bar over all calls, on stderr; ``None``: when stderr is a terminal,
        after a few seconds (:mod:`attn_lib._progress`; never in a notebook or under pytest).
        Unless ``True``, the bar is appended to the file named by ``$ATTN_BOOK_PROGRESS`` when
        that is set (:data:`PROGRESS`).

    Yields
    ------
    (int, list)
        The index of a job and ``[func(a) for a in args]``, as soon as the job is complete: in
        order when serial, in order of completion on a cluster. An exception of a call is raised
        here (the tasks still queued are cancelled).
    """
    total = sum(len(args) for _, args in jobs)
    if total:
        c = client(scheduler)
    else:  # no cluster is started for nothing to do (a sweep read whole from the cache)
        mode(scheduler)
        c = None
    with _bar(total, progress) as bar:
        if c is None:
            for j, (func, args) in enumerate(jobs):
                out = []
                for arg in args:
                    out.append(_call(func, arg))
                    bar.update()
                yield j, out
            return
        from dask.distributed import as_completed

        where: dict[Any, tuple[int, int]] = {}
        results: list[list[Any]] = [[None] * len(args) for _, args in jobs]
        left = [len(args) for _, args in jobs]
        try:
            shared = c.scatter([func for func, _ in jobs], hash=False)  # one round trip
            for j, (_, args) in enumerate(jobs):
                if not args:
                    yield j, []
                    continue
                for i, future in enumerate(c.map(_call, [shared[j]] * len(args), list(args),
                                                 pure=False)):
                    where[future] = (j, i)
            for future, result in as_completed(list(where), loop=c.loop, with_results=True):
                j, i = where.pop(future)
                results[j][i] = result
                bar.update()
                left[j] -= 1
                if left[j] == 0:
                    yield j, results[j]
                    results[j] = []  # free them
        finally:
            if where:
                c.cancel(list(where))

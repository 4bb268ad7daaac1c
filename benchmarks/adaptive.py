"""Monte Carlo with trials added until a target standard error: shared by the benchmark scripts."""

from __future__ import annotations

import time

import numpy as np

from attn_lib.simulation.trials import standard_error
from attn_lib import Setting, simulate


def trials_until(setting: Setting, gammas: np.ndarray, n: int, sem_target: float, max_trials: int,
                 deadline: float, seed: int, min_trials: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """Per-trial attention and ridge errors, each ``(T, G)``, with ``T`` grown until ``sem <= sem_target``.

    Trials come in chunks; chunk ``k`` is ``simulate.errors(..., seed=seed + 1000 k)`` (so a run is
    reproducible). The first chunk has ``min_trials`` trials; each later one aims at the target
    from the spread seen so far, ``sem = max over gammas and models of std / sqrt(T)``, and at
    most doubles the count. Stops at the target, at ``max_trials``, or when ``time.time()`` has
    passed ``deadline`` (a chunk is never interrupted).
    """
    att, rid = [], []
    chunk, k = min_trials, 0
    while True:
        res = simulate.errors(setting, gammas, n=n, trials=chunk, seed=seed + 1000 * k)
        k += 1
        att.append(res.attention.values)
        rid.append(res.ridge.values)
        A, R = np.concatenate(att), np.concatenate(rid)
        t = A.shape[0]
        sem = max(standard_error(A, axis=0).max(), standard_error(R, axis=0).max())
        if sem <= sem_target or t >= max_trials or time.time() > deadline:
            return A, R
        need = int(np.ceil(t * (sem / sem_target) ** 2))
        chunk = int(min(max(need - t, 1), t, max_trials - t))

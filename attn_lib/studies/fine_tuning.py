r"""Training the low-rank update ``W_K^T W_Q`` by stochastic gradient descent (chapter "Fine-tuning").

The paper's practical conclusion is that low-rank fine-tuning works because it turns
``W_K^T W_Q`` towards the task's signal. Here the update is trained: ``M = I + W_K^T W_Q``
(``W_K, W_Q`` of shape ``(r, p)``, a small random start), and each step draws a fresh task
``X = mu y^T + Z`` (``n`` tokens, ``mu = sqrt(snr) e_1``) and moves the weights against the
gradient of that draw's error (:mod:`attn_lib.simulation.gradient`): stochastic gradient descent
on the expected error, the interpolation error of the ridge probe or its generalisation error
on a fresh sequence.

Along the trajectory the model is a setting again (:func:`learned_setting`: the Gram matrix of
``mu`` and the learned weights), so the theory (:func:`attn_lib.theory.attention_error`) and the
simulator evaluate it; :func:`theory_optimum` minimises the limit theory over the geometry at
given norms, and :func:`theory_flow` is gradient descent on the limit theory itself, in the span
of ``mu`` and the weights.

Randomness: training run ``seed`` uses ``numpy.random.SeedSequence(seed)``; its first child
draws the starting weights, its second the tasks of the steps (labels, then noise, per step).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
from scipy import optimize

from .._validation import check_choice, check_gamma, check_int, check_real, check_seed, check_setting
from ..model import data, kernel
from ..model.data import latent_coordinates
from ..model.setting import Entrywise, RankSetting, Setting, Softmax
from ..model.scale import softmax_scale
from ..simulation.simulate import raw_gammas
from ..simulation.gradient import Draw, generalisation_gradient, interpolation_gradient
from ..theory import attention_error

__all__ = ["OBJECTIVES", "Run", "probe_gamma", "train", "train_seeds", "learned_setting",
           "alignment", "theory_along", "theory_optimum", "theory_flow"]

#: The training objectives: the interpolation error of one draw, or the test error of its probe.
OBJECTIVES = ("interpolation", "generalisation")


@dataclass(frozen=True)
class Run:
    """One training run.

    Attributes
    ----------
    steps : ndarray of shape (K,)
        The steps at which the weights were recorded (0: the start).
    W_K, W_Q : ndarray of shape (K, r, p)
        The weights at those steps.
    loss : ndarray of shape (S,)
        The objective of each step's draw, before its update.
    mu : ndarray of shape (p,)
        The signal.
    """

    steps: np.ndarray
    W_K: np.ndarray
    W_Q: np.ndarray
    loss: np.ndarray
    mu: np.ndarray


def probe_gamma(setting: Setting, g: float, n: int) -> float:
    """The probe's ``gamma`` at ``gamma / tau = g`` (the book's scale convention), in the
    simulator's convention (:func:`attn_lib.simulation.simulate.raw_gammas`; for softmax the
    effective ``gamma``, raw divided by ``s_n^2``)."""
    raw = float(raw_gammas(setting, [g], n, relative=True)[0][0])
    if isinstance(setting.attention, Softmax):
        return raw / softmax_scale(setting, n) ** 2
    return raw


def _draw(mu: np.ndarray, n: int, rng: np.random.Generator) -> Draw:
    """``X = mu y^T + Z``: labels first, then the noise (the order of :func:`attn_lib.model.data.draw`)."""
    y = data.labels(n, rng)
    X = rng.standard_normal((mu.size, n))
    X += np.outer(mu, y)
    return Draw(X, y)


def train(setting: Setting, n: int, steps: int, lr: float, gamma: float, seed: int = 0, *,
          r: int = 1, init: float = 0.1, objective: str = "interpolation",
          record: int = 10) -> Run:
    r"""Stochastic gradient descent on the expected error, a fresh draw each step.

    ``W <- W - lr dE/dW`` for ``W = W_K, W_Q`` (:func:`attn_lib.simulation.gradient.interpolation_gradient`
    or :func:`~attn_lib.simulation.gradient.generalisation_gradient` on a second fresh draw).

    Parameters
    ----------
    setting : Setting
        The task and the model: ``c``, ``snr``, ``f`` or ``Softmax(beta)``; its weights are not
        used (``alpha`` must be 1).
    n : int
        Tokens per draw (``p = round(c n)``).
    steps : int
        Number of updates.
    lr : float
        Learning rate ``> 0``.
    gamma : float
        Ridge parameter ``> 0`` of the probe (for softmax the effective one).
    seed : int, default 0
    r : int, default 1
        Rank of the update.
    init : float, default 0.1
        Starting weights: i.i.d. ``N(0, init^2 / p)`` entries (rows of norm about ``init``).
    objective : {"interpolation", "generalisation"}
    record : int, default 10
        Record the weights every ``record`` steps (and at the last).

    Returns
    -------
    Run
    """
    s = check_setting(setting, attention=(Entrywise, Softmax))
    n, steps, r, record = (check_int(n, "n", low=4), check_int(steps, "steps"),
                           check_int(r, "r"), check_int(record, "record"))
    lr = check_real(lr, "lr", low=0.0, low_open=True)
    init = check_real(init, "init", low=0.0, low_open=True)
    gamma = check_gamma(gamma)
    objective = check_choice(objective, "objective", OBJECTIVES)
    p = s.p(n)
    mu = np.zeros(p)
    mu[0] = np.sqrt(s.snr)
    start, tasks = (np.random.default_rng(q) for q in np.random.SeedSequence(check_seed(seed)).spawn(2))
    W_K = start.standard_normal((r, p)) * (init / np.sqrt(p))
    W_Q = start.standard_normal((r, p)) * (init / np.sqrt(p))
    kept, WK, WQ, loss = [0], [W_K.copy()], [W_Q.copy()], np.empty(steps)
    with kernel.BLAS.limit(limits=1):  # small products: one thread is faster (benchmarks/fine_tuning.py)
        for k in range(steps):
            d = _draw(mu, n, tasks)
            if objective == "interpolation":
                loss[k], gK, gQ = interpolation_gradient(s, d, W_K, W_Q, gamma)
            else:
                loss[k], gK, gQ = generalisation_gradient(s, d, _draw(mu, n, tasks), W_K, W_Q,
                                                          gamma)
            W_K -= lr * gK
            W_Q -= lr * gQ
            if (k + 1) % record == 0 or k + 1 == steps:
                kept.append(k + 1)
                WK.append(W_K.copy())
                WQ.append(W_Q.copy())
    return Run(np.array(kept), np.array(WK), np.array(WQ), loss, mu)


def train_seeds(*, setting: Setting, n: int, steps: int, lr: float, gamma: float,
                seeds: list[int], r: int = 1, init: float = 0.1,
                objective: str = "interpolation", record: int = 10) -> dict[str, np.ndarray]:
    """:func:`train` for each seed, stacked (a plain dictionary, for the result cache).

    Returns
    -------
    dict
        ``steps`` ``(K,)``, ``W_K`` and ``W_Q`` ``(S, K, r, p)``, ``loss`` ``(S, steps)``,
        ``mu`` ``(p,)``.
    """
    runs = [train(setting, n, steps, lr, gamma, seed, r=r, init=init, objective=objective,
                  record=record) for seed in seeds]
    return {"steps": runs[0].steps, "W_K": np.array([u.W_K for u in runs]),
            "W_Q": np.array([u.W_Q for u in runs]), "loss": np.array([u.loss for u in runs]),
            "mu": runs[0].mu}


def learned_setting(setting: Setting, mu: np.ndarray, W_K: np.ndarray, W_Q: np.ndarray
                    ) -> Setting | RankSetting:
    """The setting of ``setting``'s task with the weights ``W_K, W_Q`` (shape ``(r, p)``).

    Rank one: a :class:`~attn_lib.model.setting.Setting` with the norms and cosines of
    ``mu, w_K, w_Q`` (every theory takes it, the finite-size softmax theory included); rank
    ``r``: :meth:`RankSetting.from_vectors <attn_lib.model.setting.RankSetting.from_vectors>`.
    """
    W_K, W_Q = np.atleast_2d(W_K), np.atleast_2d(W_Q)
    if W_K.shape[0] > 1:
        return RankSetting.from_vectors(setting.c, mu, W_K, W_Q, setting.f,
                                        attention=setting.attention)
    V = np.vstack([mu, W_K, W_Q])
    norms = np.linalg.norm(V, axis=1)
    C = np.clip((V @ V.T) / np.outer(norms, norms), -1.0, 1.0)
    return dataclasses.replace(setting, snr=float(norms[0] ** 2), wk_norm=float(norms[1]), wq_norm=float(norms[2]),
                               cos_mu_wk=float(C[0, 1]), cos_mu_wq=float(C[0, 2]),
                               cos_wk_wq=float(C[1, 2]))


def alignment(mu: np.ndarray, W: np.ndarray) -> np.ndarray:
    r"""``||P_W mu|| / ||mu||``: the cosine of ``mu`` with the row space of ``W`` (``(r, p)`` or ``(K, r, p)``).

    For ``r = 1`` it is ``|cos(mu, w)|``; it is 1 when ``mu`` lies in the span of the rows.
    """
    W = np.asarray(W, dtype=float)
    if W.ndim == 3:
        return np.array([alignment(mu, w) for w in W])
    Q, _ = np.linalg.qr(W.T)
    return np.asarray(np.linalg.norm(Q.T @ mu) / np.linalg.norm(mu))


def theory_along(setting: Setting, run: Run, gamma: float, n: int | None = None) -> np.ndarray:
    """The theory's error at each recorded step of ``run`` (shape ``(K,)``).

    :func:`attn_lib.theory.attention_error` of :func:`learned_setting`, the limit or (``n``) the
    finite-size theory at ``n`` tokens.
    """
    return np.array([attention_error(learned_setting(setting, run.mu, a, b), [gamma], n=n)[0]
                     for a, b in zip(run.W_K, run.W_Q)])


def _geometry(setting: Setting, angles: np.ndarray, wk_norm: float, wq_norm: float) -> Setting:
    """The setting with ``w_K = a (cos t1, sin t1, 0)``, ``w_Q = b (cos t2, sin t2 cos t3, sin t2 sin t3)``.

    ``mu`` along the first axis: every cosine matrix with these norms is reached.
    """
    t1, t2, t3 = angles
    k = np.array([np.cos(t1), np.sin(t1), 0.0])
    q = np.array([np.cos(t2), np.sin(t2) * np.cos(t3), np.sin(t2) * np.sin(t3)])
    return dataclasses.replace(setting, wk_norm=wk_norm, wq_norm=wq_norm,
                               cos_mu_wk=float(np.clip(k[0], -1, 1)),
                               cos_mu_wq=float(np.clip(q[0], -1, 1)),
                               cos_wk_wq=float(np.clip(k @ q, -1, 1)))


def theory_optimum(setting: Setting, wk_norm: float, wq_norm: float, gamma: float,
                   starts: int = 4, seed: int = 0) -> tuple[Setting, float]:
    r"""The geometry that minimises the limit theory at the norms ``||w_K||, ||w_Q||``.

    Minimises :func:`attn_lib.theory.attention_error` (the proportional limit) over the three
    cosines of ``mu, w_K, w_Q``, parametrised by three angles (:func:`_geometry`), by
    Nelder--Mead from ``starts`` starting points (the aligned one and random ones).

    Returns
    -------
    best : Setting
        The optimal geometry.
    error : float
        The theory's error there.
    """
    gamma = check_gamma(gamma)
    rng = np.random.default_rng(np.random.SeedSequence(check_seed(seed)))

    def objective(a: np.ndarray) -> float:
        return float(attention_error(_geometry(setting, a, wk_norm, wq_norm), [gamma])[0])

    x0s = [np.zeros(3)] + [rng.uniform(0, np.pi, 3) for _ in range(starts - 1)]
    fits = [optimize.minimize(objective, x0, method="Nelder-Mead",
                              options={"xatol": 1e-3, "fatol": 1e-7}) for x0 in x0s]
    best = min(fits, key=lambda f: f.fun)
    return _geometry(setting, best.x, wk_norm, wq_norm), float(best.fun)


def theory_flow(setting: Setting, run: Run, lr: float, gamma: float, steps: int,
                record: int = 10, n: int | None = None, h: float = 1e-5
                ) -> tuple[np.ndarray, np.ndarray]:
    r"""Gradient descent on the limit theory, from the start of ``run``, with its learning rate.

    The theory depends on the weights through the Gram matrix of ``mu, w_K, w_Q`` only, so its
    gradient lies in their span: the flow runs on their latent coordinates
    (:func:`attn_lib.model.data.latent_coordinates`, 3 numbers each for rank one), ``mu`` fixed,
    ``w <- w - lr dE_theory/dw`` by central differences of step ``h``.

    Returns
    -------
    steps : ndarray of shape (K,)
    settings : ndarray of object, shape (K,)
        The :func:`learned_setting` at each recorded step.
    """
    lr, gamma = check_real(lr, "lr", low=0.0, low_open=True), check_gamma(gamma)
    V = latent_coordinates(learned_setting(setting, run.mu, run.W_K[0], run.W_Q[0]))
    mu, w = V[:, 0], V[:, 1:].copy()

    def err(w: np.ndarray) -> float:
        return float(attention_error(learned_setting(setting, mu, w[:, 0], w[:, 1]), [gamma],
                                     n=n)[0])

    kept, out = [0], [learned_setting(setting, mu, w[:, 0], w[:, 1])]
    for k in range(check_int(steps, "steps")):
        g = np.zeros_like(w)
        for idx in np.ndindex(w.shape):
            e = np.zeros_like(w)
            e[idx] = h
            g[idx] = (err(w + e) - err(w - e)) / (2 * h)
        w -= lr * g
        if (k + 1) % record == 0 or k + 1 == steps:
            kept.append(k + 1)
            out.append(learned_setting(setting, mu, w[:, 0], w[:, 1]))
    return np.array(kept), np.array(out, dtype=object)

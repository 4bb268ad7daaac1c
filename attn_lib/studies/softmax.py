r"""The studies of the chapter *Softmax attention* (``book/11_softmax``).

Softmax attention (:class:`~attn_lib.model.setting.Softmax`, columns of ``A`` summing to one,
self-pairs masked) against the entry-wise kernel of ``f_beta(t) = e^{beta t - beta^2/2} - 1``
and against ridge regression, at **equal effective regularisation**: each model at its own
``gamma = tau g`` with ``tau`` its feature scale (:func:`attn_lib.studies.sweeps.feature_scale`:
``c`` for ridge, ``tau_K`` for the entry-wise kernel, ``s_n^2 tau_K + p / (n (n - 1))`` for the
raw softmax features ``X A`` at ``n`` tokens) and ``g`` shared. The softmax theories are the
proportional limit of :mod:`attn_lib.theory.softmax` and its finite-size theory at ``n``
(``attention_error(..., n=n)``, refused where :func:`attn_lib.theory.softmax.tail` is at least
one), both at the effective ridge parameter ``gamma / s_n^2``.

* :func:`compare` (and :func:`compare_theory`) -- Monte Carlo
  (:func:`attn_lib.studies.sweeps.simulations`, cached) and the three theories of one setting
  on a grid of ``g`` (a :class:`Comparison`);
* :func:`normalisation_draws` -- the measured spread of the normalising sums
  ``eps = D / ((n - 1) m) - 1`` (against :func:`attn_lib.theory.softmax.normalisation_std`);
* :func:`self_weight_limit` -- the leading-order weight of a token on itself without the mask;
* :func:`kurtosis` and :func:`tail_beta` -- the heavy tail of ``f_beta``, which sets how large
  ``n`` must be for its Gaussian equivalence (``book/derivation_softmax.md``; defined in
  :mod:`attn_lib.theory.softmax`, whose domain checks use them);
* :func:`spectrum_draws` and :func:`wasserstein` -- the singular values of ``A`` against those of
  its Gaussian equivalent, and their relative Wasserstein-1 distance.

Functions of this module that are not in :mod:`attn_lib.theory` but are theory:
:func:`self_weight_limit`, :func:`gaussian_equivalent` (the finite-``n`` linearisation of
``A``), :func:`kurtosis` and :func:`tail_beta` (closed forms, not cached).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TypedDict, cast

import numpy as np

from .. import cache
from .._domain import ignored
from .._validation import check_gammas, check_int, check_seed, check_setting
from ..model import data, kernel
from ..model.setting import Setting, Softmax
from ..simulation.trials import Trials, standard_error
from ..theory import attention_error, ridge_error, softmax
from ..theory.softmax import kurtosis, tail_beta
from . import sweeps

__all__ = ["Comparison", "compare", "compare_theory", "attention_draw", "unmasked",
           "normalisation_draws", "self_weight_limit", "kurtosis", "tail_beta",
           "gaussian_equivalent", "spectrum_draws",
           "wasserstein", "cached_normalisation", "cached_spectrum"]


def _softmax(setting: object, mask: bool = True) -> Setting:
    s = check_setting(setting, attention=(Softmax,))
    if cast(Softmax, s.attention).mask is not mask:
        raise ValueError(f"setting.attention: expected Softmax(beta, mask={mask}), got "
                         f"{s.attention!r}")
    return s


def unmasked(setting: Setting) -> Setting:
    """The same softmax setting without the self-pair mask (``Softmax(beta, mask=False)``)."""
    s = _softmax(setting)
    return dataclasses.replace(s, attention=Softmax(cast(Softmax, s.attention).beta, mask=False))


@dataclass(frozen=True)
class Comparison:
    """Softmax, entry-wise ``f_beta`` and ridge at equal effective regularisation ``g``.

    Attributes
    ----------
    g : ndarray of shape (G,)
        Shared ``gamma / tau``.
    softmax, ridge : ndarray of shape (T, G)
        Monte Carlo errors of ``X A`` at ``gamma = tau_A g`` and of ``X`` at ``gamma = c g``,
        on the same draws.
    entrywise : ndarray of shape (T, G) or None
        Monte Carlo errors of ``X K`` (``K`` the entry-wise kernel of ``f_beta``) at
        ``gamma = tau_K g``, on the same draws.
    unmasked : ndarray of shape (T, G) or None
        Monte Carlo errors of the unmasked ``X A`` at ridge's ``gamma = c g`` (without the mask
        ``A`` is close to ``I``, so its features have ridge's scale), on the same draws.
    theory_softmax, theory_entrywise, theory_ridge : ndarray of shape (G,)
        The proportional limits at the same ``g``.
    theory_finite : ndarray of shape (G,) or None
        The finite-size softmax theory at ``n`` and the same ``g``; ``None`` where it refuses the
        setting (``tail(setting, n) >= 1``).
    theory_rows : ndarray of shape (G,) or None
        The theory that keeps the kernel's row factors at ``n``
        (:func:`attn_lib.theory.softmax.rows_error`) at the same ``g``; ``None`` unless asked.
    n, p : int
    beta, delta : float
        Inverse temperature and coherent shift ``delta`` at ``n``.
    """

    g: np.ndarray
    softmax: np.ndarray
    ridge: np.ndarray
    entrywise: np.ndarray | None
    unmasked: np.ndarray | None
    theory_softmax: np.ndarray
    theory_entrywise: np.ndarray
    theory_ridge: np.ndarray
    theory_finite: np.ndarray | None
    n: int
    p: int
    beta: float
    delta: float
    theory_rows: np.ndarray | None = None

    def mean(self, model: str) -> np.ndarray:
        """Mean over draws of ``softmax``, ``ridge``, ``entrywise``, ``unmasked`` or ``gap``."""
        return self._values(model).mean(axis=0)

    def sem(self, model: str) -> np.ndarray:
        """Standard error of :meth:`mean` (``gap``: of the paired difference softmax - ridge)."""
        return standard_error(self._values(model), axis=0)

    def _values(self, model: str) -> np.ndarray:
        if model == "gap":
            return self.softmax - self.ridge
        v = getattr(self, model) if model in ("softmax", "ridge", "entrywise", "unmasked") else None
        if v is None:
            raise ValueError(f"model: {model!r} was not simulated or is unknown")
        return v


def compare(setting: Setting, g: object, *, n: int, trials: int, seed: int = 0,
            entrywise: bool = True, with_unmasked: bool = False, rows: bool = False) -> Comparison:
    r"""Monte Carlo and theory of softmax, entry-wise ``f_beta`` and ridge at equal ``gamma / tau``.

    One draw gives every ridge parameter: the softmax simulation at equal ``gamma / tau``
    (``relative=True``) gives softmax at ``tau_A g`` and ridge at ``c g`` on the same tokens.
    Cached through :func:`attn_lib.studies.sweeps.simulations`.

    Parameters
    ----------
    setting : Setting
        With masked :class:`~attn_lib.model.setting.Softmax` attention.
    g : float or array_like of shape (G,)
        Positive ``gamma / tau``.
    n, trials, seed : int
        Tokens, draws and root seed (the same seed for every model: common draws).
    entrywise : bool, default True
        Also simulate the entry-wise kernel of ``f_beta``.
    with_unmasked : bool, default False
        Also simulate the unmasked softmax (at ridge's ``gamma = c g``).
    rows : bool, default False
        Also the row-factor theory (:func:`compare_theory`).

    Returns
    -------
    Comparison
    """
    s = _softmax(setting)
    g = np.atleast_1d(check_gammas(g, "g"))
    n, trials, seed = check_int(n, "n", low=2), check_int(trials, "trials"), check_seed(seed)
    ew = softmax.entrywise_equivalent(s)
    tau_k = sweeps.feature_scale(ew)
    mc = sweeps.simulations([s], g, n=n, trials=trials, seed=seed, relative=True)
    att, ridge = mc.values("attention")[0], mc.ridge[0]
    ew_mc = (sweeps.simulations([ew], tau_k * g, n=n, trials=trials, seed=seed).values("attention")[0]
             if entrywise else None)
    um = (sweeps.simulations([unmasked(s)], s.c * g, n=n, trials=trials, seed=seed).values("attention")[0]
          if with_unmasked else None)
    th = compare_theory(s, g, n=n, rows=rows)
    return Comparison(
        g=g, softmax=att, ridge=ridge, entrywise=ew_mc, unmasked=um,
        theory_softmax=th["softmax"], theory_entrywise=th["entrywise"], theory_ridge=th["ridge"],
        theory_finite=th["finite"], n=n, p=s.p(n), beta=cast(Softmax, s.attention).beta,
        delta=s.delta(n), theory_rows=th["rows"])


class _Theories(TypedDict):
    softmax: np.ndarray
    finite: np.ndarray | None
    entrywise: np.ndarray
    ridge: np.ndarray
    rows: np.ndarray | None


def compare_theory(setting: Setting, g: object, *, n: int, rows: bool = False) -> _Theories:
    """The theories of :func:`compare` at ``g`` (``"softmax"``, ``"finite"``, ``"entrywise"``, ``"ridge"``, ``"rows"``).

    Softmax: :func:`attn_lib.theory.attention_error` at ``gamma / s_n^2`` with ``gamma = tau_A
    g``, the proportional limit (``"softmax"``) and the finite-size theory at ``n``
    (``"finite"``; ``None`` where :func:`attn_lib.theory.softmax.tail` is at least one, which
    the theory refuses); entry-wise ``f_beta`` at ``tau_K g``; ridge at ``c g``; with ``rows``,
    the theory that keeps the kernel's row factors at ``n``
    (:func:`attn_lib.theory.softmax.rows_error`, same effective gammas; ``None`` where the
    finite-size theory refuses or unless asked). Each of shape ``(G,)``.
    """
    s = _softmax(setting)
    g = np.atleast_1d(check_gammas(g, "g"))
    n = check_int(n, "n", low=2)
    ew = softmax.entrywise_equivalent(s)
    tau_a = sweeps.feature_scale(s, n=n)
    geff = softmax.effective_gamma(s, tau_a * g, n)
    finite = attention_error(s, geff, n=n) if softmax.tail(s, n) < 1.0 else None
    return {"softmax": attention_error(s, geff), "finite": finite,
            "entrywise": attention_error(ew, sweeps.feature_scale(ew) * g),
            "ridge": ridge_error(s, s.c * g),
            "rows": _rows(s, geff, n) if rows and finite is not None else None}


def _rows(s: Setting, geff: np.ndarray, n: int) -> np.ndarray:
    """:func:`attn_lib.theory.softmax.rows_error`, outside its measured domain too (the
    breakdown figure measures where it stops)."""
    with ignored():
        return softmax.rows_error(s, geff, n)


def attention_draw(setting: Setting, n: int, seed: int = 0) -> np.ndarray:
    """The softmax ``A``, shape ``(n, n)``, of the first draw of ``seed`` (as :func:`compare`'s)."""
    s = check_setting(setting, attention=(Softmax,))
    n, seed = check_int(n, "n", low=2), check_seed(seed)
    rng = np.random.default_rng(np.random.SeedSequence(seed).spawn(1)[0])
    d = data.draw(s, n, rng)
    assert d.w_K is not None and d.w_Q is not None  # a Setting's draw
    kind = cast(Softmax, s.attention)
    return kernel.softmax_kernel(d.X, d.w_K, d.w_Q, kind.beta, s.alpha, kind.mask)


def normalisation_draws(setting: Setting, n: int, trials: int, seed: int = 0) -> Trials:
    r"""Measured mean and spread of ``eps_j = D_j / ((n - 1) m) - 1`` over the queries ``j``.

    ``D_j = sum_{k != j} e^{beta T_kj}`` and ``m = e^{beta^2 alpha^2 / 2}``: the normalising sums
    of the masked softmax, as in :func:`attn_lib.theory.softmax.decompose` (computed without its
    ``X G`` product). Seeded as :func:`attn_lib.simulate.errors` (the same draws).

    Returns
    -------
    Trials
        Curves ``"eps_std"`` (over the queries, ``ddof = 0``) and ``"eps_mean"``, shape
        ``(trials,)``.
    """
    s = _softmax(setting)
    n, trials, seed = check_int(n, "n", low=2), check_int(trials, "trials"), check_seed(seed)
    b, alpha = cast(Softmax, s.attention).beta, s.alpha
    data.geometry(s, s.p(n))

    def trial(rng: np.random.Generator) -> dict[str, float]:
        d = data.draw(s, n, rng)
        assert d.w_K is not None and d.w_Q is not None  # a Setting's draw
        G = kernel.logits(d.X, d.w_K, d.w_Q, alpha)
        G *= b
        G -= 0.5 * (b * alpha) ** 2
        np.expm1(G, out=G)
        np.fill_diagonal(G, 0.0)
        eps = G.sum(axis=0) / (n - 1)
        return {"eps_std": float(eps.std()), "eps_mean": float(eps.mean())}

    return Trials.run(trial, trials=trials, seed=seed, gammas=np.empty(0), n=n, p=s.p(n))


def self_weight_limit(setting: Setting, n: int, nodes: int = 40) -> float:
    r"""Leading-order mean weight ``tr(A) / n`` of a token on itself, without the mask.

    For ``mu = 0`` and no weights (``M = alpha I``) the self-logit is
    ``T_jj = alpha ||x_j||^2 / sqrt(p) = alpha (sqrt(p) + sqrt(2) xi)`` (``xi ~ N(0, 1)``, the
    norm's fluctuation) while the ``n - 1`` other terms of the normalising sum add up to
    ``(n - 1) e^{beta^2 alpha^2 / 2}`` (they concentrate), so

        tr(A) / n ~ E_xi [ 1 / (1 + (n - 1) exp(beta^2 alpha^2 / 2 - beta alpha t)) ],
        t = sqrt(p) + sqrt(2) xi,

    evaluated by Gauss–Hermite quadrature with ``nodes`` points.

    Parameters
    ----------
    setting : Setting
        Softmax attention (``mask`` is ignored); ``snr`` and the weight norms must be 0.
    n : int
        Tokens (``p = round(c n)``).
    """
    s = check_setting(setting, attention=(Softmax,))
    if s.snr != 0.0 or s.wk_norm != 0.0 or s.wq_norm != 0.0:
        raise ValueError("setting: self_weight_limit is derived for mu = 0 and no weights "
                         "(snr = wk_norm = wq_norm = 0)")
    n, nodes = check_int(n, "n", low=2), check_int(nodes, "nodes")
    b, a, p = cast(Softmax, s.attention).beta, s.alpha, s.p(n)
    x, w = np.polynomial.hermite_e.hermegauss(nodes)
    arg = 0.5 * (b * a) ** 2 - b * a * (np.sqrt(p) + np.sqrt(2.0) * x) + np.log(n - 1.0)
    return float(np.sum(w / (1.0 + np.exp(arg))) / np.sqrt(2.0 * np.pi))


def gaussian_equivalent(X: np.ndarray, beta: float, rng: np.random.Generator) -> np.ndarray:
    r"""The Gaussian equivalent, ``(n, n)``, of the masked softmax ``A`` of tokens ``X``, ``M = I``.

    By the reduction (:mod:`attn_lib.theory.softmax`), ``A ~ (1 1^T - I) / (n - 1) + s K`` with
    ``s = sqrt(p) / (n - 1)`` and ``K`` the entry-wise kernel of ``f_beta``; linearised,
    ``K ~ beta (S - diag S) + sqrt(b2) W / sqrt(p)``, ``S = X^T X / p``,
    ``b2 = e^{beta^2} - 1 - beta^2`` and ``W`` an independent Wigner matrix with zero diagonal
    (:func:`attn_lib.model.data.goe`). The rank-two ``a2`` term and the normalising-sum
    fluctuations are left out.
    """
    p, n = X.shape
    S = X.T @ X
    S /= p
    np.fill_diagonal(S, 0.0)
    S *= beta
    S += np.sqrt(np.expm1(beta * beta) - beta * beta) / np.sqrt(p) * data.goe(n, rng)
    S *= np.sqrt(p) / (n - 1)
    S += 1.0 / (n - 1)
    np.fill_diagonal(S, 0.0)
    return S


def spectrum_draws(setting: Setting, n: int, trials: int, seed: int = 0) -> Trials:
    r"""Singular values of the masked softmax ``A`` and of its Gaussian equivalent.

    Each draw gives the tokens ``X`` (:func:`attn_lib.model.data.draw`), ``A``
    (:func:`attn_lib.model.kernel.softmax_kernel`) and, from the same generator, the Wigner part
    of :func:`gaussian_equivalent` on the same ``X``.

    Parameters
    ----------
    setting : Setting
        Masked softmax with ``M = I`` (``alpha = 1``, no weights).

    Returns
    -------
    Trials
        Curves ``"softmax"`` and ``"equivalent"`` of shape ``(trials, n)``, singular values in
        decreasing order.
    """
    s = _softmax(setting)
    if s.alpha != 1.0 or s.wk_norm != 0.0 or s.wq_norm != 0.0:
        raise ValueError("setting: the Gaussian equivalent is written for M = I (alpha = 1, "
                         "wk_norm = wq_norm = 0)")
    n, trials, seed = check_int(n, "n", low=2), check_int(trials, "trials"), check_seed(seed)
    b = cast(Softmax, s.attention).beta

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        d = data.draw(s, n, rng)
        assert d.w_K is not None and d.w_Q is not None  # a Setting's draw
        A = kernel.softmax_kernel(d.X, d.w_K, d.w_Q, b, 1.0, True)
        sv_a = np.linalg.svd(A, compute_uv=False)
        del A
        sv_g = np.linalg.svd(gaussian_equivalent(d.X, b, rng), compute_uv=False)
        return {"softmax": sv_a, "equivalent": sv_g}

    return Trials.run(trial, trials=trials, seed=seed, gammas=np.empty(0), n=n, p=s.p(n))


def wasserstein(a: np.ndarray, b: np.ndarray, skip: int = 1) -> np.ndarray:
    r"""Relative Wasserstein-1 distance of two sets of singular values, per draw.

    ``W1(a, b) / mean(b)`` between the empirical laws of the rows of ``a`` and ``b`` (equal
    sizes: ``W1 = mean |sort a - sort b|``), after dropping the ``skip`` largest values of each
    (the mean part's outlier near 1).

    Parameters
    ----------
    a, b : ndarray of shape (T, n)
        Singular values in decreasing order.
    skip : int, default 1

    Returns
    -------
    ndarray of shape (T,)
    """
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 2:
        raise ValueError(f"a and b must have one shape (T, n), got {a.shape} and {b.shape}")
    skip = check_int(skip, "skip", low=0, high=a.shape[1] - 1)
    a, b = np.sort(a[:, skip:], axis=1), np.sort(b[:, skip:], axis=1)
    return np.abs(a - b).mean(axis=1) / b.mean(axis=1)


def cached_normalisation(setting: Setting, n: int, trials: int, seed: int = 0) -> Trials:
    """:func:`normalisation_draws` through the disk cache."""
    return cache.cached(normalisation_draws, setting=setting, n=n, trials=trials, seed=seed)


def cached_spectrum(setting: Setting, n: int, trials: int, seed: int = 0) -> Trials:
    """:func:`spectrum_draws` through the disk cache."""
    return cache.cached(spectrum_draws, setting=setting, n=n, trials=trials, seed=seed)

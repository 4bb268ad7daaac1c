r"""Softmax attention by reduction to the entry-wise theory (proportional limit).

Softmax attention (:class:`~attn_lib.model.setting.Softmax`) with the self-pairs masked has
``A_ij = exp(beta T_ij) / D_j`` (``i != j``), ``D_j = sum_{k != j} exp(beta T_kj)``, on the
logits ``T = X^T M X / sqrt(p)``, whose off-diagonal entries are about ``N(0, sigma^2)`` with
``sigma`` the setting's ``logit_scale`` (``alpha``). With ``m = E exp(beta sigma xi) =
e^{beta^2 sigma^2 / 2}`` and ``g(t) = exp(beta t) / m - 1`` (centred), **exactly**

    (n - 1) A = (1 1^T - I + G) D_eps^{-1},   G_ij = g(T_ij) (i != j),  G_jj = 0,
    D_eps = diag(1 + eps),  eps = G^T 1 / (n - 1),

so ``Phi = X A`` is the sum of

* the kernel part ``X G / (n - 1) = s X K``, ``K`` the book's entry-wise kernel of
  ``f_beta(t) = exp(beta t - beta^2/2) - 1`` (:func:`entrywise_equivalent`) and
  ``s = sqrt(p) e^{-beta^2 (sigma^2 - 1) / 2} / (n - 1)`` (:func:`scale`);
* the mean part ``X (1 1^T - I) / (n - 1)``, a rank-one spike ``u 1^T`` (``u = X 1 / (n - 1)``,
  ``||u||^2 ~ c``) plus ``-X / (n - 1)``;
* the normalising-sum fluctuations ``D_eps^{-1} - I``, of relative size
  ``std(eps) ~ sqrt(nu / n + beta^4 sigma^4 / (2 p))`` (:func:`normalisation_std`).

In the proportional limit only the kernel part survives (``book/derivation_softmax.md`` derives
each step and measures what the others add at finite ``n``): the features ``s Phi`` at ``gamma``
have the error of ``Phi`` at ``gamma / s^2`` (exact), the spike ``u 1^T`` is ``n / gamma``
times larger than the bulk and, the labels being balanced (``y^T 1 = 0``), only removes one
direction of feature space and one of token space (a rank-two change, ``O(1/n)``), the
fluctuations multiply the spike into a rank-one term along the same ``u`` and rescale the
columns of the kernel part by ``1 + O(n^{-1/2})``. Hence

    E_softmax(gamma; n) -> E_entrywise[f_beta](gamma / s_n^2),

and :func:`attn_lib.theory.attention_error` of a softmax setting is the right-hand side as a
function of the **effective** ridge parameter ``gamma / s_n^2`` (:func:`effective_gamma`): the
raw ``gamma`` of ``Phi = X A`` shrinks like ``c / n`` at fixed effective regularisation.

Finite size (``attention_error(setting, gammas, n=...)``, same effective gammas). At a coherent
shift ``delta`` of order one the normalising sums depend on the query's latent type ``t``:
with the latent split ``t_ij = g_ij + h_ij`` of the finite-size theory,
``D_j ~ (n - 1) e^{beta^2 / 2} d(t_j)``, ``d(t) = E_pi[e^{beta h(t', t)}]`` (:func:`query_mean`),
so ``(n - 1) A / sqrt(p)`` is the finite-size model with the uncentred mean kernel
``e^{beta h(t, t')} / d(t')``, the slope kernel ``beta e^{beta h} / d(t')`` and the Wigner
profile ``e^{2 beta h} (e^{beta^2} - 1 - beta^2) / d(t')^2``, solved by
:mod:`attn_lib.theory._finite_size` in the canonical form (:func:`canonical`). The fluctuations
of ``D_j`` around it are dropped (``book/derivation_softmax.md`` measures them), and the theory
refuses settings where the weights' variance over the types is infinite (:func:`tail`).

Past the tail edge (:func:`tail_beta`, ``kurtosis(beta) ~ n``) the Gaussian equivalence of
``f_beta`` misses at finite ``n`` by an amount that falls like ``n^{-1/2}``: a few large logits
carry each row of the kernel. :func:`rows_error` keeps each key row's random variance factor
(:func:`row_factor_law`) in a cavity equation with one unknown per row class
(:mod:`attn_lib.theory._softmax_rows`) and carries it to any setting through a matched Wigner
variance; :func:`rows_correction` is the change it makes on random inputs. Measured at ``n =
2048`` within 0.017 of Monte Carlo up to ``beta = 2`` on random inputs
(``benchmarks/softmax_rows.py``; its domain: :func:`attn_lib.theory.domain.rows_violations`).
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

import functools

import numpy as np
from scipy.optimize import brentq

from .._domain import emit, ignored
from .._validation import check_bool, check_gammas, check_int, check_real, check_setting
from . import _softmax_rows
from ..model.data import latent_coordinates
from ..model.kernel import logits
from ..model.scale import softmax_scale
from ..model.setting import ENTRYWISE, BaseSetting, HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax

_S = TypeVar("_S", bound="Setting | RankSetting | MatrixSetting | HeadsSetting")

__all__ = ["entrywise_equivalent", "canonical", "scale", "tail", "query_mean", "effective_gamma", "normalisation_std", "Parts",
           "decompose", "kurtosis", "tail_beta", "rows_error", "rows_correction", "row_factor_law"]


def _softmax_setting(setting: object, types: tuple[type, ...] = (Setting, RankSetting)
                     ) -> BaseSetting:
    """``setting`` if it has masked :class:`Softmax` attention (the one the reduction covers)."""
    s: BaseSetting = check_setting(setting, types=cast(Any, types), attention=(Softmax,))
    if not cast(Softmax, s.attention).mask:
        raise ValueError("setting.attention: the softmax theory needs the self-pairs masked "
                         "(Softmax(beta, mask=True)); without the mask A is close to the identity")
    return s


def entrywise_equivalent(setting: _S) -> _S:
    """The entry-wise setting whose kernel is the softmax's: ``f = f_beta``, ``Entrywise`` attention.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        With ``attention=Softmax(beta)`` (masked); its ``f`` is ignored.

    Returns
    -------
    Setting, RankSetting, MatrixSetting or HeadsSetting
        The same fields with ``f = exponential(beta)`` and entry-wise attention.
    """
    s = _softmax_setting(setting, (Setting, RankSetting, MatrixSetting, HeadsSetting))
    return cast(_S, dataclasses.replace(cast(Any, s), f=cast(Softmax, s.attention).f,
                                        attention=ENTRYWISE))


def canonical(setting: Setting) -> Setting:
    """The softmax setting with ``alpha = 1`` and the same attention matrix ``A``.

    ``beta T = (beta alpha) X^T (I + w_K w_Q^T / alpha) X / sqrt(p)``: the inverse temperature
    ``beta alpha`` and ``w_K / alpha`` (the finite-size theory's form; ``f`` stays ignored).
    Its :func:`scale` is ``sqrt(p) / (n - 1)``, that of ``setting`` is ``e^{-beta^2 (alpha^2 -
    1) / 2}`` times it.
    """
    s = cast(Setting, _softmax_setting(setting))  # a RankSetting has no canonical form here
    a = s.alpha
    if a == 1.0:
        return s
    return dataclasses.replace(s, wk_norm=s.wk_norm / a, alpha=1.0,
                               attention=Softmax(cast(Softmax, s.attention).beta * a))


def scale(setting: BaseSetting, n: int) -> float:
    r"""Scale ``s = sqrt(p) e^{-beta^2 (sigma^2 - 1) / 2} / (n - 1)`` of the kernel part of ``X A``.

    ``X G / (n - 1) = s X K`` with ``K`` the entry-wise kernel of :func:`entrywise_equivalent`
    (``sigma = setting.logit_scale``; ``s = sqrt(p) / (n - 1)`` at ``alpha = 1``). Any setting
    type with masked softmax attention: a matrix at its logit scale ``||M||_F / sqrt(p)``,
    several heads by the root mean square of theirs
    (:func:`attn_lib.model.scale.softmax_scale`). Every public call reads a softmax ``gamma``
    as ``gamma_raw / s^2`` (:mod:`attn_lib.model.scale`).
    """
    return softmax_scale(setting, n)


def effective_gamma(setting: BaseSetting, gammas: object, n: int) -> np.ndarray:
    """``gamma / s^2`` (:func:`scale`): a raw ridge parameter of ``X A`` in the units of ``X K``.

    The library's calls take the effective ``gamma`` already (the simulator converts it back,
    :func:`attn_lib.simulation.simulate.errors`); this converts a raw one, e.g. from
    ``gamma = tau g`` of the book's equal-``gamma / tau`` comparison.
    """
    return check_gammas(gammas) / scale(setting, n) ** 2


def normalisation_std(setting: Setting | RankSetting, n: int) -> float:
    r"""Predicted standard deviation of ``eps_j = D_j / ((n - 1) m) - 1`` on random inputs.

    Given the query ``x_j``, the ``n - 1`` terms ``g(T_kj)`` are independent with variance
    ``nu = e^{beta^2 sigma^2} - 1``, and their conditional mean is
    ``exp(beta^2 sigma^2 eta_j / 2) - 1``, ``eta_j = ||x_j||^2 / p - 1 ~ N(0, 2 / p)``:

        Var eps_j ~ nu / (n - 1) + beta^4 sigma^4 / (2 p).

    Leading order for ``mu = 0`` and weights that do not change the logit variance; a coherent
    shift and aligned weights add to it.
    """
    s = _softmax_setting(setting)
    n = check_int(n, "n", low=2)
    b = cast(Softmax, s.attention).beta * s.logit_scale
    return float(np.sqrt(np.expm1(b * b) / (n - 1) + b ** 4 / (2.0 * s.p(n))))


def tail(setting: Setting, n: int) -> float:
    r"""``2 beta ||M_r|| / sqrt(p)`` (canonical form): below one the type law keeps the kernel's variance finite.

    With ``h(t, t') = xi^T M_r xi' / sqrt(p)`` and Gaussian latent coordinates,
    ``E_pi[e^{2 beta h(t, t')}]`` (the second moment of the softmax weights, which sets the
    slope and Wigner parts of the finite-size theory and the spread of the normalising sums) is
    finite iff ``4 beta^2 sigma_max(M_r)^2 / p < 1``. At or above one a few keys of extreme type
    carry the normalising sums and the finite-size theory refuses the setting.
    """
    s = canonical(setting)
    n = check_int(n, "n", low=2)
    coords = latent_coordinates(s)
    if coords.shape[0] == 0:
        return 0.0
    M = np.eye(coords.shape[0]) + np.outer(coords[:, 1], coords[:, 2])
    return float(2.0 * cast(Softmax, s.attention).beta * np.linalg.norm(M, 2) / np.sqrt(s.p(n)))


def query_mean(xi: np.ndarray, mu_r: np.ndarray, m_r: np.ndarray, beta: float, p: int,
               k: float = 1.0) -> np.ndarray:
    r"""``E_pi[e^{k beta h(t', t)}]`` over the key's type ``t'``, for queries of latent coordinates ``xi``.

    With ``h(t', t) = xi'^T M_r xi / sqrt(p)``, ``xi' = y' mu_r + zeta'`` (``y' = +-1`` with
    probability 1/2, ``zeta' ~ N(0, I_r)``) and ``v = M_r xi / sqrt(p)``,

        E e^{k beta xi'^T v} = cosh(k beta mu_r^T v) e^{k^2 beta^2 v^T v / 2};

    at ``k = 1`` this is ``d(t)``, the type factor of the normalising sums
    ``D_j ~ (n - 1) e^{beta^2 / 2} d(t_j)`` (``alpha = 1``; ``book/derivation_softmax.md``).

    Parameters
    ----------
    xi : ndarray of shape (r, n)
        Latent coordinates of the queries.
    mu_r : ndarray of shape (r,)
        The signal in the same basis.
    m_r : ndarray of shape (r, r)
        ``I_r + w_{K,r} w_{Q,r}^T`` in that basis.
    beta : float
    p : int
        Token dimension.
    k : float, default 1.0

    Returns
    -------
    ndarray of shape (n,)
    """
    v = m_r @ np.asarray(xi, dtype=float) / np.sqrt(p)
    b = k * beta
    return np.cosh(b * (mu_r @ v)) * np.exp(0.5 * b * b * np.einsum("ij,ij->j", v, v))


@dataclasses.dataclass(frozen=True)
class Parts:
    """The exact decomposition of the softmax features ``X A`` (see the module docstring).

    Attributes
    ----------
    kernel : ndarray of shape (p, n)
        ``X G / (n - 1)``, the kernel part (``s X K``).
    mean : ndarray of shape (p, n)
        ``X (1 1^T - I) / (n - 1)``, the mean part.
    eps : ndarray of shape (n,)
        ``G^T 1 / (n - 1)``: the normalising sums are ``(n - 1) m (1 + eps)``.
    """

    kernel: np.ndarray
    mean: np.ndarray
    eps: np.ndarray

    @property
    def features(self) -> np.ndarray:
        """``X A = (kernel + mean) / (1 + eps)`` (column-wise), shape ``(p, n)``."""
        return (self.kernel + self.mean) / (1.0 + self.eps)


def decompose(X: np.ndarray, w_K: np.ndarray, w_Q: np.ndarray, beta: float,
              alpha: float = 1.0) -> Parts:
    """The parts of the masked softmax features ``X A`` of one draw (:class:`Parts`).

    Parameters
    ----------
    X : ndarray of shape (p, n)
    w_K, w_Q : ndarray of shape (p,)
    beta : float
        Inverse temperature.
    alpha : float, default 1.0
        Full part of the weights; the centring uses ``m = e^{beta^2 alpha^2 / 2}``.
    """
    p, n = X.shape
    G = logits(X, w_K, w_Q, alpha)
    G *= beta
    G -= 0.5 * (beta * alpha) ** 2
    np.expm1(G, out=G)
    np.fill_diagonal(G, 0.0)
    eps = G.sum(axis=0) / (n - 1)
    mean = (X.sum(axis=1, keepdims=True) - X) / (n - 1)
    return Parts(kernel=(X @ G) / (n - 1), mean=mean, eps=eps)


def kurtosis(beta: float) -> float:
    r"""``E f_beta^4 / (E f_beta^2)^2`` of ``f_beta(xi) = e^{beta xi - beta^2/2} - 1``, ``xi ~ N(0, 1)``.

    With ``L = e^{beta xi - beta^2/2}``, ``E L^k = e^{k (k - 1) beta^2 / 2}``, so with ``b = beta^2``

        E f^2 = e^b - 1 = nu,    E f^4 = e^{6 b} - 4 e^{3 b} + 6 e^b - 3.

    ``kurtosis(beta) / n`` is the relative variance of one column's empirical second moment
    ``sum_i f_beta(T_ij)^2 / n``: the Gaussian equivalence of the entry-wise kernel needs it
    small (``book/derivation_softmax.md``, *Why beta = 1.5 misses*). It grows like
    ``e^{4 beta^2}``: 8.9 at ``beta = 0.5``, 114 at 1, 1.0e4 at 1.5.

    Parameters
    ----------
    beta : float
        Inverse temperature in ``(0, 10]``.
    """
    b = check_real(beta, "beta", low=0.0, high=10.0, low_open=True) ** 2
    # the constants cancel (1 - 4 + 6 - 3 = 0): written with expm1, the O(b) terms cancel to
    # a relative rounding of eps / b only
    return float((np.expm1(6 * b) - 4 * np.expm1(3 * b) + 6 * np.expm1(b)) / np.expm1(b) ** 2)


@functools.lru_cache(maxsize=256)
def _tail_beta(n: int) -> float:
    return float(brentq(lambda b: np.log(kurtosis(b)) - np.log(n), 1e-3, 10.0, xtol=1e-12))


def tail_beta(n: int) -> float:
    r"""The ``beta`` at which :func:`kurtosis` equals ``n``: the edge of the Gaussian regime at ``n``.

    Below it one column's ``n`` entries sample the fourth moment of ``f_beta``; above it a few
    entries carry the second moment. As ``kurtosis ~ e^{4 beta^2}``, ``tail_beta(n) ->
    sqrt(log n) / 2`` (1.35 at ``n = 2048``, 1.50 at ``n = 10^4``).

    Parameters
    ----------
    n : int
        Tokens, ``n >= 9`` (the kurtosis of ``f_beta`` exceeds 3 for every ``beta > 0`` and
        tends to 3 as ``beta -> 0``).
    """
    return _tail_beta(check_int(n, "n", low=9))


def _row_parts(setting: Setting | RankSetting) -> tuple[Any, float, float, float, tuple[float, float]]:
    """The setting checked, ``c, a1, b2`` of its kernel and ``(beta alpha, beta^2 / 2)`` of
    ``f_beta(alpha t) + 1 = e^{beta alpha t - beta^2 / 2}``."""
    from .attention import linearisation

    s = cast(Setting, _softmax_setting(setting))
    lin = linearisation(s)
    beta = cast(Softmax, s.attention).beta
    return s, s.c, lin.a1, lin.b2, (beta * s.alpha, 0.5 * beta * beta)


def row_factor_law(setting: Setting | RankSetting, n: int) -> tuple[np.ndarray, np.ndarray]:
    r"""Quadrature ``(nodes, weights)`` of the row factor ``r_i`` of the kernel's non-linear part at ``n``.

    ``r_i = sum_{j != i} R(T_ij)^2 / ((n - 1) b2)`` with ``R = f_beta - a1 t`` (centred,
    ``E R^2 = b2 = nu - a1^2``), ``T_ij ~ N(0, alpha^2)``: ``E r = 1``, and for a heavy-tailed
    ``R`` (large ``beta``) most rows lie below one (at ``beta = 1.5``, ``n = 2048`` the median is
    about 0.70). :data:`attn_lib.theory._softmax_rows.CLASSES` equal-probability classes at their
    conditional means, from a fixed seed (deterministic; ``book/derivation_softmax.md``).

    Parameters
    ----------
    setting : Setting or RankSetting
        Masked softmax attention.
    n : int
        Tokens, at least 9.

    Returns
    -------
    nodes, weights : ndarray of shape (32,)
    """
    _, _, a1, b2, (b, shift) = _row_parts(setting)
    return _softmax_rows.row_law(b, shift, a1, b2, check_int(n, "n", low=9))


def rows_correction(setting: Setting | RankSetting, gammas: object, n: int) -> np.ndarray:
    r"""The change that the kernel's random row variances make to the error at ``n`` tokens.

        Delta_rows(gamma; n) = E_bulk[r ~ law_n](gamma) - E_bulk[r = 1](gamma),

    ``E_bulk[r]`` the random-input error of the row-variance equivalent
    (:mod:`attn_lib.theory._softmax_rows`: the cavity equation that keeps each row's variance
    factor ``r_i``, one unknown per row class, averaged over the law of
    :func:`row_factor_law`) and ``E_bulk[r = 1]`` the Gaussian bulk of the limit
    (:func:`attn_lib.theory.attention_bulk`). It vanishes as the law concentrates
    (``n -> infinity`` at fixed ``beta``) and is positive where the row factors matter.

    Parameters
    ----------
    setting : Setting or RankSetting
        Masked softmax attention; only ``c``, ``beta`` and ``alpha`` enter.
    gammas : float or array_like of shape (G,)
        Effective ridge parameters ``gamma_raw / s_n^2`` (:func:`effective_gamma`).
    n : int
        Tokens, at least 9.

    Returns
    -------
    ndarray shaped like ``gammas``

    Raises
    ------
    ConvergenceError
        When the row-variance fixed point cannot be solved.
    """
    from .attention import attention_bulk

    s, c, a1, b2, (b, shift) = _row_parts(setting)
    g0 = check_gammas(gammas)
    g = np.atleast_1d(g0)
    n = check_int(n, "n", low=9)
    with ignored():
        gauss = attention_bulk(s, g).error.ravel()
    law = _softmax_rows.row_law(b, shift, a1, b2, n)
    return np.reshape(_softmax_rows.rows_bulk_error(c, a1, b2, g, law) - gauss, g0.shape)


def rows_error(setting: Setting, gammas: object, n: int, *, strict: bool = False) -> np.ndarray:
    r"""The softmax error at ``n`` tokens with the kernel's row factors kept (past the tail edge).

    The row-variance equivalent of the bulk (:mod:`attn_lib.theory._softmax_rows`: the cavity
    equation that keeps each key row's variance factor ``r_i``, one unknown per row class,
    averaged over the law of :func:`row_factor_law`) gives the random-input error at each
    ``gamma``; the Gaussian bulk of Wigner variance ``b2_eff(gamma)`` has the same error
    (:func:`~attn_lib.theory._softmax_rows.matched_b2`); the limit's spiked form is evaluated with
    it (:func:`~attn_lib.theory._softmax_rows.spiked_error`), and the finite-size theory's
    difference from the limit (the mean part and the normalising sums on the latent types) is
    added:

        E_rows(gamma; n) = E_limit[b2_eff(gamma)](gamma) + E_finite(gamma; n) - E_limit(gamma).

    At ``b2_eff = b2`` (the law concentrated at one, ``n -> infinity`` at fixed ``beta``) it is
    the finite-size theory. ``book/derivation_softmax.md`` (*Row factors*) derives it and
    measures it: at ``n = 2048``, ``beta = 1.5``, within 0.015 of Monte Carlo on the regular grid
    and on a held-out grid.

    Parameters
    ----------
    setting : Setting
        Masked softmax attention with ``2 beta ||M_r|| / sqrt(p) < 1`` (:func:`tail`; the
        finite-size theory refuses the others).
    gammas : float or array_like of shape (G,)
        Effective ridge parameters ``gamma_raw / s_n^2`` (:func:`effective_gamma`).
    n : int
        Tokens, at least 9.
    strict : bool, default False
        Raise :class:`~attn_lib.DomainError` instead of warning outside the measured domain
        (``beta alpha`` above :data:`attn_lib.theory.domain.ROWS_BETA` or ``n`` below 256;
        :func:`attn_lib.theory.domain.rows_violations`).

    Returns
    -------
    ndarray shaped like ``gammas``

    Raises
    ------
    ValueError
        Where the finite-size theory refuses the setting.
    ConvergenceError
        When a fixed point cannot be solved.

    Warns
    -----
    DomainWarning
        Outside the measured domain.
    """
    from . import domain
    from .attention import attention_error, linearisation

    s = cast(Setting, _softmax_setting(setting, (Setting,)))
    g0 = check_gammas(gammas)
    g = np.atleast_1d(g0)
    n = check_int(n, "n", low=9)
    emit([(s, v) for v in domain.rows_violations(s, n)], "softmax.rows_error", 1,
         check_bool(strict, "strict"), 2)
    ew = entrywise_equivalent(s)
    lin = linearisation(ew)
    c, a1, b2 = s.c, lin.a1, lin.b2
    _, _, _, _, (b, shift) = _row_parts(s)
    with ignored():  # past the tail edge on purpose: the row factors are the theory for it
        finite = attention_error(s, g, n=n)
        limit = attention_error(s, g)
    target = _softmax_rows.rows_bulk_error(c, a1, b2, g, _softmax_rows.row_law(b, shift, a1, b2, n))
    b2_eff = _softmax_rows.matched_b2(c, lin.rho, b2, g, target)
    canon = ew.canonical()
    matched = _softmax_rows.spiked_error(c, lin.rho, b2_eff, g, canon.snr, np.asarray(canon.gram))
    return np.reshape(matched + finite - limit, g0.shape)

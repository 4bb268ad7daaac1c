r"""The strong-alignment regime: the latent split of the kernel argument and two surrogates.

With tokens ``x_i = mu y_i + z_i`` and ``M = I_p + w_K w_Q^T`` the kernel argument between tokens
``i != j`` splits exactly along an orthonormal basis ``B`` (shape ``(p, r)``, ``r <= 3``) of
``span(mu, w_K, w_Q)`` and its complement:

.. math::

    t_{ij} = \frac{x_i^\top M x_j}{\sqrt p} = g_{ij} + h_{ij}, \qquad
    g_{ij} = \frac{z_i^{\perp\top} z_j^\perp}{\sqrt p}, \qquad
    h_{ij} = \frac{\xi_i^\top M_r \xi_j}{\sqrt p},

with latent coordinates ``xi_i = B^T x_i = y_i mu_r + zeta_i`` (``zeta_i ~ N(0, I_r)``),
``mu_r = B^T mu`` and ``M_r = B^T M B = I_r + w_{K,r} w_{Q,r}^T``. The *shift* ``h_ij`` has
conditional mean ``y_i y_j delta`` with the signed coherent shift
``delta = mu^T M mu / sqrt(p)``, but it fluctuates around it with variance

.. math::

    \operatorname{Var}(h_{ij} \mid y)
        = \frac{\|M_r^\top \mu_r\|^2 + \|M_r \mu_r\|^2 + \|M_r\|_F^2}{p}

(the three terms ``y_i mu_r^T M_r zeta_j``, ``y_j zeta_i^T M_r mu_r`` and ``zeta_i^T M_r zeta_j``
are uncorrelated). For weights aligned with ``mu`` it is about ``2 delta^2 / snr``: it does not
shrink relative to ``delta`` as ``p`` grows.

Expanding ``f(g + h)`` in Hermite polynomials of ``g ~ N(0, 1)`` at fixed ``h`` gives the
*conditional Gaussian equivalent* of the (centred, zero-diagonal) kernel,

.. math::

    \sqrt p\, K_{ij} \approx F_0(H_{ij}) + F_1(H_{ij})\,(t_{ij} - H_{ij})
        + \sqrt{S_2(H_{ij})}\, W_{ij},

with the shift-dependent Hermite data ``F0(h) = E f(xi + h)``, ``F1(h) = E[xi f(xi + h)]`` and
``S2(h) = E f(xi + h)^2 - F0^2 - F1^2`` of :mod:`attn_lib.theory.shift` and ``W`` a GOE matrix
(unit off-diagonal variance) independent of the data. Two choices of ``H``:

* ``"latent"``: ``H = h``, the actual shift (``t - H = g``);
* ``"coherent"``: ``H_ij = y_i y_j delta``, keeping only the coherent part of the shift (the
  ``K_lin2`` model of the strong-alignment notes).

Both take ``g_ij`` as of unit variance. Given the noise norms it has variance
``(1 + eps_i)(1 + eps_j)`` with ``eps_i = ||z_i^perp||^2 / p - 1`` (mean ``-r/p``, variance
``2 p' / p^2``), and by the heat equation (``d/d(s^2) E f(h + s xi) = F0''(h) / 2``) the mean of
the kernel given the norms is, to first order,

.. math::

    F_0(h_{ij}) + \tfrac12 (\varepsilon_i + \varepsilon_j) F_0''(h_{ij}).

Entry by entry the *norm term* is ``O(1/sqrt(p))``, but it has rank two in the token index and an
operator norm of order one (at ``h = 0`` it is the ``a2`` spike of inner-product kernel matrices);
``surrogate_kernel(..., eps=eps)`` adds it.

The ``He2`` part of the residual. With ``F2(h) = F0''(h)`` the residual is
``(F2(h_ij) / 2) (g_ij^2 - 1)`` plus higher chaos (variance ``S3 = S2 - F2^2 / 2``), and exactly
``g_ij^2 - 1 = eps_i + eps_j + r/p + Ytilde_i^T Ytilde_j / p`` with the features
``Ytilde_i = vec(z_i^perp (z_i^perp)^T - I)`` in dimension ``D = p'(p' + 1) / 2``
(:func:`he2_gram`). ``surrogate_kernel(..., he2=Q)`` puts a matrix ``Q`` in place of that Gram
part and keeps the GOE for ``S3`` only; :func:`surrogate_errors` with ``he2=True`` compares three
choices of ``Q`` on common draws (``book/derivation_finite_size.md``, "The He2 residual").

:func:`surrogate_errors` simulates the true kernel and the surrogates on the same draws.
Only ``alpha = 1`` (``M = I + w_K w_Q^T``, the paper's model) is supported here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .. import cache
from ..model import data, kernel
from ..simulation.resolvent import interpolation_error
from ..simulation.trials import Trials
from .._validation import check_bool, check_gammas, check_int, check_seed, check_setting, check_settings
from ..model.nonlinearity import NonlinearityLike, check_nonlinearity
from ..model.setting import Setting
from ..theory import _finite_size
from ..theory.attention import attention_error_batch
from ..theory.shift import shift_functions

__all__ = ["LatentSplit", "latent_split", "signed_shift", "shift_fluctuation", "surrogate_kernel",
           "he2_gram", "latent_draw", "surrogate_errors", "SURROGATES", "HE2_SURROGATES", "DE_ERROR_SURROGATES",
           "sample_types_theory", "finite_size_theory"]

#: Choices of the shift ``H`` in :func:`surrogate_kernel`.
SURROGATES = ("latent", "coherent")
#: The curves ``surrogate_errors(..., he2=True)`` adds: the latent surrogate with its ``He2`` Gram
#: part from the tokens' own complement, from an independent Gaussian ``Z''``, and a Wishart matrix.
HE2_SURROGATES = ("latent+own", "latent+features", "latent+wishart")
#: The curves ``surrogate_errors(..., de_error=True)`` adds: the latent surrogate with complex
#: noise, and with the diagonal the deterministic equivalent gives the slope Gram.
DE_ERROR_SURROGATES = ("latent-complex", "latent+diagonal")


def _check_setting(setting: object) -> Setting:
    """A :class:`Setting` with ``alpha = 1``, the model of the latent split."""
    setting = check_setting(setting)
    if setting.alpha != 1.0:
        raise ValueError(f"setting.alpha must be 1 (M = I + w_K w_Q^T) for the latent split, "
                         f"got {setting.alpha!r}")
    return setting


def _check_draws(setting: object, gammas: object, n: object, trials: object,
                 seed: object) -> tuple[Setting, np.ndarray, int, int, int]:
    """Validated ``(setting, gammas of shape (G,), n, trials, seed)`` of a study on seeded draws.

    Fails fast when ``p = round(c n)`` is too small for the geometry
    (:func:`attn_lib.model.data.geometry`).
    """
    s = _check_setting(setting)
    g = np.atleast_1d(check_gammas(gammas))
    n = check_int(n, "n")
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    data.geometry(s, s.p(n))
    return s, g, n, trials, seed


def _restricted_m(coords: np.ndarray) -> np.ndarray:
    """``M_r = I_r + w_{K,r} w_{Q,r}^T`` from the latent coordinates ``(r, 3)`` of ``mu, w_K, w_Q``."""
    return np.eye(coords.shape[0]) + np.outer(coords[:, 1], coords[:, 2])


def signed_shift(setting: Setting, n: int) -> float:
    """Signed coherent shift ``delta = mu^T (I + w_K w_Q^T) mu / sqrt(p)`` at ``n`` tokens.

    ``Setting.delta(n)`` is its absolute value.
    """
    return _check_setting(setting).signed_delta(n)


def shift_fluctuation(setting: Setting, n: int) -> float:
    """Standard deviation of ``h_ij - y_i y_j delta`` for ``i != j`` (see the module docstring).

    ``sqrt((||M_r^T mu_r||^2 + ||M_r mu_r||^2 + ||M_r||_F^2) / p)``, computed from the Gram
    matrix of ``mu, w_K, w_Q``; it does not depend on the labels.
    """
    s = _check_setting(setting)
    p = s.p(check_int(n, "n"))
    coords = data.latent_coordinates(s)
    mu_r, M_r = coords[:, 0], _restricted_m(coords)
    var = (M_r.T @ mu_r) @ (M_r.T @ mu_r) + (M_r @ mu_r) @ (M_r @ mu_r) + np.sum(M_r ** 2)
    return float(np.sqrt(var / p))


@dataclass(frozen=True)
class LatentSplit:
    """The latent split of one sample (see the module docstring).

    Attributes
    ----------
    basis : ndarray of shape (p, r)
        Orthonormal basis of ``span(mu, w_K, w_Q)``; ``r = 0`` when all three vanish.
    xi : ndarray of shape (r, n)
        Latent coordinates ``B^T x_i`` of the tokens.
    m_r : ndarray of shape (r, r)
        ``B^T (I + w_K w_Q^T) B``.
    p : int
        Token dimension.
    """

    basis: np.ndarray
    xi: np.ndarray
    m_r: np.ndarray
    p: int

    def shift(self) -> np.ndarray:
        """``h = xi^T M_r xi / sqrt(p)``, shape ``(n, n)`` (zero matrix when ``r = 0``)."""
        return self.xi.T @ self.m_r @ self.xi / np.sqrt(self.p)

    def norms(self, X: np.ndarray) -> np.ndarray:
        """``eps_i = ||z_i^perp||^2 / p - 1 = (||x_i||^2 - ||xi_i||^2) / p - 1``, shape ``(n,)``.

        ``X`` (shape ``(p, n)``) are the tokens the split was computed from.
        """
        return (np.einsum("ij,ij->j", X, X) - np.einsum("ij,ij->j", self.xi, self.xi)) / self.p - 1.0

    def he2(self, X: np.ndarray) -> np.ndarray:
        """The tokens' own ``He2`` Gram, shape ``(n, n)``: :func:`he2_gram` of the complement.

        ``z_i^perp = x_i - B xi_i`` in dimension ``p' = p - r``, so that off the diagonal it is
        ``g_ij^2 - 1 - eps_i - eps_j - r/p``. ``X`` (shape ``(p, n)``) are the tokens the split
        was computed from.
        """
        return he2_gram(X - self.basis @ self.xi, self.p, self.p - self.xi.shape[0])


def latent_split(sample: data.Sample) -> LatentSplit:
    """Latent split of the tokens ``sample.X`` along ``span(mu, w_K, w_Q)`` (``alpha = 1``).

    Parameters
    ----------
    sample : attn_lib.model.data.Sample
        A draw from :func:`attn_lib.model.data.draw`.
    """
    if not isinstance(sample, data.Sample):
        raise TypeError(f"sample must be an attn_lib.model.data.Sample, got {type(sample).__name__}")
    if sample.w_K is None or sample.w_Q is None:
        raise ValueError("sample must be a draw of an attn_lib.Setting (with w_K and w_Q), got one "
                         "without weight vectors")
    B, coords = data.latent_basis(np.stack([sample.mu, sample.w_K, sample.w_Q], axis=1))
    return LatentSplit(basis=B, xi=B.T @ sample.X, m_r=_restricted_m(coords), p=sample.X.shape[0])


def latent_draw(setting: Setting, n: int, rng: np.random.Generator
                ) -> tuple[data.Sample, np.ndarray, np.ndarray, LatentSplit]:
    """One draw of the surrogate studies: the sample, a GOE matrix, the logits and the latent split.

    In this order from ``rng``: the tokens ``X = mu y^T + Z`` (:func:`attn_lib.model.data.draw`,
    shape ``(p, n)``), then ``W`` (:func:`attn_lib.model.data.goe`, shape ``(n, n)``); the logits
    ``T = X^T w_K w_Q^T X / sqrt(p)`` (:func:`attn_lib.model.kernel.logits`, shape ``(n, n)``)
    and :func:`latent_split` of the sample follow from them.

    Returns
    -------
    sample : attn_lib.model.data.Sample
    W, T : ndarray of shape (n, n)
    split : LatentSplit
    """
    sample = data.draw(setting, n, rng)
    W = data.goe(n, rng)
    split = latent_split(sample)  # checks that the sample carries w_K and w_Q
    assert sample.w_K is not None and sample.w_Q is not None
    return sample, W, kernel.logits(sample.X, sample.w_K, sample.w_Q), split


def surrogate_kernel(T: np.ndarray, H: np.ndarray, f: NonlinearityLike, p: int,
                     W: np.ndarray, eps: np.ndarray | None = None,
                     he2: np.ndarray | None = None) -> np.ndarray:
    """Conditional Gaussian equivalent ``K`` (shape ``(n, n)``, zero diagonal) of ``f(T)/sqrt(p)``.

    ``sqrt(p) K_ij = F0(H_ij) + F1(H_ij) (T_ij - H_ij) + sqrt(S2(H_ij)) W_ij`` for ``i != j``,
    with ``F0, F1, S2`` of the centred ``f`` from :func:`attn_lib.theory.shift.shift_functions`;
    with ``eps``, plus the norm term ``(eps_i + eps_j) F0''(H_ij) / 2`` (module docstring). With
    ``he2``, the residual is split into its ``He2`` part and the rest:
    ``(F2(H_ij) / 2) he2_ij + sqrt(S2(H_ij) - F2(H_ij)^2 / 2) W_ij`` with ``F2 = F0''``
    (the ``He3+`` variance ``S2 - F2^2 / 2`` is clipped at zero against spline rounding).

    ``T`` and ``W`` may be complex (the complex model of :func:`surrogate_errors` with
    ``de_error=True``: ``T = H + Z^H Z / sqrt(p)``, ``W`` from :func:`attn_lib.model.data.gue`);
    ``K`` is then complex.

    Parameters
    ----------
    T : ndarray of shape (n, n)
        Kernel arguments ``X^T M X / sqrt(p)`` (:func:`attn_lib.model.kernel.logits`).
    H : ndarray of shape (n, n)
        The shift at which ``f`` is expanded (``"latent"``: ``h``; ``"coherent"``: ``y y^T delta``).
    f : str or callable
        Nonlinearity.
    p : int
        Token dimension.
    W : ndarray of shape (n, n)
        Noise matrix (:func:`attn_lib.model.data.goe`; only its off-diagonal enters).
    eps : ndarray of shape (n,), optional
        Relative noise norms ``||z_i^perp||^2 / p - 1`` (:meth:`LatentSplit.norms`).
    he2 : ndarray of shape (n, n), optional
        What stands for ``g_ij^2 - 1`` in the ``He2`` part (off-diagonal variance about 2): the
        Gram part ``Ytilde_i^T Ytilde_j / p`` of the tokens' own complement or of an independent
        one (:func:`he2_gram`), or ``2 U^T U / p`` of Gaussian ``U`` (:func:`attn_lib.model.data.wishart`).
    """
    T, W = (np.asarray(a) for a in (T, W))
    T, W = (a.astype(np.result_type(a.dtype, float), copy=False) for a in (T, W))
    H = np.asarray(H, dtype=float)
    if T.ndim != 2 or T.shape[0] != T.shape[1] or H.shape != T.shape or W.shape != T.shape:
        raise ValueError(f"T, H and W must be square arrays of one shape, got {T.shape}, "
                         f"{H.shape}, {W.shape}")
    if he2 is not None:
        he2 = np.asarray(he2, dtype=float)
        if he2.shape != T.shape:
            raise ValueError(f"he2 must have shape {T.shape}, got {he2.shape}")
    p = check_int(p, "p")
    sf = shift_functions(f, h_max=float(np.abs(H).max(initial=0.0)))
    F0, F1, S2 = sf(H)
    K = F0.astype(np.result_type(T, W))
    if eps is not None:
        eps = np.asarray(eps, dtype=float)
        if eps.shape != T.shape[:1]:
            raise ValueError(f"eps must have shape {T.shape[:1]}, got {eps.shape}")
        K += 0.5 * (eps[:, None] + eps[None, :]) * sf.curvature(H)
    K += F1 * (T - H)
    if he2 is None:
        K += np.sqrt(S2) * W
    else:
        F2 = sf.curvature(H)
        K += 0.5 * F2 * he2
        K += np.sqrt(np.maximum(S2 - 0.5 * F2 * F2, 0.0)) * W
    K /= np.sqrt(p)
    np.fill_diagonal(K, 0.0)
    return K


def he2_gram(Z: np.ndarray, p: int, dim: int | None = None) -> np.ndarray:
    """``Ytilde_i^T Ytilde_j / p`` (shape ``(n, n)``) for the columns ``z_i`` of ``Z`` (shape ``(q, n)``).

    The columns lie in a subspace of dimension ``p' = dim`` (default ``q``) with orthogonal
    projector ``P``; ``Ytilde_i = vec(z_i z_i^T - P)`` (a symmetric matrix on that subspace as a
    vector in dimension ``p'(p' + 1) / 2``, off-diagonal entries weighted by ``sqrt(2)``), so
    ``Ytilde_i^T Ytilde_j = (z_i . z_j)^2 - |z_i|^2 - |z_j|^2 + p'``. For the tokens' complement
    ``z_i^perp`` (written in the coordinates of ``R^p``, ``dim = p - r``) it is
    ``g_ij^2 - 1 - eps_i - eps_j - r/p`` (module docstring): the ``He2`` chaos of ``g_ij``
    without the norm term. For Gaussian columns it has, off the diagonal, mean zero and variance
    ``2 p'(p' + 1) / p^2``.
    """
    Z = np.asarray(Z, dtype=float)
    if Z.ndim != 2:
        raise ValueError(f"Z must be a (q, n) array, got shape {Z.shape}")
    p = check_int(p, "p")
    dim = Z.shape[0] if dim is None else check_int(dim, "dim", high=Z.shape[0])
    sq = np.einsum("ij,ij->j", Z, Z)
    Q = Z.T @ Z
    Q *= Q
    Q -= sq[:, None]
    Q -= sq[None, :]
    Q += dim
    Q /= p
    return Q


def surrogate_errors(setting: Setting, gammas: object, n: int, trials: int = 2,
                     seed: int = 0, norms: bool = False, he2: bool = False,
                     de_error: bool = False) -> Trials:
    """Interpolation errors of attention, its two surrogates and ridge, on common draws.

    Each trial draws a sample (:func:`attn_lib.model.data.draw`, seeded by
    ``SeedSequence(seed).spawn(trials)[t]``, so the data equal those of
    :func:`attn_lib.simulation.simulate.errors` with the same seed), then one GOE matrix ``W``
    (:func:`attn_lib.model.data.goe`) shared by the two surrogates; the trials run through
    :meth:`attn_lib.simulation.trials.Trials.run`. The errors are
    ``E(gamma) = gamma^2 y^T Q^2 y / n`` with ``Phi = X K`` for the true kernel
    (:func:`attn_lib.model.kernel.attention_kernel`, zero diagonal) and for :func:`surrogate_kernel` with ``H = h`` (``"latent"``) and ``H = y y^T delta``
    (``"coherent"``), and ``Phi = X`` for ridge; with ``norms``, also the latent surrogate with the
    norm term (``"latent+norms"``, same ``W``). With ``he2``, also the latent surrogate with its
    ``He2`` part ``(F2 / 2)(g^2 - 1)`` modelled three ways (:data:`HE2_SURROGATES`; the same ``W``
    for the ``He3+`` rest, ``surrogate_kernel(..., he2=Q)``), ``Q`` being
    ``"latent+own"``: :func:`he2_gram` of the tokens' own complement ``z_i^perp`` (the ``He2``
    chaos itself, without the norm term: for ``quadratic`` ``f`` the true kernel minus the norm
    term and the constant ``r / p^{3/2}`` off the diagonal); ``"latent+features"``: :func:`he2_gram` of an independent Gaussian ``(p', n)``
    matrix (the same Gram structure, independent of the tokens); ``"latent+wishart"``:
    ``2 U^T U / p`` with ``U`` Gaussian in dimension ``D = p'(p' + 1) / 2``
    (:func:`attn_lib.model.data.wishart`; the Marchenko–Pastur model). These are drawn after
    ``W``, so the other curves do not change.

    With ``de_error``, two curves that locate the deterministic equivalent's own error
    (:data:`DE_ERROR_SURROGATES`, drawn after the ``he2`` ones):

    * ``"latent-complex"``: the latent surrogate of complex tokens, the same latent part and the
      complement ``(z_i^perp + i z_i'')/sqrt(2)`` (``z''`` a fresh Gaussian complement), a
      Hermitian ``W`` (:func:`attn_lib.model.data.gue`) and ``Phi^H Phi``. It has the same
      deterministic equivalent (every pairing the equivalent keeps, ``E|Z_ai|^2``,
      ``E W_ij W_ji``, is unchanged), without the real model's pairings of an entry with itself
      (``E Z_ai^2 = E W_ij^2 = 0``), which give real Gaussian matrices their ``O(1/n)``
      correction;
    * ``"latent+diagonal"``: the latent surrogate (same ``W``) with the diagonal
      ``F1(h_ii) (||z_i^perp||^2 - p') / p`` instead of zero: the slope Gram's diagonal less its
      mean, which is what the deterministic equivalent's model of ``K`` has there.

    Parameters
    ----------
    setting : Setting
        Model scalars, ``alpha = 1``.
    gammas : float or array_like of shape (G,)
    n : int
        Tokens (``p = round(c n)``).
    trials : int, default 2
    seed : int, default 0
    norms : bool, default False
        Add the ``"latent+norms"`` curve.
    he2 : bool, default False
        Add the curves of :data:`HE2_SURROGATES`.
    de_error : bool, default False
        Add the curves of :data:`DE_ERROR_SURROGATES`.

    Returns
    -------
    Trials
        Curves ``"attention"`` (true kernel), ``"latent"``, ``"coherent"``
        (``"latent+norms"``, :data:`HE2_SURROGATES`, :data:`DE_ERROR_SURROGATES`) and ``"ridge"``,
        each of shape ``(trials, G)``; ``.mean(model)``, ``.sem(model)``.
    """
    s, g, n, trials, seed = _check_draws(setting, gammas, n, trials, seed)
    norms = check_bool(norms, "norms")
    he2 = check_bool(he2, "he2")
    de_error = check_bool(de_error, "de_error")
    p = s.p(n)
    func = check_nonlinearity(s.f)
    a0 = s.hermite.a0
    delta = signed_shift(s, n)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        sample, W, T, split = latent_draw(s, n, rng)
        X, y = sample.X, sample.y
        shifts = {"latent": split.shift(), "coherent": delta * np.outer(y, y)}
        kernels = {name: surrogate_kernel(T, H, s.f, p, W) for name, H in shifts.items()}
        sur = {name: interpolation_error(X @ K, y, g) for name, K in kernels.items()}
        if norms:
            K = surrogate_kernel(T, shifts["latent"], s.f, p, W, eps=split.norms(X))
            sur["latent+norms"] = interpolation_error(X @ K, y, g)
        if he2:
            pp = p - split.xi.shape[0]
            grams = {"latent+own": split.he2(X),
                     "latent+features": he2_gram(rng.standard_normal((pp, n)), p),
                     "latent+wishart": 2.0 / p * data.wishart(n, pp * (pp + 1) // 2, rng)}
            for name, Q in grams.items():
                K = surrogate_kernel(T, shifts["latent"], s.f, p, W, he2=Q)
                sur[name] = interpolation_error(X @ K, y, g)
        if de_error:
            H, latent = shifts["latent"], split.basis @ split.xi
            Z2 = rng.standard_normal(X.shape)
            Z2 -= split.basis @ (split.basis.T @ Z2)
            Zc = (X - latent + 1j * Z2) / np.sqrt(2.0)
            Kc = surrogate_kernel(H + Zc.conj().T @ Zc / np.sqrt(p), H, s.f, p, data.gue(n, rng))
            sur["latent-complex"] = interpolation_error((latent + Zc) @ Kc, y, g)
            K = kernels["latent"]
            F1 = shift_functions(s.f, h_max=float(np.abs(H).max(initial=0.0)))(np.diag(H))[1]
            K[np.diag_indices(n)] = F1 * (split.norms(X) + split.xi.shape[0] / p)
            sur["latent+diagonal"] = interpolation_error(X @ K, y, g)
        K = kernel.apply(func, T, p, a0=a0, overwrite=True)
        return {"attention": interpolation_error(X @ K, y, g), **sur,
                "ridge": interpolation_error(X, y, g)}

    return Trials.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def sample_types_theory(setting: Setting, gammas: object, n: int, trials: int = 2,
                        seed: int = 0) -> np.ndarray:
    """The finite-size theory on each draw's own types: ``E(gamma)`` given the latent coordinates.

    Each trial draws the sample of :func:`surrogate_errors` with the same ``seed`` (the generator
    of ``SeedSequence(seed).spawn(trials)[t]``) and solves the finite-size equivalent
    (:func:`attn_lib.theory._finite_size.finite_size_resolvent_form`) on the rule of its ``n``
    tokens, node ``(xi_i, y_i)`` of weight ``1/n``, instead of the Gauss–Hermite rule for the law
    of the types. Its mean over draws minus ``attention_error(setting, gammas, n=n)`` is the
    share of the deterministic equivalent's error that comes from the sample of types.

    Parameters
    ----------
    setting : Setting
        Model scalars, ``alpha = 1``.
    gammas : float or array_like of shape (G,)
    n : int
        Tokens (``p = round(c n)``).
    trials : int, default 2
    seed : int, default 0

    Returns
    -------
    ndarray of shape (trials, G)
    """
    s, g, n, trials, seed = _check_draws(setting, gammas, n, trials, seed)
    p = s.p(n)
    out = np.empty((trials, g.size))
    for t, child in enumerate(np.random.SeedSequence(seed).spawn(trials)):
        sample = data.draw(s, n, np.random.default_rng(child))
        split = latent_split(sample)
        law = _finite_size.LatentLaw(xi=split.xi.T, y=sample.y, weight=np.full(n, 1.0 / n),
                                     M=split.m_r, p=p)
        _, dq = _finite_size.finite_size_resolvent_form(s, g, n, nodes=law)
        out[t] = -g * g * dq
    return out


def finite_size_theory(settings: Sequence[Setting], gammas: object, n: int) -> np.ndarray:
    """The finite-size theory ``attention_error(s, gammas, n=n)`` of many settings, cached.

    All settings are solved together (:func:`attn_lib.theory.attention.attention_error_batch`
    with ``n``) and the result is read from or written to the disk cache as one entry
    (:func:`attn_lib.cache.cached`).

    Parameters
    ----------
    settings : sequence of Setting, length B
    gammas : float or array_like of shape (G,)
    n : int
        Tokens; the theory uses ``p = round(c n)`` and the shift ``delta(n)``.

    Returns
    -------
    ndarray of shape ``(B, G)``.
    """
    settings = check_settings(settings)
    g = np.atleast_1d(check_gammas(gammas))
    n = check_int(n, "n")
    grid = np.broadcast_to(g, (len(settings), g.size)).copy()
    return np.asarray(cache.cached(attention_error_batch, settings=list(settings), gamma=grid, n=n))

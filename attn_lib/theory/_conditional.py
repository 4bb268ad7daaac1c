r"""The conditional Gaussian equivalent at small ``n``: the tokens' latent block kept as drawn.

The finite-size equivalent (:mod:`attn_lib.theory._finite_size`) is Gaussian given the tokens'
latent coordinates ``xi_i = B^T x_i = y_i mu_r + zeta_i`` (``r <= 3``), and it integrates them
over their law ``pi`` with a Gauss–Hermite rule. A sample has ``n`` tokens, not ``pi``: the
error is a nonlinear function of the empirical law of the ``xi_i``, and its mean over samples
differs from its value at ``pi`` by ``O(1/n)``. The *conditional* equivalent (in the sense of
Wen, Hu, Lu, Fan and Misiakiewicz, arXiv:2512.03325: a low-dimensional non-Gaussian block kept
exactly, the rest Gaussian) solves the finite-size equivalent on each draw's own block, node
``(xi_i, y_i)`` of weight ``1/n``, and averages over seeded draws of the block:

.. math::

    E_n^{\mathrm{cond}}(\gamma) = \mathbb E_{(y_i, \zeta_i)_{i \le n}}
        \big[E_n(\gamma \mid \text{types } (y_i\mu_r + \zeta_i, y_i))\big],

with balanced labels (:func:`attn_lib.model.data.labels`) and ``zeta_i ~ N(0, I_r)``: the law of
the block in the simulator. Only ``r`` numbers per token are drawn, never a ``p x n`` matrix.
Derivation and measurements: ``book/derivation_finite_size.md``, "The conditional equivalent at
small n".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_gammas, check_int, check_seed, check_tokens
from ..model.data import labels
from ..model.setting import Setting, Softmax
from . import _finite_size

__all__ = ["ConditionalError", "latent_block", "conditional_error"]


@dataclass(frozen=True)
class ConditionalError:
    """The conditional equivalent's error and its Monte Carlo uncertainty over the latent block.

    Attributes
    ----------
    mean : ndarray shaped like ``gammas``
        ``E_n^cond(gamma)``, the mean over ``draws`` draws of the block.
    sem : ndarray shaped like ``gammas``
        Its standard error (sample standard deviation over draws / ``sqrt(draws)``).
    draws : int
        Number of draws of the block.
    """

    mean: np.ndarray
    sem: np.ndarray
    draws: int


def latent_block(setting: Setting, n: int, rng: np.random.Generator) -> _finite_size.LatentLaw:
    """One draw of the ``n`` tokens' latent block as a rule for the types (weights ``1/n``).

    Parameters
    ----------
    setting : Setting
        Entry-wise, any ``alpha`` (the block is drawn in the latent frame of
        ``setting.canonical()``).
    n : int
        Number of tokens; ``p = round(c n)``.
    rng : numpy.random.Generator
        Labels are drawn first (balanced, :func:`attn_lib.model.data.labels`), then the
        ``(n, r)`` Gaussian ``zeta``.

    Returns
    -------
    LatentLaw
        Nodes ``xi_i = y_i mu_r + zeta_i`` (shape ``(n, r)``), labels ``y_i``, weights ``1/n``,
        the restricted matrix ``M_r`` and ``p`` of the Gauss–Hermite law of the setting.
    """
    s = _check(setting)
    n = check_tokens(n)
    law = _finite_size.latent_law(s.canonical(), s.p(n), nodes=2)
    mu_r = law.weight @ (law.y[:, None] * law.xi)          # E_pi[y xi] = mu_r (odd moments of zeta vanish)
    y = labels(n, rng)
    xi = rng.standard_normal((n, law.r)) + y[:, None] * mu_r
    return _finite_size.LatentLaw(xi=xi, y=y, weight=np.full(n, 1.0 / n), M=law.M, p=law.p)


def conditional_error(setting: Setting, gammas: object, n: int, *, draws: int = 32,
                      seed: int = 0) -> ConditionalError:
    r"""Interpolation error of attention from the conditional equivalent (module docstring).

    Draw ``b`` of the block uses ``numpy.random.default_rng(SeedSequence(seed).spawn(draws)[b])``
    (:func:`latent_block`), so fewer draws are a prefix of more. One draw costs one finite-size
    solve with ``n`` types (about 0.2 to 0.5 s at ``n = 512``).

    Parameters
    ----------
    setting : Setting
        Entry-wise attention (softmax raises ``ValueError``), any ``alpha``.
    gammas : float or array_like of shape (G,)
        Positive ridge parameters.
    n : int
        Number of tokens (``p = round(c n)``, at least 8).
    draws : int, default 32
        Draws of the latent block, at least 2 (for the standard error).
    seed : int, default 0
        Root seed of the draws.

    Returns
    -------
    ConditionalError
        ``mean`` and ``sem`` shaped like ``gammas``.

    Raises
    ------
    ConvergenceError
        When a fixed point does not converge (never returns NaN).
    """
    s = _check(setting)
    g = check_gammas(gammas)
    n = check_int(n, "n", low=8)
    if s.p(n) < 8:
        raise ValueError(f"n: p = round(c n) must be at least 8, got p = {s.p(n)} at n = {n}")
    draws = check_int(draws, "draws", low=2)
    seed = check_seed(seed)
    canon = s.canonical()
    out = np.empty((draws, g.size))
    for b, child in enumerate(np.random.SeedSequence(seed).spawn(draws)):
        law = latent_block(s, n, np.random.default_rng(child))
        _, dq = _finite_size.finite_size_resolvent_form(canon, g.ravel(), n, nodes=law)
        out[b] = -(g.ravel() ** 2) * dq
    sem = out.std(axis=0, ddof=1) / np.sqrt(draws)
    return ConditionalError(mean=out.mean(axis=0).reshape(g.shape), sem=sem.reshape(g.shape),
                            draws=draws)


def _check(setting: object) -> Setting:
    """An entry-wise :class:`~attn_lib.model.setting.Setting` (the block is that of the rank-one model)."""
    if not isinstance(setting, Setting):
        raise TypeError("setting: the conditional equivalent takes an attn_lib.Setting, got "
                        f"{type(setting).__name__}")
    if isinstance(setting.attention, Softmax):
        raise ValueError("setting: the conditional equivalent is for entry-wise attention; got "
                         "softmax attention")
    return setting

"""Tests of the pencil and the label quadratic form (``attn_lib.theory._spiked``) for nonlinear ``f``.

The deterministic equivalent replaces ``a^T h(S) b`` by its isotropic limit (integrals against
``mu_MP`` and ``sigma = l mu_MP``, taken with the Gauss-Chebyshev rule of the bulk) and then does
exact algebra: the ``3 x 3`` pencil per eigenvalue and a Woodbury step for the spike and the
weights. Here the isotropic law is made exact by a finite model whose spectral measures *are*
that quadrature rule, so the direct inverse ``yh^T (alpha I + J^T R J)^{-1} yh`` of the model must
equal :func:`label_quadratic_form` to rounding: any wrong term of the pencil, of the spike
``U C U^T``, of the weight part ``rho u v^T`` or of the coordinates of ``u, v`` shows.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attn_lib import Setting, data
from attn_lib.theory import linearisation
from attn_lib.theory._bulk import BulkSolution, sigma_rule, solve_bulk
from attn_lib.theory._spiked import label_quadratic_form

N_NODES = 64


def _bulk(setting: Setting, gamma: float, nodes: int = N_NODES) -> BulkSolution:
    """The bulk solution of ``setting`` at ``gamma`` (flat, shape ``(1,)``), on ``nodes`` nodes."""
    lin = linearisation(setting)
    b = solve_bulk(setting.c, lin.rho, lin.b2, np.array([[gamma]]))
    flat = {k: np.ravel(getattr(b, k)) for k in b.__dataclass_fields__}
    flat["nodes"] = np.array([nodes])
    return BulkSolution(**flat)


def _model_form(bulk: BulkSolution, setting: Setting, theta=None) -> float:
    """``yh^T (alpha I + J^T R J)^{-1} yh`` in a finite model where the isotropic law is exact.

    ``S = diag(0, l_1..l_N)`` on copy 0 and ``diag(l_1..l_N)`` on one copy per latent direction of
    ``(mu, w_K, w_Q)``; ``yh`` has squared entries the ``mu_MP`` weights ``(m_0, w_k / l_k)`` on copy
    0 (``m_0 = 1 - sum w_k / l_k``, the atom at zero), and ``Z^T w / sqrt(p)`` for ``w = L^T e``
    (``gram = L L^T``) is ``sum_i L_i sqrt(w_k / c)`` on copy ``i``. Then ``a^T h(S) b`` equals the
    quadrature of ``alpha_a alpha_b int h dmu_MP + (w_a^T w_b / c) int h dsigma`` exactly.
    ``theta = (alpha, kappa, tau)`` overrides the bulk's values.
    """
    c, rho = float(bulk.c[0]), float(bulk.rho[0])
    alpha, kappa, tau = theta if theta is not None else (float(bulk.alpha[0]), float(bulk.kappa[0]),
                                                          float(bulk.tau[0]))
    lam, w = sigma_rule(bulk.c, int(bulk.nodes[0]))
    lam = lam[0]
    L = data.latent_coordinates(setting).T            # (3, r): rows mu, w_K, w_Q
    r, N = L.shape[1], lam.size
    spec = np.concatenate([[0.0], lam, np.tile(lam, r)])
    yh = np.zeros(spec.size)
    yh[0] = np.sqrt(max(1.0 - np.sum(w / lam), 0.0))  # c >= 1: no atom (quadrature residue ~1e-16)
    yh[1:N + 1] = np.sqrt(w / lam)
    Zw = np.zeros((3, spec.size))
    for i in range(r):
        Zw[:, N + 1 + i * N:N + 1 + (i + 1) * N] = L[:, i, None] * np.sqrt(w / c)[None, :]
    e = Zw[0]
    g = setting.gram
    u = g[0, 1] / np.sqrt(c) * yh + Zw[1]
    v = g[0, 2] / np.sqrt(c) * yh + Zw[2]
    S_x = (np.diag(spec) + setting.snr / c * np.outer(yh, yh)
           + (np.outer(yh, e) + np.outer(e, yh)) / np.sqrt(c))
    eye = np.eye(spec.size)
    J = rho * (S_x - eye) - kappa * eye + rho * np.outer(u, v)
    R = np.linalg.solve(eye + tau * S_x, S_x)
    return float(yh @ np.linalg.solve(alpha * eye + J.T @ R @ J, yh))


CASES = [
    # tanh: kappa > 0 and tau > 0, a signal correlated with both weights
    (Setting(c=0.5, f="tanh", snr=3.0, wk_norm=1.5, wq_norm=0.7, cos_mu_wk=0.8, cos_mu_wq=-0.3,
             cos_wk_wq=0.2), 0.1),
    # relu at c > 1 (no atom), one latent direction
    (Setting(c=2.0, f="relu", snr=2.0, wk_norm=1.0, wq_norm=1.0), 1.0),
    # sign at small gamma: kappa < 0, large tau; w_K = w_Q
    (Setting(c=1.0, f="sign", snr=1.0, wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.5, cos_mu_wq=0.5,
             cos_wk_wq=1.0), 0.01),
]


def _case_id(v) -> str:
    return v.f if isinstance(v, Setting) else f"g{v:g}"


@pytest.mark.parametrize("setting, gamma", CASES, ids=_case_id)
def test_label_form_equals_the_exact_model(setting, gamma):
    """Pencil + Woodbury against a direct ``(1 + 64 r)``-dimensional inverse.

    Measured: relative difference at most 2e-15 in these cases. Tolerance 1e-10. A term changed
    by 10 % moves the answer by far more (measured: ``snr`` 4.3-7.1 %, ``tau`` 0.30-2.3 %,
    ``||w_Q||`` 0.05-1.9 %, ``kappa`` 2.1e-4-6.5e-4), see :func:`test_the_model_resolves_each_term`.
    """
    b = _bulk(setting, gamma)
    q, _ = label_quadratic_form(b, np.array([setting.snr]), setting.gram[None])
    assert q[0] == pytest.approx(_model_form(b, setting), rel=1e-10)


@pytest.mark.parametrize("setting, gamma", CASES, ids=_case_id)
def test_the_model_resolves_each_term(setting, gamma):
    """Each term of the pencil matters: changing it by 10 % moves the form far beyond rounding."""
    b = _bulk(setting, gamma)
    ref = _model_form(b, setting)
    alpha, kappa, tau = float(b.alpha[0]), float(b.kappa[0]), float(b.tau[0])
    moved = [_model_form(b, dataclasses.replace(setting, snr=1.1 * setting.snr)),
             _model_form(b, setting, (alpha, 1.1 * kappa, tau)),
             _model_form(b, setting, (alpha, kappa, 1.1 * tau)),
             _model_form(b, dataclasses.replace(setting, wq_norm=1.1 * setting.wq_norm))]
    # measured: at least 2.1e-4 (kappa, tanh), 1e6 times the tolerance of the check above
    assert min(abs(m / ref - 1) for m in moved) > 1e-6


@pytest.mark.parametrize("setting, gamma", CASES, ids=_case_id)
def test_label_form_derivative(setting, gamma):
    """``dq/dgamma`` along the bulk tangent against a central difference of the exact model."""
    b = _bulk(setting, gamma)
    _, dq = label_quadratic_form(b, np.array([setting.snr]), setting.gram[None])
    h = 1e-5 * gamma
    theta = np.array([b.alpha[0], b.kappa[0], b.tau[0]])
    tangent = np.array([b.dalpha[0], b.dkappa[0], b.dtau[0]])
    fd = (_model_form(b, setting, theta + h * tangent) - _model_form(b, setting, theta - h * tangent)) / (2 * h)
    # measured: relative difference 6e-11-2.4e-10 (central difference, step 1e-5 gamma)
    assert dq[0] == pytest.approx(fd, rel=1e-6)

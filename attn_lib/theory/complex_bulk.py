r"""The bulk fixed point at complex ``gamma = -z``: the limiting spectrum of ``Phi^T Phi / n``.

For ``mu = 0``, ``g1(z) = lim tr(Phi^T Phi / n - z)^{-1} / n`` solves the same equations as
:mod:`attn_lib.theory.bulk` with ``gamma = -z`` (they are analytic in ``gamma``); the density
is ``Im g1(x + i eta) / pi`` for small ``eta > 0``. Newton's method (complex, same analytic
Jacobian) is continued from a large ``x`` down the grid.
"""

from __future__ import annotations

import numpy as np

from .bulk import ConvergenceError, _start, sigma_rule


def _F_J(lam, w, rho, b2, gamma, alpha, kappa, tau):
    t = 1.0 + tau * lam
    j = rho * (lam - 1.0) - kappa
    D = alpha * t + lam * j * j
    iD = 1.0 / D
    iD2 = iD * iD
    jp = [np.ones_like(j), j, j * j]
    I = np.array([(jp[k] * iD) @ w for k in range(3)])
    dI = np.empty((3, 3), dtype=complex)
    for k in range(3):
        dI[k, 0] = -(jp[k] * t * iD2) @ w
        dI[k, 2] = -(jp[k] * alpha * lam * iD2) @ w
        dk = 2.0 * lam * j * jp[k] * iD2
        if k >= 1:
            dk = dk - k * jp[k - 1] * iD
        dI[k, 1] = dk @ w
    F = np.array([1.0 - gamma / alpha - b2 * I[0], kappa - b2 * I[1], alpha * tau - b2 * (1.0 - I[2])])
    J = np.array([[gamma / alpha ** 2 - b2 * dI[0, 0], -b2 * dI[0, 1], -b2 * dI[0, 2]],
                  [-b2 * dI[1, 0], 1.0 - b2 * dI[1, 1], -b2 * dI[1, 2]],
                  [tau + b2 * dI[2, 0], b2 * dI[2, 1], alpha + b2 * dI[2, 2]]])
    return F, J, I


def complex_g1(c: float, rho: float, b2: float, x: np.ndarray, eta: float, *,
               label: str = "") -> np.ndarray:
    """``g1(x + i eta)`` on a grid ``x`` (shape ``(M,)``), complex, same shape."""
    phi = 1.0 / c
    half = 2.0 * np.sqrt(phi)
    n_nodes = int(min(2 ** 16, max(2048, 2 ** np.ceil(np.log2(14.0 * half / eta)))))
    lam, w = sigma_rule(np.array([c]), n_nodes)
    lam = lam[0]
    order = np.argsort(-x)
    out = np.empty(x.shape, dtype=complex)
    x0 = max(_start(np.array(c), np.array(rho), np.array(b2)).item(), x.max() * 2 + 10)
    gamma = -complex(x0, eta)
    th = np.array([gamma, 0.0, b2 / gamma], dtype=complex)
    cur = x0

    def newton(th, gamma):
        res = np.inf
        for _ in range(40):
            with np.errstate(all="ignore"):
                F, J, I = _F_J(lam, w, rho, b2, gamma, *th)
            res = float(np.max(np.abs(F)))
            if not (np.all(np.isfinite(F)) and np.all(np.isfinite(J))):
                return None, res
            try:
                step = np.linalg.solve(J, -F)
            except np.linalg.LinAlgError:
                return None, res
            # limit the relative step (keeps the iterate on the branch it started on)
            big = np.max(np.abs(step) / (np.abs(th) + 1e-3))
            if big > 0.5:
                step = step * (0.5 / big)
            th = th + step
            if not np.all(np.isfinite(th)):
                return None, res
            if np.max(np.abs(step) / (np.abs(th) + 1e-12)) < 1e-12:
                return th, res
        return None, res

    def advance(th, x_from, x_to, depth):
        gamma = -complex(x_to, eta)
        new, res = newton(th, gamma)
        if new is not None and np.max(np.abs(new - th) / (np.abs(th) + 1e-3)) < 0.3:
            return new
        if depth > 30:
            raise ConvergenceError(f"spectral fixed point did not converge for {label} at "
                                   f"z={x_to:.6g}+{eta:g}i: last residual {res:.3g}")
        mid = 0.5 * (x_from + x_to)
        th = advance(th, x_from, mid, depth + 1)
        return advance(th, mid, x_to, depth + 1)

    for idx in order:
        xt = float(x[idx])
        th = advance(th, cur, xt, 0)
        cur = xt
        _, _, I = _F_J(lam, w, rho, b2, -complex(xt, eta), *th)
        out[idx] = (1.0 - I[2]) / th[0]
    return out

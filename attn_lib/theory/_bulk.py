r"""The bulk fixed point ``(alpha, kappa, tau)`` of the attention deterministic equivalent.

Model (see ``book/derivation_attention.md``): with ``S = Z^T Z / p`` (``n x n``, Marchenko–Pastur
law ``mu_MP`` with ratio ``phi = 1/c``), ``rho = sqrt(c) a1`` and ``b2 = nu - a1^2``, the
Gaussian integration over the Wigner part of the linearised kernel gives, for ``gamma > 0``,

    j(l) = rho (l - 1) - kappa,      D(l) = alpha (1 + tau l) + l j(l)^2,

    alpha = gamma + b2 alpha int l / D dmu_MP,
    kappa = b2 int l j / D dmu_MP,
    tau   = b2 int (1 + tau l) / D dmu_MP,

and ``(1/n) tr Q -> g1 = int (1 + tau l) / D dmu_MP`` (``= tau / b2`` when ``b2 > 0``).

Quadrature
----------
All integrals are taken against ``sigma = l mu_MP`` (mass one, no atom, density
``sqrt((l_+ - l)(l - l_-)) / (2 pi phi)``) with Gauss–Chebyshev nodes of the second kind, after
the identity ``int h dmu_MP = h(0) + int (h(l) - h(0)) / l dsigma`` which absorbs the atom at zero
(``c < 1``) and the ``1/l`` edge (``c = 1``). With ``I_k = int j^k / D dsigma``:

    alpha-eq:  1 - gamma / alpha - b2 I_0 = 0,
    kappa-eq:  kappa - b2 I_1 = 0,
    tau-eq:    alpha tau - b2 (1 - I_2) = 0,       g1 = (1 - I_2) / alpha.

The integrand is analytic off the roots of the cubic ``D``; the node count ``N`` is chosen from
their Bernstein-ellipse parameter ``R`` (error ``~ R^{-2N}``) so that the quadrature error is
below ``1e-13``. Newton's method with the analytic Jacobian is used along a continuation path in
``gamma`` (from large ``gamma``, where ``alpha ~ gamma``, ``kappa ~ 0``, ``tau ~ b2/gamma``),
and ``d(alpha, kappa, tau)/dgamma`` follows from the implicit function theorem with the same
Jacobian.

Spectral argument
-----------------
The equations are analytic in ``gamma``: at ``gamma = -z``, ``z = x + i eta``, ``g1(z)`` is the
limit of ``tr(Phi^T Phi / n - z)^{-1} / n`` for ``mu = 0``, and ``Im g1 / pi`` is the eigenvalue
density smoothed at the scale ``eta``. :func:`spectral_g1` solves the same residual with the same
(complex) Jacobian, continued in ``x`` from the right.

The continuation (step limit, halving, errors) is :func:`attn_lib.theory._continuation.continue_to`.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ._continuation import continue_to
from ._errors import ConvergenceError, check_converged

__all__ = ["BulkSolution", "solve_bulk", "spectral_g1", "sigma_rule", "required_nodes",
           "MIN_NODES", "MAX_NODES"]

MIN_NODES = 64
MAX_NODES = 2 ** 18
_QUAD_TOL = 1e-13
_NEWTON_TOL = 1e-8
_MAX_RATIO = 20.0  # largest gamma ratio of one continuation step
_MAX_ATTEMPTS = 40   # corrector calls per continuation step
_PROBLEM = "attention fixed point"
_SPECTRAL_NEWTON_TOL = 1e-12  # relative Newton step that ends the spectral corrector
_SPECTRAL_MAX_ITER = 40
_SPECTRAL_MAX_CHANGE = 0.3    # a spectral step is rejected if the solution moves more (relative)
_SPECTRAL_MAX_ATTEMPTS = 1000  # no step limit in x: the 0.3 rule and the 1e-9 floor bound the work


@dataclass(frozen=True)
class BulkSolution:
    """Solution of the bulk fixed point, arrays of a common shape ``(B,)``.

    Attributes
    ----------
    gamma, alpha, kappa, tau : ndarray
        Ridge parameter and the three unknowns.
    dalpha, dkappa, dtau : ndarray
        Their derivatives with respect to ``gamma`` (implicit function theorem).
    g1, dg1 : ndarray
        Limit of ``tr Q / n`` and its ``gamma``-derivative; the error for ``mu = 0`` is
        ``-gamma^2 dg1``.
    c, rho, b2 : ndarray
        Parameters (``rho = sqrt(c) a1``).
    nodes : ndarray of int
        Quadrature nodes used per element.
    residual : ndarray
        Final max-norm of the scaled residual.
    """

    gamma: np.ndarray
    alpha: np.ndarray
    kappa: np.ndarray
    tau: np.ndarray
    dalpha: np.ndarray
    dkappa: np.ndarray
    dtau: np.ndarray
    g1: np.ndarray
    dg1: np.ndarray
    c: np.ndarray
    rho: np.ndarray
    b2: np.ndarray
    nodes: np.ndarray
    residual: np.ndarray

    @property
    def error(self) -> np.ndarray:
        """``-gamma^2 dg1/dgamma``: the attention error for random (``mu = 0``) inputs."""
        return -self.gamma ** 2 * self.dg1


def sigma_rule(c: np.ndarray, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``l`` (shape ``(B, N)``) and weights (``(N,)``) for ``int g dsigma``, ``sigma = l mu_MP``.

    Gauss–Chebyshev of the second kind: ``x_k = cos(k pi / (N + 1))``,
    ``l_k = 1 + phi + 2 sqrt(phi) x_k``, weights ``2 sin^2(k pi/(N+1)) / (N + 1)`` (they sum to 1).
    Exact for polynomials of degree ``<= 2N - 1``.
    """
    c = np.asarray(c, dtype=float).reshape(-1)
    x, w = _chebyshev(int(n_nodes))
    phi = 1.0 / c
    lam = (1.0 + phi)[:, None] + (2.0 * np.sqrt(phi))[:, None] * x[None, :]
    return lam, w


@functools.lru_cache(maxsize=32)
def _chebyshev(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Read-only Gauss–Chebyshev (second kind) nodes ``x_k`` and weights on ``[-1, 1]``."""
    k = np.arange(1, n_nodes + 1)
    th = k * np.pi / (n_nodes + 1)
    x = np.cos(th)
    w = 2.0 * np.sin(th) ** 2 / (n_nodes + 1)
    x.flags.writeable = w.flags.writeable = False
    return x, w


def _cubic_coeffs(rho, kappa, alpha, tau):
    """Coefficients (highest first) of ``D(l) = rho^2 l^3 - 2 rho (rho+kappa) l^2 + ((rho+kappa)^2 + alpha tau) l + alpha``."""
    r = rho + kappa
    return np.stack([rho ** 2 + 0 * alpha, -2.0 * rho * r, r ** 2 + alpha * tau, alpha + 0 * rho], axis=-1)


def required_nodes(c, rho, kappa, alpha, tau, tol: float = _QUAD_TOL) -> np.ndarray:
    """Node count so that the Gauss–Chebyshev error ``~ R^{-2N}`` of ``1/D`` integrals is ``< tol``.

    ``R`` is the smallest Bernstein-ellipse parameter of the roots of ``D`` mapped to
    ``x = (l - 1 - phi) / (2 sqrt(phi))``. Returns powers of two in ``[MIN_NODES, MAX_NODES]``.
    """
    c, rho, kappa, alpha, tau = np.broadcast_arrays(*(np.asarray(a, dtype=float) for a in (c, rho, kappa, alpha, tau)))
    coef = _cubic_coeffs(rho, kappa, alpha, tau).reshape(-1, 4)
    B = coef.shape[0]
    roots = np.full((B, 3), np.inf + 0j)
    lead = np.abs(coef[:, 0]) > 1e-300
    if np.any(lead):
        cc = coef[lead]
        comp = np.zeros((cc.shape[0], 3, 3))
        comp[:, 0, :] = -cc[:, 1:] / cc[:, :1]
        comp[:, 1, 0] = 1.0
        comp[:, 2, 1] = 1.0
        roots[lead] = np.linalg.eigvals(comp)
    lin = ~lead & (np.abs(coef[:, 2]) > 1e-300)
    roots[lin, 0] = -coef[lin, 3] / coef[lin, 2]
    phi = 1.0 / c.reshape(-1)
    with np.errstate(invalid="ignore", over="ignore"):
        x = (roots - (1.0 + phi)[:, None]) / (2.0 * np.sqrt(phi))[:, None]
        s = np.sqrt(x * x - 1.0 + 0j)
        R = np.maximum(np.abs(x + s), np.abs(x - s))
    R = np.where(np.isfinite(R), R, np.inf).min(axis=1)
    with np.errstate(divide="ignore"):
        need = np.log(1.0 / tol) / (2.0 * np.log(np.maximum(R, 1.0 + 1e-12))) + 8
    nodes = np.full(B, MIN_NODES)
    while True:
        more = (nodes < need) & (nodes < MAX_NODES)
        if not np.any(more):
            break
        nodes[more] *= 2
    return nodes.reshape(c.shape)


def _moments(c, rho, alpha, kappa, tau, n_nodes, jac: bool = True):
    """``I_k = int j^k/D dsigma`` (k = 0, 1, 2) and their partial derivatives.

    ``n_nodes`` is an int or an int array of shape ``(B,)`` (elements are grouped by it); the
    unknowns are real (``gamma > 0``) or complex (spectral argument).
    Returns ``I`` of shape ``(3, B)`` and ``dI`` of shape ``(3, 3, B)`` (``dI[k, m]`` is
    ``d I_k / d(alpha, kappa, tau)[m]``).
    """
    if np.ndim(n_nodes) == 0:
        return _moments_fixed(c, rho, alpha, kappa, tau, int(n_nodes), jac)
    nn = np.broadcast_to(np.asarray(n_nodes), alpha.shape)
    dtype = np.result_type(alpha, kappa, tau, float)
    I = np.empty((3,) + alpha.shape, dtype=dtype)
    dI = np.empty((3, 3) + alpha.shape, dtype=dtype) if jac else None
    for N in np.unique(nn):
        sel = nn == N
        Is, dIs = _moments_fixed(c[sel], rho[sel], alpha[sel], kappa[sel], tau[sel], int(N), jac)
        I[:, sel] = Is
        if dI is not None:  # jac
            dI[:, :, sel] = dIs
    return I, dI


def _moments_fixed(c, rho, alpha, kappa, tau, n_nodes: int, jac: bool):
    lam, w = sigma_rule(c, n_nodes)
    a = alpha[:, None]
    t = 1.0 + tau[:, None] * lam
    j = rho[:, None] * (lam - 1.0) - kappa[:, None]
    D = a * t + lam * j * j
    iD = 1.0 / D
    jD = j * iD
    I = np.stack([iD @ w, jD @ w, (j * jD) @ w])
    if not jac:
        return I, None
    iD2 = iD * iD
    # dD/dalpha = t, dD/dkappa = -2 l j, dD/dtau = alpha l;  dj/dkappa = -1
    Dt = t * iD2
    Dk = -2.0 * lam * j * iD2
    Dtau = a * lam * iD2
    dI = np.empty((3, 3, alpha.shape[0]), dtype=D.dtype)
    jpow = [np.ones_like(j), j, j * j]
    for k in range(3):
        dI[k, 0] = -(jpow[k] * Dt) @ w
        dI[k, 2] = -(jpow[k] * Dtau) @ w
        dk = -(jpow[k] * Dk)
        if k >= 1:
            dk = dk - k * jpow[k - 1] * iD
        dI[k, 1] = dk @ w
    return I, dI


def _residual_jacobian(c, rho, b2, gamma, alpha, kappa, tau, n_nodes, jac=True):
    """Residual ``F`` (shape ``(3, B)``) of the alpha-, kappa- and tau-equations, its Jacobian
    ``J`` (``(B, 3, 3)``, with respect to ``(alpha, kappa, tau)``) and the moments ``I``, ``dI``;
    real or complex (the residual is analytic in ``gamma`` and the unknowns)."""
    I, dI = _moments(c, rho, alpha, kappa, tau, n_nodes, jac)
    F = np.stack([1.0 - gamma / alpha - b2 * I[0],
                  kappa - b2 * I[1],
                  alpha * tau - b2 * (1.0 - I[2])])
    if not jac:
        return F, None, I, None
    J = np.empty((alpha.shape[0], 3, 3), dtype=F.dtype)
    J[:, 0, 0] = gamma / alpha ** 2 - b2 * dI[0, 0]
    J[:, 0, 1] = -b2 * dI[0, 1]
    J[:, 0, 2] = -b2 * dI[0, 2]
    J[:, 1, 0] = -b2 * dI[1, 0]
    J[:, 1, 1] = 1.0 - b2 * dI[1, 1]
    J[:, 1, 2] = -b2 * dI[1, 2]
    J[:, 2, 0] = tau + b2 * dI[2, 0]
    J[:, 2, 1] = b2 * dI[2, 1]
    J[:, 2, 2] = alpha + b2 * dI[2, 2]
    return F, J, I, dI


def _scale(alpha, tau, b2):
    """Residual scales: equation 1 is relative, 2 absolute, 3 relative to ``alpha tau + b2``."""
    return np.stack([np.ones_like(alpha), np.ones_like(alpha), alpha * tau + b2 + 1e-300])


def _newton(c, rho, b2, gamma, alpha, kappa, tau, n_nodes, max_iter):
    """Damped Newton at fixed ``gamma`` on the elements not yet converged.

    An element stops when its relative Newton step is below ``_NEWTON_TOL`` (the updated iterate
    is then accurate to about the square of that, by quadratic convergence) and is accepted if
    its scaled residual is below ``1e-9``. Returns the iterate, converged mask and residual.
    """
    alpha, kappa, tau = alpha.copy(), kappa.copy(), tau.copy()
    nn = np.broadcast_to(np.asarray(n_nodes), alpha.shape)
    ok = np.zeros(alpha.shape, dtype=bool)
    act = np.arange(alpha.size)
    for _ in range(max_iter):
        if act.size == 0:
            break
        a, k, t, gm, bb = alpha[act], kappa[act], tau[act], gamma[act], b2[act]
        F, J, _, _ = _residual_jacobian(c[act], rho[act], bb, gm, a, k, t, nn[act])
        with np.errstate(all="ignore"):
            step = np.linalg.solve(J, -F.T[..., None])[..., 0]
        bad = ~np.all(np.isfinite(step), axis=1)
        step[bad] = 0.0
        # damping keeps alpha > 0 and tau >= 0
        lam = np.ones_like(a)
        for _k in range(40):
            viol = (a + lam * step[:, 0] <= 0.05 * a) | ((t + lam * step[:, 2] < 0.0) & (t > 0))
            if not np.any(viol):
                break
            lam = np.where(viol, lam * 0.5, lam)
        a = a + lam * step[:, 0]
        k = k + lam * step[:, 1]
        t = np.maximum(t + lam * step[:, 2], 0.0)
        alpha[act], kappa[act], tau[act] = a, k, t
        with np.errstate(all="ignore"):  # inf when tau = 0 and moving: simply not done
            rel = np.max(np.abs(lam[:, None] * step) /
                         np.stack([a, np.abs(k) + 1e-3 * np.sqrt(bb) + 1e-300, t + 1e-300], axis=1), axis=1)
        done = (rel < _NEWTON_TOL) & ~bad & (lam == 1.0)
        ok[act[done]] = True
        act = act[~done]
    F, _, _, _ = _residual_jacobian(c, rho, b2, gamma, alpha, kappa, tau, nn, jac=False)
    res = np.max(np.abs(F) / _scale(alpha, tau, b2), axis=0)
    ok &= res < 1e-9
    return alpha, kappa, tau, ok, res


def _tangent(c, rho, b2, gamma, alpha, kappa, tau, n_nodes):
    """``d(alpha, kappa, tau)/dgamma`` (shape ``(B, 3)``), ``g1``, ``dg1/dgamma`` (IFT) and the residual ``F``."""
    F, J, I, dI = _residual_jacobian(c, rho, b2, gamma, alpha, kappa, tau, n_nodes)
    dFdg = np.stack([-1.0 / alpha, np.zeros_like(alpha), np.zeros_like(alpha)], axis=1)
    d = np.linalg.solve(J, -dFdg[..., None])[..., 0]
    g1 = (1.0 - I[2]) / alpha
    dI2 = np.einsum("mb,bm->b", dI[2], d)
    dg1 = -dI2 / alpha - (1.0 - I[2]) * d[:, 0] / alpha ** 2
    return d, g1, dg1, F


def _start(c, rho, b2):
    """A ``gamma`` so large that ``alpha = gamma, kappa = 0, tau = b2/gamma`` is a good start."""
    lp = (1.0 + np.sqrt(1.0 / c)) ** 2
    return 10.0 * (1.0 + b2 * lp + rho ** 2 * lp * (lp + 1.0) ** 2)


def solve_bulk(c, rho, b2, gammas, *, max_iter: int = 50, max_steps: int = 10000,
               label=None) -> BulkSolution:
    """Solve the bulk fixed point for a batch of parameters.

    Parameters
    ----------
    c, rho, b2 : array_like of shape (B,) or scalars
        ``p/n``, ``sqrt(c) a1`` and ``nu - a1^2`` per element.
    gammas : array_like of shape (B, G) or (G,)
        Positive ridge parameters; each row is followed along a continuation path from large
        ``gamma`` through its values sorted in decreasing order (steps of ratio at most 20,
        tangent predictor, Newton corrector).
    max_iter : int, default 50
        Newton iteration cap per continuation step.
    max_steps : int
        Cap on the continuation steps.
    label : callable, optional
        ``label(b)`` describes batch element ``b`` in error messages.

    Returns
    -------
    BulkSolution
        Arrays of shape ``(B, G)``.

    Raises
    ------
    ConvergenceError
        If Newton fails after step halving; names the element, ``gamma`` and last residual.
    """
    g = np.asarray(gammas, dtype=float)
    c, rho, b2 = (np.asarray(a, dtype=float).reshape(-1) for a in (c, rho, b2))
    if g.ndim == 1:
        g = np.broadcast_to(g, (max(c.size, rho.size, b2.size), g.size))
    B, G = g.shape
    c, rho, b2 = (np.broadcast_to(a, (B,)).copy() for a in (c, rho, b2))
    order = np.argsort(-g, axis=1, kind="stable")
    gs = np.take_along_axis(g, order, axis=1)

    where = label if label is not None else (lambda b: f"batch element {b}")

    # state
    gam = np.maximum(_start(c, rho, b2), gs[:, 0])
    alpha = gam.copy()
    kappa = np.zeros(B)
    tau = b2 / gam
    n_nodes = np.full(B, MIN_NODES)
    used = n_nodes.copy()
    alpha, kappa, tau, ok, res = _newton(c, rho, b2, gam, alpha, kappa, tau, n_nodes, max_iter)
    check_converged(ok, res, gam, problem=_PROBLEM, label=where)

    def step(idx, g0, g1):
        """Tangent predictor from ``g0`` (exponential in ``alpha`` and ``tau``), Newton at ``g1``."""
        cs, rs, bs, nn = c[idx], rho[idx], b2[idx], n_nodes[idx]
        a0, k0, t0 = alpha[idx], kappa[idx], tau[idx]
        d = _tangent(cs, rs, bs, g0, a0, k0, t0, nn)[0]
        dg = g1 - g0
        with np.errstate(all="ignore"):
            pa = a0 * np.exp(np.clip(d[:, 0] * dg / a0, -20, 20))
            pt = np.where(t0 > 0, t0 * np.exp(np.clip(d[:, 2] * dg / np.maximum(t0, 1e-300), -20, 20)), 0.0)
        pk = k0 + d[:, 1] * dg
        bad = ~(np.isfinite(pa) & np.isfinite(pt) & np.isfinite(pk))
        pa, pt, pk = np.where(bad, a0, pa), np.where(bad, t0, pt), np.where(bad, k0, pk)
        a2, k2, t2, ok, r = _newton(cs, rs, bs, g1, pa, pk, pt, nn, max_iter)
        s = idx[ok]
        alpha[s], kappa[s], tau[s] = a2[ok], k2[ok], t2[ok]
        return ok, r

    def resolve(s):
        """After a step: resolve the integrals as the poles of ``1/D`` approach the support."""
        used[s] = n_nodes[s]
        n_nodes[s] = np.maximum(n_nodes[s], required_nodes(c[s], rho[s], kappa[s], alpha[s], tau[s]))

    sol = np.empty((3, B, G))
    nodes_at = np.empty((B, G), dtype=int)
    used_at = np.empty((B, G), dtype=int)
    for col in range(G):
        continue_to(gam, gs[:, col], step, max_ratio=_MAX_RATIO, max_attempts=_MAX_ATTEMPTS,
                    problem=_PROBLEM, label=where, max_steps=max_steps, on_step=resolve)
        sol[:, np.arange(B), order[:, col]] = alpha, kappa, tau
        nodes_at[np.arange(B), order[:, col]] = n_nodes
        used_at[np.arange(B), order[:, col]] = used
        # the next (smaller) gamma starts from the local need, not the maximum along the path
        n_nodes[:] = required_nodes(c, rho, kappa, alpha, tau)

    # quadrature refinement and tangents, vectorised over the whole batch
    cf, rf, bf = (np.repeat(a, G) for a in (c, rho, b2))
    gf = g.reshape(-1)
    al, ka, ta = (sol[i].reshape(-1) for i in range(3))
    need = np.maximum(required_nodes(cf, rf, ka, al, ta), nodes_at.reshape(-1))
    used_f = used_at.reshape(-1)
    nn = np.full(gf.shape, MIN_NODES)
    for N in np.unique(need):
        sel = np.flatnonzero(need == N)
        N = int(N)
        if np.any(used_f[sel] != N):  # re-solve with the node count the solution needs
            for _rep in range(4):  # the poles move slightly when the solution is refined
                a_, k_, t_, ok, res = _newton(cf[sel], rf[sel], bf[sel], gf[sel], al[sel], ka[sel], ta[sel],
                                              N, max_iter)
                check_converged(ok, res, gf[sel], problem=_PROBLEM, label=lambda i: where(sel[i] // G))
                al[sel], ka[sel], ta[sel] = a_, k_, t_
                N2 = int(required_nodes(cf[sel], rf[sel], ka[sel], al[sel], ta[sel]).max())
                if N2 <= N:
                    break
                N = N2
        nn[sel] = N
    out = {k: np.empty(gf.shape) for k in ("dalpha", "dkappa", "dtau", "g1", "dg1", "residual")}
    for N in np.unique(nn):
        sel = nn == N
        d, g1, dg1, F = _tangent(cf[sel], rf[sel], bf[sel], gf[sel], al[sel], ka[sel], ta[sel], int(N))
        out["dalpha"][sel], out["dkappa"][sel], out["dtau"][sel] = d[:, 0], d[:, 1], d[:, 2]
        out["g1"][sel], out["dg1"][sel] = g1, dg1
        out["residual"][sel] = np.max(np.abs(F) / _scale(al[sel], ta[sel], bf[sel]), axis=0)
    out.update(alpha=al, kappa=ka, tau=ta)
    for k, v in out.items():
        if not np.all(np.isfinite(v)):
            bad = int(np.flatnonzero(~np.isfinite(v))[0])
            raise ConvergenceError(f"non-finite {k} for {where(bad // G)} at gamma={gf[bad]:.6g}")
    shaped = {k: v.reshape(B, G) for k, v in out.items()}
    bc = lambda a: np.broadcast_to(a[:, None], (B, G)).copy()  # noqa: E731
    return BulkSolution(gamma=g.copy(), nodes=nn.reshape(B, G), c=bc(c), rho=bc(rho), b2=bc(b2), **shaped)


def _spectral_newton(c, rho, b2, gamma, th, n_nodes):
    """Newton at the complex ``gamma`` from ``th = (alpha, kappa, tau)`` (shape ``(3,)``).

    The relative step is limited to 0.5 (it keeps the iterate on the branch it started on).
    Returns the solution, or ``None`` when the iteration fails, and the last residual.
    """
    res = np.inf
    for _ in range(_SPECTRAL_MAX_ITER):
        with np.errstate(all="ignore"):
            F, J, _, _ = _residual_jacobian(c, rho, b2, gamma, th[0:1], th[1:2], th[2:3], n_nodes)
        F, J = F[:, 0], J[0]
        res = float(np.max(np.abs(F)))
        if not (np.all(np.isfinite(F)) and np.all(np.isfinite(J))):
            return None, res
        try:
            step = np.linalg.solve(J, -F)
        except np.linalg.LinAlgError:
            return None, res
        big = np.max(np.abs(step) / (np.abs(th) + 1e-3))
        if big > 0.5:
            step = step * (0.5 / big)
        th = th + step
        if not np.all(np.isfinite(th)):
            return None, res
        if np.max(np.abs(step) / (np.abs(th) + 1e-12)) < _SPECTRAL_NEWTON_TOL:
            return th, res
    return None, res


def spectral_g1(c: float, rho: float, b2: float, x: np.ndarray, eta: float, *,
                label: str = "") -> np.ndarray:
    """``g1(x + i eta)`` (the bulk trace at ``gamma = -(x + i eta)``) on a grid ``x > 0`` of shape ``(M,)``.

    The fixed point is continued from a large ``x`` down the sorted grid (steps halved in
    ``log x`` when Newton fails or moves the solution by more than a relative 0.3), with a
    Gauss–Chebyshev rule fine enough for poles at distance ``~eta`` from the support.

    Returns
    -------
    ndarray of complex, shape ``(M,)``.

    Raises
    ------
    ConvergenceError
        If the continuation fails; names ``label``, ``z`` and the last residual.
    """
    half = 2.0 * np.sqrt(1.0 / c)
    n_nodes = int(min(2 ** 16, max(2048, 2 ** np.ceil(np.log2(14.0 * half / eta)))))
    cb, rhob, b2b = (np.array([v], dtype=float) for v in (c, rho, b2))  # batches of one
    x0 = max(_start(cb, rhob, b2b).item(), x.max() * 2 + 10)
    gamma = -complex(x0, eta)
    th = np.array([gamma, 0.0, b2b[0] / gamma], dtype=complex)

    def step(idx, x_from, x_to):
        nonlocal th
        new, res = _spectral_newton(cb, rhob, b2b, np.array([-complex(x_to[0], eta)]), th, n_nodes)
        ok = new is not None and np.max(np.abs(new - th) / (np.abs(th) + 1e-3)) < _SPECTRAL_MAX_CHANGE
        if ok:
            th = new
        return np.array([ok]), np.array([res])

    cur = np.array([x0])
    out = np.empty(x.shape, dtype=complex)
    for i in np.argsort(-x):
        continue_to(cur, x[i], step, max_ratio=None, max_attempts=_SPECTRAL_MAX_ATTEMPTS,
                    problem="spectral fixed point", label=lambda b: label,
                    point=lambda v: f"z={v:.6g}+{eta:g}i")
        I = _moments(cb, rhob, th[0:1], th[1:2], th[2:3], n_nodes, jac=False)[0]
        out[i] = (1.0 - I[2, 0]) / th[0]
    return out

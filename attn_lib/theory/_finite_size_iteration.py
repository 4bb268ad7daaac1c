r"""The compiled fixed-point iteration of the finite-size equivalent (:mod:`attn_lib.theory._finite_size`).

One call of :func:`anderson` solves a batch: every element (one setting at one complex
``gamma + i eps``) runs its own Anderson iteration on the state ``z = (Gamma, om)``
(``Pn^2 + 4 T`` complex numbers, ``Pn = 1 + 2K``), from its own start, until its relative
residual is below the tolerance. The arithmetic is that of the equations in the module
docstring of :mod:`attn_lib.theory._finite_size`, with the sparsity of ``P(t)`` and ``R(t)``
(one entry per column and per row) used directly:

    Lambda(t)[jb_b, ib_b'] += beta_b(t) Gamma[b, b'] (-(p'/p) alpha_b'(t)),
    (E_pi[R G P])[b, b'] = sum_t w_t alpha_b(t) G(t)[ib_b, jb_b'] beta_b'(t),

``G(t) = Lambda(t)^{-1}`` by cofactors and ``Gamma = A^{-1}``, ``A = I - phi E_pi[R G P]`` (zero
between slope terms of opposite parity), in real arithmetic to first order in the complex step.
The loops are compiled by Numba (``cache=True``: once per clone, then loaded from
``__pycache__``); a batch costs one call, so the cost is the arithmetic, ``O(T (Pn^2 + T))`` per
element and iteration, not one NumPy call per operation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar, cast

import numba
import numpy as np

__all__ = ["anderson", "inv3"]

_F = TypeVar("_F", bound=Callable[..., object])


def _jit(fn: _F) -> _F:
    """``numba.njit`` with the on-disk cache, typed as the function it compiles."""
    return cast(_F, numba.njit(cache=True)(fn))


def _fastjit(fn: _F) -> _F:
    """:func:`_jit` that may reassociate sums (vectorised reductions over the types) and fuse
    multiply-adds; NaN and infinity keep their meaning (the convergence test sees them)."""
    return cast(_F, numba.njit(cache=True, fastmath={"reassoc", "contract", "nsz", "arcp"})(fn))


# cofactor (i, j) of a 3 x 3 matrix (row-major entries 0..8) is a[_CO[0]] a[_CO[1]] - a[_CO[2]] a[_CO[3]],
# listed in the order of the adjugate (its transpose)
_CO = np.array([[4, 2, 1, 5, 0, 2, 3, 1, 0],
                [8, 7, 5, 6, 8, 3, 7, 6, 4],
                [5, 1, 2, 3, 2, 0, 4, 0, 1],
                [7, 8, 4, 8, 6, 5, 6, 7, 3]])
_WIGNER = np.array([3, 5, 0, 2])  # entries (k, x), (k, e), (x, x), (x, e) of Lambda(t), row-major
_NOISE = np.array([1, 0, 7, 6])   # entries G_xk, G_xx, G_ek, G_ex of G(t) that om_0..3 read


@_jit
def inv3(a: np.ndarray, out: np.ndarray) -> None:
    """The inverses of ``3 x 3`` matrices by cofactors: ``a`` and ``out`` of shape (9, T), the
    entries (row-major) of matrix ``t`` in column ``t``."""
    T = a.shape[1]
    for j in range(9):
        for t in range(T):
            out[j, t] = a[_CO[0, j], t] * a[_CO[1, j], t] - a[_CO[2, j], t] * a[_CO[3, j], t]
    for t in range(T):
        det = a[0, t] * out[0, t] + a[1, t] * out[3, t] + a[2, t] * out[6, t]
        for j in range(9):
            out[j, t] = out[j, t] / det


@_fastjit
def _resolvent(gam: complex, c: float, delta: np.ndarray, beta: np.ndarray, palpha: np.ndarray,
               jb: np.ndarray, ib: np.ndarray, om_coef: np.ndarray, z: np.ndarray, lam: np.ndarray,
               G: np.ndarray) -> None:
    """``G(t) = Lambda(t)^{-1}`` for the state ``z``, into ``G`` (9, T) (``lam``: the same shape, scratch).

    ``Lambda(t)[jb_b, ib_b'] += Gamma[b, b'] beta_b(t) palpha_b'(t)`` over the non-zero entries
    of ``Gamma`` (those between slope terms of opposite parity are zero), vectorised over ``t``."""
    Pn, T = beta.shape
    off = Pn * Pn
    lam[:] = 0.0
    for b in range(Pn):
        for bp in range(Pn):
            g = z[b * Pn + bp]
            if g == 0.0:
                continue
            row = lam[3 * jb[b] + ib[bp]]
            for t in range(T):
                row[t] += (beta[b, t] * palpha[bp, t]) * g
    for t in range(T):
        lam[0, t] += gam               # H0(t): rows and columns x, k, e
        lam[2, t] += -c * delta[t]
        lam[3, t] += delta[t]
        lam[4, t] += 1.0
        lam[8, t] += 1.0
    for j in range(4):                 # the Wigner self-energies
        for t in range(T):
            lam[_WIGNER[j], t] += om_coef[j] * z[off + j * T + t]
    inv3(lam, G)


@_fastjit
def _noise(prof: np.ndarray, G: np.ndarray, js: tuple[int, ...], om: np.ndarray) -> None:
    """``om_j = prof @ G_j`` for ``j`` in ``js`` (``G_j`` the entry ``_NOISE[j]`` of each ``G(t)``)
    into ``om[j T:(j + 1) T]``: one real GEMM on the real and imaginary parts of the columns."""
    T = G.shape[1]
    k = len(js)
    cols = np.empty((T, 2 * k))
    for q in range(k):
        g = G[_NOISE[js[q]]]
        for s in range(T):
            cols[s, 2 * q] = g[s].real
            cols[s, 2 * q + 1] = g[s].imag
    prod = np.dot(prof, cols)
    for q in range(k):
        for t in range(T):
            om[js[q] * T + t] = prod[t, 2 * q] + 1j * prod[t, 2 * q + 1]


@_fastjit
def _update(G: np.ndarray, noise: np.ndarray, walpha: np.ndarray, beta: np.ndarray, jb: np.ndarray,
            ib: np.ndarray, pmask: np.ndarray, out: np.ndarray) -> None:
    """The new state ``(Gamma, om)`` from ``G`` (9, T), into ``out`` (``Pn^2 + 4 T``).

    ``noise`` (1 or 3, T, T): ``phi k W`` of the Wigner profiles ``sqrt(S2 S2^T), S2, S2^T`` (one
    for a symmetric ``S2``); ``om_0..3`` read ``G_xk, G_xx, G_ek, G_ex`` through profiles
    ``0, 1, 2, 0`` (all ``0`` for one profile). ``E_pi[R G P]`` is taken where ``pmask`` is
    not zero."""
    Pn, T = beta.shape
    off = Pn * Pn
    if noise.shape[0] == 1:
        _noise(noise[0], G, (0, 1, 2, 3), out[off:])
    else:
        _noise(noise[0], G, (0, 3), out[off:])
        _noise(noise[1], G, (1,), out[off:])
        _noise(noise[2], G, (2,), out[off:])
    Ar = np.eye(Pn)
    Ai = np.zeros((Pn, Pn))
    for b in range(Pn):
        for bp in range(Pn):
            if pmask[b, bp] == 0.0:
                continue
            g = G[3 * ib[b] + jb[bp]]
            acc_re = 0.0
            acc_im = 0.0
            for t in range(T):
                wb = walpha[b, t] * beta[bp, t]
                acc_re += wb * g[t].real
                acc_im += wb * g[t].imag
            Ar[b, bp] -= acc_re * pmask[b, bp]
            Ai[b, bp] = -(acc_im * pmask[b, bp])
    inv = np.linalg.inv(Ar)
    tan = -(inv @ Ai @ inv)
    for b in range(Pn):
        for bp in range(Pn):
            out[b * Pn + bp] = inv[b, bp] + 1j * tan[b, bp]


@_jit
def anderson(gam: np.ndarray, z0: np.ndarray, rows: np.ndarray, c: np.ndarray, delta: np.ndarray,
             beta: np.ndarray, palpha: np.ndarray, walpha: np.ndarray, jb: np.ndarray, ib: np.ndarray,
             pmask: np.ndarray, om_coef: np.ndarray, om_weight: np.ndarray, noise: np.ndarray,
             tol: float, max_iter: int, memory: int,
             ok: np.ndarray, err: np.ndarray, z_out: np.ndarray, G_out: np.ndarray) -> None:
    """Fixed points of a batch of ``E`` elements by Anderson acceleration (compiled loop).

    Parameters
    ----------
    gam : complex ndarray, shape (E,)
        ``gamma + i eps`` of each element.
    z0 : complex ndarray, shape (E, N)
        Starting states, ``N = Pn^2 + 4 T``.
    rows : int ndarray, shape (E,)
        The model (row of the arrays below) of each element.
    c : ndarray, shape (M,)
    delta : ndarray, shape (M, T)
        Diagonal correction of each solved type.
    beta, palpha, walpha : ndarray, shape (M, Pn, T)
        ``beta_b(t)``, ``-(p'/p) alpha_b(t)`` and ``w_t alpha_b(t)`` (``_Stack``).
    jb, ib : int ndarray, shape (Pn,)
        The row of ``Z^T`` read by column ``b`` of ``P(t)`` and the column of ``Z`` written by
        row ``b`` of ``R(t)``.
    pmask : ndarray, shape (M, Pn, Pn)
        ``phi``, zero between slope terms of opposite parity.
    om_coef : ndarray, shape (M, 4)
        Coefficients ``-1, c, c, -c^2`` of the noise self-energies in ``Lambda(t)``.
    om_weight : ndarray, shape (M,)
        Weight of the noise self-energies in the Anderson fit.
    noise : ndarray, shape (M, 1 or 3, T, T)
        ``phi k W`` of the Wigner profiles.
    tol : float
        Relative residual (of value and derivative parts) at which an element has converged.
    max_iter, memory : int
        Iteration cap and Anderson memory.
    ok, err, z_out, G_out : ndarray, shapes (E,), (E,), (E, N), (E, 9, T)
        Written: convergence, last relative residual, the fixed point (complex: the tangent part
        is ``i eps dz``) and ``G`` there (the entries of ``G(t)``, row-major, in column ``t``).

    Notes
    -----
    Anderson's mixing coefficients are real and fitted to the residuals of the value and
    tangent parts together (real and imaginary parts interleaved, each scaled by the first
    iterate's largest entry of that part, the noise self-energies by ``om_weight``), from the
    last ``memory`` differences, through their Gram matrix updated one column at a time.
    """
    E, N = z0.shape
    Pn, T = beta.shape[1], beta.shape[2]
    off = Pn * Pn
    G = np.empty((9, T), dtype=np.complex128)
    lam = np.empty((9, T), dtype=np.complex128)
    gz = np.empty(N, dtype=np.complex128)
    D = np.empty((memory, 2 * N))
    U = np.empty((memory, 2 * N))
    gram = np.zeros((memory, memory))
    wts = np.empty(2 * N)
    r = np.empty(2 * N)
    r_prev = np.empty(2 * N)
    g_prev = np.empty(2 * N)
    mix = np.empty(2 * N)
    dk = np.empty(memory)
    dr = np.empty(memory)
    for e in range(E):
        m = rows[e]
        z = z0[e].copy()
        gram[:] = 0.0
        for it in range(max_iter):
            _resolvent(gam[e], c[m], delta[m], beta[m], palpha[m], jb, ib, om_coef[m], z, lam, G)
            _update(G, noise[m], walpha[m], beta[m], jb, ib, pmask[m], gz)
            s_re = 1e-300
            s_im = 1e-300
            for j in range(N):
                s_re = max(s_re, abs(gz[j].real))
                s_im = max(s_im, abs(gz[j].imag))
            if it == 0:
                for j in range(N):
                    w = om_weight[m] if j >= off else 1.0
                    wts[2 * j] = 1.0 / s_re * w
                    wts[2 * j + 1] = 1.0 / s_im * w
            f_re = 0.0
            f_im = 0.0
            for j in range(N):
                fj = gz[j] - z[j]
                f_re = max(f_re, abs(fj.real))
                f_im = max(f_im, abs(fj.imag))
                r[2 * j] = fj.real * wts[2 * j]
                r[2 * j + 1] = fj.imag * wts[2 * j + 1]
            err[e] = max(f_re / s_re, f_im / s_im)
            if err[e] < tol:
                ok[e] = True
                z_out[e] = gz
                G_out[e] = G
                break
            for j in range(N):
                z[j] += gz[j] - z[j]  # z + f
            if it:
                k = (it - 1) % memory
                for j in range(N):
                    D[k, 2 * j] = r[2 * j] - r_prev[2 * j]
                    D[k, 2 * j + 1] = r[2 * j + 1] - r_prev[2 * j + 1]
                    U[k, 2 * j] = gz[j].real - g_prev[2 * j]
                    U[k, 2 * j + 1] = gz[j].imag - g_prev[2 * j + 1]
                n_hist = min(it, memory)
                for i in range(n_hist):
                    dk[i] = np.dot(D[i], D[k])
                    dr[i] = np.dot(D[i], r)
                for i in range(n_hist):
                    gram[k, i] = dk[i]
                    gram[i, k] = dk[i]
                A = gram[:n_hist, :n_hist].copy()
                for i in range(n_hist):
                    A[i, i] *= 1.0 + 1e-12
                theta = np.linalg.solve(A, dr[:n_hist].copy())
                mix[:] = 0.0
                for i in range(n_hist):
                    th = theta[i]
                    for j in range(2 * N):
                        mix[j] += th * U[i, j]
                for j in range(N):
                    z[j] -= mix[2 * j] + 1j * mix[2 * j + 1]
            for j in range(N):
                g_prev[2 * j] = gz[j].real
                g_prev[2 * j + 1] = gz[j].imag
                r_prev[j * 2] = r[2 * j]
                r_prev[j * 2 + 1] = r[2 * j + 1]

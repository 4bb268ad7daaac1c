r"""The compiled fixed-point iteration of the finite-size equivalent (:mod:`attn_lib.theory._finite_size`).

One call of :func:`anderson` solves a batch: every element (one setting at one complex
``gamma + i eps``) in turn runs its own Anderson iteration on the state ``z = (Gamma, om)``
(``Pn^2 + 4 T`` complex numbers, ``Pn = 1 + 2K``), from its own start or from the Taylor
predictor of the element before it, until its relative residual is below the tolerance. The arithmetic is that of the equations in the module
docstring of :mod:`attn_lib.theory._finite_size`, with the sparsity of ``P(t)`` and ``R(t)``
(one entry per column and per row) used directly:

    Lambda(t)[jb_b, ib_b'] += beta_b(t) Gamma[b, b'] (-(p'/p) alpha_b'(t)),
    (E_pi[R G P])[b, b'] = sum_t w_t alpha_b(t) G(t)[ib_b, jb_b'] beta_b'(t),

``G(t) = Lambda(t)^{-1}`` by cofactors and ``Gamma = A^{-1}``, ``A = I - phi E_pi[R G P]`` (zero
between slope terms of opposite parity), in real arithmetic to first order in the complex step.
The loops are compiled by Numba (:mod:`attn_lib.theory._jit`); a batch costs one call, so the cost is the arithmetic, ``O(T (Pn^2 + T))`` per
element and iteration, not one NumPy call per operation.
"""

from __future__ import annotations

import numpy as np

from ._jit import fastjit as _fastjit
from ._jit import jit as _jit

__all__ = ["anderson", "inv3", "invert"]


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
def _resolvent(gam: complex, c: float, delta: np.ndarray, pairs: np.ndarray, ba: np.ndarray,
               om_coef: np.ndarray, z: np.ndarray, lam: np.ndarray, G: np.ndarray) -> None:
    """``G(t) = Lambda(t)^{-1}`` for the state ``z``, into ``G`` (9, T) (``lam``: (2, 9, T), scratch).

    ``Lambda(t)[jb_b, ib_b'] += Gamma[b, b'] beta_b(t) palpha_b'(t)`` over the pairs ``(b, b')``
    of :func:`_pairs` (``ba``: the products ``beta_b palpha_b'``), vectorised over ``t`` on the
    real and imaginary parts."""
    T = ba.shape[1]
    off = len(z) - 4 * T
    lam[:] = 0.0
    for p in range(len(pairs)):
        g = z[pairs[p, 0]]
        if g == 0.0:
            continue
        g_re, g_im = g.real, g.imag
        re = lam[0, pairs[p, 1]]
        im = lam[1, pairs[p, 1]]
        for t in range(T):
            re[t] += ba[p, t] * g_re
            im[t] += ba[p, t] * g_im
    for t in range(T):
        lam[0, 2, t] += -c * delta[t]  # H0(t) without gamma: rows and columns x, k, e
        lam[0, 3, t] += delta[t]
        lam[0, 4, t] += 1.0
        lam[0, 8, t] += 1.0
    for j in range(4):                 # the Wigner self-energies
        for t in range(T):
            w = om_coef[j] * z[off + j * T + t]
            lam[0, _WIGNER[j], t] += w.real
            lam[1, _WIGNER[j], t] += w.imag
    for j in range(9):
        for t in range(T):
            G[j, t] = lam[0, j, t] + 1j * lam[1, j, t]
    for t in range(T):
        G[0, t] += gam
    inv3(G.copy(), G)


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
def _update(G: np.ndarray, noise: np.ndarray, pairs: np.ndarray, wb: np.ndarray, blocks: np.ndarray,
            out: np.ndarray) -> None:
    """The new state ``(Gamma, om)`` from ``G`` (9, T), into ``out`` (``Pn^2 + 4 T``).

    ``noise`` (1 or 3, T, T): ``phi k W`` of the Wigner profiles ``sqrt(S2 S2^T), S2, S2^T`` (one
    for a symmetric ``S2``); ``om_0..3`` read ``G_xk, G_xx, G_ek, G_ex`` through profiles
    ``0, 1, 2, 0`` (all ``0`` for one profile). ``phi E_pi[R G P]`` is taken over the pairs of
    :func:`_pairs` (``wb``: the products ``phi w alpha_b beta_b'``), and ``Gamma`` inverted in the
    blocks of :func:`_blocks`."""
    Pn = blocks.shape[0]
    T = G.shape[1]
    off = Pn * Pn
    if noise.shape[0] == 1:
        _noise(noise[0], G, (0, 1, 2, 3), out[off:])
    else:
        _noise(noise[0], G, (0, 3), out[off:])
        _noise(noise[1], G, (1,), out[off:])
        _noise(noise[2], G, (2,), out[off:])
    Gr = np.empty((9, T))
    Gi = np.empty((9, T))
    for j in range(9):
        for t in range(T):
            Gr[j, t] = G[j, t].real
            Gi[j, t] = G[j, t].imag
    Ar = np.eye(Pn)
    Ai = np.zeros((Pn, Pn))
    for p in range(len(pairs)):
        gr = Gr[pairs[p, 2]]
        gi = Gi[pairs[p, 2]]
        acc_re = 0.0
        acc_im = 0.0
        for t in range(T):
            acc_re += wb[p, t] * gr[t]
            acc_im += wb[p, t] * gi[t]
        b, bp = divmod(pairs[p, 0], Pn)
        Ar[b, bp] -= acc_re
        Ai[b, bp] = -acc_im
    out[:off] = 0.0
    for b in range(Pn):                # Gamma = A^{-1} block by block: A is zero between parities
        if b != blocks[b, 0]:
            continue
        idx = blocks[b, 1:1 + blocks[b, -1]]
        n = len(idx)
        inv = np.empty((n, n))
        ai = np.empty((n, n))
        for i in range(n):
            for j in range(n):
                inv[i, j] = Ar[idx[i], idx[j]]
                ai[i, j] = Ai[idx[i], idx[j]]
        invert(inv)
        tan = -(inv @ ai @ inv)
        for i in range(n):
            for j in range(n):
                out[idx[i] * Pn + idx[j]] = inv[i, j] + 1j * tan[i, j]


@_jit
def _blocks(pmask: np.ndarray) -> np.ndarray:
    """The blocks of ``A = I - phi E_pi[R G P]`` (zero between slope terms of opposite parity,
    where ``pmask`` is): row ``b`` holds the first index of ``b``'s block, its indices and, last,
    their number (a padded term, ``pmask`` zero in its row, is a block of its own)."""
    Pn = pmask.shape[0]
    out = np.zeros((Pn, Pn + 2), dtype=np.int64)
    for b in range(Pn):
        n = 0
        for bp in range(Pn):
            if pmask[b, bp] != 0.0 or bp == b:
                out[b, 1 + n] = bp
                n += 1
        out[b, 0] = out[b, 1]
        out[b, -1] = n
    return out


@_jit
def _pairs(blocks: np.ndarray, beta: np.ndarray, palpha: np.ndarray, walpha: np.ndarray, jb: np.ndarray,
           ib: np.ndarray, pmask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The entries ``(b, b')`` of ``Gamma`` that can be non-zero (``pmask`` not zero): rows
    ``(b Pn + b', 3 jb_b + ib_b', 3 ib_b + jb_b')`` (the entry of ``Gamma``, of ``Lambda(t)`` and of
    ``G(t)``), and the products ``beta_b palpha_b'`` and ``pmask w alpha_b beta_b'`` over the types."""
    Pn, T = beta.shape
    n = 0
    for b in range(Pn):
        for bp in range(Pn):
            n += pmask[b, bp] != 0.0
    pairs = np.empty((n, 3), dtype=np.int64)
    ba = np.empty((n, T))
    wb = np.empty((n, T))
    p = 0
    for b in range(Pn):
        for bp in range(Pn):
            if pmask[b, bp] == 0.0:
                continue
            pairs[p, 0] = b * Pn + bp
            pairs[p, 1] = 3 * jb[b] + ib[bp]
            pairs[p, 2] = 3 * ib[b] + jb[bp]
            for t in range(T):
                ba[p, t] = beta[b, t] * palpha[bp, t]
                wb[p, t] = pmask[b, bp] * walpha[b, t] * beta[bp, t]
            p += 1
    return pairs, ba, wb


@_jit
def invert(a: np.ndarray) -> None:
    """``a <- a^{-1}`` in place by Gauss–Jordan elimination with partial pivoting (a small matrix;
    the row interchanges undone as column interchanges at the end)."""
    n = a.shape[0]
    rows = np.arange(n)
    for k in range(n):
        p = k
        for i in range(k + 1, n):
            if abs(a[i, k]) > abs(a[p, k]):
                p = i
        rows[k] = p
        if p != k:
            for j in range(n):
                a[k, j], a[p, j] = a[p, j], a[k, j]
        piv = 1.0 / a[k, k]
        a[k, k] = 1.0
        for j in range(n):
            a[k, j] *= piv
        for i in range(n):
            if i != k:
                f = a[i, k]
                a[i, k] = 0.0
                for j in range(n):
                    a[i, j] -= f * a[k, j]
    for k in range(n - 1, -1, -1):
        if rows[k] != k:
            for i in range(n):
                a[i, k], a[i, rows[k]] = a[i, rows[k]], a[i, k]


@_jit
def anderson(gam: np.ndarray, z0: np.ndarray, chain: np.ndarray, rows: np.ndarray, c: np.ndarray, delta: np.ndarray,
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
    chain : bool ndarray, shape (E,)
        Where true (and element ``e - 1`` converged), element ``e`` starts instead from the
        Taylor predictor of ``e - 1``'s fixed point, ``z + s dz + s^2 d2z / 2`` and tangent
        ``dz + s d2z`` (``s`` the gamma step; ``d2z`` from ``e - 2`` when it is chained and
        converged too, else zero).
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
    lam = np.empty((2, 9, T))
    gz = np.empty(N, dtype=np.complex128)
    act = np.empty(N, dtype=np.int64)
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
        if chain[e] and ok[e - 1]:     # the Taylor predictor of the previous element's fixed point
            g1 = gam[e - 1].real
            step = gam[e].real - g1
            second = e >= 2 and chain[e - 1] and ok[e - 2] and gam[e - 2].real != g1
            for j in range(N):
                v, d = z_out[e - 1, j].real, z_out[e - 1, j].imag / gam[e - 1].imag
                d2 = 0.0
                if second:
                    d2 = (d - z_out[e - 2, j].imag / gam[e - 2].imag) / (g1 - gam[e - 2].real)
                z[j] = v + step * d + 0.5 * step * step * d2 + 1j * gam[e].imag * (d + step * d2)
        if e == 0 or m != rows[e - 1]:
            blocks = _blocks(pmask[m])
            pairs, ba, wb = _pairs(blocks, beta[m], palpha[m], walpha[m], jb, ib, pmask[m])
        # the entries of the state that can be non-zero (Gamma is zero between its blocks): the
        # Anderson vectors hold these only, real and imaginary parts interleaved
        na = 0
        for b in range(Pn):
            for bp in range(Pn):
                if blocks[b, 0] == blocks[bp, 0]:
                    act[na] = b * Pn + bp
                    na += 1
        for j in range(off, N):
            act[na] = j
            na += 1
        gram[:] = 0.0
        for it in range(max_iter):
            _resolvent(gam[e], c[m], delta[m], pairs, ba, om_coef[m], z, lam, G)
            _update(G, noise[m], pairs, wb, blocks, gz)
            s_re = 1e-300             # the largest entries of each part (the others are zero)
            s_im = 1e-300
            f_re = 0.0
            f_im = 0.0
            for a in range(na):
                g = gz[act[a]]
                fj = g - z[act[a]]
                s_re = max(s_re, abs(g.real))
                s_im = max(s_im, abs(g.imag))
                f_re = max(f_re, abs(fj.real))
                f_im = max(f_im, abs(fj.imag))
            if it == 0:
                for a in range(na):
                    w = om_weight[m] if act[a] >= off else 1.0
                    wts[2 * a] = 1.0 / s_re * w
                    wts[2 * a + 1] = 1.0 / s_im * w
            for a in range(na):
                fj = gz[act[a]] - z[act[a]]
                r[2 * a] = fj.real * wts[2 * a]
                r[2 * a + 1] = fj.imag * wts[2 * a + 1]
            err[e] = max(f_re / s_re, f_im / s_im)
            if err[e] < tol:
                ok[e] = True
                z_out[e] = gz
                G_out[e] = G
                break
            for a in range(na):
                z[act[a]] += gz[act[a]] - z[act[a]]   # z + f
            if it:
                k = (it - 1) % memory
                for a in range(na):
                    D[k, 2 * a] = r[2 * a] - r_prev[2 * a]
                    D[k, 2 * a + 1] = r[2 * a + 1] - r_prev[2 * a + 1]
                    U[k, 2 * a] = gz[act[a]].real - g_prev[2 * a]
                    U[k, 2 * a + 1] = gz[act[a]].imag - g_prev[2 * a + 1]
                n_hist = min(it, memory)
                _dots(D, k, r, n_hist, 2 * na, dk, dr)
                A = np.empty((n_hist, n_hist))
                for i in range(n_hist):
                    gram[k, i] = dk[i]
                    gram[i, k] = dk[i]
                for i in range(n_hist):
                    for j in range(n_hist):
                        A[i, j] = gram[i, j]
                    A[i, i] *= 1.0 + 1e-12
                invert(A)
                mix[:2 * na] = 0.0
                for i in range(n_hist):
                    th = 0.0
                    for j in range(n_hist):
                        th += A[i, j] * dr[j]
                    for j in range(2 * na):
                        mix[j] += th * U[i, j]
                for a in range(na):
                    z[act[a]] -= mix[2 * a] + 1j * mix[2 * a + 1]
            for a in range(na):
                g_prev[2 * a] = gz[act[a]].real
                g_prev[2 * a + 1] = gz[act[a]].imag
                r_prev[2 * a] = r[2 * a]
                r_prev[2 * a + 1] = r[2 * a + 1]


@_fastjit
def _dots(D: np.ndarray, k: int, r: np.ndarray, n: int, length: int, dk: np.ndarray, dr: np.ndarray) -> None:
    """``dk_i = D_i . D_k`` and ``dr_i = D_i . r`` for the first ``n`` rows of ``D``, over the first
    ``length`` entries."""
    for i in range(n):
        a = 0.0
        b = 0.0
        for j in range(length):
            a += D[i, j] * D[k, j]
            b += D[i, j] * r[j]
        dk[i] = a
        dr[i] = b

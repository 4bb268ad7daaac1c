"""A dense reference of the multi-head pencil (:mod:`attn_lib.theory._heads`), for small ``p``.

It assembles the whole pencil as written in the module docstring of ``_heads`` — ``1 + 2H``
n-variables ``(x, a_h, t_h)``, ``1 + 4H`` p-variables ``(d, d'_h, b_h, q_h, q'_h)``, every
random block listed with its coefficient and left matrix — and integrates it generically:
``Sigma_pp[rho, pi] = kappa beta g[c, r] / c A``, ``Sigma_nn[r, c] = beta kappa tr(G[pi, rho] A) / p``
plus the ``H`` terms ``eta eta' C[h, h'] g[c, r']``, with the p-side inverted as one dense
``(1 + 4H) p`` matrix. The fixed point is solved by damped Newton with a finite-difference
Jacobian,
the signal by a Woodbury step over every block separately (``2 (1 + 5H)`` columns) and ``E`` by
a Richardson-extrapolated central difference of ``y^T Q y / n``. Nothing of the fast module's
reduction (the ``2p x 2p`` collapse, the factors, Anderson, the complex-step tangent) is used.
"""

from __future__ import annotations

import numpy as np


class DensePencil:
    """The pencil of ``H`` heads (``M``: the normalised ``(H, p, p)`` matrices; ``rho``, ``k0``
    ``(H,)``; ``C`` the residual covariance; ``blocks`` the heads' output coordinates; ``m`` the
    signal)."""

    def __init__(self, c, M, rho, k0, C, blocks, m):
        H, p, _ = M.shape
        self.c, self.p, self.m, self.C = c, p, m, C
        self.N = N = 1 + 2 * H
        x, a, t = 0, [1 + h for h in range(H)], [1 + H + h for h in range(H)]
        d, dp = 0, [1 + h for h in range(H)]
        b, q, qp = [1 + H + h for h in range(H)], [1 + 2 * H + h for h in range(H)], \
            [1 + 3 * H + h for h in range(H)]
        # the left matrices A are diagonal: kept as their diagonals
        P = [np.isin(np.arange(p), blk).astype(float) for blk in blocks]
        eye = np.ones(p)
        # Y blocks (p-row, n-col, kappa, A), Y^T blocks (n-row, p-col, beta), H blocks
        self.Y = [(d, x, -1.0, eye)] + [(b[h], a[h], -1.0, P[h]) for h in range(H)] \
            + [(q[h], t[h], -1.0, eye) for h in range(H)]
        self.YT = [(x, qp[h], rho[h]) for h in range(H)] + [(a[h], dp[h], -rho[h]) for h in range(H)] \
            + [(t[h], b[h], -1.0) for h in range(H)]
        self.Hb = [(x, t[h], 1.0, h) for h in range(H)] + [(a[h], x, -1.0, h) for h in range(H)]
        # every (Y block, Y^T block) pair, vectorised: Sigma_pp[rho, pi] on the diagonal of the
        # block (A is diagonal) and Sigma_nn[r, c] from the diagonal of G[pi, rho]
        pairs = [(y, yt) for y in self.Y for yt in self.YT]
        i = np.arange(p)
        self._rows = np.concatenate([y[0] * p + i for y, _ in pairs])
        self._cols = np.concatenate([yt[1] * p + i for _, yt in pairs])
        self._A = np.concatenate([y[3] for y, _ in pairs])
        self._kb = np.repeat([y[2] * yt[2] for y, yt in pairs], p)
        self._gidx = tuple(np.repeat([[y[1], yt[0]] for y, yt in pairs], p, axis=0).T)  # g[c, r]
        self._nidx = tuple(np.array([[yt[0], y[1]] for y, yt in pairs]).T)          # Sigma_nn[r, c]
        self.L0n = np.eye(N)
        for h in range(H):
            self.L0n[x, t[h]] = -k0[h]
            self.L0n[a[h], x] = k0[h]
        Np = 1 + 4 * H
        self.L0p = np.eye(Np * p)
        for h in range(H):
            self.L0p[dp[h] * p:(dp[h] + 1) * p, d * p:(d + 1) * p] = -M[h]
            self.L0p[qp[h] * p:(qp[h] + 1) * p, q[h] * p:(q[h] + 1) * p] = -M[h].T

    def _blk(self, G, i, j):
        p = self.p
        return G[i * p:(i + 1) * p, j * p:(j + 1) * p]

    def pside(self, g):
        S = np.zeros(self.L0p.shape, dtype=g.dtype)
        S[self._rows, self._cols] = self._kb * g[self._gidx] / self.c * self._A
        return np.linalg.inv(self.L0p - S)

    def phi(self, g, gamma):
        G = self.pside(g)
        S = np.zeros((self.N, self.N), dtype=G.dtype)
        tr = (self._kb * G[self._cols, self._rows] * self._A).reshape(-1, self.p).sum(axis=1)
        np.add.at(S, self._nidx, tr / self.p)
        for r1, c1, e1, h1 in self.Hb:
            for r2, c2, e2, h2 in self.Hb:
                S[r1, c2] += e1 * e2 * self.C[h1, h2] * g[c1, r2]
        L0 = self.L0n.astype(S.dtype)
        L0[0, 0] = gamma
        return np.linalg.inv(L0 - S)

    def solve(self, gamma, g, tol=1e-13):
        """Newton with a forward-difference Jacobian (its accuracy sets the rate, not the
        solution: the test is the residual), damped to a relative step of 0.5."""
        N = self.N
        for _ in range(80):
            phi = self.phi(g, gamma)
            r = phi - g
            if np.abs(r).max() < tol * np.abs(g).max():
                return g
            J = np.empty((N * N, N * N))
            eps = 1e-7 * np.abs(g).max()
            for k in range(N * N):
                e = g.copy().ravel()
                e[k] += eps
                J[:, k] = ((self.phi(e.reshape(N, N), gamma) - phi).ravel() - eps * (np.arange(N * N) == k)) / eps
            step = np.linalg.solve(J, -r.ravel()).reshape(N, N)
            g = g + step * min(1.0, 0.5 * np.abs(g).max() / np.abs(step).max())
        raise RuntimeError(f"dense reference: no convergence at gamma={gamma}")

    def form(self, g):
        c, m = self.c, self.m
        G = self.pside(g)
        cols = [(("p", rr, A * m), ("n", cn), ka / np.sqrt(c)) for rr, cn, ka, A in self.Y] \
            + [(("n", rn), ("p", pc, m), be / np.sqrt(c)) for rn, pc, be in self.YT]
        k = len(cols)
        K = np.zeros((k, k))
        for i, (_, v, _) in enumerate(cols):
            for j, (u, _, _) in enumerate(cols):
                if v[0] == u[0] == "n":
                    K[i, j] = g[v[1], u[1]]
                elif v[0] == u[0] == "p":
                    K[i, j] = v[2] @ self._blk(G, v[1], u[1]) @ u[2]
        coef = np.diag([cc for _, _, cc in cols])
        left = np.array([g[0, u[1]] if u[0] == "n" else 0.0 for u, _, _ in cols])
        right = np.array([g[v[1], 0] if v[0] == "n" else 0.0 for _, v, _ in cols])
        return g[0, 0] - left @ np.linalg.solve(np.eye(k) + coef @ K, coef @ right)

    def resolvent_form(self, gammas, h=1e-3):
        """``(y^T Q y / n, E)`` at ``gammas`` (decreasing): one path from ``gamma = 10`` in
        halvings through them, ``E`` by Richardson from central differences at relative steps
        ``h`` and ``2 h``."""
        L0 = self.L0n.copy()
        L0[0, 0] = 10.0
        g, last, qs, Es = np.linalg.inv(L0), 10.0, [], []
        for gam in gammas:
            while last / gam > 2:
                last /= 2
                g = self.solve(last, g)
            g, last = self.solve(gam, g), gam
            f = [self.form(self.solve(gam * (1 + k * h), g)) for k in (-2, -1, 1, 2)]
            d1 = (f[2] - f[1]) / (2 * h * gam)
            d2 = (f[3] - f[0]) / (4 * h * gam)
            qs.append(self.form(g))
            Es.append(-gam ** 2 * (4 * d1 - d2) / 3)
        return np.array(qs), np.array(Es)

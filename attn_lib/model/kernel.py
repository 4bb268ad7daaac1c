"""The attention kernels: entry-wise (the paper's) and softmax.

``K = f(X^T (alpha I_p + w_K w_Q^T) X / sqrt(p)) / sqrt(p)`` (shape ``(n, n)``) with the centred
``f``; row ``i`` indexes keys and column ``j`` queries:
``K_ij = f((alpha x_i^T x_j + (x_i^T w_K)(w_Q^T x_j)) / sqrt(p)) / sqrt(p)``.

**The diagonal is set to zero by default.** Its entries ``f(x_i^T M x_i / sqrt(p)) / sqrt(p)``
evaluate ``f`` at arguments of size ``sqrt(p)``, far outside the O(1) range of the off-diagonal
ones: for a bounded ``f`` they are ``O(p^{-1/2})`` but not negligible at finite ``p`` (0.044 for
``tanh`` at ``p = 512``), and for a growing ``f`` (ReLU, linear) they add an ``O(1)`` multiple of
the identity. Either way they are a deterministic-looking shift that the random-matrix limit
treats separately, so the theory assumes a zero diagonal; ``keep_diagonal=True`` keeps it.

**Softmax attention** (:func:`softmax_kernel`) normalises ``exp(beta T)`` over the keys of each
query, so each column of ``A`` sums to one; the self-pairs are masked by default, for the same
reason: a token's logit with itself is about ``alpha sqrt(p)``, and unmasked it takes nearly all
of its column's weight (:func:`self_weight`); :func:`softmax_columns` is that normalisation
of given logits.

**Any key-query matrix** ``M`` (:class:`~attn_lib.model.setting.MatrixSetting`, GPT-2's layers
and heads) has the logits of :func:`matrix_logits`, from the noise and the signal separately,
so that one ``Z^T M Z`` serves several signals; either kernel step then applies to them
(:func:`apply`, :func:`softmax_columns`). **Multi-head attention**
(:class:`~attn_lib.model.setting.HeadsSetting`) applies the kernel step to each head's logits
and writes head ``h``'s features ``X_h K_h`` into its block :func:`head_blocks` ``[h]`` of the
``p`` feature rows (:func:`head_features`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
from scipy.linalg import blas
from threadpoolctl import ThreadpoolController

from .nonlinearity import Nonlinearity

_Name = TypeVar("_Name", bound=Hashable)  # the names of the signals in head_features

#: The BLAS thread pools (their thread count is the one the entry-wise passes use).
BLAS = ThreadpoolController().select(user_api="blas")
#: Bytes of one row block of the entry-wise passes: one block per core stays in its L2 cache.
_BLOCK_BYTES = 1 << 18


def logits(X: np.ndarray, w_K: np.ndarray, w_Q: np.ndarray, alpha: float = 1.0,
           gram: np.ndarray | None = None) -> np.ndarray:
    """Kernel arguments ``T = X^T (alpha I + W_K^T W_Q) X / sqrt(p)``, shape ``(n, n)``.

    Parameters
    ----------
    X : ndarray of shape (p, n)
    w_K, w_Q : ndarray of shape (p,) or (r, p)
        One pair of weight vectors (``W_K^T W_Q = w_K w_Q^T``), or ``r`` pairs as rows
        (``W_K^T W_Q = sum_k w_K^(k) w_Q^(k)T``).
    alpha : float, default 1.0
        Scale of the full part.
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (it is not modified).
    """
    p = X.shape[0]
    if gram is None:
        T = X.T @ X
        T *= alpha / np.sqrt(p)
    else:
        T = gram * (alpha / np.sqrt(p))
    low = _low_rank(X, w_K, w_Q)
    if low is not None:  # in place on T.T, which is Fortran-ordered
        _add_low_rank(T.T, 1.0 / np.sqrt(p), low[0], low[1])
    return T


def _low_rank(X: np.ndarray, w_K: np.ndarray, w_Q: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """Factors of the low-rank logits ``X^T W_K^T W_Q X = U V^T``; ``None`` when it vanishes.

    For one pair (``w_K, w_Q`` of shape ``(p,)`` or ``(1, p)``): ``u = X^T w_K`` and
    ``v = X^T w_Q``, shape ``(n,)`` (two GEMVs: the rank-one arithmetic). For ``r`` pairs
    (shape ``(r, p)``): ``U^T = W_K X`` (shape ``(r', n)``) and ``V = (W_Q X)^T`` (shape
    ``(n, r')``, Fortran-ordered), two GEMMs, keeping the ``r'`` pairs with ``u != 0`` and
    ``v != 0``. Returns ``(u or U^T, v or V, W_K', W_Q')`` with the kept pairs' weights as rows.
    """
    W_K, W_Q = np.atleast_2d(w_K), np.atleast_2d(w_Q)
    if W_K.shape[0] == 1:
        u, v = X.T @ W_K[0], X.T @ W_Q[0]
        return (u, v, W_K, W_Q) if np.any(u) and np.any(v) else None
    Ut, Vt = W_K @ X, W_Q @ X
    on = np.any(Ut, axis=1) & np.any(Vt, axis=1)
    if not np.any(on):
        return None
    return Ut[on], Vt[on].T, W_K[on], W_Q[on]


def _add_low_rank(Tt: np.ndarray, s: float, u: np.ndarray, v: np.ndarray) -> None:
    """``T += s u v^T`` (or ``s U V^T``) in place, through ``Tt = T.T`` (Fortran-ordered).

    ``T`` is a block of rows of the logits and ``u`` (or ``U^T``, shape ``(r, rows)``) its part
    of the key factor; ``v`` (or ``V``, shape ``(n, r)``) is the whole query factor
    (:func:`_low_rank`). One pair is a ``dger``, several a ``dgemm`` with ``beta = 1``.
    """
    if u.ndim == 1:
        blas.dger(s, v, u, a=Tt, overwrite_a=True)
    else:
        blas.dgemm(s, v, u, beta=1.0, c=Tt, overwrite_c=True)


def matrix_logits(Z: np.ndarray, y: np.ndarray, mu: np.ndarray, M: np.ndarray,
                  ZMZ: np.ndarray | None = None) -> np.ndarray:
    r"""Logits ``T = X^T M X / sqrt(p)`` of ``X = Z + mu y^T`` for any matrix ``M``, shape ``(n, n)``.

    Row ``i`` is a key and column ``j`` a query: ``T_ij = x_i^T M x_j / sqrt(p)``. Expanded,

        X^T M X = Z^T M Z + (Z^T M mu) y^T + y (Z^T M^T mu)^T + (mu^T M mu) y y^T,

    two GEMMs (``M Z``, then ``Z^T (M Z)``) and rank-one terms, so that ``Z^T M Z`` can be
    shared by several signals ``mu`` on the same noise (pass it as ``ZMZ``).

    Parameters
    ----------
    Z : ndarray of shape (p, n)
        Noise.
    y : ndarray of shape (n,)
        Labels.
    mu : ndarray of shape (p,)
        Signal.
    M : ndarray of shape (p, p)
        Key-query matrix (rows: keys).
    ZMZ : ndarray of shape (n, n), optional
        A precomputed ``Z^T (M Z)`` (it is not modified).
    """
    Mmu, Mtmu = M @ mu, M.T @ mu
    if ZMZ is None:
        T = Z.T @ (M @ Z)
        T += np.outer(Z.T @ Mmu, y)
    else:
        T = ZMZ + np.outer(Z.T @ Mmu, y)
    T += np.outer(y, Z.T @ Mtmu + (mu @ Mmu) * y)
    T *= 1.0 / np.sqrt(Z.shape[0])
    return T


def head_blocks(p: int, H: int) -> list[np.ndarray]:
    """The output coordinates of each of ``H`` heads among ``p`` feature rows.

    ``numpy.array_split(arange(p), H)``: contiguous blocks, the first ``p mod H`` one longer
    (GPT-2's 12 heads of 64 in ``p = 768``). Head ``h`` writes ``Phi[blocks[h]] = X[blocks[h]] K_h``.
    """
    return np.array_split(np.arange(p), H)


def head_features(Z: np.ndarray, y: np.ndarray, X: Mapping[_Name, np.ndarray],
                  mus: Mapping[_Name, np.ndarray], heads: Sequence[np.ndarray] | np.ndarray,
                  step: Callable[[int, np.ndarray], np.ndarray]) -> dict[_Name, np.ndarray]:
    """Multi-head features ``Phi = [X_1 K_1; ...; X_H K_H]`` of one noise draw, per signal.

    For each head ``h`` (matrix ``B_h``), ``Z^T B_h Z`` is formed once and shared by the
    signals; for each signal ``d``, ``K_h = step(h, T)`` of the logits ``T`` of
    :func:`matrix_logits` (``X_d = Z + mu_d y^T``), and head ``h`` writes ``X_d[rows] K_h`` into
    its rows :func:`head_blocks` ``[h]``. One head is the single-matrix model ``Phi = X K``.

    Parameters
    ----------
    Z : ndarray of shape (p, n)
        Noise.
    y : ndarray of shape (n,)
        Labels.
    X : mapping name -> ndarray of shape (p, n)
        The tokens ``Z + mu y^T`` of each signal.
    mus : mapping name -> ndarray of shape (p,)
        The signals, with the keys of ``X``.
    heads : sequence of H ndarrays of shape (p, p)
        The head matrices (rows: keys).
    step : callable
        ``step(h, T)``: head ``h``'s kernel of its logits ``T`` (shape ``(n, n)``; it may
        overwrite ``T``), for example :func:`apply` or :func:`softmax_columns`.

    Returns
    -------
    dict name -> ndarray of shape (p, n)
    """
    p = Z.shape[0]
    Phi = {d: np.empty_like(X[d]) for d in mus}
    for h, (B, rows) in enumerate(zip(heads, head_blocks(p, len(heads)))):
        ZBZ = Z.T @ (B @ Z)  # shared by all signals
        for d, mu in mus.items():
            Phi[d][rows] = X[d][rows] @ step(h, matrix_logits(Z, y, mu, B, ZBZ))
    return Phi


def blas_threads() -> int:
    """The number of threads BLAS uses now (at least 1): the width of the entry-wise passes."""
    return max(1, min((lib.num_threads for lib in BLAS.lib_controllers), default=1))


def _by_rows(step: Callable[[slice], None], shape: tuple[int, ...]) -> None:
    """Call ``step`` on consecutive row blocks of an ``(m, n)`` float array, in threads.

    The blocks have about ``_BLOCK_BYTES`` each; there are as many threads as BLAS has
    (:data:`BLAS`), thread ``j`` taking blocks ``j, j + k, ...`` (balanced when the work per
    block varies), so the entry-wise passes use the cores as the GEMMs around them do (one
    thread where BLAS is limited to one).
    """
    m, n = shape
    rows = max(1, _BLOCK_BYTES // (8 * max(n, 1)))
    blocks = [slice(i, min(i + rows, m)) for i in range(0, m, rows)]
    k = min(blas_threads(), len(blocks))

    def run(part: list[slice]) -> None:
        for b in part:
            step(b)

    # BLAS calls inside a block (dger) run single-threaded: the threads here are the parallelism
    with BLAS.limit(limits=1):
        if k <= 1:
            run(blocks)
            return
        with ThreadPoolExecutor(k) as pool:
            list(pool.map(run, [blocks[j::k] for j in range(k)]))


def _parallel(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``b = lambda a`` to rounding (``|b - lambda a| <= 8 eps max|b|`` entry-wise)."""
    lam = (a @ b) / (a @ a)
    return bool(np.all(np.abs(b - lam * a) <= 8 * np.finfo(float).eps * np.abs(b).max()))


def _finish(f: Nonlinearity, K: np.ndarray, a0: float, scale: float) -> None:
    """``K <- (f(K) - a0) * scale`` in place, for a block of a registered ``f``."""
    u = f.ufunc
    if u is not None:
        u(K, out=K)
    else:
        K[...] = f(K)
    if a0:
        K -= a0
    K *= scale


def apply(f: Callable[[np.ndarray], np.ndarray], T: np.ndarray, p: int,
          keep_diagonal: bool = False, a0: float = 0.0, overwrite: bool = False) -> np.ndarray:
    """``K = (f(T) - a0) / sqrt(p)`` with the diagonal zeroed unless ``keep_diagonal``.

    Parameters
    ----------
    f : callable
        Vectorised nonlinearity, e.g. a :class:`~attn_lib.model.nonlinearity.Nonlinearity`;
        ``f - a0`` must be centred (see :func:`attn_lib.model.hermite.centered`, or pass the
        raw ``f`` with its ``a0``).
    T : ndarray of shape (n, n)
        Kernel arguments (:func:`logits`).
    p : int
        Token dimension.
    keep_diagonal : bool, default False
        Keep ``K_ii``.
    a0 : float, default 0.0
        Constant subtracted from ``f``.
    overwrite : bool, default False
        Allow ``T`` to be overwritten (a nonlinearity built from registered functions then
        writes into it: one ``n x n`` allocation less).

    Notes
    -----
    A :class:`~attn_lib.model.nonlinearity.Nonlinearity` built from registered functions
    (``f.registered``) is evaluated row block by row block, each block (about 256 KB) going
    through ``f``, the centring and the scaling while it sits in cache, on as many threads as
    BLAS uses: one pass over memory instead of three. Each entry gets the same floating-point
    operations as ``(f(T) - a0) * (1 / sqrt(p))``, so the result is bit-identical to it. Any
    other callable is called once on the whole ``T``.
    """
    scale = 1.0 / np.sqrt(p)
    if isinstance(f, Nonlinearity) and f.registered:
        K = T if overwrite else np.empty(np.shape(T))
        src = np.asarray(T, dtype=float)

        def step(b: slice) -> None:
            if K is not src:
                K[b] = src[b]
            _finish(f, K[b], a0, scale)

        _by_rows(step, K.shape)
    else:
        K = np.array(f(T), dtype=float)  # a copy: never an alias of T
        if a0:
            K -= a0
        K *= scale
    if not keep_diagonal:
        np.fill_diagonal(K, 0.0)
    return K


def attention_kernel(X: np.ndarray, f: Callable[[np.ndarray], np.ndarray], w_K: np.ndarray,
                     w_Q: np.ndarray, alpha: float = 1.0, keep_diagonal: bool = False,
                     gram: np.ndarray | None = None, a0: float = 0.0,
                     use_symmetry: bool = False) -> np.ndarray:
    """``K = (f(X^T (alpha I + W_K^T W_Q) X / sqrt(p)) - a0) / sqrt(p)``, shape ``(n, n)``.

    Parameters
    ----------
    X : ndarray of shape (p, n)
        Tokens as columns.
    f : callable
        Vectorised nonlinearity, centred by ``a0``.
    w_K, w_Q : ndarray of shape (p,) or (r, p)
        Low-rank weight vectors: one pair, or ``r`` pairs as rows (see :func:`logits`).
    alpha : float, default 1.0
        Scale of the full part of the key-query matrix.
    keep_diagonal : bool, default False
        Keep ``K_ii`` (see the module docstring for why it is zeroed by default).
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (not modified).
    a0 : float, default 0.0
        Centring constant ``E f(alpha xi)`` when ``f`` is not centred already.
    use_symmetry : bool, default False
        Mirror the upper triangle when ``w_K`` and ``w_Q`` are parallel (for ``r`` pairs: each
        ``w_Q^(k)`` parallel to its ``w_K^(k)``; see the Notes): half the evaluations of ``f``,
        at the price of rounding-level differences.

    Notes
    -----
    Besides the GEMM ``X^T X`` (or the given ``gram``), one pass over the ``n x n`` memory: for
    an ``f`` built from registered functions, each row block of ``X^T X`` gets the scaling
    ``alpha / sqrt(p)``, the rank-one term ``(X^T w_K)_i (X^T w_Q)_j / sqrt(p)``, ``f``, the
    centring and the ``1 / sqrt(p)`` while it is in cache, on the BLAS threads (:func:`apply`).
    Each entry gets the floating-point operations of :func:`logits` followed by :func:`apply`
    (the rank-one term by the same ``dger``), so the result is bit-identical to theirs. With
    ``r > 1`` pairs the low-rank term is one ``dgemm`` per row block (a GEMM of inner dimension
    ``r``), equal to :func:`logits`' whole-array ``dgemm`` up to the summation order of its
    ``r`` terms.

    With ``use_symmetry``, when ``w_Q = lambda w_K`` to rounding (aligned weights, or a zero
    one) the matrix ``alpha I + w_K w_Q^T`` is symmetric and so is ``K``: ``f``, the centring
    and the scaling are applied on the upper triangle only (half the work of ``f``) and the
    strict lower triangle is its mirror, so ``K`` is exactly symmetric. The upper triangle is
    bit-identical to the two-step path; the mirrored entries differ from it by the rounding
    of the rank-one term only (``u_i v_j`` against ``u_j v_i``, a few ulp of it).

    Any other callable takes the two-step path, with one call of ``f`` on the whole array.
    """
    if not (isinstance(f, Nonlinearity) and f.registered):
        return apply(f, logits(X, w_K, w_Q, alpha, gram), X.shape[0], keep_diagonal, a0,
                     overwrite=True)
    p = X.shape[0]
    s, c = 1.0 / np.sqrt(p), alpha / np.sqrt(p)
    K = X.T @ X if gram is None else np.empty(gram.shape)
    low = _low_rank(X, w_K, w_Q)
    symmetric = use_symmetry and (low is None or all(map(_parallel, low[2], low[3])))

    def step(b: slice) -> None:
        Kb = K[b]
        np.multiply(Kb if gram is None else gram[b], c, out=Kb)
        if low is not None:  # in place, the same arithmetic as logits' (Kb.T is Fortran-ordered)
            u = low[0]
            _add_low_rank(Kb.T, s, u[b] if u.ndim == 1 else u[:, b], low[1])
        # f on the upper part of the rows b when K is symmetric, else on all of them
        _finish(f, Kb[:, b.start:] if symmetric else Kb, a0, s)

    def mirror(b: slice) -> None:
        K[b, :b.start] = K[:b.start, b].T
        D = K[b, b]
        lower = np.tril_indices(D.shape[0], -1)
        D[lower] = D.T[lower]

    _by_rows(step, K.shape)
    if symmetric:
        _by_rows(mirror, K.shape)
    if not keep_diagonal:
        np.fill_diagonal(K, 0.0)
    return K


def softmax_kernel(X: np.ndarray, w_K: np.ndarray, w_Q: np.ndarray, beta: float,
                   alpha: float = 1.0, mask: bool = True,
                   gram: np.ndarray | None = None) -> np.ndarray:
    r"""Softmax attention ``A = softmax(beta T)`` column by column, shape ``(n, n)``.

    With the logits ``T = X^T (alpha I + W_K^T W_Q) X / sqrt(p)`` (:func:`logits`; row ``i`` a
    key, column ``j`` a query)

        A_ij = exp(beta T_ij) / sum_k exp(beta T_kj),

    the sum over ``k != j`` and ``A_jj = 0`` when ``mask`` (the diagonal logit is ``-inf``), so
    **each column sums to one**. Computed stably: the column maximum is subtracted before the
    exponential (no overflow for any ``beta``).

    Parameters
    ----------
    X : ndarray of shape (p, n)
        Tokens as columns, ``n >= 2``.
    w_K, w_Q : ndarray of shape (p,) or (r, p)
        One pair of weight vectors or ``r`` pairs as rows (see :func:`logits`).
    beta : float
        Inverse temperature ``> 0``.
    alpha : float, default 1.0
        Scale of the full part of ``W_K^T W_Q``.
    mask : bool, default True
        Mask the self-pairs.
    gram : ndarray of shape (n, n), optional
        A precomputed ``X^T X`` (not modified).

    Notes
    -----
    Besides the GEMM ``X^T X``, four passes over the ``n x n`` memory (scale, column maximum,
    exponential, column sums and division), all in place (:func:`softmax_columns`).
    """
    return softmax_columns(logits(X, w_K, w_Q, alpha, gram), beta, mask)


def softmax_columns(T: np.ndarray, beta: float, mask: bool = True) -> np.ndarray:
    """``A = softmax(beta T)`` column by column, **in place** on the logits ``T`` (``(n, n)``).

    ``A_ij = exp(beta T_ij) / sum_k exp(beta T_kj)``, the sum over ``k != j`` and ``A_jj = 0``
    when ``mask``; the column maximum is subtracted before the exponential. Returns ``T``.
    """
    T *= beta
    if mask:
        np.fill_diagonal(T, -np.inf)
    T -= T.max(axis=0)
    np.exp(T, out=T)
    T /= T.sum(axis=0)
    return T


def self_weight(A: np.ndarray) -> float:
    """Mean weight ``tr(A) / n`` a query puts on itself (``0`` with the mask; near ``1`` without)."""
    return float(np.trace(A) / A.shape[0])

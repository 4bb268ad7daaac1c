"""Settings: one point of the model in its high-dimensional scalars.

The data are ``X = mu y^T + Z`` in ``R^{p x n}``; the logits are ``T = X^T W X / sqrt(p)`` for
the key-query matrix ``W = W_K^T W_Q`` and the attention kind turns them into the kernel ``K``.
In the proportional limit only a few scalars enter the theory; a setting holds exactly these and
validates them.

Layout, made for more kinds of attention and of weights:

* **Attention kinds** are small frozen dataclasses deriving from :class:`Attention`:
  :class:`Entrywise` (``K_ij = f(T_ij) / sqrt(p)`` with the centred ``f`` and a zero diagonal:
  the paper's model) and :class:`Softmax` (``A = softmax(beta T)`` column by column, inverse
  temperature ``beta > 0``, self-pairs masked by default; it ignores the setting's ``f``). A kind
  holds its fields and checks them in ``__post_init__``; a setting carries its kind in the
  keyword-only field ``attention``.
* **Setting types** derive from :class:`BaseSetting`, which owns what every type shares: the
  aspect ratio ``c``, the nonlinearity ``f``, the attention kind and the common validation path
  (:meth:`BaseSetting.__post_init__` checks those, then calls the type's :meth:`~BaseSetting._validate`),
  plus ``p(n)`` and the Hermite data of ``f`` at the scale of the logits (:attr:`~BaseSetting.logit_scale`).
  :class:`Setting` is the rank-one family ``W = alpha I_p + w_K w_Q^T``; :class:`RankSetting`
  the rank-``r`` family ``W = alpha I_p + sum_{k<=r} w_K^(k) w_Q^(k)T`` (LoRA-style weights),
  given by the Gram matrix of ``mu`` and the ``2 r`` weight vectors. General key-query matrices,
  :class:`MatrixSetting` (``MatrixSetting(c=..., M=..., mu=..., f=...)``), are one more
  subclass that declares its fields, implements ``_validate`` and ``logit_scale``
  (``||M||_F / sqrt(p)``); it holds the arrays themselves, and ``p`` is fixed by ``M``.
  :class:`HeadsSetting` is multi-head attention as GPT-2 computes it: a stack of head matrices,
  ``f`` applied to each head's logits at the head's own scale, and each head writing its own
  block of the feature rows (one logit scale per head: :attr:`HeadsSetting.logit_scales`).
* **Which function supports what** is stated where it is checked:
  :func:`attn_lib._validation.check_setting` accepts :class:`Setting` with :class:`Entrywise`
  attention by default, and a function that supports a later type or kind passes
  ``types=`` / ``attention=``. Everything else keeps refusing them with a clear error.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .._validation import check_array, check_bool, check_int, check_real, check_square
from .hermite import Hermite, coefficients
from .kernel import head_blocks
from .nonlinearity import Nonlinearity, NonlinearityLike, check_nonlinearity, exponential, scaled

__all__ = ["Attention", "Entrywise", "ENTRYWISE", "Softmax", "BaseSetting", "Setting", "RankSetting",
           "MatrixSetting", "CovarianceSetting", "HeadsSetting", "scale_spread"]

_GRAM_TOL = 1e-10


# ----------------------------------------------------------------------------- attention kinds
@dataclass(frozen=True)
class Attention:
    """Base of the attention kinds: how the logits ``T`` become the kernel ``K``.

    A kind is a frozen dataclass (hashable, described by its fields for the disk cache) that
    validates its parameters in ``__post_init__``.
    """


@dataclass(frozen=True)
class Entrywise(Attention):
    """Entry-wise attention ``K_ij = f(T_ij) / sqrt(p)`` (centred ``f``, zero diagonal).

    The kernel of :mod:`attn_lib.model.kernel` and the model of every deterministic
    equivalent in :mod:`attn_lib.theory`. It has no parameters.
    """


#: The default attention kind.
ENTRYWISE = Entrywise()


@dataclass(frozen=True)
class Softmax(Attention):
    r"""Softmax attention: ``A = softmax(beta T)`` over the keys of each query.

    Keys index rows and queries columns (as for :class:`Entrywise`), so **each column of ``A``
    sums to one**:

        A_ij = exp(beta T_ij) / sum_{k != j} exp(beta T_kj)   (i != j),   A_jj = 0

    with the self-pair masked (``mask=True``); without the mask the sums run over every ``k``.
    The features are the raw attention output ``Phi = X A`` (no rescaling,
    :func:`attn_lib.model.kernel.softmax_kernel`).

    Under softmax the setting's ``f`` is **ignored**: the kernel is fixed by ``beta``. Once the
    normalising sums concentrate at ``(n - 1) e^{beta^2 alpha^2 / 2}``, ``A`` is
    ``(1 1^T - I) / (n - 1)`` plus the entry-wise kernel of :attr:`f`, the centred
    ``f_beta(t) = exp(beta t - beta^2/2) - 1`` (:mod:`attn_lib.theory.softmax` derives it).

    Parameters
    ----------
    beta : float
        Inverse temperature ``> 0``.
    mask : bool, default True
        Mask the self-pairs (diagonal logits ``-inf``). A token's logit with itself is about
        ``alpha sqrt(p)``, so without the mask each token puts nearly all its weight on itself
        (:func:`attn_lib.model.kernel.self_weight`).
    """

    beta: float
    mask: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "beta", check_real(self.beta, "beta", low=0.0, low_open=True))
        object.__setattr__(self, "mask", check_bool(self.mask, "mask"))

    @property
    def f(self) -> Nonlinearity:
        """The entry-wise kernel of this softmax, ``f_beta`` (:func:`~attn_lib.model.nonlinearity.exponential`)."""
        return exponential(self.beta)


# ----------------------------------------------------------------------------- setting types
def _signal(mu: object, p: int, of: str) -> np.ndarray:
    """``mu`` as a read-only float copy of shape ``(p,)``, the ``p`` of the field ``of``."""
    out = np.array(check_array(mu, "mu"), dtype=float, copy=True)
    if out.shape != (p,):
        raise ValueError(f"mu must have shape ({p},), the p of {of}, got {out.shape}")
    out.flags.writeable = False
    return out


@functools.lru_cache(maxsize=8)
def _eigh(data: bytes, p: int) -> tuple[np.ndarray, np.ndarray]:
    """Eigenvalues and eigenvectors (read-only) of the symmetric matrix stored in ``data``: one
    decomposition for the settings that share a covariance (:attr:`CovarianceSetting.spectrum`)."""
    lam, V = np.linalg.eigh(np.frombuffer(data).reshape(p, p))
    lam.flags.writeable = False
    V.flags.writeable = False
    return lam, V


def _fixed_p(c: float, p: int, n: int | None, what: str) -> int:
    """``p`` of a setting whose arrays fix it; with ``n``, checks ``round(c n) = p``.

    ``what`` describes the arrays for the message (``{p}`` is replaced by ``p``)."""
    if n is not None:
        n = check_int(n, "n")
        if int(round(c * n)) != p:
            raise ValueError(f"n={n} does not fit the matrix: {what.format(p=p)}, so n must "
                             f"give round(c n) = {p} with c = {c:g} (round(c n) = "
                             f"{int(round(c * n))}); e.g. n = {int(round(p / c))}")
    return p


@dataclass(frozen=True)
class BaseSetting:
    """What every setting type shares, and its one validation path.

    Subclasses declare ``f`` (a :data:`~attn_lib.model.nonlinearity.NonlinearityLike`) among
    their fields and, last, the keyword-only ``attention: Attention = field(default=ENTRYWISE,
    kw_only=True)`` (declared there so that it is printed last); they implement
    :meth:`_validate` and :attr:`logit_scale`.

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``.
    """

    c: float

    if TYPE_CHECKING:  # fields of every subclass (declared there, for their order)
        @property
        def f(self) -> NonlinearityLike: ...

        @property
        def attention(self) -> Attention: ...

    def __post_init__(self) -> None:
        self._set("c", check_real(self.c, "c", low=0.0, low_open=True))
        check_nonlinearity(self.f)
        if not isinstance(self.attention, Attention):
            raise TypeError("attention must be an attention kind (attn_lib.model.setting."
                            f"Attention), got {type(self.attention).__name__}")
        self._validate()

    def _set(self, name: str, value: object) -> None:
        """Store a validated (converted) field of the frozen instance."""
        object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        """The fields' values, in declaration order."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))

    def __eq__(self, other: object) -> bool:
        """Equal when of the same class with equal fields, arrays compared by value."""
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
                   for a, b in zip(self._values(), other._values()))

    def __hash__(self) -> int:
        """Hash of the fields, arrays by their bytes (consistent with :meth:`__eq__`)."""
        return hash(tuple(v.tobytes() if isinstance(v, np.ndarray) else v for v in self._values()))

    def _validate(self) -> None:
        """Check and convert the fields of the subclass (called by ``__post_init__``)."""
        raise NotImplementedError

    @property
    def logit_scale(self) -> float:
        """Standard deviation of the off-diagonal logits on pure noise, where ``f`` is read."""
        raise NotImplementedError

    @functools.cached_property
    def hermite(self) -> Hermite:
        """Hermite data of the effective nonlinearity ``t -> f(logit_scale t)``."""
        return coefficients(self.f, self.logit_scale)

    def p(self, n: int) -> int:
        """Token dimension ``p = max(1, round(c n))`` for ``n`` tokens."""
        n = check_int(n, "n")
        return max(1, int(round(self.c * n)))


@dataclass(frozen=True)
class Setting(BaseSetting):
    """Scalars of the signal-plus-noise attention model with ``W = alpha I + w_K w_Q^T``.

    In the proportional limit only these enter the theory: ``c = p/n``, ``snr = ||mu||^2``,
    the Hermite data of ``f``, the norms ``||w_K||, ||w_Q||``, the cosines between
    ``mu, w_K, w_Q`` and the full part ``alpha``.

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``.
    snr : float, default 0.0
        Signal strength ``||mu||^2 >= 0``.
    f : str, callable or Nonlinearity, default "tanh"
        Entry-wise nonlinearity (a name of :data:`attn_lib.model.nonlinearity.REGISTRY`, a
        vectorised callable or a :class:`~attn_lib.model.nonlinearity.Nonlinearity`), kept as
        given; the library always uses the centred ``f - E f(xi)``.
    wk_norm, wq_norm : float, default 0.0
        ``||w_K||, ||w_Q|| >= 0`` of the low-rank part of ``W_K^T W_Q = alpha I + w_K w_Q^T``.
    cos_mu_wk, cos_mu_wq, cos_wk_wq : float, default 1.0
        Cosines between ``mu, w_K, w_Q`` in ``[-1, 1]``; their 3x3 Gram matrix must be positive
        semi-definite. They are validated even when a norm or ``snr`` is zero.
    alpha : float, default 1.0
        Scale ``> 0`` of the full part. ``alpha I + w_K w_Q^T = alpha (I + (w_K/alpha) w_Q^T)``,
        so the model equals the paper's (``alpha = 1``) with ``f(alpha t)`` and ``w_K / alpha``;
        see :meth:`canonical`.
    attention : Attention, keyword-only, default ``Entrywise()``
        The attention kind (see the module docstring).

    Notes
    -----
    The coherent shift of the kernel argument between two tokens of the same class is
    ``delta = |snr + (mu^T w_K)(mu^T w_Q)/alpha| * alpha / sqrt(p)`` (see :meth:`delta`); the
    proportional-limit theory assumes it is small, and warns when it is not
    (:mod:`attn_lib.theory.domain`). The symbols are explained in the book's notation page,
    section *Glossary* (``book/notation.md``).
    """

    snr: float = 0.0
    f: NonlinearityLike = "tanh"
    wk_norm: float = 0.0
    wq_norm: float = 0.0
    cos_mu_wk: float = 1.0
    cos_mu_wq: float = 1.0
    cos_wk_wq: float = 1.0
    alpha: float = 1.0
    attention: Attention = field(default=ENTRYWISE, kw_only=True)

    def _validate(self) -> None:
        self._set("snr", check_real(self.snr, "snr", low=0.0))
        self._set("wk_norm", check_real(self.wk_norm, "wk_norm", low=0.0))
        self._set("wq_norm", check_real(self.wq_norm, "wq_norm", low=0.0))
        for name in ("cos_mu_wk", "cos_mu_wq", "cos_wk_wq"):
            self._set(name, check_real(getattr(self, name), name, low=-1.0, high=1.0))
        self._set("alpha", check_real(self.alpha, "alpha", low=0.0, low_open=True))
        eig = np.linalg.eigvalsh(self.cosine_gram)
        if eig[0] < -_GRAM_TOL:
            raise ValueError(
                "cos_mu_wk, cos_mu_wq, cos_wk_wq must form a positive semi-definite Gram matrix "
                f"[[1, cos_mu_wk, cos_mu_wq], [., 1, cos_wk_wq], [., ., 1]]; its smallest "
                f"eigenvalue is {eig[0]:.3g}")

    # ------------------------------------------------------------------ derived scalars
    @property
    def cosine_gram(self) -> np.ndarray:
        """Gram matrix ``(3, 3)`` of the unit vectors along ``mu, w_K, w_Q``."""
        return np.array([[1.0, self.cos_mu_wk, self.cos_mu_wq],
                         [self.cos_mu_wk, 1.0, self.cos_wk_wq],
                         [self.cos_mu_wq, self.cos_wk_wq, 1.0]])

    @property
    def gram(self) -> np.ndarray:
        """Gram matrix ``(3, 3)`` of ``mu, w_K, w_Q`` themselves (norms included)."""
        norms = np.array([np.sqrt(self.snr), self.wk_norm, self.wq_norm])
        return self.cosine_gram * np.outer(norms, norms)

    @property
    def mu_wk(self) -> float:
        """``mu^T w_K``."""
        return float(np.sqrt(self.snr) * self.wk_norm * self.cos_mu_wk)

    @property
    def mu_wq(self) -> float:
        """``mu^T w_Q``."""
        return float(np.sqrt(self.snr) * self.wq_norm * self.cos_mu_wq)

    @property
    def logit_scale(self) -> float:
        """``alpha``: the off-diagonal logits on pure noise are ``N(0, alpha^2)`` up to ``O(1/p)``."""
        return self.alpha

    def canonical(self) -> "Setting":
        """The equivalent setting with ``alpha = 1``: ``f(alpha t)`` and ``w_K / alpha``.

        Only the theory uses this reduction; the simulator draws ``alpha I + w_K w_Q^T``
        itself, so that comparing the two checks it.
        """
        if self.alpha == 1.0:
            return self
        a = self.alpha
        return dataclasses.replace(self, f=scaled(self.f, a), wk_norm=self.wk_norm / a, alpha=1.0)

    def signed_delta(self, n: int) -> float:
        """Signed coherent shift ``mu^T (alpha I + w_K w_Q^T) mu / sqrt(p)`` at ``n`` tokens."""
        return (self.alpha * self.snr + self.mu_wk * self.mu_wq) / np.sqrt(self.p(n))

    def delta(self, n: int) -> float:
        """Coherent shift ``|mu^T (alpha I + w_K w_Q^T) mu| / sqrt(p)`` at ``n`` tokens."""
        return abs(self.signed_delta(n))


@dataclass(frozen=True, eq=False)
class RankSetting(BaseSetting):
    """Scalars of the attention model with rank-``r`` weights ``W = alpha I + W_K^T W_Q``.

    ``W_K^T W_Q = sum_{k<=r} w_K^(k) w_Q^(k)T`` for ``W_K, W_Q`` of shape ``(r, p)`` (rows
    ``w_K^(k)``, ``w_Q^(k)``). In the proportional limit the vectors enter only through ``c``,
    ``alpha``, the Hermite data of ``f`` and the Gram matrix of ``V = [mu; W_K; W_Q]``
    (``(1 + 2r) x p``, rows in this order). :class:`Setting` is the case ``r = 1``
    (:meth:`from_setting`).

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``.
    gram : array_like of shape (1 + 2r, 1 + 2r)
        ``V V^T``: symmetric positive semi-definite, ``r >= 1``; ``gram[0, 0] = snr = ||mu||^2``,
        ``gram[0, 1 + k] = mu^T w_K^(k)``, ``gram[0, 1 + r + k] = mu^T w_Q^(k)``. Stored as a
        read-only float array.
    f : str, callable or Nonlinearity, default "tanh"
        Entry-wise nonlinearity, as for :class:`Setting`.
    alpha : float, default 1.0
        Scale ``> 0`` of the full part; :meth:`canonical` reduces to ``alpha = 1``.
    attention : Attention, keyword-only, default ``Entrywise()``
        The attention kind (see the module docstring).

    Notes
    -----
    The coherent shift is ``delta = |mu^T W mu| / sqrt(p)`` with
    ``mu^T W mu = alpha snr + sum_k (mu^T w_K^(k)) (mu^T w_Q^(k))`` (:meth:`delta`). The
    matrix is positive semi-definite when the smallest eigenvalue of its equilibrated form
    ``gram / (d d^T)`` (``d`` the square roots of the diagonal, 1 where it is zero) is at least
    ``-1e-10``, the tolerance :class:`Setting` applies to its cosines. Instances compare and hash
    by their fields (``gram`` by value).
    """

    gram: np.ndarray
    f: NonlinearityLike = "tanh"
    alpha: float = 1.0
    attention: Attention = field(default=ENTRYWISE, kw_only=True)

    def _validate(self) -> None:
        g = check_square(self.gram, "gram")
        m = g.shape[0]
        if m < 3 or m % 2 == 0:
            raise ValueError("gram must be the (1 + 2r) x (1 + 2r) Gram matrix of mu, w_K^(1..r), "
                             f"w_Q^(1..r) with r >= 1, got shape {g.shape}")
        scale = max(float(np.abs(g).max()), 1e-300)
        asym = float(np.abs(g - g.T).max())
        if asym > 1e-12 * scale:
            raise ValueError(f"gram must be symmetric; max |gram - gram^T| = {asym:.3g}")
        diag = np.diag(g)
        if np.any(diag < 0):
            raise ValueError(f"gram must have a non-negative diagonal (squared norms), got {diag.min():.3g}")
        g = (g + g.T) / 2
        d = np.where(diag > 0, np.sqrt(np.where(diag > 0, diag, 1.0)), 1.0)
        eig = np.linalg.eigvalsh(g / np.outer(d, d))
        if eig[0] < -_GRAM_TOL:
            raise ValueError("gram must be positive semi-definite; the smallest eigenvalue of "
                             f"gram / (d d^T), d = sqrt(diag(gram)), is {eig[0]:.3g}")
        g.flags.writeable = False
        self._set("gram", g)
        self._set("alpha", check_real(self.alpha, "alpha", low=0.0, low_open=True))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_setting(cls, setting: Setting) -> "RankSetting":
        """The rank-one :class:`Setting` as a ``RankSetting`` with ``r = 1`` (``gram = setting.gram``)."""
        if not isinstance(setting, Setting):
            raise TypeError(f"setting must be an attn_lib.Setting, got {type(setting).__name__}")
        return cls(c=setting.c, gram=setting.gram, f=setting.f, alpha=setting.alpha,
                   attention=setting.attention)

    @classmethod
    def from_vectors(cls, c: float, mu: object, W_K: object, W_Q: object,
                     f: NonlinearityLike = "tanh", alpha: float = 1.0, *,
                     attention: Attention = ENTRYWISE) -> "RankSetting":
        """The setting of given vectors: ``gram = V V^T``, ``V = [mu; W_K; W_Q]``.

        Parameters
        ----------
        c, f, alpha, attention
            As for the class.
        mu : array_like of shape (d,)
            Signal direction and strength (``snr = ||mu||^2``).
        W_K, W_Q : array_like of shape (r, d)
            Rows ``w_K^(k)``, ``w_Q^(k)``: ``W_K^T W_Q = sum_k w_K^(k) w_Q^(k)T``. Only their
            Gram matrix with ``mu`` is kept, so ``d`` need not be the ``p`` of a simulation.
        """
        mu = np.asarray(mu, dtype=float)
        W_K = np.asarray(W_K, dtype=float)
        W_Q = np.asarray(W_Q, dtype=float)
        if mu.ndim != 1 or mu.size == 0:
            raise ValueError(f"mu must be a non-empty 1-D array, got shape {mu.shape}")
        for name, W in (("W_K", W_K), ("W_Q", W_Q)):
            if W.ndim != 2 or W.shape[0] < 1 or W.shape[1] != mu.size:
                raise ValueError(f"{name} must have shape (r, {mu.size}) with r >= 1 (rows "
                                 f"w^(k) in the space of mu), got {W.shape}")
        if W_K.shape != W_Q.shape:
            raise ValueError(f"W_K and W_Q must have the same shape (r, d), got {W_K.shape} and {W_Q.shape}")
        V = np.vstack([mu[None, :], W_K, W_Q])
        if not np.all(np.isfinite(V)):
            raise ValueError("mu, W_K and W_Q must be finite")
        return cls(c=c, gram=V @ V.T, f=f, alpha=alpha, attention=attention)

    # ------------------------------------------------------------------ derived scalars
    @property
    def r(self) -> int:
        """Number of weight pairs ``r``."""
        return (self.gram.shape[0] - 1) // 2

    @property
    def snr(self) -> float:
        """``||mu||^2 = gram[0, 0]``."""
        return float(self.gram[0, 0])

    @property
    def mu_wk(self) -> np.ndarray:
        """``mu^T w_K^(k)``, shape ``(r,)``."""
        return self.gram[0, 1:1 + self.r]

    @property
    def mu_wq(self) -> np.ndarray:
        """``mu^T w_Q^(k)``, shape ``(r,)``."""
        return self.gram[0, 1 + self.r:]

    @property
    def logit_scale(self) -> float:
        """``alpha``: the off-diagonal logits on pure noise are ``N(0, alpha^2)`` up to ``O(r/p)``."""
        return self.alpha

    def canonical(self) -> "RankSetting":
        """The equivalent setting with ``alpha = 1``: ``f(alpha t)`` and every ``w_K^(k) / alpha``.

        As for :meth:`Setting.canonical`, only the theory uses this reduction.
        """
        if self.alpha == 1.0:
            return self
        a = self.alpha
        s = np.ones(self.gram.shape[0])
        s[1:1 + self.r] = 1.0 / a
        return dataclasses.replace(self, f=scaled(self.f, a), gram=self.gram * np.outer(s, s),
                                   alpha=1.0)

    def signed_delta(self, n: int) -> float:
        """Signed coherent shift ``mu^T W mu / sqrt(p)`` at ``n`` tokens (see the Notes)."""
        return (self.alpha * self.snr + float(self.mu_wk @ self.mu_wq)) / np.sqrt(self.p(n))

    def delta(self, n: int) -> float:
        """Coherent shift ``|mu^T W mu| / sqrt(p)`` at ``n`` tokens."""
        return abs(self.signed_delta(n))


@dataclass(frozen=True, eq=False)
class MatrixSetting(BaseSetting):
    r"""The attention model with a given key-query matrix ``M`` and signal ``mu``.

    Tokens ``X = mu y^T + Z`` in ``R^{p x n}`` and the logits ``T = X^T M X / sqrt(p)``,
    ``T_ij = x_i^T M x_j / sqrt(p)``: ``M`` is in the book's orientation, **rows index keys**
    (``i``) and columns queries (``j``), as :func:`attn_lib.studies.gpt2.paper_matrix`
    (``W_K @ W_Q.T`` for projections stored ``[in, out]``). ``M.T`` is another model, and
    nothing in ``M`` tells the two apart: build it in this orientation. The scale matters too:
    ``f`` reads logits of standard deviation ``||M||_F / sqrt(p)`` (:attr:`logit_scale`); the
    book's matrices are normalised to one (:func:`attn_lib.studies.gpt2.normalise`), and the
    theory and the simulator warn (:class:`~attn_lib.DomainWarning`) for a scale more than 4
    times away from it. The kernel
    is then that of the attention kind: ``K = f_c(T) / sqrt(p)`` with ``f_c = f - E f(sigma
    xi)``, ``sigma`` = :attr:`logit_scale`, and a zero diagonal, or ``softmax(beta T)`` column by
    column. Unlike :class:`Setting` and :class:`RankSetting`, which hold scalars, this type holds
    the arrays: no reduction to a few inner products is assumed.

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``; it fixes the one ``n`` the setting is drawn at (see Notes).
    M : array_like of shape (p, p)
        Key-query matrix, finite, non-zero, ``p >= 2`` (read from its shape); any real matrix,
        symmetric or not. Stored as a read-only float copy.
    mu : array_like of shape (p,)
        Signal, finite (``snr = ||mu||^2``). Stored as a read-only float copy.
    f : str, callable or Nonlinearity, default "tanh"
        Entry-wise nonlinearity, as for :class:`Setting` (ignored under softmax).
    attention : Attention, keyword-only, default ``Entrywise()``
        The attention kind (see the module docstring).

    Notes
    -----
    **How ``n``, ``c`` and ``p`` agree.** ``p`` is ``M.shape[0]``, so only the token counts ``n``
    with ``round(c n) = p`` are allowed (the rule of :meth:`BaseSetting.p`); every entry point
    that takes ``n`` (:meth:`p`, :meth:`delta`, :func:`attn_lib.simulation.simulate.errors`, ...)
    raises a ``ValueError`` naming ``n`` otherwise.

    The coherent shift is ``delta = |mu^T M mu| / sqrt(p)`` (:meth:`delta`); for
    ``M = alpha I + w_K w_Q^T`` it is :meth:`Setting.delta` (:meth:`from_setting`). The
    off-diagonal logits on noise, ``z_i^T M z_j / sqrt(p)``, have the variance
    ``||M||_F^2 / p`` exactly, the :attr:`logit_scale` at which ``f`` is centred; for
    ``alpha I + w_K w_Q^T`` that is ``alpha^2`` up to ``O(1/p)``, the scale a :class:`Setting`
    uses, so an ``f`` with ``E f(sigma xi)`` depending on ``sigma`` is centred slightly
    differently (an odd ``f`` and softmax are not). Instances compare and hash by their fields
    (``M`` and ``mu`` by value).
    """

    M: np.ndarray
    mu: np.ndarray
    f: NonlinearityLike = "tanh"
    attention: Attention = field(default=ENTRYWISE, kw_only=True)

    def _validate(self) -> None:
        M = np.array(check_square(self.M, "M"), dtype=float, copy=True)
        p = M.shape[0]
        if p < 2:
            raise ValueError(f"M must be p x p with p >= 2, got shape {M.shape}")
        if not np.any(M):
            raise ValueError("M must not be zero: its logits would vanish")
        M.flags.writeable = False
        self._set("M", M)
        self._set("mu", _signal(self.mu, p, "M"))

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_setting(cls, setting: Setting | RankSetting, p: int) -> "MatrixSetting":
        """The matrix of a :class:`Setting` or :class:`RankSetting` in ``R^p``.

        ``M = alpha I_p + W_K^T W_Q`` and ``mu`` from the concrete vectors of
        :func:`attn_lib.model.data.geometry` (the ones the simulator draws with), with the
        setting's ``c``, ``f`` and attention kind; ``p`` must be ``setting.p(n)`` for the ``n``
        it is drawn at.

        Parameters
        ----------
        setting : Setting or RankSetting
        p : int
            Dimension, ``>= 2`` and at least the rank of ``mu`` and the weight vectors.
        """
        from .data import geometry  # data imports this module

        if not isinstance(setting, (Setting, RankSetting)):
            raise TypeError("setting must be an attn_lib.Setting or attn_lib.RankSetting, got "
                            f"{type(setting).__name__}")
        p = check_int(p, "p", low=2)
        V = geometry(setting, p)
        r = 1 if isinstance(setting, Setting) else setting.r
        W_K, W_Q = V[1:1 + r], V[1 + r:]
        M = setting.alpha * np.eye(p) + W_K.T @ W_Q
        return cls(c=setting.c, M=M, mu=V[0], f=setting.f, attention=setting.attention)

    # ------------------------------------------------------------------ derived scalars
    def p(self, n: int | None = None) -> int:
        """``p = M.shape[0]``; with ``n``, checks that ``round(c n) = p`` (else ``ValueError``)."""
        return _fixed_p(self.c, self.M.shape[0], n, "M is {p} x {p}")

    @property
    def snr(self) -> float:
        """``||mu||^2``."""
        return float(self.mu @ self.mu)

    @property
    def logit_scale(self) -> float:
        """``||M||_F / sqrt(p)``: the standard deviation of ``z_i^T M z_j / sqrt(p)``, ``i != j``."""
        return float(np.linalg.norm(self.M) / np.sqrt(self.p()))

    def signed_delta(self, n: int | None = None) -> float:
        """Signed coherent shift ``mu^T M mu / sqrt(p)`` (``n``, if given, is checked by :meth:`p`)."""
        return float(self.mu @ self.M @ self.mu) / np.sqrt(self.p(n))

    def delta(self, n: int | None = None) -> float:
        """Coherent shift ``|mu^T M mu| / sqrt(p)`` (``n``, if given, is checked by :meth:`p`)."""
        return abs(self.signed_delta(n))


@dataclass(frozen=True)
class CovarianceSetting(MatrixSetting):
    r"""Tokens with a general covariance: ``x_i = y_i mu + C^{1/2} z_i``, any key-query matrix ``M``.

    A two-class Gaussian mixture with the class means ``+mu`` and ``-mu`` and the common
    covariance ``C`` (``z_i`` standard Gaussian), logits ``T_ij = x_i^T M x_j / sqrt(p)``
    (rows of ``M`` index keys, as :class:`MatrixSetting`), and the attention kind's kernel.
    ``C = I`` is the :class:`MatrixSetting` of the same ``M`` and ``mu``. The off-diagonal logits
    on noise have the variance ``tr(C M C M^T) / p`` (:attr:`logit_scale`). Real tokens enter
    through :meth:`from_tokens`, which estimates ``mu`` and ``C`` from them.

    Parameters
    ----------
    c, M, mu, f, attention
        As for :class:`MatrixSetting`.
    C : array_like of shape (p, p), keyword-only
        The covariance: symmetric (to 1e-10 relative) and positive semi-definite (eigenvalues
        above ``-1e-10`` times the largest), finite, not zero. Stored as a read-only float copy
        (symmetrised).

    Notes
    -----
    The theory (:func:`attn_lib.theory.attention_error`, :func:`attn_lib.theory.ridge_error`)
    is the proportional limit of :mod:`attn_lib.theory._covariance`, entry-wise attention; the
    simulator (:func:`attn_lib.simulation.simulate.errors`) draws ``Z = C^{1/2} Z_0`` and also
    runs softmax. The eigendecomposition of ``C`` is computed once per instance
    (:attr:`spectrum`).
    """

    C: np.ndarray = field(kw_only=True)

    def _validate(self) -> None:
        super()._validate()
        C = np.array(check_square(self.C, "C"), dtype=float, copy=True)
        p = self.M.shape[0]
        if C.shape != (p, p):
            raise ValueError(f"C must have shape ({p}, {p}), the shape of M, got {C.shape}")
        scale = np.abs(C).max()
        if scale == 0.0:
            raise ValueError("C must not be zero: the tokens would carry no noise")
        if np.abs(C - C.T).max() > 1e-10 * scale:
            raise ValueError("C must be symmetric (to 1e-10 relative): it is a covariance")
        C = (C + C.T) / 2.0
        C.flags.writeable = False
        self._set("C", C)
        lam = self.spectrum[0]
        if lam.min() < -1e-10 * lam.max():
            raise ValueError(f"C must be positive semi-definite: its smallest eigenvalue is "
                             f"{lam.min():.3g} (largest {lam.max():.3g})")

    @classmethod
    def from_tokens(cls, X: object, y: object, *, c: float, M: object = None,
                    f: NonlinearityLike = "tanh", attention: Attention = ENTRYWISE) -> "CovarianceSetting":
        r"""The setting of real tokens: ``mu`` and ``C`` estimated from them.

        ``mu = (m_+ - m_-) / 2`` (``m_k`` the mean of class ``k``) and ``C`` the pooled
        within-class covariance ``(S_+ + S_-) / (N - 2)``, ``S_k`` the scatter matrix of class
        ``k`` about its mean. The model's tokens are centred at the midpoint of the class
        means, so ``X`` must be (:func:`attn_lib.model.datasets.standardise` does it).

        Parameters
        ----------
        X : array_like of shape (p, N)
            The tokens as columns, ``p >= 2``, at least two per class.
        y : array_like of shape (N,)
            Labels ``+1`` and ``-1``.
        c : float
            ``p / n`` of the model (``n`` the tokens a draw or a subset has).
        M : array_like of shape (p, p), optional
            Key-query matrix; default the identity.
        f, attention
            As for :class:`MatrixSetting`.

        Raises
        ------
        ValueError
            For labels other than ``+-1``, fewer than two tokens of a class, or tokens not
            centred at the midpoint of their class means (relative ``1e-8``).
        """
        Xa = check_array(X, "X", ndim=2)
        p, N = Xa.shape
        ya = check_array(y, "y")
        if ya.shape != (N,):
            raise ValueError(f"y must have shape ({N},), one label per column of X, got {ya.shape}")
        if not np.all(np.isin(ya, (-1.0, 1.0))):
            raise ValueError("y must hold the labels +1 and -1 only")
        plus, minus = Xa[:, ya > 0], Xa[:, ya < 0]
        if min(plus.shape[1], minus.shape[1]) < 2:
            raise ValueError("X must hold at least two tokens of each class")
        m_plus, m_minus = plus.mean(axis=1), minus.mean(axis=1)
        mid = (m_plus + m_minus) / 2.0
        if np.linalg.norm(mid) > 1e-8 * max(np.sqrt(np.mean(Xa * Xa) * p), 1e-300):
            raise ValueError("X must be centred at the midpoint of its class means (the model's "
                             "tokens are y mu + noise): subtract (m_+ + m_-)/2, e.g. with "
                             "attn_lib.model.datasets.standardise")
        dp, dm = plus - m_plus[:, None], minus - m_minus[:, None]
        C = (dp @ dp.T + dm @ dm.T) / (N - 2.0)
        Mm = np.eye(p) if M is None else check_square(M, "M")
        return cls(c=c, M=Mm, mu=(m_plus - m_minus) / 2.0, f=f, C=C, attention=attention)

    @functools.cached_property
    def diagonal(self) -> bool:
        """Whether ``C`` is diagonal (then :attr:`spectrum` and the draws cost ``O(p)``)."""
        return not np.any(self.C - np.diag(np.diag(self.C)))

    @functools.cached_property
    def spectrum(self) -> tuple[np.ndarray, np.ndarray]:
        """``(lam, V)``: the eigenvalues and orthonormal eigenvectors of ``C`` (``C V = V diag(lam)``;
        a diagonal ``C`` has its diagonal and ``V = I``, otherwise ascending order)."""
        if self.diagonal:
            lam, V = np.diag(self.C).copy(), np.eye(self.C.shape[0])
            lam.flags.writeable = False
            V.flags.writeable = False
            return lam, V
        return _eigh(self.C.tobytes(), self.C.shape[0])

    @functools.cached_property
    def noise_factor(self) -> np.ndarray:
        """``C^{1/2}`` (symmetric, eigenvalues below zero by rounding set to zero)."""
        lam, V = self.spectrum
        if self.diagonal:
            return np.diag(np.sqrt(np.clip(lam, 0.0, None)))
        return (V * np.sqrt(np.clip(lam, 0.0, None))) @ V.T

    @functools.cached_property
    def logit_scale(self) -> float:
        """``sqrt(tr(C M C M^T) / p)``: the standard deviation of ``z_i^T C^{1/2} M C^{1/2} z_j / sqrt(p)``.

        Computed once per instance with :attr:`spectrum` (``O(p^3)``, ``O(p^2)`` for a diagonal ``C``)."""
        lam, Mh = self.spectrum[0], self.rotated_M
        return float(np.sqrt(np.einsum("k,kl,l,kl->", lam, Mh, lam, Mh) / self.p()))

    @functools.cached_property
    def rotated_M(self) -> np.ndarray:
        """``V^T M V``: ``M`` in the eigenbasis of ``C`` (:attr:`spectrum`), read-only."""
        V = self.spectrum[1]
        out = self.M.copy() if self.diagonal else V.T @ self.M @ V
        out.flags.writeable = False
        return out

    @property
    def effective_rank(self) -> float:
        """``tr(C)^2 / tr(C^2)``: how many directions carry the noise (``p`` for ``C = I``)."""
        lam = self.spectrum[0]
        return float(lam.sum() ** 2 / (lam @ lam))


@dataclass(frozen=True, eq=False)
class HeadsSetting(BaseSetting):
    r"""Multi-head entry-wise attention as GPT-2 computes it: ``f`` per head, heads side by side.

    Tokens ``X = mu y^T + Z`` in ``R^{p x n}``; head ``h`` has the matrix ``B_h`` (book's
    orientation, rows index keys), the logits ``T_h = X^T B_h X / sqrt(p)`` and the kernel
    ``K_h = f_h(T_h) / sqrt(p)`` with a zero diagonal, ``f_h = f - E f(sigma_h xi)`` centred at
    the head's own logit scale ``sigma_h = ||B_h||_F / sqrt(p)`` (:attr:`logit_scales`). Head
    ``h`` writes its own block of output coordinates, as GPT-2's heads write their values side
    by side:

        Phi = [X_1 K_1; ...; X_H K_H],

    ``X_h`` the rows :attr:`blocks` ``[h]`` of ``X`` (``numpy.array_split`` of ``0..p-1`` into
    ``H`` blocks: the values are the identity, split into blocks). The features keep their count
    ``p``, so the model is at the same ``c`` as one matrix; summing the heads' logits instead is
    the :class:`MatrixSetting` of ``sum_h B_h``. Under :class:`Softmax` attention each head's
    kernel is ``softmax(beta T_h)`` column by column instead (``f`` ignored): GPT-2's own form.

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``; it fixes the one ``n`` the setting is drawn at (as for
        :class:`MatrixSetting`: ``round(c n) = p``).
    heads : array_like of shape (H, p, p)
        The head matrices ``B_h``: finite, each non-zero, ``p >= 2`` and ``1 <= H <= p`` (every
        head needs an output coordinate). Stored as a read-only float copy. For GPT-2's layers:
        :func:`attn_lib.studies.gpt2.heads`.
    mu : array_like of shape (p,)
        Signal, finite (``snr = ||mu||^2``). Stored as a read-only float copy.
    f : str, callable or Nonlinearity, default "tanh"
        Entry-wise nonlinearity (ignored under softmax).
    attention : Attention, keyword-only, default ``Entrywise()``

    Notes
    -----
    With one head this is the :class:`MatrixSetting` of ``B_1`` (the same draws and errors).
    A head's logit scale is ``||B_h||_F / sqrt(p)`` exactly on noise tokens; the setting has no
    single :attr:`logit_scale` (reading it raises ``AttributeError``). Instances compare and
    hash by their fields (``heads`` and ``mu`` by value).
    """

    heads: np.ndarray
    mu: np.ndarray
    f: NonlinearityLike = "tanh"
    attention: Attention = field(default=ENTRYWISE, kw_only=True)

    def _validate(self) -> None:
        B = np.array(check_array(self.heads, "heads", ndim=3), dtype=float, copy=True)
        H, p = B.shape[0], B.shape[1]
        if B.shape != (H, p, p) or p < 2:
            raise ValueError(f"heads must have shape (H, p, p) with p >= 2, got {B.shape}")
        if H > p:
            raise ValueError(f"heads: H = {H} heads need at most p = {p} (one output coordinate "
                             "per head at least)")
        zero = [h for h in range(H) if not np.any(B[h])]
        if zero:
            raise ValueError(f"heads[{zero[0]}] must not be zero: its logits would vanish")
        B.flags.writeable = False
        self._set("heads", B)
        self._set("mu", _signal(self.mu, p, "heads"))

    # ------------------------------------------------------------------ derived scalars
    @property
    def H(self) -> int:
        """Number of heads."""
        return self.heads.shape[0]

    def p(self, n: int | None = None) -> int:
        """``p = heads.shape[1]``; with ``n``, checks that ``round(c n) = p`` (else ``ValueError``)."""
        return _fixed_p(self.c, self.heads.shape[1], n, f"heads are {self.H} x {{p}} x {{p}}")

    @property
    def blocks(self) -> list[np.ndarray]:
        """The output coordinates of each head (:func:`attn_lib.model.kernel.head_blocks`)."""
        return head_blocks(self.p(), self.H)

    @property
    def snr(self) -> float:
        """``||mu||^2``."""
        return float(self.mu @ self.mu)

    @property
    def logit_scales(self) -> np.ndarray:
        """``||B_h||_F / sqrt(p)`` per head, shape ``(H,)``: the standard deviations of the logits."""
        return np.array([np.linalg.norm(B) / np.sqrt(self.p()) for B in self.heads])

    @property
    def logit_scale(self) -> float:
        """Not defined: one scale per head (:attr:`logit_scales`)."""
        raise AttributeError("a HeadsSetting has one logit scale per head: see logit_scales")

    @functools.cached_property
    def hermites(self) -> tuple[Hermite, ...]:
        """Hermite data of ``t -> f(sigma_h t)`` per head (``sigma_h`` = :attr:`logit_scales`)."""
        return tuple(coefficients(self.f, float(s)) for s in self.logit_scales)


def scale_spread(setting: CovarianceSetting) -> float:
    """The relative spread of the tokens' own logit scales, ``sqrt(2 tr(B^2)) / tr(B)``.

    Token ``i``'s logits against noise tokens have the variance ``z_i^T B z_i / p``, ``B = A A^T``
    with ``A = C^{1/2} M C^{1/2}`` (as a key, ``A^T A``: the same two traces); over Gaussian
    ``z_i`` its standard deviation relative to its mean ``sigma^2`` is this number: ``sqrt(2 / p)``
    for ``C = M = I``, of order one when ``C M`` has few large directions. The theories give every
    token the common scale ``sigma`` (:attr:`CovarianceSetting.logit_scale`). One ``p x p``
    product in the eigenbasis of ``C``.

    Parameters
    ----------
    setting : CovarianceSetting

    Returns
    -------
    float
    """
    lam = np.sqrt(np.clip(setting.spectrum[0], 0.0, None))
    A = lam[:, None] * setting.rotated_M * lam[None, :]
    return float(np.sqrt(2.0) * np.linalg.norm(A.T @ A) / np.sum(A * A))   # tr(B) = ||A||_F^2

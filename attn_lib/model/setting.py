"""One point of the model in its high-dimensional scalars.

The data are ``X = mu y^T + Z`` in ``R^{p x n}`` and the attention weights are
``W_K^T W_Q = alpha I_p + w_K w_Q^T``. In the proportional limit only the following scalars enter
the theory: ``c = p/n``, ``snr = ||mu||^2``, the Hermite data of ``f``, the norms
``||w_K||, ||w_Q||``, the cosines between ``mu, w_K, w_Q`` and the full part ``alpha``.
A :class:`Setting` holds exactly these and validates them.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import numpy as np

from .._validation import check_int, check_real
from .hermite import Hermite, Nonlinearity, check_nonlinearity, coefficients

_GRAM_TOL = 1e-10


@dataclass(frozen=True)
class Setting:
    """Scalars of the signal-plus-noise attention model.

    Parameters
    ----------
    c : float
        Aspect ratio ``p/n > 0``.
    snr : float, default 0.0
        Signal strength ``||mu||^2 >= 0``.
    f : str or callable, default "tanh"
        Entry-wise nonlinearity (a name of :data:`attn_lib.model.hermite.REGISTRY` or a vectorised
        callable); the library always uses the centred ``f - E f(xi)``.
    wk_norm, wq_norm : float, default 0.0
        ``||w_K||, ||w_Q|| >= 0`` of the low-rank part of ``W_K^T W_Q = alpha I + w_K w_Q^T``.
    cos_mu_wk, cos_mu_wq, cos_wk_wq : float, default 1.0
        Cosines between ``mu, w_K, w_Q`` in ``[-1, 1]``; their 3x3 Gram matrix must be positive
        semi-definite. They are validated even when a norm or ``snr`` is zero.
    alpha : float, default 1.0
        Scale ``> 0`` of the full part. ``alpha I + w_K w_Q^T = alpha (I + (w_K/alpha) w_Q^T)``,
        so the model equals the paper's (``alpha = 1``) with ``f(alpha t)`` and ``w_K / alpha``;
        see :meth:`canonical`.

    Notes
    -----
    The coherent shift of the kernel argument between two tokens of the same class is
    ``delta = |snr + (mu^T w_K)(mu^T w_Q)/alpha| * alpha / sqrt(p)`` (see :meth:`delta`); the
    proportional-limit theory assumes it is small.
    """

    c: float
    snr: float = 0.0
    f: Nonlinearity = "tanh"
    wk_norm: float = 0.0
    wq_norm: float = 0.0
    cos_mu_wk: float = 1.0
    cos_mu_wq: float = 1.0
    cos_wk_wq: float = 1.0
    alpha: float = 1.0

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        set_("c", check_real(self.c, "c", low=0.0, low_open=True))
        set_("snr", check_real(self.snr, "snr", low=0.0))
        set_("wk_norm", check_real(self.wk_norm, "wk_norm", low=0.0))
        set_("wq_norm", check_real(self.wq_norm, "wq_norm", low=0.0))
        for name in ("cos_mu_wk", "cos_mu_wq", "cos_wk_wq"):
            set_(name, check_real(getattr(self, name), name, low=-1.0, high=1.0))
        set_("alpha", check_real(self.alpha, "alpha", low=0.0, low_open=True))
        check_nonlinearity(self.f)
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

    @functools.cached_property
    def hermite(self) -> Hermite:
        """Hermite data of the effective nonlinearity ``t -> f(alpha t)``."""
        return coefficients(self.f, self.alpha)

    def canonical(self) -> "Setting":
        """The equivalent setting with ``alpha = 1``: ``f(alpha t)`` and ``w_K / alpha``.

        Only the theory uses this reduction; the simulator draws ``alpha I + w_K w_Q^T``
        itself, so that comparing the two checks it.
        """
        if self.alpha == 1.0:
            return self
        func, breaks = check_nonlinearity(self.f)
        a = self.alpha
        scaled = _Scaled(func, a, tuple(b / a for b in breaks))
        return dataclasses.replace(self, f=scaled, wk_norm=self.wk_norm / a, alpha=1.0)

    def p(self, n: int) -> int:
        """Token dimension ``p = max(1, round(c n))`` for ``n`` tokens."""
        n = check_int(n, "n")
        return max(1, int(round(self.c * n)))

    def signed_delta(self, n: int) -> float:
        """Signed coherent shift ``mu^T (alpha I + w_K w_Q^T) mu / sqrt(p)`` at ``n`` tokens."""
        return (self.alpha * self.snr + self.mu_wk * self.mu_wq) / np.sqrt(self.p(n))

    def delta(self, n: int) -> float:
        """Coherent shift ``|mu^T (alpha I + w_K w_Q^T) mu| / sqrt(p)`` at ``n`` tokens."""
        return abs(self.signed_delta(n))


def check_setting(setting: object) -> Setting:
    """``setting`` if it is a :class:`Setting`, else a ``TypeError`` naming its type."""
    if not isinstance(setting, Setting):
        raise TypeError(f"setting must be an attn_lib.Setting, got {type(setting).__name__}")
    return setting


@dataclass(frozen=True)
class _Scaled:
    """``t -> func(scale t)`` as a hashable callable (so Hermite data can be cached).

    ``breaks`` lists its kinks and jumps, which :func:`attn_lib.model.hermite.coefficients` uses.
    """

    func: object
    scale: float
    breaks: tuple[float, ...] = ()

    def __call__(self, t: np.ndarray) -> np.ndarray:
        return self.func(self.scale * np.asarray(t, dtype=float))

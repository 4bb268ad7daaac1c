r"""Deterministic equivalent of the nonlinear-attention interpolation error (Theorem 1).

``E(gamma) = gamma^2 y^T Q^2 y / n``, ``Q = (K^T X^T X K / n + gamma I_n)^{-1}``, tends to

    E(gamma) = -gamma^2 d/dgamma [ yh^T Qbar(gamma) yh ],

where ``Qbar`` is built from the bulk fixed point (``attn_lib.theory._bulk``) and the spiked
linear pencil (``attn_lib.theory._spiked``). The inputs are ``c``, ``snr``, the Gram matrix of
``mu, w_K, w_Q`` and the linearisation coefficients ``a1`` and ``b2 = nu - a1^2`` of ``f``
(``a2`` only enters rank-two terms orthogonal to the labels, and drops out). A full weight part
``alpha != 1`` is reduced to ``alpha = 1`` through :meth:`attn_lib.Setting.canonical`.

Softmax attention (:class:`~attn_lib.model.setting.Softmax`) is reduced to the entry-wise
kernel of ``f_beta`` (:mod:`attn_lib.theory.softmax`): its proportional limit is that of
:func:`~attn_lib.theory.softmax.entrywise_equivalent` at the effective ridge parameter
``gamma / s_n^2`` (:func:`~attn_lib.theory.softmax.effective_gamma`); its finite-size theory is
that of the column-normalised kernel (``attn_lib.theory._finite_size``), at the same effective
gammas.

Rank-``r`` weights (:class:`attn_lib.RankSetting`, ``W = alpha I + sum_k w_K^(k) w_Q^(k)T``)
go through the same bulk and a spiked pencil with ``1 + 2r`` vectors (``attn_lib.theory._spiked``,
"Rank r"). With ``n=...`` (entry-wise attention): the finite-size theory, exact when the latent
span of ``mu, w_K^(k), w_Q^(k)`` has dimension ``<= 3`` (``M_r = I + W_{K,r} W_{Q,r}^T``), the
reduced model otherwise (below).

Any key-query matrix (:class:`attn_lib.MatrixSetting`, logits ``x_i^T M x_j / sqrt(p)``) goes
to the any-matrix deterministic equivalent (:mod:`attn_lib.theory._matrix`: a linear pencil with
``M`` and ``M^T`` as deterministic blocks, ``f`` linearised at the logit scale
``||M||_F / sqrt(p)``), entry-wise attention only (a softmax ``MatrixSetting`` raises
``ValueError``: the softmax reduction is derived for rank-one weights).

Tokens with a general covariance (:class:`attn_lib.CovarianceSetting`, ``x_i = y_i mu + C^{1/2}
z_i``) go to :mod:`attn_lib.theory._covariance` (the any-matrix pencil with ``C`` in its Gaussian
blocks), entry-wise attention only; with ``n=...``, plus the finite-size shift of an isotropic
reduced model with the same coherent shift, cross terms and noise logit variance
(:func:`_covariance_shift`, :func:`~._covariance_shift.reduced_covariance_setting`).

Multi-head attention as GPT-2 computes it (:class:`attn_lib.HeadsSetting`: ``f`` per head at
the head's own scale, the heads' features side by side) goes to the per-head pencil
(:mod:`attn_lib.theory._heads`), entry-wise attention only (softmax raises ``ValueError``);
with ``n=...``, plus the finite-size shift of each head's reduced model weighted by the head's
share of the feature rows (:func:`_heads_shift`).

Reduced finite-size model (``n=...`` for a ``MatrixSetting`` or a ``RankSetting`` with a latent
span above 3; ``book/derivation_finite_size.md``, "Rank r and any matrix"): ``s_B`` keeps ``mu``
and the directions ``M mu, M^T mu`` of the matrix exactly, with an isotropic bulk of the
complement's logit variance (:func:`~._finite_size.reduced_setting`), and
``E = E_lim(s) + [E_n(s_B) - E_lim(s_B)]``, ``E_lim`` the any-matrix theory of the concrete
``p x p`` matrix (for a ``RankSetting``, ``alpha I_p + W_K^T W_Q``, solved in its latent span:
unlike the rank-``r`` limit it keeps the spikes' ``O(r/p)`` share of the logit variance, which
is order one for many strong pairs). It is exact when the matrix is ``s_B``'s (e.g.
:meth:`attn_lib.MatrixSetting.from_setting`) and neglects the cross terms of the kept
directions with the complement in the correction.

Special cases handled by the same code: ``a1 = 0`` (then ``Qbar = I/alpha``, and the error does
not depend on ``snr`` or the weights), linear ``f`` (``b2 = 0``: ``alpha = gamma``,
``kappa = tau = 0``), ``snr = 0``, weights orthogonal to ``mu``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence, cast

import numpy as np

from .._validation import check_bool, check_gammas, check_int, check_real, check_setting, check_settings
from ..model.data import latent_coordinates
from ..model.kernel import BLAS
from ..model.scale import feature_scale
from ..model.setting import CovarianceSetting, Entrywise, HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax
from . import _covariance, _heads, _matrix, domain, softmax
from ._bulk import BulkSolution, solve_bulk, spectral_g1
from ._conditional import conditional_error
from ._covariance_shift import reduced_covariance_setting
from ._errors import ConvergenceError
from ._finite_size import _restricted, finite_size_resolvent_form_batch, reduced_setting
from ._spiked import label_quadratic_form

__all__ = ["attention_error", "attention_error_batch", "attention_bulk", "heads_shift", "covariance_shift", "Linearisation",
           "linearisation", "gram_spectrum", "attention_resolvent_form", "BulkSolution",
           "ConvergenceError"]


@dataclass(frozen=True)
class Linearisation:
    """Coefficients of the Gaussian-equivalent kernel of a setting (canonical, ``alpha = 1``).

    ``K ~ a1 (X^T M X / p - diag) + sqrt(b2) W / sqrt(p) + a2/sqrt(2) (eta 1^T + 1 eta^T) / p``.

    Attributes
    ----------
    a1, a2, nu : float
        Hermite data of the centred ``f(alpha t)``.
    b2 : float
        ``nu - a1^2``, variance of the Wigner part.
    rho : float
        ``sqrt(c) a1``, the slope in ``sqrt(c) K``.
    """

    a1: float
    a2: float
    nu: float
    b2: float
    rho: float


def linearisation(setting: Setting | RankSetting) -> Linearisation:
    """Linearisation coefficients ``a1, a2, nu, b2, rho`` of ``setting`` (see :class:`Linearisation`).

    Under (masked) softmax attention: those of the kernel part of ``X A`` in units of its scale
    ``s_n`` (:func:`~attn_lib.theory.softmax.entrywise_equivalent`, ``f_beta``; at ``alpha = 1``
    ``a1 = beta``, ``nu = e^{beta^2} - 1``).
    """
    s = _entrywise(setting, None)
    h = s.hermite  # Hermite data of f(alpha t), i.e. of the canonical setting
    b2 = h.b2 if h.b2 > 1e-14 * max(h.nu, 1e-300) else 0.0
    return Linearisation(a1=h.a1, a2=h.a2, nu=h.nu, b2=b2, rho=float(np.sqrt(s.c) * h.a1))


def _params(settings: Sequence[Setting | RankSetting]
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[np.ndarray]]:
    """``c, rho, b2, snr`` (shape ``(B,)``) and the canonical Gram matrices (a list: their size
    ``1 + 2r`` may differ)."""
    c = np.array([s.c for s in settings])
    lin = [linearisation(s) for s in settings]
    rho = np.array([li.rho for li in lin])
    b2 = np.array([li.b2 for li in lin])
    canon = [s.canonical() for s in settings]
    snr = np.array([s.snr for s in canon])
    gram = [np.asarray(s.gram) for s in canon]
    return c, rho, b2, snr, gram


def _label_forms(flat: BulkSolution, snr: np.ndarray, gram: list[np.ndarray], G: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`~._spiked.label_quadratic_form` of every (setting, gamma), flat ``(B G,)``.

    The settings are grouped by the size of their Gram matrix (one Woodbury size per group);
    one group (all rank one, say) is a single call on the whole batch.
    """
    sizes = np.array([g.shape[0] for g in gram])
    if np.all(sizes == sizes[0]):
        return label_quadratic_form(flat, np.repeat(snr, G), np.repeat(np.array(gram), G, axis=0))
    q, dq = np.empty(flat.alpha.shape), np.empty(flat.alpha.shape)
    for m in np.unique(sizes):
        rows = np.flatnonzero(sizes == m)
        idx = (rows[:, None] * G + np.arange(G)).reshape(-1)
        part = BulkSolution(**{k: v[idx] for k, v in flat.__dict__.items()})
        q[idx], dq[idx] = label_quadratic_form(part, np.repeat(snr[rows], G),
                                               np.repeat(np.array([gram[b] for b in rows]), G, axis=0))
    return q, dq


_CONTINUATIONS = ("parallel", "grid")
#: The setting types of the vectorised theories (a MatrixSetting goes to ``_matrix``).
_TYPES = (Setting, RankSetting)


def _solve(settings: Sequence[Setting | RankSetting], g: np.ndarray, max_iter: int, continuation: str = "parallel"
           ) -> tuple[BulkSolution, np.ndarray, np.ndarray]:
    """Bulk solution and label form for settings (B,) x gammas (B, G); returns (bulk, q, dq).

    ``continuation="grid"`` follows each row's sorted gamma grid with warm starts (tangent
    predictor); ``"parallel"`` gives every (setting, gamma) its own continuation path from large
    gamma, all advanced together (fewer, larger vectorised steps: faster for curves).
    """
    if continuation not in _CONTINUATIONS:
        raise ValueError(f"continuation must be one of {_CONTINUATIONS}, got {continuation!r}")
    c, rho, b2, snr, gram = _params(settings)
    B, G = g.shape
    if continuation == "parallel" and G > 1:
        label = lambda b: repr(settings[b // G])  # noqa: E731
        bulk = solve_bulk(np.repeat(c, G), np.repeat(rho, G), np.repeat(b2, G), g.reshape(-1, 1),
                          max_iter=max_iter, label=label)
    else:
        label = lambda b: repr(settings[b])  # noqa: E731
        bulk = solve_bulk(c, rho, b2, g, max_iter=max_iter, label=label)
    flat = BulkSolution(**{k: np.asarray(v).reshape(-1) for k, v in bulk.__dict__.items()})
    try:
        q, dq = _label_forms(flat, snr, gram, G)
    except np.linalg.LinAlgError as exc:  # a singular Woodbury core: report, never NaN
        raise ConvergenceError(f"singular spiked Woodbury system for one of {len(settings)} settings "
                               f"(first: {settings[0]!r}) on gammas {g.min():.3g}..{g.max():.3g}") from exc
    q, dq = q.reshape(B, G), dq.reshape(B, G)
    for name, arr in (("q", q), ("dq", dq)):
        if not np.all(np.isfinite(arr)):
            b, k = np.argwhere(~np.isfinite(arr))[0]
            raise ConvergenceError(f"non-finite label form {name} for {settings[b]!r} at gamma={g[b, k]:.6g}")
    return bulk, q, dq


#: The attention kinds of the error functions (softmax by reduction, proportional limit only).
_KINDS = (Entrywise, Softmax)


def _entrywise(setting: object, n: object) -> Setting | RankSetting:
    """``setting`` checked; in the proportional limit (``n`` None) a softmax one is replaced by
    its entry-wise equivalent, for the finite-size theory it is kept (masked only)."""
    if isinstance(setting, (MatrixSetting, HeadsSetting)):
        raise ValueError("setting: this function takes an attn_lib.Setting or RankSetting; the "
                         f"theory of an attn_lib.{type(setting).__name__} is attention_error / "
                         "attention_resolvent_form (entry-wise)")
    s = check_setting(setting, types=_TYPES, attention=_KINDS)
    if isinstance(s.attention, Softmax) and n is None:
        s = softmax.entrywise_equivalent(s)
    return s


def _check_n(n: object, setting: Setting | RankSetting | MatrixSetting | HeadsSetting) -> int:
    if isinstance(setting, (RankSetting, MatrixSetting)) and isinstance(setting.attention, Softmax):
        raise ValueError(f"n={n!r}: the finite-size softmax theory takes an attn_lib.Setting only "
                         f"(its canonical form and tail are derived for rank-one weights), not a "
                         f"{type(setting).__name__}; simulate it with attn_lib.simulate.errors")
    n = check_int(n, "n", low=8)
    if setting.p(n) < 8:
        raise ValueError(f"n must give p = round(c n) >= 8 for the finite-size theory; got n={n}, "
                         f"c={setting.c} (p={setting.p(n)})")
    return n


def _exact(setting: Setting | RankSetting) -> bool:
    """Whether the finite-size model of ``setting`` is exact: a latent span of dimension ``<= 3``."""
    return isinstance(setting, Setting) or latent_coordinates(setting).shape[0] <= 3


def _finite_size(settings: Sequence[Setting | RankSetting | MatrixSetting], gammas: Sequence[np.ndarray],
                 n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """``(q, dq)`` of the finite-size theory for each setting (checked by :func:`_check_n`).

    A softmax setting is solved in its canonical form (:func:`~attn_lib.theory.softmax.canonical`,
    the normalised kernel in units of ``sqrt(p) / (n - 1)``) at ``lam gamma``,
    ``lam = (s_n / s_n^canonical)^2 = e^{-beta^2 (alpha^2 - 1)}``, so that ``gammas`` are
    effective ridge parameters as in the limit: ``q = lam q_c(lam gamma)``,
    ``dq = lam^2 dq_c(lam gamma)``.

    A ``RankSetting`` whose latent span has dimension above 3 and a ``MatrixSetting`` take the
    reduced model ``s_B`` (``_finite_size.reduced_setting``): their proportional limit plus
    ``s_B``'s finite-size shift, ``q = q_lim(s) + [q_fs(s_B) - q_lim(s_B)]`` (the same for ``dq``),
    ``q_lim`` the any-matrix theory of the concrete ``p x p`` matrix of ``s`` and of ``s_B``
    (:func:`_limit_form` with ``p``).
    """
    for s in settings:
        n = _check_n(n, s)
        if isinstance(s.attention, Softmax) and softmax.tail(cast(Setting, s), n) >= 1.0:  # _check_n
            raise ValueError(f"n={n}: 2 beta ||M_r|| / sqrt(p) = {softmax.tail(cast(Setting, s), n):.3g} >= 1 for "
                             f"{s!r}: the softmax weights have an infinite variance over the latent "
                             "types (a few keys carry the normalising sums), and the finite-size "
                             "theory does not apply; a larger n or a smaller beta")
    exact = [not isinstance(s, MatrixSetting) and _exact(s) for s in settings]
    # exact: a Setting or a RankSetting; else a RankSetting or a MatrixSetting (_exact)
    fs = [cast("Setting | RankSetting", s) if e else reduced_setting(cast("RankSetting | MatrixSetting", s), n)
          for s, e in zip(settings, exact)]
    canon = [softmax.canonical(cast(Setting, s)) if isinstance(s.attention, Softmax) else s  # _check_n
             for s in fs]
    lam = [(softmax.scale(s, n) / softmax.scale(c, n)) ** 2 if isinstance(s.attention, Softmax)
           else 1.0 for s, c in zip(fs, canon)]
    out = finite_size_resolvent_form_batch(canon, [lam_b * np.asarray(g) for lam_b, g in zip(lam, gammas)], n)
    out = [(lam_b * q, lam_b * lam_b * dq) for lam_b, (q, dq) in zip(lam, out)]
    for b in np.flatnonzero(~np.array(exact, dtype=bool)).tolist():
        g = np.asarray(gammas[b], dtype=float)
        p = settings[b].p(n)
        # the any-matrix limit of the concrete p x p matrices of s and s_B (so that M = s_B's
        # matrix gives s_B's finite-size theory exactly); a RankSetting's, s_B's included, in
        # its latent span (O(r^3) per oracle call and exact: _matrix._Blocks)
        q_s, dq_s = _limit_form(settings[b], g, p)
        q_b, dq_b = _limit_form(fs[b], g, p)
        out[b] = q_s + out[b][0] - q_b, dq_s + out[b][1] - dq_b
    return out


def _limit_form(setting: Setting | RankSetting | MatrixSetting, g: np.ndarray, p: int | None = None
                ) -> tuple[np.ndarray, np.ndarray]:
    """``(q, dq)`` of the proportional limit (entry-wise attention), shaped like ``g``.

    With ``p``, a ``RankSetting`` takes the any-matrix theory of its concrete matrix
    ``alpha I_p + W_K^T W_Q`` instead of the rank-``r`` limit: the ``O(r / p)`` share of the
    spikes in the traces and in the logit scale ``sigma^2 = alpha^2 + ||W_K^T W_Q||_F^2 / p`` is
    kept (the rank-``r`` limit drops it; at ``r = 32`` it can be several times ``alpha^2``),
    solved in the latent span (``complement`` of :func:`~._matrix.matrix_resolvent_form`).
    """
    if isinstance(setting, RankSetting) and p is not None:
        coords = latent_coordinates(setting)
        A = _restricted(coords, setting.alpha)
        q, E = _matrix.matrix_resolvent_form(setting.c, A, coords[:, 0], setting.f, g.reshape(-1),
                                             complement=(setting.alpha, p - A.shape[0]))
    elif isinstance(setting, MatrixSetting):
        q, E = _matrix.matrix_resolvent_form(setting.c, setting.M, setting.mu, setting.f, g.reshape(-1))
    else:
        _, q, dq = _solve([setting], g.reshape(1, -1), 50)
        return q.reshape(g.shape), dq.reshape(g.shape)
    return q.reshape(g.shape), (-E / g.reshape(-1) ** 2).reshape(g.shape)


def _refuse_softmax(s: MatrixSetting | HeadsSetting, weights: str) -> None:
    """``ValueError`` for softmax attention with ``weights`` other than rank one."""
    if isinstance(s.attention, Softmax):
        raise ValueError(f"setting: no theory for softmax attention with {weights}: the softmax "
                         "reduction is derived for rank-one weights (attn_lib.Setting) only; "
                         "simulate it with attn_lib.simulate.errors")


def _matrix_form(setting: MatrixSetting, g: np.ndarray, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(q, dq)`` of the any-matrix theory (:mod:`attn_lib.theory._matrix`) for ``setting``.

    Entry-wise attention only (a softmax setting raises ``ValueError``). With ``n``, the
    reduced finite-size model (:func:`_finite_size`). ``dq = -E / gamma^2`` from the error of
    :func:`~._matrix.matrix_resolvent_form`. Run with one BLAS thread: its many ``p x p`` solves
    gain nothing from more, and on a shared machine a threaded BLAS made the any-matrix theory
    at ``p = 128`` 70 times slower (9.8 s against 0.14 s, load average 18 on 2 cores).
    """
    s = check_setting(setting, types=(MatrixSetting,), attention=_KINDS)
    _refuse_softmax(s, "a general matrix (attn_lib.MatrixSetting)")
    with BLAS.limit(limits=1):  # many small solves: far faster on a loaded machine
        if n is not None:
            return _finite_size([s], [g], n)[0]
        return _limit_form(s, g)


def _covariance_form(setting: CovarianceSetting, g: np.ndarray, n: int | None
                     ) -> tuple[np.ndarray, np.ndarray]:
    """``(q, dq)`` of the covariance theory (:mod:`attn_lib.theory._covariance`), shaped like
    ``g``; entry-wise attention only (``ValueError`` otherwise). With ``n``, plus the finite-size
    shift of the reduced covariance model (:func:`_covariance_shift`)."""
    s = check_setting(setting, types=(CovarianceSetting,), attention=_KINDS)
    _refuse_softmax(s, "tokens of a general covariance (attn_lib.CovarianceSetting)")
    if n is not None:
        n = _check_n(n, s)
    with BLAS.limit(limits=1):
        q, E = _covariance.setting_form(s, g.reshape(-1))
        q, dq = q.reshape(g.shape), (-E / g.reshape(-1) ** 2).reshape(g.shape)
        if n is None:
            return q, dq
        shift = _covariance_shift(s, g, n)
    return q + shift[0], dq + shift[1]


def _covariance_shift(setting: CovarianceSetting, g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The finite-size shift of the covariance theory, ``(dq, d dq)`` shaped like ``g``:
    ``q_n(s_B) - q_lim(s_B)`` (the same for ``dq``), ``s_B`` the isotropic reduced model of
    :func:`~._covariance_shift.reduced_covariance_setting` (coherent shift, cross terms and noise
    logit variance of the covariance setting; ``book/derivation_covariance.md``, "Finite size")."""
    sB = reduced_covariance_setting(setting, n)
    q_n, dq_n = _finite_size([sB], [g], n)[0]
    q_l, dq_l = _limit_form(sB, g, setting.p(n))
    return q_n - q_l, dq_n - dq_l


def covariance_shift(setting: CovarianceSetting, gammas: object, *, n: int) -> np.ndarray:
    """The finite-size shift of the covariance theory's error, shaped like ``gammas``.

    ``attention_error(setting, gammas, n=n) - attention_error(setting, gammas)`` without the
    limit (:func:`_covariance_shift`), for a caller that adds it to another limit (the
    two-covariance theory, :func:`attn_lib.studies.real_tokens.class_theory`). Outside the
    measured domain a :class:`~attn_lib.DomainWarning`, as for :func:`attention_error`.

    Parameters
    ----------
    setting : CovarianceSetting
        Entry-wise attention, ``mu != 0``.
    gammas : float or array_like of shape (G,)
        Raw ridge parameters (as :func:`attention_error` without ``relative``).
    n : int
        Number of tokens, ``round(c n) = p``.

    Raises
    ------
    ValueError
        For a softmax setting, ``mu = 0``, an ``n`` that does not fit ``p``, and as
        :func:`attention_error`.
    """
    return _shift_error(setting, gammas, n, "covariance_shift", CovarianceSetting,
                        "tokens of a general covariance (attn_lib.CovarianceSetting)", _covariance_shift)


def _shift_error(setting: Any, gammas: object, n: int, call: str, kind: type,
                 what: str, shift: Callable[[Any, np.ndarray, int], tuple[np.ndarray, np.ndarray]]
                 ) -> np.ndarray:
    """A public finite-size shift of the error, ``-gamma^2 d(dq)``, shaped like ``gammas``: the
    domain check of ``call``, ``setting`` checked as a ``kind`` of entry-wise attention (a
    softmax one refused, naming ``what``), ``n`` and ``gammas`` checked, then ``shift(setting,
    g, n)`` (``(dq, d dq)``) with one BLAS thread."""
    _in_domain(setting, n, call, False)
    s: Any = check_setting(setting, types=(kind,), attention=_KINDS)
    _refuse_softmax(s, what)
    n = _check_n(n, s)
    g = check_gammas(gammas)
    with BLAS.limit(limits=1):
        dq = shift(s, g, n)[1]
    return -np.asarray(g) ** 2 * dq


def _heads_shift(setting: HeadsSetting, g: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The finite-size shift of the multi-head theory, ``(dq, d dq)`` shaped like ``g``.

    ``sum_h w_h [q_n(s_B,h) - q_lim(s_B,h)]`` (the same for ``dq``), ``w_h = |P_h| / p`` the
    share of the feature rows that head ``h`` writes and ``s_B,h`` the reduced model of head
    ``h``'s :class:`~attn_lib.MatrixSetting` (:func:`~._finite_size.reduced_setting`: ``mu``,
    ``B_h mu`` and ``B_h^T mu`` kept exactly; module docstring of :mod:`~attn_lib.theory._heads`,
    "Finite size"). ``n`` is checked by :func:`_check_n` and ``setting.p(n)``.
    """
    p = setting.p(n)
    sB = [reduced_setting(MatrixSetting(c=setting.c, M=B, mu=setting.mu, f=setting.f), n)
          for B in setting.heads]
    fs = np.array(_finite_size(sB, [g] * len(sB), n))          # (H, 2, *g.shape): q, dq
    lim = np.array([_limit_form(b, g, p) for b in sB])
    w = np.array([b.size for b in setting.blocks]) / p
    shift = np.tensordot(w, fs - lim, axes=1)
    return shift[0], shift[1]


def heads_shift(setting: HeadsSetting, gammas: object, *, n: int) -> np.ndarray:
    """The finite-size shift of the multi-head error, shaped like ``gammas``.

    ``attention_error(setting, gammas, n=n) - attention_error(setting, gammas)`` without the
    limit (:func:`_heads_shift`: each head's reduced-model shift, weighted by the head's share
    of the feature rows), a few seconds at ``p = 768`` where the limit takes a minute: for a
    caller that has the limit already. Outside the measured domain a
    :class:`~attn_lib.DomainWarning`, as for :func:`attention_error`.

    Parameters
    ----------
    setting : HeadsSetting
        Entry-wise attention.
    gammas : float or array_like of shape (G,)
    n : int
        Number of tokens, ``round(c n) = p``.

    Raises
    ------
    ValueError
        For a softmax setting, an ``n`` that does not fit ``p``, and as :func:`attention_error`.
    """
    return _shift_error(setting, gammas, n, "heads_shift", HeadsSetting,
                        "several heads (attn_lib.HeadsSetting)", _heads_shift)


def _heads_form(setting: HeadsSetting, g: np.ndarray, n: int | None) -> tuple[np.ndarray, np.ndarray]:
    """``(q, dq)`` of the multi-head theory (:mod:`attn_lib.theory._heads`) for ``setting``,
    shaped like ``g``; entry-wise attention only (a softmax setting raises ``ValueError``). With
    ``n`` (``round(c n) = p``), plus the finite-size shift of the heads' reduced models
    (:func:`_heads_shift`)."""
    s = check_setting(setting, types=(HeadsSetting,), attention=_KINDS)
    _refuse_softmax(s, "several heads (attn_lib.HeadsSetting)")
    if n is not None:
        n = _check_n(n, s)                       # also round(c n) = p (HeadsSetting.p)
    with BLAS.limit(limits=1):
        q, E = _heads.heads_resolvent_form(s.c, s.heads, s.mu, s.f, g.reshape(-1))
        q, dq = q.reshape(g.shape), (-E / g.reshape(-1) ** 2).reshape(g.shape)
        if n is None:
            return q, dq
        shift = _heads_shift(s, g, n)
    return q + shift[0], dq + shift[1]


def attention_resolvent_form(setting: Setting | RankSetting | MatrixSetting | HeadsSetting,
                             gammas: object, *,
                             n: int | None = None, max_iter: int = 50,
                             continuation: str = "parallel", strict: bool = False
                             ) -> tuple[np.ndarray, np.ndarray]:
    """``yh^T Qbar yh`` (the limit of ``y^T Q y / n``) and its ``gamma``-derivative, each shaped like ``gammas``.

    With ``n`` given, the finite-size equivalent (``attn_lib.theory._finite_size``;
    ``max_iter`` and ``continuation`` then do not apply; the reduced model for a latent span
    above 3 and a ``MatrixSetting``, see the module docstring). A
    :class:`~attn_lib.MatrixSetting` goes to the any-matrix theory
    (:func:`attn_lib.theory._matrix.matrix_resolvent_form`; entry-wise), a
    :class:`~attn_lib.HeadsSetting` to the multi-head one
    (:func:`attn_lib.theory._heads.heads_resolvent_form`; entry-wise; with ``n``, plus the
    heads' finite-size shift).
    Outside the measured domain a :class:`~attn_lib.DomainWarning` (``strict=True``:
    :class:`~attn_lib.DomainError`), as for :func:`attention_error`.
    """
    _in_domain(setting, n, "attention_resolvent_form", strict)
    return _resolvent_form(setting, gammas, n, max_iter, continuation)


def _in_domain(setting: object, n: object, call: str, strict: object) -> None:
    """The inputs checked, then the domain (:func:`attn_lib.theory.domain.check`) of ``call``."""
    s = check_setting(setting, types=_TYPES + (MatrixSetting, HeadsSetting), attention=_KINDS)
    if n is not None:
        n = check_int(n, "n", low=8)
    strict = check_bool(strict, "strict")
    if isinstance(s.attention, Softmax) and not s.attention.mask:
        return  # refused by the call (the softmax theory needs the mask)
    domain.check(s, n, call=call, strict=strict, stacklevel=3)


def _resolvent_form(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object,
                    n: int | None, max_iter: int, continuation: str
                    ) -> tuple[np.ndarray, np.ndarray]:
    """:func:`attention_resolvent_form` without the domain check."""
    if isinstance(setting, CovarianceSetting):
        return _covariance_form(setting, check_gammas(gammas), n)
    if isinstance(setting, MatrixSetting):
        return _matrix_form(setting, check_gammas(gammas), n)
    if isinstance(setting, HeadsSetting):
        return _heads_form(setting, check_gammas(gammas), n)
    s = _entrywise(setting, n)
    g = check_gammas(gammas)
    if n is not None:
        return _finite_size([s], [g], n)[0]
    _, q, dq = _solve([s], g.reshape(1, -1), max_iter, continuation)
    return q.reshape(g.shape), dq.reshape(g.shape)


def attention_error(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object, *,
                    n: int | None = None, max_iter: int = 50,
                    continuation: str = "parallel", strict: bool = False,
                    relative: bool = False, conditional: int = 0) -> np.ndarray:
    """Deterministic equivalent of the attention interpolation error.

    ``E(gamma) = -gamma^2 d/dgamma yh^T Qbar yh`` (see the module docstring and
    ``book/derivation_attention.md``). Without ``n`` this is the proportional limit; with ``n``
    it is the finite-size ("renormalised") equivalent (``book/derivation_finite_size.md``),
    which keeps the latent part of the kernel argument exactly and is the one to use when the
    coherent shift ``setting.delta(n)`` is not small. The two agree as ``n`` grows.

    Parameters
    ----------
    setting : Setting, RankSetting or MatrixSetting
        Any ``c > 0``, ``snr >= 0``, weight geometry, nonlinearity and ``alpha``; a
        :class:`~attn_lib.model.setting.RankSetting` (rank-``r`` weights, the spiked pencil with
        ``1 + 2r`` vectors; with ``n``, see below); entry-wise or (masked) softmax
        attention. A :class:`~attn_lib.model.setting.MatrixSetting` (any ``p x p`` matrix
        ``M``, logits ``x_i^T M x_j / sqrt(p)`` with ``i`` the key and ``j`` the query: rows of
        ``M`` index keys; ``M.T`` is another model): the any-matrix theory (:mod:`attn_lib.theory._matrix`, ``f`` linearised at
        the logit scale ``||M||_F / sqrt(p)``), entry-wise attention only (softmax raises
        ``ValueError``); it costs ``O(p^3)`` per oracle call, a few seconds for three ``gamma``
        at ``p = 768`` (it runs with one BLAS thread, as does the multi-head theory). A
        :class:`~attn_lib.model.setting.HeadsSetting` (multi-head attention as GPT-2 computes
        it): the per-head pencil (:mod:`attn_lib.theory._heads`), entry-wise attention only
        (softmax raises ``ValueError``; with ``n``, below). A
        :class:`~attn_lib.model.setting.CovarianceSetting` (tokens ``y_i mu + C^{1/2} z_i``,
        e.g. from real data): the pencil with ``C`` in its Gaussian blocks
        (:mod:`attn_lib.theory._covariance`), entry-wise attention only; with ``n``, plus the
        finite-size shift of its isotropic reduced model (module docstring). Under softmax
        ``gammas`` are effective ridge parameters ``gamma_raw / s_n^2``
        (:func:`attn_lib.theory.softmax.effective_gamma`): the raw features ``X A`` have the
        scale ``s_n ~ sqrt(p) / n``. The simulator takes the same ``gamma``
        (:func:`attn_lib.simulation.simulate.errors` converts it), for every attention kind.
    gammas : float or array_like of shape (G,)
        Positive ridge parameters (any order; solved along the sorted grid).
    n : int, optional
        Number of tokens (``p = round(c n)``, at least 8; for a ``MatrixSetting``,
        ``round(c n)`` must be ``M``'s ``p``): switches on the finite-size theory. Exact for a
        ``Setting`` and for a ``RankSetting`` whose latent span has dimension ``<= 3``; the
        reduced model (module docstring) for a larger span and for a ``MatrixSetting``
        (measured on GPT-2's normalised layers with an aligned ``mu``, n = 1536: within
        0.008 of Monte Carlo, where the limit is up to 0.026 above it). For a ``HeadsSetting``
        (``round(c n) = p``) the limit plus the heads' reduced-model shifts (module docstring;
        GPT-2's 12 layers, aligned ``mu``, n = 1536: within 0.005 of Monte Carlo at unit scale
        and 0.0064 at GPT-2's, where the limit is up to 0.013 and 0.016 above it). Under softmax
        (``Setting`` only; a softmax ``RankSetting`` raises ``ValueError``) the normalising sums
        are kept on the latent types, and a setting with ``2 beta ||M_r|| / sqrt(p) >= 1``,
        :func:`~attn_lib.theory.softmax.tail`, raises ``ValueError``.
    max_iter : int, default 50
        Newton iteration cap per continuation step (proportional limit only).
    continuation : {"parallel", "grid"}, default "parallel"
        ``"grid"``: follow the sorted grid with warm starts; ``"parallel"``: one vectorised
        continuation path per gamma (faster for curves). Both give the same values.
    strict : bool, default False
        Raise :class:`~attn_lib.DomainError` instead of warning outside the domain (below).
    relative : bool, default False
        Read ``gammas`` as ``g = gamma / tau``, ``tau`` the model's mean feature eigenvalue
        (:func:`attn_lib.model.scale.feature_scale`): the error at ``gamma = tau g``, for
        comparison with ridge at ``c g`` (``ridge_error(..., relative=True)``) and with
        ``simulate.errors(..., relative=True)``, the book's equal-``gamma / tau`` convention. Under
        masked softmax, with ``n`` the effective ``tau_A(n) g / s_n^2`` of the simulator; without
        ``n`` its limit ``(tau_K + e^{beta^2 (sigma^2 - 1)}) g``.

    Returns
    -------
    ndarray shaped like ``gammas``, values in ``[0, 1]``.

    Raises
    ------
    ConvergenceError
        When the fixed point cannot be solved (never returns NaN).
    DomainError
        With ``strict=True``, outside the domain.

    Warns
    -----
    DomainWarning
        When ``setting`` (at ``n``) is outside the conditions under which the book measured
        this theory against Monte Carlo (:mod:`attn_lib.theory.domain` lists them with their
        sources): for the limit, a coherent shift ``delta`` above 0.3 at ``n = 2048``
        (0.05 in units of the logit scale for a matrix or a head), softmax ``beta`` past the
        tail edge :func:`~attn_lib.theory.softmax.tail_beta` or ``beta delta`` above 0.3; for
        the finite-size theory, ``n < 256``, ``delta > 3`` or ``beta`` past the tail edge at
        ``n``; and for a matrix a logit scale ``||M||_F / sqrt(p)`` more than 4 times away
        from one (normalise it with :func:`attn_lib.studies.gpt2.normalise`). The message says
        by how much and which call to use instead.

    Notes
    -----
    Where the finite-size theory stops holding: for an ``f`` with a jump (``sign``) and a spike
    that dominates the full part, ``|w_K| |w_Q| / (alpha sqrt(p)) >> 1``, the mean kernel is a
    step function of the latent types and the Gauss–Hermite rule over them does not converge.
    Measured at ``alpha = 1e-3``, ``|w_K| = |w_Q| = 3``, three latent directions, ``n = 1536``,
    ``gamma = 0.1``: 6 and 8 nodes per direction give 0.652 and 0.520, Monte Carlo
    0.586 ± 0.016 (tanh in the same setting: 0.583 and 0.583, Monte Carlo 0.600 ± 0.014). The
    memory and time stay bounded (``benchmarks/finite_size_memory.py``).

    How small ``n`` may be: the finite-size theory is a leading-order equivalent. It leaves
    an ``O(1/n)`` error of its own (about ``2/n`` for the quadratic at ``c = 1/2``,
    ``gamma = 1e-4``) and, for an ``f`` with an ``He2`` part at the shifts (``a2 != 0`` or
    ``F0''(h) != 0``), an ``O(p^{-1/2})`` error from the dependence of the kernel's residual on
    the tokens, which the Gaussian integration does not see (``book/derivation_finite_size.md``,
    "The He2 residual"). On the 29 settings of ``benchmarks/small_n.py`` (Monte Carlo standard
    error at most 0.002) the largest error is 0.0102 at ``n = 512`` (3 of 87 points beyond 4
    standard errors, all the quadratic at ``c = 1/2``, ``p = 256``) and 0.0133 at ``n = 256``.
    The conditional equivalent (``conditional=32``) lowers that point to 0.0096 and is within
    0.0086 on 22 held-out settings (``book/derivation_finite_size.md``, "The conditional
    equivalent at small n"); keeping the tokens' norms as well changes nothing measurable.
    """
    _in_domain(setting, n, "attention_error", strict)
    conditional = check_int(conditional, "conditional", low=0)
    if conditional and n is None:
        raise ValueError("conditional: the conditional equivalent is a finite-size theory; "
                         "pass n as well")
    if check_bool(relative, "relative"):
        gammas = _relative(setting, check_gammas(gammas), n)
    if conditional:
        assert n is not None
        return conditional_error(cast(Setting, setting), gammas, n, draws=conditional).mean
    _, dq = _resolvent_form(setting, gammas, n, max_iter, continuation)
    g = np.asarray(gammas, dtype=float)
    return -(g ** 2) * dq


def _relative(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, g: np.ndarray,
              n: int | None) -> np.ndarray:
    """The ``gamma`` of the theory at ``gamma / tau = g`` (``relative=True`` of :func:`attention_error`)."""
    if isinstance(setting.attention, Softmax) and setting.attention.mask:
        if n is not None:
            return softmax.effective_gamma(setting, feature_scale(setting, n=n) * g, n)
        twin = softmax.entrywise_equivalent(setting)
        b, sigma = setting.attention.beta, setting.logit_scale
        return (feature_scale(twin) + np.exp(b * b * (sigma * sigma - 1.0))) * g
    return feature_scale(setting) * g


def attention_error_batch(settings: Sequence[Setting | RankSetting], gamma: object, *, n: int | None = None,
                          max_iter: int = 50, strict: bool = False) -> np.ndarray:
    """The error of many settings at once, vectorised across settings.

    Parameters
    ----------
    settings : sequence of Setting or RankSetting, length B
        Ranks may be mixed (the proportional limit groups them by ``r``). A
        :class:`~attn_lib.MatrixSetting` raises ``ValueError`` (its theory is not vectorised:
        call :func:`attention_error` on each).
    gamma : float or array_like of shape (B,) or (B, G)
        One ``gamma`` for all, one per setting, or a curve per setting.
    n : int, optional
        Number of tokens: the finite-size equivalent (as :func:`attention_error` with ``n``),
        solved in batches of settings of similar size, every (setting, gamma) of a batch
        advanced by one vectorised fixed-point iteration (``attn_lib.theory._finite_size``).
    max_iter : int, default 50
        Newton iteration cap per continuation step (proportional limit only).
    strict : bool, default False
        Raise :class:`~attn_lib.DomainError` instead of warning when a setting is outside the
        domain (as :func:`attention_error`; one warning for the whole batch, with the count).

    Returns
    -------
    ndarray of shape ``(B,)`` (scalar or per-setting ``gamma``) or ``(B, G)``.

    Raises
    ------
    ConvergenceError
        When the fixed point of any setting cannot be solved (never returns NaN).
    """
    checked = check_settings(settings, types=_TYPES + (MatrixSetting, HeadsSetting), attention=_KINDS)
    for s in checked:
        if isinstance(s, (MatrixSetting, HeadsSetting)):
            raise ValueError(f"settings: attention_error_batch does not take an attn_lib."
                             f"{type(s).__name__} (its theory is not vectorised); call "
                             "attention_error on each")
    if n is not None:
        n = check_int(n, "n", low=8)
    domain.check(checked, n, call="attention_error_batch", strict=check_bool(strict, "strict"))
    settings = [_entrywise(s, n) for s in checked]
    g = np.asarray(gamma, dtype=float)
    B = len(settings)
    if g.ndim == 0:
        g2 = np.full((B, 1), check_gammas(g))
    elif g.ndim == 1:
        if g.shape[0] != B:
            raise ValueError(f"gamma must be a scalar, shape ({B},) or ({B}, G); got shape {g.shape}")
        g2 = check_gammas(g).reshape(B, 1)
    elif g.ndim == 2 and g.shape[0] == B:
        check_gammas(g.reshape(-1))
        g2 = g
    else:
        raise ValueError(f"gamma must be a scalar, shape ({B},) or ({B}, G); got shape {g.shape}")
    if n is not None:
        dq = np.array([d for _, d in _finite_size(settings, list(g2), n)])
    else:
        _, _, dq = _solve(settings, g2, max_iter)
    out = -(g2 ** 2) * dq
    return out[:, 0] if g.ndim < 2 else out


def attention_bulk(setting: Setting | RankSetting, gammas: object, *, max_iter: int = 50) -> BulkSolution:
    """Bulk fixed-point solution ``(alpha, kappa, tau)`` and derivatives, arrays shaped like ``gammas``.

    It depends on ``c``, ``a1`` and ``b2`` only; its ``.error`` is the answer for ``mu = 0``
    (random inputs). Under (masked) softmax attention ``gammas`` are effective ridge
    parameters ``gamma / s_n^2`` and the solution is that of the entry-wise kernel of
    ``f_beta`` (:func:`linearisation`), as in :func:`attention_error`.
    """
    s = _entrywise(setting, None)
    g = check_gammas(gammas)
    lin = linearisation(s)
    sol = solve_bulk(s.c, lin.rho, lin.b2, g.reshape(1, -1), max_iter=max_iter,
                     label=lambda b: repr(s))
    return BulkSolution(**{k: np.asarray(v).reshape(g.shape) for k, v in sol.__dict__.items()})


def gram_spectrum(setting: Setting | RankSetting, x: object, *, eta: float = 1e-2) -> np.ndarray:
    """Limiting eigenvalue density of ``Phi^T Phi / n`` at ``mu = 0`` (continuous part).

    Stieltjes inversion ``rho(x) = Im g1(x + i eta) / pi`` of the bulk trace
    ``g1(z) = lim tr(Phi^T Phi / n - z)^{-1} / n`` with the fixed point solved at the complex
    ``gamma = -z``, continued along the grid from the right end. ``g1`` is computed with a fine
    Gauss–Chebyshev rule (the poles of the integrand come within ``~eta`` of the support).

    Parameters
    ----------
    setting : Setting
    x : array_like of shape (M,)
        Finite points ``> 0`` (sorted internally).
    eta : float, default 1e-2
        Imaginary part of ``z``; the density is smoothed at that scale (a Cauchy kernel of
        width ``eta``). The cost grows like ``1/eta``: about 1 s for 200 points at ``1e-2``,
        10-50 s at ``1e-3``.

    Returns
    -------
    ndarray shaped like ``x``. For ``c < 1`` the law also has an atom ``1 - c`` at zero.
    """
    s = check_setting(setting, types=_TYPES)
    eta = check_real(eta, "eta", low=0.0, low_open=True)
    xs = np.asarray(x, dtype=float)
    if xs.ndim != 1 or xs.size == 0 or not np.all(np.isfinite(xs)) or np.any(xs <= 0):
        raise ValueError("x must be a non-empty 1-D array of finite points in (0, inf)")
    lin = linearisation(s)
    return spectral_g1(s.c, lin.rho, lin.b2, xs, eta, label=repr(s)).imag / np.pi

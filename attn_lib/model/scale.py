r"""The scale of a model's features: the unit in which its ridge parameter is read.

``E(gamma)`` is not scale free: features ``s Phi`` have ``E_{s Phi}(s^2 gamma) = E_Phi(gamma)``.
Two conventions of the library rest on the scales here:

* **one gamma for theory and simulation.** Masked softmax attention has raw features ``X A``
  of the scale ``s_n = sqrt(p) e^{-beta^2 (sigma^2 - 1) / 2} / (n - 1)`` (:func:`softmax_scale`)
  times the entry-wise kernel of ``f_beta``; every public call (the simulator and the theory)
  reads a softmax ``gamma`` as the **effective** ridge parameter ``gamma_raw / s_n^2``, in the
  units of that kernel (:mod:`attn_lib.theory.softmax`), so the same ``gamma`` goes to both.
  Entry-wise attention, unmasked softmax (``A`` close to ``I``) and ridge take ``gamma`` as it is.
* **equal gamma / tau** (``relative=True`` of :func:`attn_lib.simulation.simulate.errors`,
  :func:`attn_lib.theory.attention_error` and :func:`attn_lib.theory.ridge_error`): each model at
  its own ``gamma = g tau``, ``tau`` its mean feature eigenvalue (:func:`feature_scale`), the
  book's fair comparison of two models.

Both are predictions of the model (Gaussian moments of the tokens and the Hermite data of
``f``), not measured on a draw.
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast

import numpy as np

from .._validation import check_bool, check_choice, check_int, check_setting
from .setting import (ENTRYWISE, BaseSetting, CovarianceSetting, Entrywise, HeadsSetting, MatrixSetting,
                      RankSetting, Setting, Softmax)

__all__ = ["MODELS", "softmax_scale", "feature_scale"]

#: The models whose feature scale is known.
MODELS = ("attention", "ridge")
_TYPES = (Setting, RankSetting, MatrixSetting, HeadsSetting)


def _masked_softmax(setting: object) -> BaseSetting:
    s = check_setting(setting, types=_TYPES, attention=(Softmax,))
    if not cast(Softmax, s.attention).mask:
        raise ValueError("setting.attention: the softmax theory needs the self-pairs masked "
                         "(Softmax(beta, mask=True)); without the mask A is close to the identity")
    return s


def _head_scales(s: BaseSetting, n: int) -> np.ndarray:
    """``s_n`` of each head (one for a setting with one logit scale)."""
    sig = s.logit_scales if isinstance(s, HeadsSetting) else np.array([s.logit_scale])
    b = cast(Softmax, s.attention).beta
    return np.sqrt(s.p(n)) * np.exp(-0.5 * b * b * (sig * sig - 1.0)) / (n - 1)


def softmax_scale(setting: BaseSetting, n: int) -> float:
    r"""Scale ``s_n = sqrt(p) e^{-beta^2 (sigma^2 - 1) / 2} / (n - 1)`` of the kernel part of ``X A``.

    ``X G / (n - 1) = s_n X K`` with ``K`` the entry-wise kernel of ``f_beta``
    (:func:`attn_lib.theory.softmax.entrywise_equivalent`; ``sigma`` the setting's logit scale,
    ``s_n = sqrt(p) / (n - 1)`` at ``sigma = 1``). For several heads, whose scales differ, the
    root mean square over the feature rows, ``sqrt(sum_h w_h s_{n,h}^2)`` (``w_h`` the share of
    rows head ``h`` writes): the common ``s_n`` when the heads share one logit scale.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        With masked :class:`~attn_lib.model.setting.Softmax` attention.
    n : int
        Tokens, at least 2 (a matrix or heads: the ``n`` of their ``p``).
    """
    s = _masked_softmax(setting)
    n = check_int(n, "n", low=2)
    if isinstance(s, HeadsSetting):
        w = np.array([b.size for b in s.blocks]) / s.p()
        return float(np.sqrt(np.sum(w * _head_scales(s, n) ** 2)))
    b, sigma = cast(Softmax, s.attention).beta, s.logit_scale
    return float(np.sqrt(s.p(n)) * np.exp(-0.5 * b * b * (sigma * sigma - 1.0)) / (n - 1))


def _head_terms(setting: BaseSetting) -> np.ndarray:
    """Each head's term of ``tau`` (entry-wise, zero diagonal; one term for one logit scale)."""
    c = setting.c
    if isinstance(setting, CovarianceSetting):
        h, lam, M2 = setting.hermite, setting.spectrum[0], setting.rotated_M ** 2
        ratio = (lam ** 2 @ M2 @ lam) / (lam @ M2 @ lam)   # Mh = V^T M V in C's eigenbasis
        return np.array([_trace_ratio(setting) * (h.a1 ** 2 + max(h.b2, 0.0)) + h.a1 ** 2 * ratio / c])
    if not isinstance(setting, HeadsSetting):
        h = setting.hermite
        return np.array([h.a1 ** 2 * (1.0 + 1.0 / c) + max(h.b2, 0.0)])
    out = []
    for B, h, rows in zip(setting.heads, setting.hermites, setting.blocks):
        w = rows.size / setting.p()
        r = float(np.sum(B[rows] ** 2) / np.sum(B ** 2))
        out.append(h.a1 ** 2 * (w + r / c) + max(h.b2, 0.0) * w)
    return np.array(out)


def _trace_ratio(setting: BaseSetting) -> float:
    """``tr(C) / p`` of a :class:`~attn_lib.model.setting.CovarianceSetting`, 1 otherwise."""
    if isinstance(setting, CovarianceSetting):
        return float(np.trace(setting.C) / setting.p())
    return 1.0


def _entrywise_tau(setting: BaseSetting) -> float:
    """``tau`` of entry-wise attention with a zero diagonal (see :func:`feature_scale`)."""
    terms = _head_terms(setting)
    tau = terms[0] if terms.size == 1 else np.sum(terms)
    if not tau > 0:
        raise ValueError(f"the features of {setting!r} vanish (a1 = b2 = 0): no scale")
    return float(tau)


def feature_scale(setting: BaseSetting, model: str = "attention", keep_diagonal: bool = False,
                  n: int | None = None) -> float:
    r"""Mean eigenvalue ``tau = tr(Phi^T Phi / n) / n`` of a model's features: the unit of ``gamma``.

    **The book's scale convention.** ``E(gamma)`` is not scale free: features ``s Phi`` have
    ``E_{s Phi}(s^2 gamma) = E_Phi(gamma)``. Attention's features ``X K`` and ridge's ``X`` (or
    those of two nonlinearities) have different scales, so a comparison at one raw ``gamma``
    compares them at different effective regularisations. Every cross-model comparison of the
    book therefore puts two models side by side at the same ``gamma / tau`` (each model at its
    own ``gamma = tau g``, ``g`` shared); in the ridgeless limit ``gamma -> 0`` the scale drops
    out and both conventions agree.

    Deterministic equivalent, in the proportional limit with a vanishing coherent shift
    (``delta -> 0``; finite-rank parts of ``X`` and ``K`` change the trace by ``O(1/n)``), with the
    Hermite data ``a1, b2 = nu - a1^2`` of the canonical ``f`` and the moments
    ``tr(S^k) / n -> 1, 1 + 1/c, 1 + 3/c + 1/c^2`` (``k = 1, 2, 3``) of ``S = Z^T Z / p``:

    * ridge, ``Phi = X``: ``tau = c`` (for any attention kind and setting type);
    * attention, zero diagonal, ``K ~ a1 (S - I) + sqrt(b2) W / sqrt(p)``:
      ``Phi^T Phi / n ~ c K S K`` and ``tau = a1^2 (1 + 1/c) + b2``;
    * any key-query matrix (:class:`~attn_lib.model.setting.MatrixSetting`), zero diagonal: the
      same ``tau = a1^2 (1 + 1/c) + b2`` with the Hermite data of ``f`` at the logit scale
      ``sigma = ||M||_F / sqrt(p)``: on noise tokens ``E ||X K||_F^2 / n^2`` does not depend on
      the shape of ``M`` (``E[(Z Z^T)^2] = n (n + p + 1) I`` for the sum over keys);
    * tokens with a covariance ``C`` (:class:`~attn_lib.model.setting.CovarianceSetting`),
      zero diagonal: with the Hermite data at the logit scale ``sigma^2 = tr(C M C M^T) / p``,
      ``tau = (tr(C) / p) (a1^2 + b2) + (a1^2 / c) tr(C M^T C^2 M) / tr(C M^T C M)`` (the
      key's own term, ``E ||x_i||^2 K_ij^2``, and the pairs of keys, ``E[x_i^T x_k (x_i^T M
      x_j) (x_k^T M x_j)] = x_j^T M^T C^2 M x_j``); ridge ``tau = c tr(C) / p``, and the
      softmax mean part is ``tr(C) / p`` times the one below;
    * several heads (:class:`~attn_lib.model.setting.HeadsSetting`), head ``h`` writing the
      rows ``b_h`` (a share ``w_h = |b_h| / p``) of ``Phi``:
      ``tau = sum_h a1_h^2 (w_h + r_h / c) + b2_h w_h`` with the Hermite data of head ``h`` at
      its own scale and ``r_h = ||B_h[b_h, :]||_F^2 / ||B_h||_F^2``, the share of the head's
      key rows that it writes (the same Gaussian moments, ``E[Z Z_h^T Z_h Z^T] = m p_h I +
      m (m + 1) P_h`` over ``m = n - 1`` keys); one head is the matrix case;
    * attention with the diagonal kept, linear ``f`` only (``b2 = 0``, ``K = a1 S``):
      ``tau = a1^2 (c + 3 + 1/c)``;
    * masked softmax attention, the raw features ``Phi = X A`` at ``n`` tokens: by the reduction
      of :mod:`attn_lib.theory.softmax`, ``X A = (s X K + X (1 1^T - I) / (n - 1)) D_eps^{-1}``
      with ``K`` the entry-wise kernel of ``f_beta`` and ``s = s_n``
      (:func:`softmax_scale`). The kernel part gives ``s^2 tau_K`` (``tau_K``
      the entry-wise ``tau`` of ``f_beta``: ``a1 = beta``, ``b2 = e^{beta^2} - 1 - beta^2``
      at ``alpha = 1``); the mean part is the rank-one ``u 1^T``, ``u = X 1 / (n - 1) = Z 1 / (n
      - 1)`` (balanced labels), one eigenvalue ``||u||^2 ~ c`` of ``Phi^T Phi / n`` that adds
      ``||u||^2 / n ~ p / (n (n - 1))`` to the mean; its cross term with the kernel part, the
      ``- X / (n - 1)`` and the fluctuations ``D_eps`` are smaller by ``O(n^{-1/2})``:

          tau = s_n^2 tau_K + p / (n (n - 1))       (~ (c / n) (tau_K + 1)).

      A matrix takes its own ``s_n`` (:func:`softmax_scale`, at its logit scale); several heads
      ``sum_h s_{n,h}^2 tau_{K,h} + p / (n (n - 1))``, ``tau_{K,h}`` head ``h``'s term above.

      The spike is a fraction ``1 / (tau_K + 1)`` of the trace (0.56 at ``beta = 1/2``, ``c =
      1/2``; 0.07 at ``beta = 3/2``) but, orthogonal to the labels, it does not change the
      error; so at equal ``gamma / tau`` softmax sits at the effective ridge parameter
      ``gamma / s_n^2 = g (tau_K + 1)`` of the entry-wise theory, not at ``g tau_K``.
      Measured on random inputs, ``c = 1/2``, ``n = 2048`` (3 draws): within 0.4 % at ``beta <=
      1`` and 4.2 % too large at ``beta = 3/2`` (a finite-``n`` correction that grows with
      ``nu = e^{beta^2} - 1``: 11 % at ``n = 512``); with a coherent shift or large weights the entry-wise ``tau_K`` misses their
      finite-``n`` contribution (``snr = 3``, ``c = 0.3``, ``beta = 1``: ``tau_K`` 10 % low,
      softmax's ``tau`` 6 % low).

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        Only ``c`` and, for attention, the Hermite data of ``f`` at the logit scale enter (for
        heads, also the shares above; under softmax, ``beta``, the logit scale and ``n``).
    model : {"attention", "ridge"}, default "attention"
    keep_diagonal : bool, default False
        The attention kernel keeps its diagonal (as ``simulate.errors(..., keep_diagonal=True)``).
    n : int, optional
        Number of tokens: required for softmax attention, whose raw features scale like
        ``sqrt(p) / n``; the entry-wise and ridge scales have an ``n``-free limit and do not
        use it.

    Returns
    -------
    float
        ``tau > 0``.

    Raises
    ------
    ValueError
        For ``keep_diagonal=True`` with a nonlinear ``f`` (its diagonal ``f(||x_i||^2 / sqrt p) /
        sqrt p`` has no universal limit), with ``model="ridge"``, with softmax attention or with
        a matrix or heads (not derived); for
        ``a1 = b2 = 0``; for softmax attention without ``n`` or without the mask.
    """
    setting = check_setting(setting, types=_TYPES, attention=(Entrywise, Softmax))
    model = check_choice(model, "model", MODELS)
    keep_diagonal = check_bool(keep_diagonal, "keep_diagonal")
    c = setting.c
    if model == "ridge":
        if keep_diagonal:
            raise ValueError("keep_diagonal applies to model='attention' only")
        return float(c * _trace_ratio(setting))
    if isinstance(setting.attention, Softmax):
        if keep_diagonal:
            raise ValueError("keep_diagonal applies to entry-wise attention; softmax masks its "
                             "self-pairs (Softmax(beta, mask=True))")
        if n is None:
            raise ValueError("n: the scale of softmax features X A depends on the number of "
                             "tokens (s_n ~ sqrt(p) / n); pass n")
        n = check_int(n, "n", low=2)
        s = _masked_softmax(setting)
        twin = dataclasses.replace(cast(Any, s), f=cast(Softmax, s.attention).f, attention=ENTRYWISE)
        if isinstance(s, HeadsSetting):
            kernel = float(np.sum(_head_scales(s, n) ** 2 * _head_terms(twin)))
            return kernel + s.p(n) / (n * (n - 1.0))
        tau_k = feature_scale(twin)
        return float(softmax_scale(setting, n) ** 2 * tau_k
                     + _trace_ratio(setting) * setting.p(n) / (n * (n - 1.0)))
    if keep_diagonal:
        if isinstance(setting, (MatrixSetting, HeadsSetting)):
            raise ValueError("keep_diagonal: the feature scale with the diagonal kept is derived "
                             "for M = I (a Setting) only")
        h = setting.hermite
        if h.b2 > 1e-12 * max(h.nu, 1e-300):
            raise ValueError(f"keep_diagonal=True has a feature scale only for a linear f "
                             f"(b2 = 0), got b2 = {h.b2:.3g} for {setting.f!r}")
        return float(h.a1 ** 2 * (c + 3.0 + 1.0 / c))
    return _entrywise_tau(setting)

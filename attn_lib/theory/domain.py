r"""Where each theory holds, as the book measured it, and what a call does outside.

Every deterministic equivalent of :mod:`attn_lib.theory.attention` is an approximation whose
error the book measured against Monte Carlo; outside the measured conditions it still returns a
number, and that number can be wrong by more than the Monte Carlo noise. The public theory
calls (:func:`~attn_lib.theory.attention.attention_error`,
:func:`~attn_lib.theory.attention.attention_resolvent_form`,
:func:`~attn_lib.theory.attention.attention_error_batch`) check the conditions below
(:func:`violations`) and, outside them, emit a :class:`DomainWarning` that says which condition
failed, by how much, and which call to use instead (or that none exists). With ``strict=True``
they raise :class:`DomainError` instead. The book states these domains in its prose and
evaluates theories outside them on purpose, so its pages ignore the warning
(:func:`attn_lib.book.page.setup`); a script that does the same wraps the call in
:func:`ignored`.

The conditions and the measurements behind them (the symbols are in the book's notation page,
``book/notation.md``, "Glossary"):

**Proportional limit** (``attention_error(setting, gammas)``, no ``n``).

* *Coherent shift* of a :class:`~attn_lib.Setting` or :class:`~attn_lib.RankSetting`:
  ``delta = |mu^T M mu| / sqrt(p)`` at ``n =`` :data:`REFERENCE_N` tokens at most
  :data:`LIMIT_DELTA`. ``benchmarks/fidelity.py``: at ``n = 2048`` and ``delta <= 0.3`` the
  limit is within 0.0067 of Monte Carlo (median 0.0011-0.0040); ``benchmarks/strong_alignment.py``:
  at ``0.3 < delta <= 2`` it is off by up to 0.097 where the finite-size theory is within 0.0121.
  The limit has no ``n``, so the shift is read at :data:`REFERENCE_N`, the largest size of those
  measurements; the message gives the ``n`` from which the shift is small. Instead: the
  finite-size theory ``attention_error(setting, gammas, n=n)`` at the ``n`` simulated.
* *Coherent shift* of a :class:`~attn_lib.MatrixSetting` (``|mu^T M mu| / (sqrt(p) sigma)``,
  ``sigma = ||M||_F / sqrt(p)``) at most :data:`MATRIX_DELTA`, and of the heads of a
  :class:`~attn_lib.HeadsSetting` (the largest ``|mu^T B_h mu| / (sqrt(p) sigma_h)``) at most
  :data:`HEADS_DELTA`. ``benchmarks/any_matrix.py`` and ``benchmarks/multi_head.py`` on GPT-2's
  12 layers (SNR 1, ``n = 1536``): with a random ``mu`` (shift at most 0.006 for the matrix,
  0.011 for the heads) the limit is within 0.01 of Monte Carlo in 12 of 12 layers; with the
  aligned ``mu`` (0.151-0.246 for the matrix, 0.089-0.205 for the heads) it is above it by up to
  0.025 (matrix) and 0.016 (heads). Each bound lies between its two groups; nothing between
  them was measured. Instead: the finite-size theory ``n=round(p / c)`` (12 of 12 aligned
  layers within 0.01, for the matrix and for the heads).
* *Softmax tail edge*: ``beta`` at most :func:`~attn_lib.theory.softmax.tail_beta` of
  :data:`REFERENCE_N` (1.35: the ``beta`` where the kurtosis of ``f_beta`` equals ``n``).
  ``benchmarks/softmax_grid.py``: on 36 settings at ``n = 2048`` the limit is within 0.0114
  of Monte Carlo at ``beta <= 1`` and off by up to 0.029 at ``beta = 1.5``, where the entry-wise
  kernel of ``f_beta`` itself misses by as much (``benchmarks/softmax_beta.py``: an
  ``n^{-1/2}`` law). Instead: the row-factor theory
  :func:`attn_lib.theory.softmax.rows_error` at the ``n`` simulated (below).
* *Softmax regular regime*: ``beta delta`` at :data:`REFERENCE_N` at most
  :data:`SOFTMAX_BETA_DELTA` (``book/derivation_softmax.md``, the regular grid is kept at
  ``beta delta <= 0.3``; beyond it the mean of ``A`` carries the labels, which the limit drops:
  ``benchmarks/softmax_strong.py``, limit off by up to 0.39). Instead: the finite-size theory.

**Finite-size theory** (``attention_error(setting, gammas, n=n)``).

* *Tokens*: ``n`` at least :data:`FINITE_MIN_N`. ``benchmarks/small_n.py``: on 29 settings
  the largest error is 0.0102 at ``n = 512`` and 0.0133 at ``n = 256``; smaller ``n`` was not
  measured, and the theory's own error is ``O(1/n)`` (about ``2 / n`` for the quadratic).
  Instead: none; simulate.
* *Coherent shift*: ``delta`` at ``n`` (of a :class:`~attn_lib.HeadsSetting`, the largest
  ``|mu^T B_h mu| / (sqrt(p) sigma_h)``) at most :data:`FINITE_DELTA`, the largest shift of
  ``benchmarks/strong_alignment.py`` and ``benchmarks/small_n.py`` (finite-size error at most
  0.0121 for ``0.3 < delta <= 2``). Instead: none; simulate.
* *Softmax tail edge*: ``beta`` at most ``tail_beta(n)`` (as above, at the ``n`` given;
  ``benchmarks/softmax_strong.py``: at ``beta = 1.5``, ``n = 2048`` it misses by up to 0.030).
  Instead: the row-factor theory :func:`attn_lib.theory.softmax.rows_error`.

**Row-factor softmax theory** (:func:`attn_lib.theory.softmax.rows_error`, which checks these
itself; the finite-size theory plus the kernel's row factors).

* *Temperature*: ``beta`` (``beta alpha`` in canonical form) at most :data:`ROWS_BETA`.
  ``benchmarks/softmax_rows.py``, part ``breakdown`` (random inputs, ``c = 1``, 8 draws): at
  ``n = 2048`` within 0.017 of Monte Carlo up to ``beta = 2`` (the limit: 0.113 there) and off
  by 0.026 at 2.5; at ``n = 512`` within 0.023 up to ``beta = 2``, 0.033-0.037 at 2.5-3.
  Instead: none; simulate.
* *Tokens*: ``n`` at least :data:`FINITE_MIN_N` (its law of the row factors was measured from
  ``n = 256``, where the miss at ``beta = 1.5`` is 0.021). Instead: none; simulate.

**Tokens with a covariance** (:class:`~attn_lib.CovarianceSetting`, the limit and the
finite-size covariance theory alike): the relative spread of the tokens' own logit scales,
:func:`attn_lib.model.setting.scale_spread`, at most :data:`SCALE_SPREAD`. Both theories give
every token the common scale ``sigma``. ``benchmarks/real_tokens.py`` (part ``synthetic``,
``n = 2048``): the spiked spectrum (spread 0.31 at ``p = 512``, 0.12 at 2048) within 0.0074 of
Monte Carlo at every point; the power law ``k^{-0.7}`` (0.52-0.55 at ``p`` = 512 to 8192) off by
0.014 to 0.11 (the largest miss of each ``f`` and ``M``), growing with ``p``; at ``C = I`` the finite-size theory is within 0.0011 of the
limit there, so the miss is the spread's, not finite size (part ``fscov``: making the scales
equal moves MNIST's Gaussian surrogate by up to 0.087). The MNIST pairs have 0.61-0.67 with
``M = I``, about 1.4 with the aligned matrix. The bound lies between the two groups; nothing
between them was measured. Instead: none; simulate (a Gaussian surrogate of the tokens).

**Logit scale of a matrix** (:class:`~attn_lib.MatrixSetting`, :class:`~attn_lib.HeadsSetting`,
in the theory and in :func:`attn_lib.simulation.simulate.errors`): the scale
``sigma = ||M||_F / sqrt(p)`` (per head, ``||B_h||_F / sqrt(p)``) within a factor
:data:`SCALE_FACTOR` of one. The theory handles any scale (it linearises ``f`` at ``sigma``), but
the book's model reads ``f`` on ``O(1)`` logits, and a raw weight matrix (GPT-2's layers have
``sigma`` of 15 to 74) makes ``f`` see saturated logits: a different model, with another error.
This is a choice of scale, not a failure of the theory; the message names the normalisation helper,
:func:`attn_lib.studies.gpt2.normalise` (``M / sigma``; :func:`attn_lib.studies.gpt2.heads` with
``scale="unit"`` for heads).
"""

from __future__ import annotations

import math
from typing import Sequence, cast

import numpy as np

from .._domain import (SCALE_FACTOR, DomainError, DomainWarning, Violation, check_scale, emit, excess,
                       ignored, scale_violations)
from ..model.setting import (BaseSetting, CovarianceSetting, HeadsSetting, MatrixSetting, RankSetting,
                             Setting, Softmax, scale_spread)

__all__ = ["DomainWarning", "DomainError", "Violation", "violations", "check", "check_scale",
           "ignored", "REFERENCE_N", "LIMIT_DELTA", "MATRIX_DELTA", "HEADS_DELTA", "SOFTMAX_BETA_DELTA",
           "FINITE_MIN_N", "FINITE_DELTA", "SCALE_FACTOR", "ROWS_BETA", "SCALE_SPREAD", "rows_violations"]

#: Tokens at which the limit's conditions are read (it has no ``n``): the largest ``n`` of
#: ``benchmarks/fidelity.py`` and ``benchmarks/softmax_grid.py``.
REFERENCE_N = 2048
#: Largest coherent shift of a ``Setting`` or ``RankSetting`` for the limit (fidelity.py).
LIMIT_DELTA = 0.3
#: Largest coherent shift, in units of the logit scale, of a matrix for the limit
#: (any_matrix.py on GPT-2's layers: random ``mu`` at most 0.006, aligned at least 0.151).
MATRIX_DELTA = 0.1
#: Largest coherent shift, in units of its logit scale, of any head for the multi-head limit
#: (multi_head.py on GPT-2's layers: random ``mu`` at most 0.011, aligned at least 0.089).
HEADS_DELTA = 0.05
#: Largest ``beta delta`` of softmax for the limit (the regular regime, softmax_grid.py).
SOFTMAX_BETA_DELTA = 0.3
#: Fewest tokens at which the finite-size theory was measured (small_n.py).
FINITE_MIN_N = 256
#: Largest coherent shift at which the finite-size theory was measured (strong_alignment.py).
FINITE_DELTA = 3.0
#: Largest ``beta`` (canonical form) of the row-factor softmax theory (softmax_rows.py).
ROWS_BETA = 2.0
#: Largest relative spread of the tokens' own logit scales of a covariance setting
#: (real_tokens.py: within 0.01 up to 0.31, off by 0.014-0.11 from 0.52 on).
SCALE_SPREAD = 0.4

_SIMULATE = "simulate it with attn_lib.simulate.errors"


def _n_for_shift(coef: float, c: float, bound: float) -> int:
    """Fewest ``n`` with ``coef / sqrt(round(c n)) <= bound``."""
    return int(math.ceil((coef / bound) ** 2 / c))


def _tail_edge(beta: float, n: int, measured: str) -> list[Violation]:
    """The softmax tail-edge violation at ``n`` (empty inside), ``measured`` ending its message."""
    from .softmax import tail_beta

    edge = tail_beta(n)
    if beta <= edge:
        return []
    return [Violation("softmax tail edge", beta, edge, (
        f"softmax beta = {beta:g} is past the tail edge beta = {edge:.3g} at n = {n} "
        f"({excess(beta, edge)}; the kurtosis of f_beta equals n there, "
        f"attn_lib.theory.softmax.tail_beta): {measured}"))]


def _spread(s: BaseSetting) -> list[Violation]:
    """The token-scale violation of a :class:`~attn_lib.CovarianceSetting` (empty inside, and for
    every other setting)."""
    if not isinstance(s, CovarianceSetting):
        return []
    spread = scale_spread(s)
    if spread <= SCALE_SPREAD:
        return []
    return [Violation("token logit scales", spread, SCALE_SPREAD, (
        f"the tokens' own logit scales spread by {spread:.3g} (sqrt(2 tr(B^2)) / tr(B), "
        "B = C^{1/2} M C M^T C^{1/2}; attn_lib.model.setting.scale_spread), "
        f"{excess(spread, SCALE_SPREAD)} {SCALE_SPREAD:g}: the theory gives every token the "
        "common scale sigma. Gaussian tokens (benchmarks/real_tokens.py, n = 2048): within 0.01 "
        "of Monte Carlo up to a spread of 0.31 (spiked spectrum); at 0.52-0.55 (power law k^-0.7) "
        "the largest miss of each f and M is 0.014-0.11; MNIST pairs 0.61-0.67 (M = I). "
        f"Instead: none; {_SIMULATE} (a Gaussian surrogate of the tokens)"))]


def _limit(s: BaseSetting) -> list[Violation]:
    out = []
    if isinstance(s, (MatrixSetting, HeadsSetting)):
        p = s.p()
        if isinstance(s, MatrixSetting):
            shift = abs(float(s.mu @ s.M @ s.mu)) / (np.sqrt(p) * s.logit_scale)
            what, bound = "|mu^T M mu| / (sqrt(p) sigma)", MATRIX_DELTA
            instead = (f"the finite-size theory attention_error(setting, gammas, n={int(round(p / s.c))}) "
                       "(the reduced model; 12 of 12 aligned GPT-2 layers within 0.01)")
            if isinstance(s, CovarianceSetting):
                instead = (f"the finite-size covariance theory attention_error(setting, gammas, "
                           f"n={int(round(p / s.c))}) (the limit plus a reduced model's shift, which "
                           "carries the coherent shift on a noise spread over many directions, not "
                           "over few; book/derivation_covariance.md, Finite size)")
        else:
            shift = float(max(abs(float(s.mu @ B @ s.mu)) / (np.sqrt(p) * sig)
                              for B, sig in zip(s.heads, s.logit_scales)))
            what, bound = "max_h |mu^T B_h mu| / (sqrt(p) sigma_h)", HEADS_DELTA
            instead = (f"the finite-size theory attention_error(setting, gammas, n={int(round(p / s.c))}) "
                       "(each head's reduced model; 12 of 12 aligned GPT-2 layers within 0.01)")
        if shift > bound:
            out.append(Violation("coherent shift", shift, bound, (
                f"coherent shift {what} = {shift:.3g} is {excess(shift, bound)} {bound:g}: on "
                "GPT-2's layers the limit is within 0.01 of Monte Carlo at shifts up to 0.011 "
                "(random mu) and up to 0.025 above it at 0.089-0.25 (aligned mu; benchmarks/"
                f"any_matrix.py, benchmarks/multi_head.py). Instead: {instead}")))
        return out
    n = REFERENCE_N
    p = s.p(n)
    coef = abs(cast("Setting | RankSetting", s).signed_delta(n)) * np.sqrt(p)
    delta = coef / np.sqrt(p)
    if isinstance(s.attention, Softmax):

        beta = s.attention.beta
        out += _tail_edge(beta, n, (
            "at n = 2048 the limit is within 0.011 of Monte Carlo for beta <= 1 and off by up to "
            "0.029 at beta = 1.5 (benchmarks/softmax_grid.py). Instead: the row-factor theory "
            "attn_lib.theory.softmax.rows_error(setting, gammas, n) at the n you simulate "
            "(benchmarks/softmax_rows.py)"))
        if beta * delta > SOFTMAX_BETA_DELTA:
            n_ok = _n_for_shift(beta * coef, s.c, SOFTMAX_BETA_DELTA)
            out.append(Violation("softmax regular regime", beta * delta, SOFTMAX_BETA_DELTA, (
                f"beta delta = {beta * delta:.3g} at n = {n} (p = {p}) is "
                f"{excess(beta * delta, SOFTMAX_BETA_DELTA)} {SOFTMAX_BETA_DELTA:g}, the regular "
                "regime of book/derivation_softmax.md (beyond it the mean of A carries the "
                "labels and the limit is off by up to 0.39, benchmarks/softmax_strong.py); it is "
                f"below {SOFTMAX_BETA_DELTA:g} from n >= {n_ok}. Instead: the finite-size "
                "theory attention_error(setting, gammas, n=n) at the n you simulate")))
        return out
    if delta > LIMIT_DELTA:
        n_ok = _n_for_shift(coef, s.c, LIMIT_DELTA)
        out.append(Violation("coherent shift", delta, LIMIT_DELTA, (
            f"coherent shift delta = |mu^T M mu| / sqrt(p) = {delta:.3g} at n = {n} "
            f"(p = {p}) is {excess(delta, LIMIT_DELTA)} {LIMIT_DELTA:g} (the limit has no n: it "
            f"is read at n = {n}; it is below {LIMIT_DELTA:g} from n >= {n_ok}). At n = 2048 "
            "and delta <= 0.3 the limit is within 0.0067 of Monte Carlo (benchmarks/"
            "fidelity.py); for 0.3 < delta <= 2 it is off by up to 0.097 (benchmarks/"
            "strong_alignment.py). Instead: the finite-size theory attention_error(setting, "
            "gammas, n=n) at the n you simulate")))
    return out


def _finite(s: BaseSetting, n: int) -> list[Violation]:
    out: list[Violation] = []
    if n < FINITE_MIN_N:
        out.append(Violation("tokens", float(n), float(FINITE_MIN_N), (
            f"n = {n} is below {FINITE_MIN_N}, the smallest n at which the finite-size theory "
            "was measured (benchmarks/small_n.py: largest error 0.0133 at n = 256, 0.0102 at "
            "n = 512; its own error is O(1/n), about 2/n for the quadratic). Instead: none; "
            f"{_SIMULATE}")))
    if isinstance(s, HeadsSetting):   # each head's reduced model: its own shift, at its scale
        delta = float(max(abs(float(s.mu @ B @ s.mu)) / (np.sqrt(s.p(n)) * sig)
                          for B, sig in zip(s.heads, s.logit_scales)))
    else:
        delta = cast("Setting | RankSetting | MatrixSetting", s).delta(n)
    if delta > FINITE_DELTA:
        out.append(Violation("coherent shift", delta, FINITE_DELTA, (
            f"coherent shift delta = {delta:.3g} at n = {n} is {excess(delta, FINITE_DELTA)} "
            f"{FINITE_DELTA:g}, the largest shift at which the finite-size theory was measured "
            "(benchmarks/strong_alignment.py, benchmarks/small_n.py). Instead: none; "
            f"{_SIMULATE}")))
    if isinstance(s.attention, Softmax) and n >= 9:

        out += _tail_edge(s.attention.beta, n, (
            "at beta = 1.5, n = 2048 the finite-size theory misses by up to 0.030 "
            "(benchmarks/softmax_strong.py). Instead: the row-factor theory "
            "attn_lib.theory.softmax.rows_error(setting, gammas, n) (benchmarks/softmax_rows.py)"))
    return out


def rows_violations(setting: Setting, n: int) -> list[Violation]:
    """The conditions of the row-factor softmax theory that ``setting`` fails at ``n`` (module
    docstring); empty inside."""
    out: list[Violation] = []
    beta = cast(Softmax, setting.attention).beta * setting.alpha
    if beta > ROWS_BETA:
        out.append(Violation("softmax row factors", beta, ROWS_BETA, (
            f"beta = {beta:g} is {excess(beta, ROWS_BETA)} {ROWS_BETA:g}, the largest beta at "
            "which the row-factor theory was measured within 0.02 of Monte Carlo "
            "(benchmarks/softmax_rows.py, part breakdown: at n = 2048 off by 0.026 at beta = "
            f"2.5). Instead: none; {_SIMULATE}")))
    if n < FINITE_MIN_N:
        out.append(Violation("tokens", float(n), float(FINITE_MIN_N), (
            f"n = {n} is below {FINITE_MIN_N}, the smallest n at which the row-factor theory "
            f"was measured (benchmarks/softmax_rows.py). Instead: none; {_SIMULATE}")))
    return out


def violations(setting: BaseSetting, n: int | None = None) -> list[Violation]:
    """The conditions of the module docstring that ``setting`` fails.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
    n : int, optional
        Tokens of the finite-size theory; ``None`` for the proportional limit.

    Returns
    -------
    list of Violation
        Empty inside the domain.
    """
    found = scale_violations(setting)
    found += _limit(setting) if n is None else _finite(setting, n)
    found += _spread(setting)
    return found


def check(settings: BaseSetting | Sequence[BaseSetting], n: int | None = None, *, call: str,
          strict: bool = False, stacklevel: int = 2) -> None:
    """Warn (:class:`DomainWarning`) or, with ``strict``, raise (:class:`DomainError`) when a
    setting is outside the domain of the theory ``call`` (:func:`violations`).

    Parameters
    ----------
    settings : setting or sequence of settings
        A sequence gives one warning for all (the first violation and the count).
    n : int, optional
        As in :func:`violations`.
    call : str
        The public call, for the message (e.g. ``"attention_error"``).
    strict : bool, default False
    stacklevel : int, default 2
        As for :func:`warnings.warn`, counted from the caller of this function.
    """
    group: list[BaseSetting] = ([settings] if isinstance(settings, BaseSetting)
                                else list(settings))
    found = [(s, v) for s in group for v in violations(s, n)]
    emit(found, call, len(group), strict, stacklevel + 1)



"""The domain warning of the theory, and the one condition the simulator checks too.

:class:`DomainWarning` and :class:`DomainError` (public as ``attn_lib.DomainWarning`` and
``attn_lib.DomainError``), the :class:`Violation` record and the logit-scale condition of a
matrix (:func:`scale_violations`), which the simulator checks as well as the theory. The theory's
conditions are in :mod:`attn_lib.theory.domain`, which documents all of them.
"""

from __future__ import annotations

import contextlib
import warnings
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from .model.setting import BaseSetting, CovarianceSetting, HeadsSetting, MatrixSetting

__all__ = ["DomainWarning", "DomainError", "Violation", "SCALE_FACTOR", "scale_violations",
           "excess", "emit", "check_scale", "ignored"]

#: How far (a factor either way) the logit scale of a matrix may be from one.
SCALE_FACTOR = 4.0


class DomainWarning(UserWarning):
    """A theory was evaluated outside the conditions under which the book measured it.

    The message names the condition, the value and its bound, and the call to use instead (or
    that none exists). Ignore it with :func:`ignored` or
    ``warnings.filterwarnings("ignore", category=attn_lib.DomainWarning)``.
    """


class DomainError(ValueError):
    """Raised instead of :class:`DomainWarning` when a theory call is made with ``strict=True``."""


DomainWarning.__module__ = DomainError.__module__ = "attn_lib"  # their public names


@dataclass(frozen=True)
class Violation:
    """One failed condition.

    Attributes
    ----------
    condition : str
        Its name (``"coherent shift"``, ``"softmax tail edge"``, ``"tokens"``, ...).
    value, bound : float
        The setting's value and the bound it exceeds (or, for ``"tokens"``, falls below).
    message : str
        What was measured there and what to call instead.
    """

    condition: str
    value: float
    bound: float
    message: str


def excess(value: float, bound: float) -> str:
    """How far ``value`` is past ``bound``, in words."""
    if value > bound:
        return f"{value / bound:.3g} times the bound" if bound > 0 else "above the bound"
    return f"{bound / value:.3g} times below the bound" if value > 0 else "below the bound"


def scale_violations(s: BaseSetting) -> list[Violation]:
    """The logit-scale condition of a :class:`~attn_lib.MatrixSetting` or
    :class:`~attn_lib.HeadsSetting`: ``sigma = ||M||_F / sqrt(p)`` (per head ``||B_h||_F /
    sqrt(p)``) within a factor :data:`SCALE_FACTOR` of one (:mod:`attn_lib.theory.domain`)."""
    if isinstance(s, CovarianceSetting):
        scales, what, helper = np.array([s.logit_scale]), "sqrt(tr(C M C M^T) / p)", (
            "M / sigma (the chapter Real tokens normalises its matrices so)")
    elif isinstance(s, MatrixSetting):
        scales, what, helper = np.array([s.logit_scale]), "||M||_F / sqrt(p)", (
            "attn_lib.studies.gpt2.normalise(M) (M / sigma; the book's GPT-2 matrices are "
            "normalised so)")
    elif isinstance(s, HeadsSetting):
        scales, what, helper = s.logit_scales, "||B_h||_F / sqrt(p)", (
            "attn_lib.studies.gpt2.heads(W_Q, W_K, 'unit') (each head divided by its sigma_h)")
    else:
        return []
    worst = float(scales[np.argmax(np.abs(np.log(scales)))])
    if 1.0 / SCALE_FACTOR <= worst <= SCALE_FACTOR:
        return []
    return [Violation("logit scale", worst, SCALE_FACTOR if worst > 1 else 1.0 / SCALE_FACTOR, (
        f"logit scale sigma = {what} = {worst:.3g}, more than {SCALE_FACTOR:g} times "
        f"{'above' if worst > 1 else 'below'} one: f reads logits of that size (tanh "
        "saturated, or nearly linear), a different model from the book's O(1) logits (the "
        "theory still linearises f at sigma). If the matrix is a raw weight matrix, use "
        f"{helper}"))]


def emit(found: list[tuple[BaseSetting, Violation]], call: str, total: int, strict: bool,
         stacklevel: int) -> None:
    """One :class:`DomainWarning` (``strict``: :class:`DomainError`) for the violations
    ``found`` of ``total`` settings of ``call``; nothing when ``found`` is empty."""
    if not found:
        return
    s, v = found[0]
    text = f"{call}: {v.message}"
    if total > 1:
        text = (f"{call}: {len(found)} condition(s) failed over {total} settings; the first, "
                f"for {s!r}: {v.message}")
    elif len(found) > 1:
        text += "; also: " + "; ".join(w.message for _, w in found[1:])
    if strict:
        raise DomainError(text + " (strict=True)")
    warnings.warn(text, DomainWarning, stacklevel=stacklevel + 1)


def check_scale(setting: BaseSetting, *, call: str, stacklevel: int = 2) -> None:
    """The logit-scale condition alone (for the simulator), as a :class:`DomainWarning`."""
    emit([(setting, v) for v in scale_violations(setting)], call, 1, False, stacklevel + 1)


@contextlib.contextmanager
def ignored() -> Iterator[None]:
    """A context in which :class:`DomainWarning` is not shown (for deliberate calls outside)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DomainWarning)
        yield

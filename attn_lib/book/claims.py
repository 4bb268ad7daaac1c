"""Checked findings: the sentences of a chapter that state a sign, an inequality or an equality.

A finding is a :class:`Claim`: what the prose says, whether the numbers support it, the evidence
(with its significance), and the words the prose uses in each case. The constructors decide:

* :func:`exceeds` -- ``a - b`` has a sign beyond ``z`` standard errors (Monte Carlo);
* :func:`equivalent` -- ``|a - b|`` is below a margin with ``z`` standard errors to spare (an
  equivalence test: "equal within noise" is only said when the noise is small enough to tell);
* :func:`exact` -- a deterministic statement (theory, closed forms), true or false.

Each claim is *decided* (``holds`` is ``True`` or ``False``) or *undecided* (``holds is None``: the
difference is within ``z`` standard errors, or the equivalence test has too little power), and the
prose quotes ``claim.text``, the wording chosen for that case, so that the undecided case has its
own words. A claim is glued like a number (:func:`attn_lib.book.page.glue`): under its name the
chosen wording, under ``<name>_evidence`` the evidence. With the ``full`` profile, gluing a claim
that does not hold (or is undecided, unless ``required=False``) raises :class:`ClaimError`, so the
published book cannot state a finding its numbers contradict; the ``quick`` profile, whose sizes
are too small to decide most findings, only reports them.

Examples
--------
>>> c = exceeds("att_worse", 0.30, 0.01, 0.20, 0.01,
...             wording=("is worse than", "is better than", "is not distinguishable from"))
>>> c.holds, c.text
(True, 'is worse than')
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._validation import check_real

__all__ = ["Claim", "ClaimError", "exceeds", "equivalent", "exact", "Z"]

#: Default significance: a difference counts beyond 3 standard errors (two-sided p ~ 0.003).
Z: float = 3.0


class ClaimError(AssertionError):
    """A finding the prose states does not hold for the numbers of this build."""


@dataclass(frozen=True)
class Claim:
    """A finding with its verdict.

    Attributes
    ----------
    name : str
        Glue name of the wording (``<name>_evidence`` holds the evidence).
    holds : bool or None
        ``True`` supported, ``False`` contradicted, ``None`` undecided at this significance.
    evidence : str
        The numbers behind the verdict, e.g. ``"difference 0.012 ± 0.003 (4.0 s.e.)"``.
    wording : tuple of str
        The prose for ``holds`` = ``True``, ``False``, ``None``.
    required : bool
        Whether the full profile fails when the claim is not ``True``.
    """

    name: str
    holds: bool | None
    evidence: str
    wording: tuple[str, str, str]
    required: bool = True

    @property
    def text(self) -> str:
        """The wording for the verdict."""
        return self.wording[0 if self.holds is True else 1 if self.holds is False else 2]

    def enforce(self, profile: str) -> None:
        """Raise :class:`ClaimError` in the ``full`` profile if a required claim is not ``True``."""
        if profile == "full" and self.required and self.holds is not True:
            verdict = "is contradicted" if self.holds is False else "is undecided"
            raise ClaimError(f"claim {self.name!r} {verdict}: {self.evidence} "
                             f"(the prose would say {self.text!r})")


def _wording(wording: object) -> tuple[str, str, str]:
    w = tuple(wording) if isinstance(wording, (tuple, list)) else ()
    if len(w) != 3 or not all(isinstance(x, str) for x in w):
        raise TypeError("wording must be three strings: for a claim that holds, is "
                        "contradicted, and is undecided")
    return w


def _name(name: object) -> str:
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"name must be an identifier-like str, got {name!r}")
    return name


def exceeds(name: str, a: float, se_a: float, b: float = 0.0, se_b: float = 0.0, *,
            wording: tuple[str, str, str], z: float = Z, required: bool = True) -> Claim:
    """Claim ``a > b``, decided beyond ``z`` standard errors of ``a - b``.

    The standard error of the difference is ``sqrt(se_a^2 + se_b^2)`` for independent estimates;
    for paired draws pass the standard error of the paired difference as ``se_a`` and
    ``se_b = 0``. ``holds`` is ``True`` if ``a - b > z se``, ``False`` if ``a - b < -z se`` and
    ``None`` otherwise. For ``a < b`` swap the arguments.
    """
    name = _name(name)
    a, b = check_real(a, "a"), check_real(b, "b")
    se = float(np.hypot(check_real(se_a, "se_a", low=0.0), check_real(se_b, "se_b", low=0.0)))
    z = check_real(z, "z", low=0.0, low_open=True)
    d = a - b
    holds = True if d > z * se else False if d < -z * se else None
    ratio = f"{d / se:+.1f} s.e." if se > 0 else "exact"
    return Claim(name, holds, f"difference {d:+.4g} ± {se:.2g} ({ratio}; threshold {z:g} s.e.)",
                 _wording(wording), bool(required))


def equivalent(name: str, a: float, se_a: float, b: float = 0.0, se_b: float = 0.0, *,
               margin: float, wording: tuple[str, str, str], z: float = Z,
               required: bool = True) -> Claim:
    """Claim ``|a - b| < margin``, an equivalence test at ``z`` standard errors.

    ``holds`` is ``True`` if ``|a - b| + z se < margin`` (equal within the margin, and the noise is
    small enough to tell), ``False`` if ``|a - b| - z se > margin`` (they differ by more than the
    margin) and ``None`` otherwise (too little power: say so rather than "equal").
    """
    name = _name(name)
    a, b = check_real(a, "a"), check_real(b, "b")
    se = float(np.hypot(check_real(se_a, "se_a", low=0.0), check_real(se_b, "se_b", low=0.0)))
    margin = check_real(margin, "margin", low=0.0, low_open=True)
    z = check_real(z, "z", low=0.0, low_open=True)
    d = abs(a - b)
    holds = True if d + z * se < margin else False if d - z * se > margin else None
    return Claim(name, holds, f"|difference| {d:.4g} ± {se:.2g} against the margin {margin:.3g} "
                 f"({z:g} s.e.)", _wording(wording), bool(required))


def exact(name: str, condition: bool, evidence: str, *, wording: tuple[str, str, str],
          required: bool = True) -> Claim:
    """A deterministic claim (no noise): ``holds`` is ``bool(condition)``."""
    if not isinstance(evidence, str):
        raise TypeError(f"evidence must be a str, got {type(evidence).__name__}")
    return Claim(_name(name), bool(condition), evidence, _wording(wording), bool(required))

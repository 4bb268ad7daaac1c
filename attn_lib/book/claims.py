"""Checked findings: the sentences of a chapter that state a sign, an inequality or an equality.

A finding is a :class:`Claim`: what the prose says, whether the numbers support it, the evidence
(with its significance), and the words the prose uses in each case. The constructors decide:

* :func:`exceeds` -- ``a > b``: ``a - b`` is positive beyond the threshold (Monte Carlo);
* :func:`less` -- ``a < b``, the same test with the evidence still written as ``a - b``;
* :func:`equivalent` -- ``|a - b|`` is below a margin with the threshold's worth of standard
  errors to spare (an equivalence test: "equal within noise" is only said when the noise is small
  enough to tell);
* :func:`exact` -- a deterministic statement (theory, closed forms), true or false.

**Threshold.** A difference is decided at the two-sided level of ``z`` standard errors of a normal
law (:data:`Z` = 3: level 0.0027). With ``draws``, the number of independent draws behind the
standard error (the pairs of a paired difference; for two independent means, the smaller of the
two counts, a conservative choice), the threshold is the Student t quantile with ``draws - 1``
degrees of freedom at that level: 9.2 standard errors for 4 draws, 4.5 for 8, 3.3 for 32. With
fewer than two draws nothing is decided.

**Sign.** The evidence always reports ``a - b`` in the order the prose names them: a claim that
attention is below ridge is ``less("...", att, se_att, ridge, se_ridge, ...)`` and its evidence
a negative difference.

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

__all__ = ["Claim", "ClaimError", "exceeds", "less", "equivalent", "exact", "threshold", "rule", "Z"]

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


def threshold(z: float = Z, draws: int | None = None) -> float:
    """The number of standard errors beyond which a difference is decided.

    ``z`` for a normal law (``draws=None``: many draws, or an exact standard error); otherwise the
    Student t quantile with ``draws - 1`` degrees of freedom at the same two-sided level
    ``2 (1 - Phi(z))``, and ``inf`` for fewer than two draws (nothing can be decided).
    """
    from scipy import stats

    z = check_real(z, "z", low=0.0, low_open=True)
    if draws is None:
        return z
    if isinstance(draws, bool) or not isinstance(draws, (int, np.integer)) or draws < 0:
        raise ValueError(f"draws must be a non-negative int (the draws behind the standard "
                         f"error), got {draws!r}")
    if draws < 2:
        return float("inf")
    return float(stats.t.ppf(stats.norm.cdf(z), int(draws) - 1))


def _decision(d: float, se: float, z: float, draws: int | None,
              sign: int = 1) -> tuple[bool | None, str]:
    """Verdict on ``sign * d > 0`` and the statistic of ``d``, e.g. ``"t = +7.0, 3 d.o.f.; ..."``."""
    k, s = threshold(z, draws), sign * d
    if se == 0:
        return (s > 0) if s != 0 else None, "exact"
    holds = True if s > k * se else False if s < -k * se else None
    stat = f"{d / se:+.1f} s.e." if draws is None else f"t = {d / se:+.1f}, {int(draws) - 1} d.o.f."
    need = ("not decided with fewer than 2 draws" if not np.isfinite(k)
            else rule(k, holds is not None))
    return holds, f"{stat}; {need}"


def rule(k: float, decided: bool) -> str:
    """The decision rule and its outcome, e.g. ``"threshold 4.53 s.e.: decided"``."""
    return f"threshold {k:.3g} s.e.: {'decided' if decided else 'not decided'}"


def exceeds(name: str, a: float, se_a: float, b: float = 0.0, se_b: float = 0.0, *,
            wording: tuple[str, str, str], z: float = Z, draws: int | None = None,
            required: bool = True) -> Claim:
    """Claim ``a > b``, decided beyond :func:`threshold` standard errors of ``a - b``.

    The standard error of the difference is ``sqrt(se_a^2 + se_b^2)`` for independent estimates;
    for paired draws pass the standard error of the paired difference as ``se_a`` and
    ``se_b = 0``. ``holds`` is ``True`` if ``a - b > k se``, ``False`` if ``a - b < -k se`` and
    ``None`` otherwise, with ``k = threshold(z, draws)``. For ``a < b`` use :func:`less`.
    """
    name = _name(name)
    a, b = check_real(a, "a"), check_real(b, "b")
    se = float(np.hypot(check_real(se_a, "se_a", low=0.0), check_real(se_b, "se_b", low=0.0)))
    d = a - b
    holds, stat = _decision(d, se, z, draws)
    return Claim(name, holds, f"difference {d:+.4g} ± {se:.2g} ({stat})", _wording(wording),
                 bool(required))


def less(name: str, a: float, se_a: float, b: float = 0.0, se_b: float = 0.0, *,
         wording: tuple[str, str, str], z: float = Z, draws: int | None = None,
         required: bool = True) -> Claim:
    """Claim ``a < b``: :func:`exceeds` of ``b > a``, with the evidence written as ``a - b``."""
    name = _name(name)
    a, b = check_real(a, "a"), check_real(b, "b")
    se = float(np.hypot(check_real(se_a, "se_a", low=0.0), check_real(se_b, "se_b", low=0.0)))
    d = a - b
    holds, stat = _decision(d, se, z, draws, sign=-1)
    return Claim(name, holds, f"difference {d:+.4g} ± {se:.2g} ({stat})", _wording(wording),
                 bool(required))


def equivalent(name: str, a: float, se_a: float, b: float = 0.0, se_b: float = 0.0, *,
               margin: float, wording: tuple[str, str, str], z: float = Z,
               draws: int | None = None, required: bool = True) -> Claim:
    """Claim ``|a - b| < margin``, an equivalence test at :func:`threshold` standard errors.

    ``holds`` is ``True`` if ``|a - b| + k se < margin`` (equal within the margin, and the noise is
    small enough to tell), ``False`` if ``|a - b| - k se > margin`` (they differ by more than the
    margin) and ``None`` otherwise (too little power: say so rather than "equal"), with
    ``k = threshold(z, draws)``.
    """
    name = _name(name)
    a, b = check_real(a, "a"), check_real(b, "b")
    se = float(np.hypot(check_real(se_a, "se_a", low=0.0), check_real(se_b, "se_b", low=0.0)))
    margin = check_real(margin, "margin", low=0.0, low_open=True)
    k = threshold(z, draws)
    d = abs(a - b)
    holds = True if d + k * se < margin else False if d - k * se > margin else None
    if not np.isfinite(k) and se == 0:
        holds = d < margin
    rule = ("not decided with fewer than 2 draws" if not np.isfinite(k)
            else f"{k:.3g} s.e." + ("" if draws is None else f", t with {int(draws) - 1} d.o.f."))
    return Claim(name, holds, f"|difference| {d:.4g} ± {se:.2g} against the margin {margin:.3g} "
                 f"({rule})", _wording(wording), bool(required))


def exact(name: str, condition: bool, evidence: str, *, wording: tuple[str, str, str],
          required: bool = True) -> Claim:
    """A deterministic claim (no noise): ``holds`` is ``bool(condition)``."""
    if not isinstance(evidence, str):
        raise TypeError(f"evidence must be a str, got {type(evidence).__name__}")
    return Claim(_name(name), bool(condition), evidence, _wording(wording), bool(required))

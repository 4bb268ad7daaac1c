r"""A nonlinearity atlas: Hermite data and interpolation errors of many ``f`` at fixed settings.

In the proportional deterministic equivalent (:mod:`attn_lib.theory.attention`) the
nonlinearity enters only through ``rho = sqrt(c) a1`` and ``b2 = nu - a1^2``. A constant factor
on ``f`` rescales ``K`` and therefore only moves ``gamma`` (by ``nu``), so with every ``f``
scaled to ``nu = 1`` the predicted error is a function of the single number ``a1^2 / nu``
(the sign of ``a1`` drops out: ``-f`` gives the same ``Phi^T Phi`` draw by draw, and
:func:`attn_lib.theory.attention.attention_error` gives the same value for ``a1`` and ``-a1``
to rounding, also when ``(mu^T w_K)(mu^T w_Q) < 0``; ``tests/test_atlas.py`` checks both).

Whether ``a1^2 / nu`` really *drives* the error is a question about finite-size simulations,
which see the whole function: its ``a2`` (even part), its higher odd Hermite coefficients,
its tails. This module builds the comparison:

* :func:`catalogue` -- registered functions at ``nu = 1``
  (:func:`~attn_lib.model.nonlinearity.normalised`), "partners" with exactly the same
  ``a1^2 / nu`` but a different non-linear part (:func:`~attn_lib.model.nonlinearity.mixture`),
  reflections ``t -> f(-t)`` at ``nu = 1`` (:func:`~attn_lib.model.nonlinearity.reflected`, which
  flips the sign of ``a1`` and of every odd coefficient and keeps the even part), and a sweep of
  ``a1`` at fixed ``nu``;
* :func:`compute` -- their Hermite data, the deterministic equivalents (attention, and ridge
  for reference; with ``matched=True`` each ``f`` at ridge's ``gamma / tau``, the book's scale
  convention) and cached Monte Carlo (:func:`attn_lib.studies.sweeps.simulations`, common random
  numbers: every ``f`` sees the same tokens in each draw) at a few fixed settings
  (:func:`default_settings`), collected in an :class:`Atlas`;
* :meth:`Atlas.groups_summary` -- for every group of functions with equal ``a1^2 / nu``, the
  spread of the simulated errors against their standard error, with paired differences;
* the finite-size theory (:func:`finite_size_theory`, ``compute(..., finite_size=True)``): the
  equivalent at the simulated ``n`` (:func:`attn_lib.theory.attention_error` with ``n``), which
  keeps the whole ``f`` through its shifted mean ``F0(h)``, slope ``F1(h)`` and residual variance
  ``S2(h)`` (:mod:`attn_lib.theory.shift`) and so can tell functions of equal ``a1^2 / nu``
  apart once the coherent shift ``delta`` is of order one; :meth:`Atlas.explained` and
  :meth:`Atlas.deviation` compare the simulation with either theory.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np
from numpy.typing import ArrayLike

from ..model import hermite
from ..simulation.trials import standard_error
from . import sweeps
from .strong_alignment import finite_size_theory as _finite_size_curves
from .._validation import (check_array, check_bool, check_choice, check_gammas, check_int,
                           check_real, check_seed, check_setting)
from ..model.hermite import Hermite
from ..model.nonlinearity import (Nonlinearity, NonlinearityLike, check_nonlinearity,
                                  check_registered, mixture, normalised, reflected)
from ..model.setting import Setting

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["NAMES", "GAMMA", "Entry", "catalogue", "default_settings",
           "mixture_for_ratio", "mixture_theory", "finite_size_theory", "compute", "Atlas",
           "THEORIES"]

#: Registered nonlinearities of the atlas (each scaled to ``nu = 1``).
NAMES: tuple[str, ...] = ("linear", "tanh", "erf", "sign", "relu", "trunc_relu", "trunc_exp",
                          "sin", "poly", "cubic", "cos", "quadratic", "he3")
#: Ridge parameter of the atlas: ridge regression's, and with ``compute(..., matched=True)`` every
#: ``f`` at the same ``gamma / tau`` (see :func:`default_settings` and the chapter for the choice).
GAMMA: float = 0.1
#: Ratios ``a1^2 / nu`` closer than this are the same group; smaller ones are ``a1 = 0``.
_RATIO_TOL = 1e-9
_KINDS = ("named", "partner", "reflected", "sweep")
#: The theories an :class:`Atlas` compares with: the proportional limit and the finite-size one.
THEORIES = ("limit", "finite")


@dataclass(frozen=True)
class Entry:
    """One nonlinearity of the atlas.

    Attributes
    ----------
    label : str
        Display name (unique within a catalogue).
    f : str, callable or Nonlinearity
        The hashable nonlinearity, scaled to ``nu = 1``.
    kind : {"named", "partner", "reflected", "sweep"}
        A registered function (:func:`~attn_lib.model.nonlinearity.normalised`), a
        :func:`~attn_lib.model.nonlinearity.mixture` with the same ``a1^2 / nu`` as a registered
        one, a :func:`~attn_lib.model.nonlinearity.reflected` function, or a point of the ``a1``
        sweep.
    """

    label: str
    f: NonlinearityLike
    kind: str

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise TypeError("label must be a non-empty str")
        check_choice(self.kind, "kind", _KINDS)
        check_nonlinearity(self.f)


def _ratio(f: NonlinearityLike) -> float:
    """``a1^2 / nu`` of ``f``, snapped to 0 below :data:`_RATIO_TOL` and clipped to ``[0, 1]``."""
    h = hermite.coefficients(f)
    r = h.a1 ** 2 / h.nu
    return 0.0 if r < _RATIO_TOL else float(min(r, 1.0))


def mixture_for_ratio(ratio: float, h: str = "cos") -> Nonlinearity:
    """The mixture ``t cos(theta) + h(t) sin(theta)`` with ``a1^2 / nu = cos(theta)^2 = ratio``.

    Parameters
    ----------
    ratio : float
        Target ``a1^2 / nu`` in ``[0, 1]``.
    h : str, default "cos"
        Registered function whose normalised non-linear part is mixed in.
    """
    ratio = check_real(ratio, "ratio", low=0.0, high=1.0)
    return mixture(float(np.arccos(np.sqrt(ratio))), h)


def catalogue(names: Sequence[str] = NAMES, partners: Sequence[str] = ("cos",),
              reflect: Sequence[str] = ("relu",), sweep_ratios: Sequence[float] | np.ndarray = ()
              ) -> list[Entry]:
    """The nonlinearities of the atlas, all at ``nu = 1``.

    Parameters
    ----------
    names : sequence of str
        Registered functions, each as :func:`~attn_lib.model.nonlinearity.normalised`
        (``kind="named"``).
    partners : sequence of str
        For every named ``f`` and every ``h`` here, the :func:`~attn_lib.model.nonlinearity.mixture` with
        the same ``a1^2 / nu`` and the non-linear part of ``h`` (``kind="partner"``). Left out
        when ``a1^2 / nu = 1`` (the mixture is the identity) and when ``h`` itself has that
        ratio: then the mixture is ``h`` scaled to ``nu = 1`` (e.g. ``h = f``, or the cosine
        for ``f = t^2``), not a new function.
    reflect : sequence of str
        Registered functions also included as :func:`~attn_lib.model.nonlinearity.reflected`
        (``kind="reflected"``).
    sweep_ratios : sequence of float
        Points ``a1^2 / nu`` in ``[0, 1]`` of the mixture sweep, one entry per ``h`` in
        ``partners`` (``kind="sweep"``).

    Returns
    -------
    list of Entry, named functions first. Duplicate functions are dropped.

    Raises
    ------
    ValueError
        Unknown names, an empty ``names`` or ratios outside ``[0, 1]``.
    """
    names, partners, reflect = list(names), list(partners), list(reflect)
    if not names:
        raise ValueError("names must not be empty")
    for what, group in (("names", names), ("partners", partners), ("reflect", reflect)):
        for name in group:
            check_registered(name, what)
    entries: list[Entry] = []
    seen: set[object] = set()  # (base, angle) of a mixture, else the Nonlinearity

    def add(label: str, f: Nonlinearity, kind: str) -> None:
        # mixtures are equal when their angles agree to rounding (e.g. a sweep point at t^3's 0.6)
        key = (f.base, round(f.theta, 9)) if f.theta is not None else f
        if key not in seen:
            seen.add(key)
            entries.append(Entry(label, f, kind))

    named = [(name, normalised(name)) for name in names]
    for name, f in named:
        add(name, f, "named")
    for name, f in named:
        r = _ratio(f)
        for h in partners:
            if r < 1.0 - _RATIO_TOL and abs(_ratio(normalised(h)) - r) > _RATIO_TOL:
                add(f"mix[{h}] ~ {name}", mixture_for_ratio(r, h), "partner")
    for name in reflect:
        add(f"{name}(-t)", reflected(name), "reflected")
    for r in sweep_ratios:
        r = check_real(r, "sweep_ratios", low=0.0, high=1.0)
        for h in partners:
            add(f"mix[{h}] a1^2={r:.2f}", mixture_for_ratio(r, h), "sweep")
    return entries


def default_settings(c: float = 2.0) -> dict[str, Setting]:
    """The four fixed settings of the atlas at ``c = p / n`` (their ``f`` is replaced per entry).

    * ``"random"``: ``mu = 0``, no low-rank weights (only the spectrum matters);
    * ``"aligned"``: SNR 2, ``w_K = w_Q`` of norm 1 along ``mu``;
    * ``"orthogonal"``: SNR 2, ``w_K = w_Q`` of norm 1 orthogonal to ``mu``;
    * ``"strong"``: SNR 4, aligned weights of norm 2: the coherent shift
      ``delta = (SNR + (mu^T w_K)(mu^T w_Q)) / sqrt(p)`` is five times that of ``"aligned"``.
    """
    c = check_real(c, "c", low=0.0, low_open=True)
    return {
        "random": Setting(c=c),
        "aligned": Setting(c=c, snr=2.0, wk_norm=1.0, wq_norm=1.0),
        "orthogonal": Setting(c=c, snr=2.0, wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.0,
                              cos_mu_wq=0.0),
        "strong": Setting(c=c, snr=4.0, wk_norm=2.0, wq_norm=2.0),
    }


def mixture_theory(setting: Setting, ratios: ArrayLike, gammas: object = GAMMA,
                   h: str = "cos", matched: bool = False) -> np.ndarray:
    """Deterministic-equivalent attention error along the mixture family at fixed ``nu = 1``.

    Parameters
    ----------
    setting : Setting
        Its ``f`` is replaced by :func:`mixture_for_ratio` ``(r, h)`` for each ratio.
    ratios : array_like of shape (R,)
        Values of ``a1^2 / nu`` in ``[0, 1]``.
    gammas : float or array_like of shape (G,)
    h : str, default "cos"
    matched : bool, default False
        Read ``gammas`` as ridge regression's ridge parameters and evaluate each mixture at the
        same ``gamma / tau`` (:func:`attn_lib.studies.sweeps.matched_gamma`: ``gamma tau_f /
        c``, with ``tau_f = a1^2 (1 + 1/c) + b2`` depending on the ratio).

    Returns
    -------
    ndarray of shape ``(R,)`` for a scalar ``gammas``, else ``(R, G)``.
    """
    check_setting(setting)
    r = check_array(np.atleast_1d(ratios), "ratios")
    settings = [dataclasses.replace(setting, f=mixture_for_ratio(float(x), h)) for x in r]
    if not check_bool(matched, "matched"):
        return sweeps.equivalents(settings, gammas)
    from ..theory.attention import attention_error_batch

    g = check_gammas(gammas)
    grid = np.array([np.atleast_1d(sweeps.matched_gamma(s, np.atleast_1d(g))) for s in settings])
    out = np.asarray(attention_error_batch(settings, grid), dtype=float)
    return out[:, 0] if np.ndim(g) == 0 else out


def finite_size_theory(entries: Sequence[Entry], settings: Mapping[str, Setting], gamma: object,
                       n: int) -> np.ndarray:
    """Finite-size theory of every entry at every setting, cached on disk.

    :func:`attn_lib.theory.attention_error` ``(s, [gamma], n=n)`` with each entry's ``f`` in
    each setting, through :func:`attn_lib.studies.strong_alignment.finite_size_theory` (one
    cache entry per curve). It keeps ``f`` through ``F0, F1, S2`` at the pairwise latent shifts
    of the tokens, so it differs between functions of equal ``a1^2 / nu`` by an amount that grows
    with the coherent shift ``delta(n)``; at ``delta = 0`` (no signal, no low-rank weights) it
    is the proportional limit.

    Parameters
    ----------
    entries : sequence of Entry, length F
    settings : mapping of str to Setting, length S
    gamma : float or array_like of shape (F, S)
        Ridge parameter ``> 0``, shared or one per entry and setting.
    n : int
        Tokens (``p = round(c n)``, the shift ``delta(n)``).

    Returns
    -------
    ndarray of shape ``(F, S)``.
    """
    F, S = len(entries), len(settings)
    gam = np.broadcast_to(np.asarray(gamma, dtype=float), (F, S))
    grid = np.array([dataclasses.replace(s, f=e.f) for e in entries for s in settings.values()],
                    dtype=object).reshape(F, S)
    out = np.empty((F, S))
    for g in np.unique(gam):
        sel = gam == g
        out[sel] = _finite_size_curves(list(grid[sel]), [float(g)], n)[:, 0]
    return out


@dataclass(frozen=True)
class Atlas:
    """Hermite data and errors of ``F`` nonlinearities at ``S`` settings, one ``gamma``.

    Attributes
    ----------
    entries : tuple of Entry, length F
    settings : dict of str to Setting, length S
        The settings (their ``f`` is replaced by each entry's).
    gamma : float
        Ridge regression's ridge parameter, and attention's unless ``matched``.
    n : int
        Tokens of the simulation.
    hermite : tuple of Hermite, length F
    theory : ndarray of shape (F, S)
        Deterministic equivalent of the attention error.
    ridge_theory : ndarray of shape (S,)
        Deterministic equivalent of the ridge error.
    attention : ndarray of shape (F, S, T)
        Simulated attention error of each draw; draw ``t`` uses the same tokens for every ``f``.
    ridge : ndarray of shape (S, T)
        Simulated ridge error of each draw.
    finite : ndarray of shape (F, S) or None
        Finite-size theory of the attention error at ``n`` (:func:`finite_size_theory`), when
        computed (``compute(..., finite_size=True)``).
    gammas : ndarray of shape (F, S) or None
        Attention's ridge parameter of every entry and setting: ``gamma`` everywhere (``None``)
        or, for an atlas computed with ``matched=True``, the same ``gamma / tau`` as ridge's
        ``gamma`` (:func:`attn_lib.studies.sweeps.matched_gamma`).
    """

    entries: tuple[Entry, ...]
    settings: dict[str, Setting]
    gamma: float
    n: int
    hermite: tuple[Hermite, ...]
    theory: np.ndarray
    ridge_theory: np.ndarray
    attention: np.ndarray
    ridge: np.ndarray
    finite: np.ndarray | None = None
    gammas: np.ndarray | None = None

    @property
    def labels(self) -> list[str]:
        """Entry labels, length F."""
        return [e.label for e in self.entries]

    @property
    def ratio(self) -> np.ndarray:
        """``a1^2 / nu`` of every entry, shape ``(F,)`` (snapped to 0 below 1e-9)."""
        return np.array([_ratio(e.f) for e in self.entries])

    @property
    def mean(self) -> np.ndarray:
        """Simulated mean error, shape ``(F, S)``."""
        return self.attention.mean(axis=2)

    @property
    def sem(self) -> np.ndarray:
        """Standard error of the simulated mean (:func:`attn_lib.simulation.trials.standard_error`), shape ``(F, S)``."""
        return standard_error(self.attention, axis=2)

    def deltas(self) -> dict[str, float]:
        """Coherent shift ``delta`` of every setting at the simulated ``n``."""
        return {k: s.delta(self.n) for k, s in self.settings.items()}

    def groups(self) -> dict[str, list[int]]:
        """Entries with equal ``a1^2 / nu`` (within 1e-9), keyed by the labels of their named members.

        Only groups with at least two members are returned; the first index is a named
        function when the group has one (the reference of :meth:`groups_summary`).
        """
        ratio = self.ratio
        order = sorted(range(len(self.entries)), key=lambda i: self.entries[i].kind != "named")
        groups: list[list[int]] = []
        for i in order:
            for g in groups:
                if abs(ratio[g[0]] - ratio[i]) <= _RATIO_TOL:
                    g.append(i)
                    break
            else:
                groups.append([i])
        out = {}
        for g in groups:
            if len(g) < 2:
                continue
            named = [self.entries[i].label for i in g if self.entries[i].kind == "named"]
            out[", ".join(named) if named else self.entries[g[0]].label] = g
        return out

    def table(self) -> pd.DataFrame:
        """The atlas as a :class:`pandas.DataFrame`, one row per entry.

        Columns ``kind, a1, a2, nu, a1^2/nu`` and, for every setting ``s``,
        ``DE <s>`` (theory), ``MC <s>`` (simulated mean) and ``SEM <s>``.
        """
        import pandas as pd

        cols: dict[str, object] = {
            "kind": [e.kind for e in self.entries],
            "a1": [h.a1 for h in self.hermite],
            "a2": [h.a2 for h in self.hermite],
            "nu": [h.nu for h in self.hermite],
            "a1^2/nu": self.ratio,
        }
        mean, sem = self.mean, self.sem
        for k, name in enumerate(self.settings):
            cols[f"DE {name}"] = self.theory[:, k]
            cols[f"MC {name}"] = mean[:, k]
            cols[f"SEM {name}"] = sem[:, k]
        return pd.DataFrame(cols, index=pd.Index(self.labels, name="f"))

    def paired(self, i: int, j: int) -> tuple[np.ndarray, np.ndarray]:
        """Mean and standard error of the per-draw difference ``E_i - E_j``, each of shape ``(S,)``.

        Both functions see the same tokens in each draw, so the difference is far less noisy
        than either error.
        """
        F = len(self.entries)
        for name, v in (("i", i), ("j", j)):
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 0 <= v < F:
                raise ValueError(f"{name} must be an entry index in [0, {F - 1}], got {v!r}")
        d = self.attention[i] - self.attention[j]
        return d.mean(axis=1), standard_error(d, axis=1)

    def groups_summary(self) -> pd.DataFrame:
        """Spread of the simulated errors within every group of equal ``a1^2 / nu``.

        Returns
        -------
        pandas.DataFrame
            One row per (group, setting) with ``members``, ``a1^2/nu``, ``DE spread`` (max -
            min of the theory, ~1e-12 by construction), ``MC spread`` (max - min of the
            simulated means), ``FS spread`` (max - min of the finite-size theory, NaN without
            it), ``SEM`` (largest standard error of a member's mean),
            ``spread / SEM``, ``max |z|`` (largest ``|mean / sem|`` of the paired difference of
            a member and the reference, the group's first entry) and ``rel. spread`` (MC
            spread over the mean error of the group).
        """
        import pandas as pd

        rows = []
        mean, sem, ratio = self.mean, self.sem, self.ratio
        for label, idx in self.groups().items():
            z = np.array([np.abs(m / np.where(s > 0, s, np.inf))
                          for m, s in (self.paired(i, idx[0]) for i in idx[1:])])
            for k, name in enumerate(self.settings):
                spread = float(np.ptp(mean[idx, k]))
                rows.append({"group": label, "setting": name, "members": len(idx),
                             "a1^2/nu": float(ratio[idx[0]]),
                             "DE spread": float(np.ptp(self.theory[idx, k])),
                             "MC spread": spread,
                             "FS spread": (np.nan if self.finite is None
                                           else float(np.ptp(self.finite[idx, k]))),
                             "SEM": float(sem[idx, k].max()),
                             "spread / SEM": spread / float(sem[idx, k].max()),
                             "max |z|": float(z[:, k].max()),
                             "rel. spread": spread / float(mean[idx, k].mean())})
        return pd.DataFrame(rows)

    def _values(self, theory: str) -> np.ndarray:
        """The theory ``(F, S)`` named by ``theory`` (one of :data:`THEORIES`)."""
        theory = check_choice(theory, "theory", THEORIES)
        if theory == "limit":
            return self.theory
        if self.finite is None:
            raise ValueError("theory='finite' needs an atlas computed with finite_size=True")
        return self.finite

    def explained(self, theory: str = "limit", within_groups: bool = False) -> np.ndarray:
        """Share of the variance of the simulated means across entries explained by a theory.

        ``1 - sum_f (MC_f - T_f)^2 / sum_f (MC_f - mean_f MC)^2`` per setting, shape ``(S,)``,
        with ``T`` the proportional limit (``theory="limit"``, :attr:`theory`) or the
        finite-size theory (``"finite"``, :attr:`finite`): 1 when the theory accounts for every
        difference between nonlinearities, 0 or less when it explains none of them; NaN where
        the simulated means do not vary (e.g. a single entry).

        With ``within_groups=True`` only the differences *within* the groups of equal
        ``a1^2 / nu`` (:meth:`groups`) count: ``MC_f`` and ``T_f`` are centred on their group's
        mean and the sums run over the members of the groups. The limit, constant within a
        group, explains exactly 0 of that variance.
        """
        T = self._values(theory)
        mean = self.mean
        if check_bool(within_groups, "within_groups"):
            parts = [(mean[g] - mean[g].mean(axis=0), T[g] - T[g].mean(axis=0))
                     for g in self.groups().values()]
            if not parts:
                return np.full(mean.shape[1], np.nan)
            mean, T = np.concatenate([m for m, _ in parts]), np.concatenate([t for _, t in parts])
            total = (mean ** 2).sum(axis=0)
        else:
            total = ((mean - mean.mean(axis=0)) ** 2).sum(axis=0)
        resid = ((mean - T) ** 2).sum(axis=0)
        out = np.full(total.shape, np.nan)
        np.divide(resid, total, out=out, where=total > 0)
        return np.where(total > 0, 1.0 - out, np.nan)

    def deviation(self, theory: str = "finite") -> tuple[np.ndarray, np.ndarray]:
        """Relative deviation ``(MC_f - T_f) / T_f`` of the simulated mean from a theory.

        Parameters
        ----------
        theory : {"limit", "finite"}, default "finite"
            As in :meth:`explained`.

        Returns
        -------
        dev, se : ndarray of shape (F, S)
            The deviation and its standard error ``sem / T`` (the theory has no noise).
        """
        T = self._values(theory)
        return self.mean / T - 1.0, self.sem / T


def compute(entries: Sequence[Entry], settings: Mapping[str, Setting] | None = None,
            gamma: float = GAMMA, n: int = 256, trials: int = 4, seed: int = 0,
            finite_size: bool = False, matched: bool = False) -> Atlas:
    """Hermite data, theory and cached Monte Carlo of every entry at every setting.

    Parameters
    ----------
    entries : sequence of Entry, length F
        From :func:`catalogue`; labels must be unique.
    settings : mapping of str to Setting, optional
        Default :func:`default_settings` ``()``. Each entry's ``f`` replaces the setting's.
    gamma : float, default :data:`GAMMA`
        Ridge parameter ``> 0``.
    n : int, default 256
        Tokens of the simulation (``p = round(c n)``).
    trials : int, default 4
        Draws per (entry, setting), at least 2 (for standard errors). Draw ``t`` uses the same
        seed for every entry and setting (common random numbers).
    seed : int, default 0
    finite_size : bool, default False
        Also compute the finite-size theory at ``n`` (:func:`finite_size_theory`, up to a
        second per entry and setting, cached), stored in :attr:`Atlas.finite`.
    matched : bool, default False
        The book's scale convention: ``gamma`` is ridge regression's ridge parameter and every
        entry is simulated and evaluated at the same ``gamma / tau``
        (:func:`attn_lib.studies.sweeps.matched_gamma`; ``tau = a1^2 (1 + 1/c) + b2`` is the
        same within a group of equal ``a1^2 / nu`` at ``nu = 1``), stored in
        :attr:`Atlas.gammas`. One draw gives the errors at every ``gamma``, so the draws are
        those of ``matched=False``.

    Returns
    -------
    Atlas
    """
    entries = tuple(entries)
    if not entries:
        raise ValueError("entries must not be empty")
    for e in entries:
        if not isinstance(e, Entry):
            raise TypeError(f"entries must be atlas.Entry instances, got {type(e).__name__}")
    labels = [e.label for e in entries]
    if len(set(labels)) != len(labels):
        raise ValueError("entries must have unique labels")
    settings = dict(default_settings() if settings is None else settings)
    if not settings:
        raise ValueError("settings must not be empty")
    for s in settings.values():
        if not isinstance(s, Setting):
            raise TypeError(f"settings must map names to attn_lib.Setting, got {type(s).__name__}")
    gamma = check_real(gamma, "gamma", low=0.0, low_open=True)
    n = check_int(n, "n")
    trials = check_int(trials, "trials", low=2)
    seed = check_seed(seed)
    finite_size = check_bool(finite_size, "finite_size")
    matched = check_bool(matched, "matched")

    grid = [dataclasses.replace(s, f=e.f) for e in entries for s in settings.values()]
    F, S = len(entries), len(settings)
    ridge_theory = sweeps.equivalents(list(settings.values()), gamma, model="ridge")
    if not matched:
        theory = sweeps.equivalents(grid, gamma).reshape(F, S)
        mc = sweeps.simulations(grid, gamma, n=n, trials=trials, seed=seed)
        attention, ridge, gammas = mc.values("attention")[:, :, 0], mc.ridge[:S, :, 0], None
    else:
        from ..theory.attention import attention_error_batch

        gam = np.array([float(sweeps.matched_gamma(s, gamma)) for s in grid])
        theory = np.asarray(attention_error_batch(grid, gam[:, None]), dtype=float)
        theory = theory[:, 0].reshape(F, S)
        uniq = np.unique(np.append(gam, gamma))    # one draw gives every gamma
        mc = sweeps.simulations(grid, uniq, n=n, trials=trials, seed=seed)
        attention = mc.values("attention")[np.arange(F * S), :, np.searchsorted(uniq, gam)]
        ridge = mc.ridge[:S, :, int(np.searchsorted(uniq, gamma))]
        gammas = gam.reshape(F, S)
    return Atlas(entries=entries, settings=settings, gamma=gamma, n=n,
                 hermite=tuple(hermite.coefficients(e.f) for e in entries), theory=theory,
                 ridge_theory=ridge_theory, attention=attention.reshape(F, S, trials),
                 ridge=ridge,
                 finite=(finite_size_theory(entries, settings, gamma if gammas is None
                                            else gammas, n) if finite_size else None),
                 gammas=gammas)

"""Monte Carlo interpolation errors of nonlinear attention and of ridge regression.

One draw of the model (:func:`attn_lib.model.data.draw`) gives the error curves
``E(gamma) = gamma^2 y^T Q^2 y / n``, ``Q = (Phi^T Phi / n + gamma I)^{-1}``, of attention
(``Phi = X K``; under :class:`~attn_lib.model.setting.Softmax` attention the raw output
``Phi = X A``, no rescaling) and of ridge regression (``Phi = X``) through :func:`draw_errors`.
:func:`errors` takes ``gamma`` in the library's one convention (:func:`raw_gammas`): the same
``gamma`` as :func:`attn_lib.theory.attention_error` for every attention kind (a masked softmax
``gamma`` is the effective ``gamma_raw / s_n^2``), or, with ``relative=True``, each model at its
own ``gamma = g tau`` (equal ``gamma / tau``, the book's fair comparison);
:func:`errors` runs seeded trials of it (:meth:`attn_lib.simulation.trials.Trials.run`), in-process
or on a Dask cluster (:mod:`attn_lib.simulation.executor`); :func:`errors_plan` lists its trials
without running them, so that a sweep can send the trials of many settings at once.

A :class:`~attn_lib.model.setting.MatrixSetting` (any key-query matrix ``M`` and signal ``mu``)
is drawn the same way, with the logits ``X^T M X / sqrt(p)``; its ``n`` must give its ``p``. A
:class:`~attn_lib.model.setting.HeadsSetting` (multi-head attention as GPT-2 computes it) applies
the kernel step to each head's logits and writes each head's features into its block of rows.
A :class:`~attn_lib.model.setting.CovarianceSetting` draws ``Z = C^{1/2} Z_0``;
:func:`subset_errors` computes the same errors on real tokens (random balanced subsets).

The error of one draw lives in :mod:`attn_lib.simulation.resolvent` and the trials and their
summaries in :mod:`attn_lib.simulation.trials`; their names are importable from here too.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .. import _domain
from ..model import data, kernel
from .._validation import (check_array, check_bool, check_gammas, check_int, check_seed, check_setting,
                           check_tokens)
from ..model.scale import feature_scale, softmax_scale
from ..model.nonlinearity import check_nonlinearity
from ..model.setting import CovarianceSetting, Entrywise, HeadsSetting, MatrixSetting, RankSetting, Setting, Softmax
from .resolvent import interpolation_error, interpolation_errors
from .trials import Plan, Stats, Trials

__all__ = ["draw_errors", "sample_errors", "SimulationResult", "errors", "errors_plan", "raw_gammas",
           "self_weight", "subset_errors"]

#: The attention kinds and the setting types the simulator draws.
KINDS = (Entrywise, Softmax)
TYPES = (Setting, RankSetting, MatrixSetting, HeadsSetting)


def _kernel(setting: Setting | RankSetting | MatrixSetting, s: data.Sample, keep_diagonal: bool
            ) -> Callable[..., np.ndarray]:
    """The kernel of the draw ``s``: ``kern(gram=None, use_symmetry=False) -> K`` (``(n, n)``).

    Entry-wise (:func:`~attn_lib.model.kernel.attention_kernel`, centred at
    ``setting.hermite.a0``) or softmax (:func:`~attn_lib.model.kernel.softmax_kernel`); for a
    :class:`~attn_lib.model.setting.MatrixSetting` the same steps on
    :func:`~attn_lib.model.kernel.matrix_logits` (``gram`` and ``use_symmetry`` do not apply).
    """
    kind, p = setting.attention, s.X.shape[0]
    if not isinstance(kind, Softmax):
        f = check_nonlinearity(setting.f)
        a0 = setting.hermite.a0  # E f(sigma xi): the off-diagonal logits are ~ N(0, sigma^2)
    if isinstance(setting, MatrixSetting):
        def kern(gram: np.ndarray | None = None, use_symmetry: bool = False) -> np.ndarray:
            assert s.Z is not None  # a MatrixSetting's draw keeps its noise
            T = kernel.matrix_logits(s.Z, s.y, s.mu, setting.M)
            if isinstance(kind, Softmax):
                return kernel.softmax_columns(T, kind.beta, kind.mask)
            return kernel.apply(f, T, p, keep_diagonal, a0, overwrite=True)
    elif isinstance(kind, Softmax):
        def kern(gram: np.ndarray | None = None, use_symmetry: bool = False) -> np.ndarray:
            assert s.w_K is not None and s.w_Q is not None  # drawn for these settings
            return kernel.softmax_kernel(s.X, s.w_K, s.w_Q, kind.beta, setting.alpha, kind.mask,
                                         gram)
    else:
        def kern(gram: np.ndarray | None = None, use_symmetry: bool = False) -> np.ndarray:
            assert s.w_K is not None and s.w_Q is not None  # drawn for these settings
            return kernel.attention_kernel(s.X, f, s.w_K, s.w_Q, setting.alpha, keep_diagonal,
                                           gram, a0, use_symmetry)
    return kern


def _head_features(setting: HeadsSetting, s: data.Sample, keep_diagonal: bool) -> np.ndarray:
    """``Phi = [X_1 K_1; ...; X_H K_H]`` of the draw ``s`` (shape ``(p, n)``).

    :func:`~attn_lib.model.kernel.head_features` with head ``h``'s step: the entry-wise ``f``
    centred at the head's own ``E f(sigma_h xi)`` (:func:`~attn_lib.model.kernel.apply`) or the
    column softmax (:func:`~attn_lib.model.kernel.softmax_columns`).
    """
    kind, p = setting.attention, s.X.shape[0]
    if isinstance(kind, Softmax):
        def step(h: int, T: np.ndarray) -> np.ndarray:
            return kernel.softmax_columns(T, kind.beta, kind.mask)
    else:
        func = check_nonlinearity(setting.f)

        def step(h: int, T: np.ndarray) -> np.ndarray:
            return kernel.apply(func, T, p, keep_diagonal, setting.hermites[h].a0, overwrite=True)
    assert s.Z is not None  # a HeadsSetting's draw keeps its noise
    return kernel.head_features(s.Z, s.y, {0: s.X}, {0: s.mu}, setting.heads, step)[0]


def draw_errors(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: np.ndarray,
                n: int, rng: np.random.Generator, keep_diagonal: bool = False, attention: bool = True,
                ridge_gammas: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray]:
    """Attention and ridge errors of one draw, each shaped like ``gammas``.

    ``gammas`` are the raw ridge parameters of the attention features and ``ridge_gammas``
    (default ``gammas``) those of ridge's (:func:`raw_gammas` converts the library's ``gamma``).

    When ``p >= n`` the attention Gram matrix is formed as ``K^T (X^T X) K`` (reusing ``X^T X``,
    which the kernel needs anyway); otherwise ``Phi Phi^T`` with ``Phi = X K``. With
    ``attention=False`` only the ridge error is computed (the attention entry is ``None``).
    Under :class:`~attn_lib.model.setting.Softmax` attention the kernel is
    :func:`attn_lib.model.kernel.softmax_kernel` (``f`` and ``keep_diagonal`` do not apply) and
    the features are the raw ``Phi = X A``. A :class:`~attn_lib.model.setting.MatrixSetting`'s
    logits are :func:`attn_lib.model.kernel.matrix_logits` (``M Z``, ``Z^T (M Z)`` and
    rank-one terms: two GEMMs more than ``X^T X`` alone), followed by the same kernel step. A
    :class:`~attn_lib.model.setting.HeadsSetting` does that per head (:func:`_head_features`) and
    takes the features ``Phi`` for any ``p``.

    Notes
    -----
    Beyond its three unavoidable GEMMs (``X^T X``, ``X K``, ``Phi Phi^T`` when ``p < n``), a
    trial makes one pass over the ``n x n`` kernel memory (scaling, rank-one term, ``f``,
    centring and ``1 / sqrt(p)`` on cache-sized row blocks, on the BLAS threads:
    :func:`attn_lib.model.kernel.attention_kernel`) and the attention and ridge tridiagonal
    reductions (:func:`attn_lib.simulation.resolvent.interpolation_errors`).
    Everything is bit-identical to evaluating ``f`` on the whole logits array, except that for
    ``p < n`` and aligned ``w_K``, ``w_Q`` the symmetric kernel is mirrored (``use_symmetry``):
    half the evaluations of ``f``; the errors then move by at most 2e-14 relative (measured
    over the registered ``f``, ``c`` = 0.25 and 0.5, gammas 1e-5 to 10). For ``p >= n`` the
    Gram ``K^T G K / n`` is ill-conditioned at small ``gamma`` (mirroring moved the error at
    ``gamma = 1e-5`` by up to 5e-10, a random one-ulp change of ``K`` by up to 2e-10), so
    there ``K`` is computed entry by entry.
    """
    return sample_errors(setting, data.draw(setting, n, rng), gammas, keep_diagonal, attention,
                         ridge_gammas)


def sample_errors(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, s: data.Sample,
                  gammas: np.ndarray, keep_diagonal: bool = False, attention: bool = True,
                  ridge_gammas: np.ndarray | None = None) -> tuple[np.ndarray | None, np.ndarray]:
    """The errors of :func:`draw_errors` on the tokens of the sample ``s`` (drawn, or real
    tokens: :func:`subset_errors`)."""
    n = s.X.shape[1]
    p = s.X.shape[0]
    rg = gammas if ridge_gammas is None else ridge_gammas
    if not attention:
        return None, interpolation_error(s.X, s.y, rg)
    if isinstance(setting, HeadsSetting):
        att, ridge = interpolation_errors([_head_features(setting, s, keep_diagonal), s.X], s.y,
                                          [gammas, rg])
        return att, ridge
    kern = _kernel(setting, s, keep_diagonal)
    if p >= n:
        G = s.X.T @ s.X
        K = kern(G)
        A = K.T @ (G @ K)
        A /= n
        G /= n  # in place: the kernel is done with X^T X
        att, ridge = interpolation_errors([A, G], s.y, [gammas, rg], gram=True)
    else:
        K = kern(use_symmetry=True)
        att, ridge = interpolation_errors([s.X @ K, s.X], s.y, [gammas, rg])
    return att, ridge


class SimulationResult(Trials):
    """Monte Carlo errors of attention (``Phi = X K``) and ridge regression (``Phi = X``).

    A :class:`~attn_lib.simulation.trials.Trials` with the curves ``"attention"`` (absent for a
    ridge-only run) and ``"ridge"``, each of shape ``(trials, *gammas.shape)``.
    """

    @property
    def attention(self) -> Stats | None:
        """:class:`~attn_lib.simulation.trials.Stats` of the attention error; ``None`` if not simulated."""
        return self.stats("attention") if "attention" in self.values else None

    @property
    def ridge(self) -> Stats:
        """:class:`~attn_lib.simulation.trials.Stats` of the ridge error."""
        return self.stats("ridge")


def raw_gammas(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object,
               n: int, relative: bool = False, keep_diagonal: bool = False
               ) -> tuple[np.ndarray, np.ndarray]:
    r"""The raw ridge parameters ``(attention, ridge)`` of the features at ``n`` tokens for ``gammas``.

    The library's one ``gamma`` convention, shared by the simulator and the theory:

    * by default attention and ridge take ``gamma`` as it is, except masked softmax attention,
      whose ``gamma`` is the **effective** ridge parameter of :mod:`attn_lib.theory.softmax`:
      its raw features ``X A`` are ``s_n`` times the entry-wise kernel's
      (:func:`attn_lib.model.scale.softmax_scale`, ``s_n ~ sqrt(p) / n``), so they are
      regularised with ``s_n^2 gamma``, the ``gamma`` that
      :func:`attn_lib.theory.attention_error` takes (unmasked softmax, ``A`` close to ``I``, has
      the scale of ``X``: ``gamma`` as it is);
    * ``relative=True``: each model at its own ``gamma = g tau``, ``tau`` its mean feature
      eigenvalue (:func:`attn_lib.model.scale.feature_scale`: ridge ``c``, attention its
      predicted ``tau``, raw for softmax): equal ``gamma / tau``, the book's fair comparison.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
    gammas : float or array_like of shape (G,)
        Positive ridge parameters in that convention.
    n : int
        Tokens (for softmax, ``s_n`` and ``tau`` depend on it).
    relative : bool, default False
    keep_diagonal : bool, default False
        As in :func:`errors` (``tau`` of a kernel with its diagonal, linear ``f`` only).

    Returns
    -------
    attention, ridge : ndarray shaped like ``gammas``
    """
    setting = check_setting(setting, types=TYPES, attention=KINDS)
    g = check_gammas(gammas)
    n = check_tokens(n)
    if check_bool(relative, "relative"):
        return (feature_scale(setting, keep_diagonal=keep_diagonal, n=n) * g,
                feature_scale(setting, "ridge") * g)
    if isinstance(setting.attention, Softmax) and setting.attention.mask:
        return g * softmax_scale(setting, n) ** 2, g
    return g, g


def errors(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object,
           n: int = 2048,
           trials: int = 4, seed: int = 0,
           keep_diagonal: bool = False, progress: bool | None = None,
           attention: bool = True, scheduler: str | None = None,
           relative: bool = False) -> SimulationResult:
    """Monte Carlo interpolation errors of attention and ridge regression.

    Parameters
    ----------
    setting : Setting, RankSetting, MatrixSetting or HeadsSetting
        Model scalars (rank-one or rank-``r`` weights), a given key-query matrix and signal, or
        given head matrices (multi-head attention), with :class:`~attn_lib.model.setting.Entrywise` or
        :class:`~attn_lib.model.setting.Softmax` attention (softmax ignores ``setting.f``).
    gammas : float or array_like of shape (G,)
        Positive ridge parameters, the same ``gamma`` as :func:`attn_lib.theory.attention_error`
        and :func:`attn_lib.theory.ridge_error` take for every attention kind: under masked
        softmax the effective ``gamma_raw / s_n^2`` (the features ``X A`` are regularised with
        ``s_n^2 gamma``, :func:`raw_gammas`).
    n : int, default 2048
        Number of tokens; ``p = max(1, round(c n))``. A ``MatrixSetting`` or ``HeadsSetting``
        fixes ``p``, and an ``n`` with ``round(c n) != p`` raises ``ValueError``
        (:meth:`MatrixSetting.p`).
    trials : int, default 4
        Independent draws. Trial ``t`` uses ``SeedSequence(seed).spawn(trials)[t]``, so fewer
        trials are a prefix of more.
    seed : int, default 0
        Non-negative root seed.
    keep_diagonal : bool, default False
        Keep the kernel's diagonal (see :mod:`attn_lib.model.kernel`); entry-wise attention only
        (softmax has ``Softmax(beta, mask=...)``).
    progress : bool or None, default None
        Show a tqdm progress bar over trials; ``None``: when stderr is a terminal and the run
        lasts more than a few seconds (never in a notebook or under pytest).
    attention : bool, default True
        Also simulate attention; ``False`` gives ridge only (``.attention`` is ``None``).
    scheduler : str, optional
        Where the trials run (:mod:`attn_lib.simulation.executor`; default
        ``$ATTN_BOOK_SCHEDULER``, else in-process); the result is the same in every mode (bit
        for bit at the same BLAS threads per trial, see the executor). Leave
        it out of a cached call (:func:`attn_lib.cache.cached`), whose key would include it.
    relative : bool, default False
        Read ``gammas`` as ``g = gamma / tau``: attention at ``tau_att g`` and ridge at ``c g``,
        equal effective regularisation (:func:`raw_gammas`; ``tau`` predicted by
        :func:`attn_lib.model.scale.feature_scale`, any setting type).

    Returns
    -------
    SimulationResult
        ``.attention`` and ``.ridge`` with ``mean``, ``std`` (ddof=0), ``sem`` and ``values``
        (shape ``(trials, *gammas.shape)``); ``.gammas`` as given.

    Warns
    -----
    DomainWarning
        For a ``MatrixSetting`` or ``HeadsSetting`` whose logit scale ``||M||_F / sqrt(p)``
        is more than 4 times away from one (a raw weight matrix: ``f`` reads saturated
        logits; :func:`attn_lib.studies.gpt2.normalise`, :mod:`attn_lib.theory.domain`).
    """
    plan = errors_plan(setting, gammas, n, trials, seed, keep_diagonal, attention, relative)
    _domain.check_scale(setting, call="simulate.errors")
    return plan.run(progress=progress, scheduler=scheduler)


def errors_plan(setting: Setting | RankSetting | MatrixSetting | HeadsSetting, gammas: object,
                n: int = 2048,
                trials: int = 4, seed: int = 0,
                keep_diagonal: bool = False, attention: bool = True,
                relative: bool = False) -> Plan[SimulationResult]:
    """The trials of :func:`errors` (same parameters), as a :class:`~.trials.Plan`."""
    check_setting(setting, types=TYPES, attention=KINDS)
    if not isinstance(keep_diagonal, bool) or not isinstance(attention, bool):
        raise TypeError("keep_diagonal and attention must be bool")
    if keep_diagonal and isinstance(setting.attention, Softmax):
        raise ValueError("keep_diagonal applies to entry-wise attention; softmax attention masks "
                         "its self-pairs with Softmax(beta, mask=True) and keeps them with mask=False")
    g = check_gammas(gammas)
    n = check_int(n, "n")
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    p = setting.p(n)  # a MatrixSetting or HeadsSetting checks that n gives its p
    if not isinstance(setting, (MatrixSetting, HeadsSetting)):
        data.geometry(setting, p)  # fail fast when n is too small for the geometry
    g_att, g_ridge = raw_gammas(setting, g, n, relative, keep_diagonal)

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        att, ridge = draw_errors(setting, g_att, n, rng, keep_diagonal, attention, g_ridge)
        return {"ridge": ridge} if att is None else {"attention": att, "ridge": ridge}

    return SimulationResult.plan(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)


def subset_errors(setting: CovarianceSetting, X: object, y: object, gammas: object, n: int,
                  trials: int = 4, seed: int = 0, relative: bool = False,
                  scheduler: str | None = None) -> SimulationResult:
    """The errors of attention and ridge on real tokens: random balanced subsets of ``n`` of them.

    Trial ``t`` draws ``n / 2`` tokens of each class without replacement from
    ``SeedSequence(seed).spawn(trials)[t]`` and computes both errors on them exactly as
    :func:`errors` does on a draw (the same kernel, centring ``E f(sigma xi)`` at the setting's
    logit scale, and ``gamma`` convention: :func:`raw_gammas` of ``setting``).

    Parameters
    ----------
    setting : CovarianceSetting
        The model of the tokens (usually :meth:`~attn_lib.model.setting.CovarianceSetting.from_tokens`
        of ``X, y``): its ``M``, ``f``, attention kind, ``c`` (``round(c n)`` must be ``p``) and
        feature scales.
    X : array_like of shape (p, N)
        All tokens, as columns.
    y : array_like of shape (N,)
        Their labels ``+-1``.
    gammas : float or array_like of shape (G,)
    n : int
        Tokens per subset, even, at most twice the smaller class.
    trials, seed, relative, scheduler
        As for :func:`errors`.

    Returns
    -------
    SimulationResult
    """
    check_setting(setting, types=(CovarianceSetting,), attention=KINDS)
    Xa = check_array(X, "X", ndim=2)
    ya = check_array(y, "y")
    p, N = Xa.shape
    if ya.shape != (N,) or not np.all(np.isin(ya, (-1.0, 1.0))):
        raise ValueError(f"y must hold one label +1 or -1 per column of X ({N})")
    n = check_tokens(n)
    setting.p(n)  # round(c n) = p
    plus, minus = np.flatnonzero(ya > 0), np.flatnonzero(ya < 0)
    if n % 2 or n // 2 > min(plus.size, minus.size):
        raise ValueError(f"n must be even and at most {2 * min(plus.size, minus.size)} (twice the "
                         f"smaller class), got {n}")
    g = check_gammas(gammas)
    g_att, g_ridge = raw_gammas(setting, g, n, relative)
    mu = setting.mu

    def trial(rng: np.random.Generator) -> dict[str, np.ndarray]:
        idx = rng.permutation(np.concatenate([rng.choice(plus, n // 2, replace=False),
                                              rng.choice(minus, n // 2, replace=False)]))
        Xs, ys = Xa[:, idx], ya[idx]
        s = data.Sample(X=Xs, y=ys, mu=mu, w_K=None, w_Q=None, Z=Xs - np.outer(mu, ys))
        att, ridge = sample_errors(setting, s, g_att, ridge_gammas=g_ridge)
        assert att is not None
        return {"attention": att, "ridge": ridge}

    plan = SimulationResult.plan(trial, trials=check_int(trials, "trials"), seed=check_seed(seed),
                                 gammas=g, n=n, p=p)
    return plan.run(progress=False, scheduler=scheduler)


def self_weight(setting: Setting | RankSetting | MatrixSetting, n: int = 2048, trials: int = 4,
                seed: int = 0) -> Trials:
    """Monte Carlo of the mean weight ``tr(A) / n`` a query puts on itself under softmax.

    ``setting.attention`` must be :class:`~attn_lib.model.setting.Softmax`; with
    ``mask=False`` this shows the self-pair taking nearly all the weight (its logit is about
    ``alpha sqrt(p)``, for a ``MatrixSetting`` about ``tr(M) / sqrt(p)``, the others ``O(1)``).
    Seeded as :func:`errors` (the same draws); ``n`` as there.

    Returns
    -------
    Trials
        The curve ``"self_weight"`` of shape ``(trials,)`` (``gammas`` empty).
    """
    # one kernel per draw: not a HeadsSetting (one softmax per head)
    check_setting(setting, types=(Setting, RankSetting, MatrixSetting), attention=(Softmax,))
    n, trials, seed = check_int(n, "n", low=2), check_int(trials, "trials"), check_seed(seed)
    p = setting.p(n)
    if not isinstance(setting, MatrixSetting):
        data.geometry(setting, p)

    def trial(rng: np.random.Generator) -> dict[str, float]:
        A = _kernel(setting, data.draw(setting, n, rng), False)()
        return {"self_weight": kernel.self_weight(A)}

    return Trials.run(trial, trials=trials, seed=seed, gammas=np.empty(0), n=n, p=p)

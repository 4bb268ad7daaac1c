r"""The attention nonlinearity ``f``: one type for every function the library evaluates.

A :class:`Nonlinearity` is a frozen, hashable dataclass described by its fields only (no
lambdas), so settings that hold one can be keys of the disk cache (:mod:`attn_lib.cache`)
and of the Hermite-data cache. It knows its *break points* ``breaks``, the kinks and jumps where
``f`` is not smooth, which the Gaussian quadratures of :mod:`attn_lib.model.hermite` and
:mod:`attn_lib.theory.shift` put on panel edges.

Its ``base`` is a registered name (:data:`REGISTRY`), a vectorised user callable (which may
declare its kinks in a ``breaks`` attribute) or another :class:`Nonlinearity`. With
``u = scale t`` (``scale`` may be negative: ``-1`` reflects) it evaluates

* ``f(t) = g(u)`` (``nu`` and ``theta`` unset),
* ``f(t) = sqrt(nu / nu_g) g(u)`` (``nu`` set: output rescaled to variance ``nu``),
* ``f(t) = cos(theta) u + sin(theta) (g(u) - a0 - a1 u) / sqrt(nu_g - a1^2)`` (``theta`` set: the
  normalised non-linear part of ``g`` mixed with the identity),

where ``g`` is the base and ``a0, a1, nu_g`` its Hermite data (:func:`attn_lib.model.hermite.coefficients`).
``nu`` and ``theta`` need a registered base. The constructors build the families of the book:

==========================  ================================================  ==========================
constructor                 function                                          used by
==========================  ================================================  ==========================
:func:`normalised`          ``t -> sqrt(nu / nu_f) f(t)``                     sweeps, atlas, a1 = 0
:func:`mixture`             ``t -> cos(theta) t + sin(theta) h(t)``           sweeps, atlas, a1 = 0
:func:`reflected`           ``t -> sqrt(nu / nu_f) f(-t)``                    atlas
:func:`scaled`              ``t -> f(scale t)``                               ``Setting.canonical``, ``gpt2.fit_setting``
:func:`exponential`         ``f_beta(t) = exp(beta t - beta^2/2) - 1``        softmax attention
==========================  ================================================  ==========================

``f_beta`` is the entry-wise kernel hidden in softmax attention
(:class:`~attn_lib.model.setting.Softmax`); its base is an :class:`Exponential`, whose Hermite data
:mod:`attn_lib.model.hermite` gives in closed form.

Every transform is evaluated in the same order of floating-point operations as the wrappers it
replaces, so Hermite data and kernels are bit-identical to them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Union, cast

import numpy as np
from scipy import special

from .._validation import check_real

if TYPE_CHECKING:
    from .hermite import Hermite

__all__ = ["Nonlinearity", "NonlinearityLike", "REGISTRY", "Exponential", "check_nonlinearity",
           "check_registered", "normalised", "mixture", "reflected", "scaled", "exponential"]


def _linear(t: np.ndarray) -> np.ndarray:
    return np.asarray(t, dtype=float) * 1.0


def _relu(t: np.ndarray) -> np.ndarray:
    return np.maximum(t, 0.0)


def _trunc_relu(t: np.ndarray) -> np.ndarray:
    return np.clip(t, 0.0, 2.0)


def _trunc_exp(t: np.ndarray) -> np.ndarray:
    return np.exp(np.minimum(t, 2.0))


def _cubic(t: np.ndarray) -> np.ndarray:
    return np.asarray(t, dtype=float) ** 3


def _he3(t: np.ndarray) -> np.ndarray:
    return np.asarray(t, dtype=float) ** 3 - 3.0 * np.asarray(t, dtype=float)


def _poly(t: np.ndarray) -> np.ndarray:
    return np.asarray(t, dtype=float) + 0.5 * np.asarray(t, dtype=float) ** 2


#: The registered functions: name -> (vectorised function, points where it is not smooth).
_FUNCTIONS: dict[str, tuple[Callable[[np.ndarray], np.ndarray], tuple[float, ...]]] = {
    "linear": (_linear, ()),
    "tanh": (np.tanh, ()),
    "relu": (_relu, (0.0,)),
    "sign": (np.sign, (0.0,)),
    "cos": (np.cos, ()),
    "sin": (np.sin, ()),
    "trunc_relu": (_trunc_relu, (0.0, 2.0)),
    "trunc_exp": (_trunc_exp, (2.0,)),
    "erf": (special.erf, ()),
    # polynomials (Hermite data in closed form: t^2 = He2 + 1, t^3 = He3 + 3 He1)
    "quadratic": (np.square, ()),
    "cubic": (_cubic, ()),
    "he3": (_he3, ()),
    "poly": (_poly, ()),
}

_PROBE = np.linspace(-4.0, 4.0, 9)
_LINEAR_TOL = 1e-12  # a mixture needs b2 = nu - a1^2 above this


def check_registered(name: object, what: str) -> str:
    """``name`` if it is a key of :data:`REGISTRY`; ``what`` names the parameter in the error."""
    if not isinstance(name, str):
        raise TypeError(f"{what} must be the name of a registered nonlinearity "
                        f"{sorted(_FUNCTIONS)}, got {type(name).__name__}")
    if name not in _FUNCTIONS:
        raise ValueError(f"{what} must be one of {sorted(_FUNCTIONS)}, got {name!r}")
    return name


def _check_callable(f: object, name: str) -> None:
    """Probe a user callable on ``[-4, 4]``: vectorised, finite, with real ``breaks``."""
    if not callable(f):
        raise TypeError(f"{name} must be a registered name {sorted(_FUNCTIONS)} or a callable, "
                        f"got {type(f).__name__}")
    try:
        with np.errstate(all="ignore"):
            out = np.asarray(f(_PROBE.copy()), dtype=float)
    except Exception as exc:  # any failure of user code is reported as bad input
        raise ValueError(f"{name} must accept a float array and return one of the same shape; "
                         f"calling it on a probe array raised {exc!r}") from exc
    if out.shape != _PROBE.shape:
        raise ValueError(f"{name} must be vectorised: on an array of shape {_PROBE.shape} it "
                         f"returned shape {out.shape}")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} returned non-finite values on [-4, 4]")
    for b in getattr(f, "breaks", ()):
        check_real(b, f"{name}.breaks")


@dataclass(frozen=True)
class Exponential:
    r"""The centred exponential ``f_beta(t) = exp(beta t - beta^2 / 2) - 1`` of softmax attention.

    With ``xi ~ N(0, 1)``, ``E exp(beta xi) = e^{beta^2/2}``, so ``f_beta`` is centred and
    ``1 + f_beta(t) = exp(beta t) / E exp(beta xi)``: softmax weights over ``n`` keys are
    ``(1 + f_beta(t_ij)) / n`` once their normalising sums concentrate. Its Hermite coefficients
    are ``a_k = beta^k / sqrt(k!)`` (``E[He_k(xi) e^{beta xi}] = beta^k e^{beta^2/2}``) and
    ``nu = e^{beta^2} - 1``; with the argument shifted, ``E f_beta(h + xi) = e^{beta h} - 1``
    (:func:`attn_lib.model.hermite.coefficients` uses these closed forms).

    A callable base of :class:`Nonlinearity` (use :func:`exponential`), smooth (no ``breaks``).

    Parameters
    ----------
    beta : float
        Inverse temperature ``> 0``.
    """

    beta: float
    breaks = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "beta", check_real(self.beta, "beta", low=0.0, low_open=True))

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """``f_beta(t)``, an array shaped like ``t`` (``expm1``: accurate near ``f = 0``)."""
        return np.expm1(self.beta * np.asarray(t, dtype=float) - 0.5 * self.beta ** 2)


def _hermite(name: str) -> "Hermite":
    """Hermite data of a registered function (``hermite`` imports this module, hence here)."""
    from .hermite import coefficients
    return coefficients(name)


@dataclass(frozen=True)
class Nonlinearity:
    """An entry-wise nonlinearity with its break points (see the module docstring).

    Parameters
    ----------
    base : str or callable
        A name in :data:`REGISTRY`, a vectorised callable ``R -> R`` (kinks and jumps in an
        optional ``breaks`` attribute) or another :class:`Nonlinearity`.
    scale : float, default 1.0
        Non-zero factor on the argument, ``u = scale t`` (``-1``: reflection ``t -> -t``).
    nu : float, optional
        Target variance ``> 0``: the output is ``sqrt(nu / nu_g) g(u)``. Registered ``base`` only.
    theta : float, optional
        Mixing angle in ``[0, pi/2]``: ``cos(theta) u + sin(theta) h(u)`` with ``h`` the
        normalised non-linear part of ``g``. Registered ``base`` only; excludes ``nu``.

    Notes
    -----
    A constant factor on ``f`` multiplies every Hermite coefficient, so ``nu`` keeps
    ``a1^2 / nu``. The mixture has ``a0 = 0``, ``a1 = cos(theta)``, ``nu = 1`` and
    ``b2 = sin(theta)^2`` for every ``theta``. A reflection flips the sign of every odd Hermite
    coefficient and keeps the even ones.

    Examples
    --------
    >>> from attn_lib import hermite
    >>> round(hermite.coefficients(Nonlinearity("tanh", nu=1.0)).nu, 10)
    1.0
    """

    base: str | Callable[[np.ndarray], np.ndarray]
    scale: float = 1.0
    nu: float | None = None
    theta: float | None = None

    def __post_init__(self) -> None:
        set_ = functools.partial(object.__setattr__, self)
        if isinstance(self.base, str):
            check_registered(self.base, "base")
        elif not isinstance(self.base, Nonlinearity):
            _check_callable(self.base, "base")
        scale = check_real(self.scale, "scale")
        if scale == 0.0:
            raise ValueError("scale must be a non-zero real number, got 0.0")
        set_("scale", scale)
        if self.nu is not None and self.theta is not None:
            raise ValueError("nu and theta cannot both be set")
        if (self.nu is not None or self.theta is not None) and not isinstance(self.base, str):
            raise TypeError("nu and theta need a registered base name, got "
                            f"{type(self.base).__name__}")
        if self.nu is not None:
            set_("nu", check_real(self.nu, "nu", low=0.0, low_open=True))
            if _hermite(cast(str, self.base)).nu <= 0.0:  # a name (checked above)
                raise ValueError(f"base {self.base!r} is constant under N(0, 1); it cannot be "
                                 "normalised")
        if self.theta is not None:
            set_("theta", check_real(self.theta, "theta", low=0.0, high=float(np.pi / 2)))
            if _hermite(cast(str, self.base)).b2 <= _LINEAR_TOL:  # a name (checked above)
                raise ValueError(f"h={self.base!r} is linear under N(0, 1): it has no non-linear "
                                 "part")

    @property
    def _function(self) -> Callable[[np.ndarray], np.ndarray]:
        """The base as a plain callable (the registered function for a name)."""
        return _FUNCTIONS[self.base][0] if isinstance(self.base, str) else self.base

    @property
    def breaks(self) -> tuple[float, ...]:
        """Kinks and jumps of ``f``, sorted: those of the base divided by ``scale``."""
        inner = (_FUNCTIONS[self.base][1] if isinstance(self.base, str)
                 else getattr(self.base, "breaks", ()))
        return tuple(sorted(float(b) / self.scale for b in inner))

    @property
    def gain(self) -> float:
        """Output factor ``sqrt(nu / nu_g)`` (``1`` when ``nu`` is unset)."""
        if self.nu is None:
            return 1.0
        return float(np.sqrt(self.nu / _hermite(cast(str, self.base)).nu))  # nu: base is a name

    @property
    def plain(self) -> bool:
        """Whether ``f`` is its base itself (no scale, ``nu`` or ``theta``)."""
        return self.scale == 1.0 and self.nu is None and self.theta is None

    @property
    def registered(self) -> bool:
        """Whether ``f`` is built from registered functions only.

        Such an ``f`` (or :class:`Exponential`) is entry-wise NumPy code that releases the GIL, so a kernel may evaluate it
        on blocks of its argument in several threads (:mod:`attn_lib.model.kernel`); a user
        callable is always called once on the whole array.
        """
        return isinstance(self.base, (str, Exponential)) or (
            isinstance(self.base, Nonlinearity) and self.base.registered)

    @property
    def ufunc(self) -> np.ufunc | None:
        """The NumPy ufunc ``f`` is, if it is a bare registered one (lets kernels work in place)."""
        func = self._function
        return func if self.plain and isinstance(func, np.ufunc) else None

    def __call__(self, t: np.ndarray) -> np.ndarray:
        """``f(t)``, an array shaped like ``t``."""
        t = np.asarray(t, dtype=float)
        u = t if self.scale == 1.0 else self.scale * t
        g = self._function
        if self.theta is not None:
            d = _hermite(cast(str, self.base))  # theta: base is a name
            h = (np.asarray(g(u), dtype=float) - d.a0 - d.a1 * u) / np.sqrt(d.b2)
            return np.cos(self.theta) * u + np.sin(self.theta) * h
        if self.nu is not None:
            return self.gain * np.asarray(g(u), dtype=float)
        return np.asarray(g(u), dtype=float)


#: What the library accepts as a nonlinearity: a registered name, a callable or a Nonlinearity.
NonlinearityLike = Union[str, Callable[[np.ndarray], np.ndarray], Nonlinearity]

#: The registered nonlinearities, by name.
REGISTRY: dict[str, Nonlinearity] = {name: Nonlinearity(name) for name in _FUNCTIONS}


def check_nonlinearity(f: object, name: str = "f") -> Nonlinearity:
    """``f`` as a :class:`Nonlinearity`, validated.

    Parameters
    ----------
    f : str, callable or Nonlinearity
        A name in :data:`REGISTRY`, a vectorised function ``R -> R`` (its optional ``breaks``
        attribute lists kinks and jumps) or a :class:`Nonlinearity` (returned as is).
    name : str, default "f"
        Parameter name used in error messages.

    Raises
    ------
    ValueError
        Unknown name, or a callable that returns the wrong shape or non-finite values on a probe
        grid of ``[-4, 4]``.
    TypeError
        ``f`` is neither a string nor callable.
    """
    if isinstance(f, Nonlinearity):
        return f
    if isinstance(f, str):
        if f not in _FUNCTIONS:
            raise ValueError(f"{name} must be one of {sorted(_FUNCTIONS)} or a callable, "
                             f"got {f!r}")
        return REGISTRY[f]
    _check_callable(f, name)
    return Nonlinearity(cast("Callable[[np.ndarray], np.ndarray]", f))


def normalised(base: str, nu: float = 1.0) -> Nonlinearity:
    """A registered function rescaled to variance ``nu``: ``t -> sqrt(nu / nu_f) f(t)``.

    Parameters
    ----------
    base : str
        Name in :data:`REGISTRY` (``"tanh"``, ``"cos"``, ...).
    nu : float, default 1.0
        Target variance ``Var f(xi) > 0`` for ``xi ~ N(0, 1)``.
    """
    check_registered(base, "base")
    return Nonlinearity(base, nu=check_real(nu, "nu", low=0.0, low_open=True))


def mixture(theta: float, h: str = "cos") -> Nonlinearity:
    r"""``f_theta(t) = cos(theta) t + sin(theta) h(t)`` with ``a1 = cos(theta)`` and ``nu = 1``.

    ``h`` is the non-linear part of the registered ``g``, normalised:
    ``h(t) = (g(t) - a0 - a1 t) / sqrt(nu - a1^2)``; ``theta = 0`` is the identity and
    ``theta = pi/2`` is ``h`` alone (``a1 = 0``).

    Parameters
    ----------
    theta : float
        Mixing angle in ``[0, pi/2]``.
    h : str, default "cos"
        Registered function whose non-linear part is mixed in (not ``"linear"``).

    Examples
    --------
    >>> from attn_lib import hermite
    >>> c = hermite.coefficients(mixture(np.pi / 3))
    >>> round(c.a1, 10), round(c.nu, 10)
    (0.5, 1.0)
    """
    theta = check_real(theta, "theta", low=0.0, high=float(np.pi / 2))
    check_registered(h, "h")
    return Nonlinearity(h, theta=theta)


def reflected(base: str, nu: float = 1.0) -> Nonlinearity:
    """A registered function reflected and scaled to variance ``nu``: ``t -> sqrt(nu / nu_f) f(-t)``.

    Reflection flips the sign of every odd Hermite coefficient (``a1 -> -a1``) and keeps the
    even ones and ``nu``. For an odd ``f`` it is ``-f``; for ReLU it is ``relu(t) - t``.

    Parameters
    ----------
    base : str
        Name in :data:`REGISTRY`.
    nu : float, default 1.0
        Target variance ``> 0``.
    """
    return scaled(normalised(base, nu), -1.0)


def scaled(f: NonlinearityLike, scale: float) -> Nonlinearity:
    """The input-scaled nonlinearity ``t -> f(scale t)``, break points divided by ``scale``.

    ``scale = alpha`` is the full part ``alpha I`` of the weights moved into ``f``
    (:meth:`attn_lib.model.setting.Setting.canonical`); ``scale = -1`` is the reflection
    ``f(-t)`` of a negative ``alpha`` (:func:`attn_lib.studies.gpt2.fit_setting`).
    """
    f = check_nonlinearity(f)
    return Nonlinearity(f.base if f.plain else f, scale=scale)


def exponential(beta: float) -> Nonlinearity:
    """The centred exponential ``f_beta(t) = exp(beta t - beta^2/2) - 1`` (see :class:`Exponential`).

    Parameters
    ----------
    beta : float
        Inverse temperature ``> 0`` of the softmax whose entry-wise kernel this is.

    Examples
    --------
    >>> from attn_lib import hermite
    >>> h = hermite.coefficients(exponential(1.0))
    >>> h.a0, h.a1, round(h.nu, 12)
    (0.0, 1.0, 1.718281828459)
    """
    return Nonlinearity(Exponential(beta))

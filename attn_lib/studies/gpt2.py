r"""GPT-2 small query/key weights and the paper's full-plus-low-rank model.

Loading
-------
:func:`load_qk` returns the query and key projections ``W_Q, W_K`` (``768 x 768``, ``float64``,
exact copies of the released ``float32`` values) of one layer of OpenAI's pretrained GPT-2 small,
in the stored ``[in, out]`` orientation (``q = x @ W_Q + b_Q`` for a row vector ``x``). The weights
are looked up, in this order (:func:`find_source`),

1. at the path in the environment variable ``ATTN_BOOK_GPT2`` (see :data:`ENV_VAR`): the
   repository's ``gpt2_small_qk.npz``, a Hugging Face GPT-2 ``model.safetensors``, or a folder
   holding one of them (no fallback when it is set);
2. at ``../shared/gpt2_small_qk/gpt2_small_qk.npz`` relative to the repository root;
3. in the user cache, ``$ATTN_BOOK_GPT2_CACHE/gpt2_small_qk.npz`` (default
   ``~/.cache/attn-book/gpt2/``, or under ``$XDG_CACHE_HOME``);
4. otherwise they are downloaded once into that cache: HTTP range requests fetch only the
   needed tensors (88 MB of the 548 MB checkpoint) of the public Hugging Face checkpoint at a
   pinned revision (:data:`DOWNLOAD_URL`; ``$ATTN_BOOK_GPT2_URL`` replaces it), every array is
   checked against the SHA-256 hashes kept in the package, and the file is written atomically
   (see :mod:`attn_lib.studies._gpt2_weights`). ``ATTN_BOOK_GPT2_NO_DOWNLOAD=1`` forbids the
   download: then step 4 raises :class:`FileNotFoundError` instead.

In a ``model.safetensors`` the tensor ``h.{i}.attn.c_attn.weight`` (``768 x 2304``; keys with a
``transformer.`` prefix are accepted too) is split into its query, key and value thirds.

The paper's matrix
------------------
The paper's kernel is ``K_ij = f(x_i^T W_K^T W_Q x_j / sqrt(p)) / sqrt(p)`` with ``[out, in]``
weights: row ``i`` indexes keys and column ``j`` queries. With the stored ``[in, out]`` arrays the
matrix of that bilinear form is :func:`paper_matrix` ``A = W_K W_Q^T`` (summed over the 12 heads;
GPT-2's own logit of query ``j`` attending to key ``i`` is ``x_i^T A x_j / 8``). ``A`` is far from
symmetric (``||A - A^T||_F / ||A||_F`` is 1.15 to 1.38 across layers), so the orientation matters.

Model pieces that do **not** enter ``A``: the layer norm ``ln_1`` in front of attention, the
biases ``b_Q, b_K`` and GPT-2's per-head factor ``1/8``. The paper's tokens are ``N(0, I)`` plus a
rank-one signal, not layer-normed states; the factor ``1/8`` is a global scale that
:func:`normalise` removes anyway. :func:`load_layer` returns the biases and ``ln_1`` parameters
for readers who want to fold them in.

The fit
-------
:func:`fit` writes ``A = alpha I + sum_k s_k u_k v_k^T + residual`` in two steps:

* ``alpha = tr(A) / p``, the least-squares coefficient of the identity (``<A, I>_F / ||I||_F^2``),
  so that ``||A||_F^2 = alpha^2 p + ||A - alpha I||_F^2`` exactly;
* the truncated SVD of ``A - alpha I`` (Eckart–Young: the best rank-``k`` part given ``alpha``).

Shares are fractions of the *squared* Frobenius norm ("energy") of ``A``:
``share(k) = 1 - ||A - alpha I - A_k||_F^2 / ||A||_F^2`` (``share(0)`` is the identity alone).
The *norm ratio* of the identity part is ``|alpha| sqrt(p) / ||A||_F = sqrt(share(0))``.
:func:`verdict` turns a fit into a per-layer verdict by the rule stated there.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, overload

import numpy as np
from threadpoolctl import threadpool_limits

from ..model import data, hermite, kernel
from ..simulation.resolvent import interpolation_error
from ..simulation.trials import Stats, Trials
from . import _gpt2_weights as _weights
from .._validation import check_bool, check_gammas, check_int, check_real, check_seed, check_square
from ..model.nonlinearity import NonlinearityLike, check_nonlinearity, scaled
from ..model.setting import (ENTRYWISE, Attention, Entrywise, HeadsSetting, MatrixSetting,
                             RankSetting, Setting, Softmax)
from ..theory.attention import attention_error, heads_shift as theory_heads_shift

__all__ = [
    "ENV_VAR", "DOWNLOAD_URL", "N_LAYERS", "N_HEADS", "HEAD_DIM", "P",
    "Layer", "Spectrum", "Fit", "Summary", "MonteCarlo", "layer_summary",
    "DownloadError", "default_path", "find_source", "source_label", "load_qk", "load_layer",
    "paper_matrix", "head_matrix", "heads",
    "asymmetry", "spectrum", "shuffled", "normalise", "fit", "verdict", "VERDICT_RULE",
    "aligned_direction", "random_direction", "fit_setting", "fit_rank_setting",
    "matrix_theory", "heads_theory", "heads_shift", "simulate_matrices",
]

#: Environment variable holding the path of the weights (an ``.npz``, a ``model.safetensors``
#: or a folder with one of them).
ENV_VAR = "ATTN_BOOK_GPT2"
#: The public Hugging Face checkpoint (the repository formerly called ``gpt2``), at a pinned
#: revision.
DOWNLOAD_URL = _weights.DOWNLOAD_URL
N_LAYERS = 12
N_HEADS = 12
HEAD_DIM = 64
#: Hidden size of GPT-2 small.
P = 768

_REPO_ROOT = Path(__file__).resolve().parents[2]
_NPZ_NAME = "gpt2_small_qk.npz"
_ST_NAME = "model.safetensors"


# ----------------------------------------------------------------------------- loading
def default_path() -> Path:
    """``<repository>/../shared/gpt2_small_qk/gpt2_small_qk.npz`` (it may not exist)."""
    return _REPO_ROOT.parent / "shared" / "gpt2_small_qk" / _NPZ_NAME


DownloadError = _weights.DownloadError


def _download_hint() -> str:
    return (f"The public Hugging Face GPT-2 checkpoint is {DOWNLOAD_URL} (about 550 MB; e.g. "
            f"`curl -L -o model.safetensors {DOWNLOAD_URL}`); set {ENV_VAR}=/path/to/"
            f"model.safetensors, or leave both unset ({ENV_VAR}, {_weights.NO_DOWNLOAD_VAR}) to "
            f"let the book fetch the 88 MB it needs into {_weights.cache_path()}.")


def _resolve_dir(path: Path) -> Path | None:
    for name in (_NPZ_NAME, _ST_NAME):
        if (path / name).is_file():
            return path / name
    return None


def find_source(*, download: bool = True) -> Path:
    """The weights file :func:`load_qk` reads (see the module docstring for the search order).

    Parameters
    ----------
    download : bool, default True
        Download the weights into the user cache when no other source has them (unless
        ``ATTN_BOOK_GPT2_NO_DOWNLOAD`` forbids it). With ``False`` nothing is fetched.

    Raises
    ------
    FileNotFoundError
        If ``ATTN_BOOK_GPT2`` is set to a path that does not exist (no fallback then: the reader
        asked for that file), or if no source has the weights and downloading is off. The
        message lists where it looked and the one download step.
    DownloadError
        If the download fails (offline, server error, interrupted transfer, hash mismatch).
    """
    download = check_bool(download, "download")
    env = os.environ.get(ENV_VAR, "").strip()
    if env:
        path = Path(env).expanduser()
        if path.is_dir():
            found = _resolve_dir(path)
            if found is None:
                raise FileNotFoundError(
                    f"{ENV_VAR}={env!r} is a folder without {_NPZ_NAME} or {_ST_NAME}. "
                    + _download_hint())
            return found
        if not path.is_file():
            raise FileNotFoundError(
                f"{ENV_VAR}={env!r} does not exist (no fallback to other locations when it is "
                f"set). " + _download_hint())
        return path
    for path in (default_path(), _weights.cache_path()):
        if path.is_file():
            return path
    if download and _weights.downloads_allowed():
        return _weights.download()
    why = (f"{_weights.NO_DOWNLOAD_VAR} forbids downloading" if download
           else "downloading was not asked for")
    raise FileNotFoundError(
        f"GPT-2 weights not found: the environment variable {ENV_VAR} is not set, neither "
        f"{default_path()} nor {_weights.cache_path()} exists, and {why}. " + _download_hint())


def source_label(path: Path) -> str:
    """Where :func:`find_source`'s ``path`` comes from: ``"from $ATTN_BOOK_GPT2"``,
    ``"repository default ../shared/gpt2_small_qk/"`` or ``"user cache <folder>"`` (with ``~``
    for the home folder)."""
    if os.environ.get(ENV_VAR, "").strip():
        return "from $" + ENV_VAR
    if Path(path) == default_path():
        return "repository default ../shared/gpt2_small_qk/"
    folder, home = Path(path).parent, Path.home()
    if folder.is_relative_to(home):
        return f"user cache ~/{folder.relative_to(home).as_posix()}"
    return f"user cache {folder}"


def _kind(path: Path) -> str:
    """``"npz"`` or ``"safetensors"`` from the file's first bytes (not its name)."""
    with open(path, "rb") as fh:
        head = fh.read(9)
    if head[:2] == b"PK":
        return "npz"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    raise ValueError(f"{path} is neither a NumPy .npz archive nor a safetensors file")


@dataclass(frozen=True)
class Layer:
    """Attention-input parameters of one GPT-2 layer (``float64``, stored orientation).

    Attributes
    ----------
    W_Q, W_K : ndarray of shape (p, p)
        Query and key projections, ``[in, out]``.
    b_Q, b_K : ndarray of shape (p,)
        Their biases.
    ln_weight, ln_bias : ndarray of shape (p,)
        The ``ln_1`` layer norm applied before attention.
    """

    W_Q: np.ndarray
    W_K: np.ndarray
    b_Q: np.ndarray
    b_K: np.ndarray
    ln_weight: np.ndarray
    ln_bias: np.ndarray


def _split(w: np.ndarray, name: str) -> tuple[np.ndarray, np.ndarray]:
    if w.ndim not in (1, 2) or w.shape[-1] % 3:
        raise ValueError(f"{name} has shape {w.shape}; expected (d, 3d) or (3d,)")
    d = w.shape[-1] // 3
    if w.ndim == 2 and w.shape[0] != d:
        raise ValueError(f"{name} has shape {w.shape}; expected (d, 3d)")
    return w[..., :d], w[..., d:2 * d]


def _as64(a: np.ndarray) -> np.ndarray:
    return np.array(a, dtype=np.float64, copy=True)


def _read_npz(path: Path, layer: int, full: bool) -> dict[str, np.ndarray]:
    names = ["W_Q", "W_K"] + (["b_Q", "b_K", "ln_1.weight", "ln_1.bias"] if full else [])
    with np.load(path, allow_pickle=False) as z:
        missing = [f"h{layer}.{n}" for n in names if f"h{layer}.{n}" not in z.files]
        if missing:
            raise KeyError(f"{path} has no arrays {missing}")
        return {n: _as64(z[f"h{layer}.{n}"]) for n in names}


def _st_key(keys: set[str], name: str, path: Path) -> str:
    for k in (name, "transformer." + name):
        if k in keys:
            return k
    raise KeyError(f"{path} has no tensor {name!r} (nor 'transformer.{name}')")


def _read_safetensors(path: Path, layer: int, full: bool) -> dict[str, np.ndarray]:
    from safetensors import safe_open

    out: dict[str, np.ndarray] = {}
    with safe_open(str(path), framework="np") as fh:
        keys = set(fh.keys())
        base = f"h.{layer}"
        w = fh.get_tensor(_st_key(keys, f"{base}.attn.c_attn.weight", path))
        out["W_Q"], out["W_K"] = map(_as64, _split(w, f"{base}.attn.c_attn.weight"))
        if full:
            b = fh.get_tensor(_st_key(keys, f"{base}.attn.c_attn.bias", path))
            out["b_Q"], out["b_K"] = map(_as64, _split(b, f"{base}.attn.c_attn.bias"))
            out["ln_1.weight"] = _as64(fh.get_tensor(_st_key(keys, f"{base}.ln_1.weight", path)))
            out["ln_1.bias"] = _as64(fh.get_tensor(_st_key(keys, f"{base}.ln_1.bias", path)))
    return out


def _read(layer: object, full: bool) -> dict[str, np.ndarray]:
    layer = check_int(layer, "layer", low=0, high=N_LAYERS - 1)
    path = find_source()
    reader = _read_npz if _kind(path) == "npz" else _read_safetensors
    arrays = reader(path, layer, full)
    d = arrays["W_Q"].shape[0]
    if arrays["W_Q"].shape != (d, d) or arrays["W_K"].shape != (d, d):
        raise ValueError(f"{path}: layer {layer} has W_Q {arrays['W_Q'].shape} and "
                         f"W_K {arrays['W_K'].shape}; expected square matrices")
    return arrays


def load_qk(layer: int) -> tuple[np.ndarray, np.ndarray]:
    """Query and key projections ``(W_Q, W_K)`` of GPT-2 small layer ``layer``.

    Parameters
    ----------
    layer : int
        Layer index in ``0..11`` (booleans and floats are refused).

    Returns
    -------
    W_Q, W_K : ndarray of shape (768, 768)
        ``float64`` copies of the stored ``float32`` values, ``[in, out]`` orientation.

    Raises
    ------
    TypeError, ValueError
        For a bad ``layer``.
    FileNotFoundError
        When no weights file is found (see :func:`find_source`).
    """
    arrays = _read(layer, full=False)
    return arrays["W_Q"], arrays["W_K"]


def load_layer(layer: int) -> Layer:
    """All attention-input parameters of one layer (see :class:`Layer`); sources as :func:`load_qk`."""
    a = _read(layer, full=True)
    return Layer(W_Q=a["W_Q"], W_K=a["W_K"], b_Q=a["b_Q"], b_K=a["b_K"],
                 ln_weight=a["ln_1.weight"], ln_bias=a["ln_1.bias"])


# ----------------------------------------------------------------------------- the matrix
def paper_matrix(W_Q: np.ndarray, W_K: np.ndarray) -> np.ndarray:
    """The paper's ``W_K^T W_Q`` from ``[in, out]`` arrays: ``A = W_K @ W_Q.T``.

    ``x_i^T A x_j = (x_i W_K) . (x_j W_Q)`` is the (unscaled) logit of query ``x_j`` attending
    to key ``x_i``, summed over heads: rows of the kernel index keys, columns queries.
    """
    W_Q = np.asarray(W_Q, dtype=float)
    W_K = np.asarray(W_K, dtype=float)
    if W_Q.ndim != 2 or W_Q.shape != W_K.shape:
        raise ValueError(f"W_Q and W_K must be 2-D of the same shape, got {W_Q.shape} and {W_K.shape}")
    return W_K @ W_Q.T


def head_matrix(W_Q: np.ndarray, W_K: np.ndarray, head: int, head_dim: int = HEAD_DIM) -> np.ndarray:
    """The paper's matrix of a single head, ``W_K^h (W_Q^h)^T`` (rank ``<= head_dim``)."""
    head = check_int(head, "head", low=0)
    cols = slice(head_dim * head, head_dim * (head + 1))
    if cols.stop > np.shape(W_Q)[1]:
        raise ValueError(f"head must be < {np.shape(W_Q)[1] // head_dim}, got {head}")
    return paper_matrix(np.asarray(W_Q)[:, cols], np.asarray(W_K)[:, cols])


def asymmetry(A: np.ndarray) -> float:
    """``||A - A^T||_F / ||A||_F``: 0 for symmetric, 2 for antisymmetric matrices, and about
    ``sqrt(2)`` for a matrix with independent centred entries."""
    A = check_square(A)
    return float(np.linalg.norm(A - A.T) / np.linalg.norm(A))


@dataclass(frozen=True)
class Spectrum:
    """Singular values of ``A`` (descending) and eigenvalues of ``(A + A^T)/2`` (descending)."""

    singular_values: np.ndarray
    sym_eigenvalues: np.ndarray


def spectrum(A: np.ndarray) -> Spectrum:
    """Singular values of ``A`` and eigenvalues of its symmetric part, both descending."""
    A = check_square(A)
    s = np.linalg.svd(A, compute_uv=False)
    ev = np.linalg.eigvalsh((A + A.T) / 2.0)[::-1]
    return Spectrum(singular_values=s, sym_eigenvalues=ev.copy())


def shuffled(A: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A copy of ``A`` with its entries randomly permuted (same entries, structure destroyed)."""
    A = np.asarray(A)
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator, got {type(rng).__name__}")
    return rng.permutation(A.ravel()).reshape(A.shape)


def normalise(A: np.ndarray) -> tuple[np.ndarray, float]:
    """Scale ``A`` so that ``||A||_F^2 / p = 1``; return ``(A / scale, scale)``.

    ``scale = ||A||_F / sqrt(p)``. After it, ``x^T A x' / sqrt(p)`` has variance 1 for
    independent ``x, x' ~ N(0, I_p)``: the kernel arguments are on the paper's ``O(1)`` scale
    whatever GPT-2's raw scale (15 to 74) and its per-head ``1/8``.
    """
    A = check_square(A)
    scale = float(np.linalg.norm(A) / np.sqrt(A.shape[0]))
    if scale == 0.0:
        raise ValueError("A must not be zero")
    return A / scale, scale


# ----------------------------------------------------------------------------- the fit
@dataclass(frozen=True)
class Fit:
    """``A = alpha I + U diag(s) V^T + residual`` (see the module docstring).

    Attributes
    ----------
    alpha : float
        ``tr(A) / p``.
    s : ndarray of shape (p,)
        All singular values of ``A - alpha I`` (descending).
    U, V : ndarray of shape (p, k_max)
        Leading left / right singular vectors of ``A - alpha I`` (columns), signs fixed so that
        the largest-magnitude entry of each ``u_k`` is positive.
    frob2 : float
        ``||A||_F^2``.
    """

    alpha: float
    s: np.ndarray
    U: np.ndarray
    V: np.ndarray
    frob2: float

    @property
    def p(self) -> int:
        return int(self.s.shape[0])

    @property
    def identity_share(self) -> float:
        """Energy share of ``alpha I`` alone, ``alpha^2 p / ||A||_F^2``."""
        return float(self.alpha ** 2 * self.p / self.frob2)

    @property
    def identity_norm_ratio(self) -> float:
        """``alpha sqrt(p) / ||A||_F`` (signed): the identity's Frobenius norm over ``A``'s."""
        return float(self.alpha * np.sqrt(self.p / self.frob2))

    @overload
    def share(self, k: int) -> float: ...
    @overload
    def share(self, k: np.ndarray) -> np.ndarray: ...
    def share(self, k: int | np.ndarray) -> float | np.ndarray:
        """Energy share of ``alpha I + top-k spikes``: ``1 - ||A - alpha I - A_k||_F^2 / ||A||_F^2``."""
        tail = np.concatenate([np.cumsum((self.s ** 2)[::-1])[::-1], [0.0]])  # tail[k] = sum_{>=k}
        out = 1.0 - tail[np.asarray(k)] / self.frob2
        return float(out) if np.ndim(out) == 0 else out

    def spike_share(self, k: int) -> float:
        """Energy share of the ``k``-th spike alone (1-based), ``s_k^2 / ||A||_F^2``."""
        return float(self.s[k - 1] ** 2 / self.frob2)

    def k_for(self, share: float) -> int:
        """Smallest ``k`` with ``share(k) >= share`` (``p`` if never)."""
        shares = self.share(np.arange(self.p + 1))
        hit = np.nonzero(shares >= share - 1e-12)[0]
        return int(hit[0]) if hit.size else self.p

    @property
    def cos_uv(self) -> float:
        """``u_1 . v_1``: how close the leading spike is to symmetric (``+1``) or skew (``-1``)."""
        return float(self.U[:, 0] @ self.V[:, 0])

    def low_rank(self, k: int) -> np.ndarray:
        """``alpha I + sum_{l<=k} s_l u_l v_l^T`` (``k <= k_max``)."""
        if k > self.U.shape[1]:
            raise ValueError(f"k must be <= {self.U.shape[1]} (vectors kept by the fit), got {k}")
        return self.alpha * np.eye(self.p) + (self.U[:, :k] * self.s[:k]) @ self.V[:, :k].T


def fit(A: np.ndarray, k_max: int = 64) -> Fit:
    """Full-plus-low-rank fit ``A ~ alpha I + sum_{k} s_k u_k v_k^T`` (two steps, see module doc).

    Parameters
    ----------
    A : ndarray of shape (p, p)
    k_max : int, default 64
        Number of singular vectors kept (all singular values are always kept).
    """
    A = check_square(A)
    p = A.shape[0]
    k_max = min(check_int(k_max, "k_max"), p)
    alpha = float(np.trace(A) / p)
    U, s, Vt = np.linalg.svd(A - alpha * np.eye(p))
    U, V = U[:, :k_max], Vt[:k_max].T
    sign = np.sign(U[np.argmax(np.abs(U), axis=0), np.arange(k_max)])
    sign[sign == 0] = 1.0
    return Fit(alpha=alpha, s=s, U=U * sign, V=V * sign, frob2=float(np.sum(A * A)))


#: The per-layer verdict rule of :func:`verdict`, stated in words.
VERDICT_RULE = (
    "'holds': alpha > 0 and alpha I plus the leading spike explain at least half of ||A||_F^2; "
    "'holds with a few spikes': alpha > 0 and alpha I plus at most 8 spikes explain half; "
    "otherwise 'fails', with the reason(s): 'alpha <= 0' (no positive full part) and/or "
    "'spread' (more than 8 spikes needed for half of ||A||_F^2; k50 is the number needed).")


def verdict(f: Fit, few: int = 8, half: float = 0.5) -> str:
    """Per-layer verdict on the paper's assumption ``A = alpha I + low rank`` (rule: :data:`VERDICT_RULE`)."""
    pos = f.alpha > 0
    if pos and f.share(1) >= half:
        return "holds"
    if pos and f.share(few) >= half:
        return "holds with a few spikes"
    reasons = []
    if not pos:
        reasons.append("alpha <= 0")
    if f.share(few) < half:
        reasons.append(f"spread (k50 = {f.k_for(half)})")
    return "fails: " + ", ".join(reasons)


@dataclass(frozen=True)
class Summary:
    """Everything the chapter reports about one layer's matrix (see :func:`layer_summary`).

    Attributes
    ----------
    scale : float
        ``||A||_F / sqrt(p)`` of the raw matrix.
    asymmetry : float
        ``||A - A^T||_F / ||A||_F``.
    spectrum, shuffled_spectrum : Spectrum
        Of the normalised matrix and of a shuffled copy of it.
    fit : Fit
        Full-plus-low-rank fit of the normalised matrix.
    shuffled_shares : ndarray of shape (p + 1,)
        ``share(k)`` of the same fit applied to the shuffled copy, ``k = 0..p``.
    verdict : str
        :func:`verdict` of ``fit``.
    """

    scale: float
    asymmetry: float
    spectrum: Spectrum
    shuffled_spectrum: Spectrum
    fit: Fit
    shuffled_shares: np.ndarray
    verdict: str


def layer_summary(A: np.ndarray, k_max: int = 64, seed: int | list[int] = 0) -> Summary:
    """Scale, spectra (real and shuffled), fit and verdict of one raw matrix ``A``.

    ``A`` is normalised first (:func:`normalise`); the shuffled copy is drawn with
    ``numpy.random.default_rng(SeedSequence(seed))`` (``seed``: an int or a list of ints, e.g.
    ``[seed, layer]`` for one stream per layer).
    """
    A = check_square(A)
    An, scale = normalise(A)
    S = shuffled(An, np.random.default_rng(np.random.SeedSequence(seed)))
    ft = fit(An, k_max)
    p = S.shape[0]
    alpha_s = float(np.trace(S) / p)
    s_s = np.linalg.svd(S - alpha_s * np.eye(p), compute_uv=False)  # the fit, without vectors
    sfit = Fit(alpha=alpha_s, s=s_s, U=np.zeros((p, 0)), V=np.zeros((p, 0)),
               frob2=float(np.sum(S * S)))
    return Summary(scale=scale, asymmetry=asymmetry(A), spectrum=spectrum(An),
                   shuffled_spectrum=spectrum(S), fit=ft,
                   shuffled_shares=sfit.share(np.arange(p + 1)), verdict=verdict(ft))


# ----------------------------------------------------------------------------- directions
def aligned_direction(f: Fit, snr: float) -> np.ndarray:
    """``mu = sqrt(snr) (u_1 + sign(u_1.v_1) v_1) / ||.||``: aligned with both sides of the spike.

    With ``c = u_1.v_1`` and ``sigma = sign(c)``: ``cos(mu, u_1) = sqrt((1 + |c|)/2)``,
    ``cos(mu, v_1) = sigma sqrt((1 + |c|)/2)``, and the spike's coherent shift
    ``mu^T (s_1 u_1 v_1^T) mu = sigma s_1 snr (1 + |c|)/2`` has the largest magnitude a direction
    of norm ``sqrt(snr)`` can give it (``u_1 + sigma v_1`` is the extreme eigenvector of the
    symmetric part of ``u_1 v_1^T``). Its sign is that of ``c``. Flipping the sign of ``mu`` is
    the same as flipping the labels, so the overall sign of ``mu`` does not matter.
    """
    snr = check_real(snr, "snr", low=0.0)
    u, v = f.U[:, 0], f.V[:, 0]
    d = u + (1.0 if u @ v >= 0 else -1.0) * v
    return np.sqrt(snr) * d / np.linalg.norm(d)


def random_direction(p: int, snr: float, seed: int) -> np.ndarray:
    """``mu = sqrt(snr) g / ||g||`` with ``g ~ N(0, I_p)`` from ``SeedSequence(seed)``."""
    p = check_int(p, "p")
    snr = check_real(snr, "snr", low=0.0)
    g = np.random.default_rng(np.random.SeedSequence(check_seed(seed))).standard_normal(p)
    return np.sqrt(snr) * g / np.linalg.norm(g)


def _fit_parts(f: Fit, mu: np.ndarray, nonlinearity: NonlinearityLike, r: object
               ) -> tuple[np.ndarray, int, float, float, NonlinearityLike]:
    """What :func:`fit_setting` and :func:`fit_rank_setting` share: the checked ``mu`` and ``r``,
    the orientation ``sign(alpha)`` of the key side, ``|alpha|`` and the nonlinearity (``f``, or
    ``t -> f(-t)`` when ``alpha < 0``)."""
    mu = np.asarray(mu, dtype=float)
    if mu.shape != (f.p,):
        raise ValueError(f"mu must have shape ({f.p},), got {mu.shape}")
    r = check_int(r, "r", low=1, high=f.U.shape[1])
    alpha = f.alpha
    if abs(alpha) <= 1e-12 * np.sqrt(f.frob2 / f.p):
        raise ValueError(f"alpha must be non-zero for a Setting, got {alpha!r}")
    if alpha > 0:
        return mu, r, 1.0, alpha, nonlinearity
    return mu, r, -1.0, -alpha, scaled(nonlinearity, -1.0)


def fit_setting(f: Fit, mu: np.ndarray, c: float, nonlinearity: NonlinearityLike) -> Setting:
    """The :class:`~attn_lib.model.setting.Setting` of the fitted ``alpha I + s_1 u_1 v_1^T``.

    ``w_K = sqrt(s_1) u_1`` (key side: ``K_ij`` depends on ``x_i^T w_K`` for key ``i``) and
    ``w_Q = sqrt(s_1) v_1``; ``snr = ||mu||^2`` and the cosines are those of ``mu, u_1, v_1``.
    The fit should be of the *normalised* matrix (:func:`normalise`). It is the case ``r = 1`` of
    :func:`fit_rank_setting` as a :class:`Setting`.

    A negative ``alpha`` is mapped to the equivalent positive one:
    ``f(alpha t + (x^T w_K)(w_Q^T x')) = g(|alpha| t + (x^T (-w_K))(w_Q^T x'))`` with
    ``g(t) = f(-t)`` (:func:`attn_lib.model.nonlinearity.scaled` by ``-1``), so ``f`` becomes
    ``g`` and ``cos(mu, w_K), cos(w_K, w_Q)`` change sign.

    Raises
    ------
    ValueError
        If ``alpha == 0`` (the Setting needs a full part).
    """
    mu, _, sign, alpha, func = _fit_parts(f, mu, nonlinearity, 1)
    snr = float(mu @ mu)
    u, v = f.U[:, 0], f.V[:, 0]
    mhat = mu / np.sqrt(snr) if snr > 0 else u

    def clip(x: float) -> float:
        return float(np.clip(x, -1.0, 1.0))
    w = float(np.sqrt(f.s[0]))
    return Setting(c=c, snr=snr, f=func, wk_norm=w, wq_norm=w, cos_mu_wk=clip(sign * (mhat @ u)),
                   cos_mu_wq=clip(mhat @ v), cos_wk_wq=clip(sign * (u @ v)), alpha=alpha)


def fit_rank_setting(f: Fit, mu: np.ndarray, c: float, nonlinearity: NonlinearityLike,
                     r: int) -> RankSetting:
    """The :class:`~attn_lib.model.setting.RankSetting` of the fitted
    ``alpha I + sum_{k<=r} s_k u_k v_k^T`` (:meth:`Fit.low_rank` ``(r)``).

    ``w_K^(k) = sqrt(s_k) u_k`` and ``w_Q^(k) = sqrt(s_k) v_k``, so that
    ``W_K^T W_Q = sum_{k<=r} w_K^(k) w_Q^(k)T = U_r diag(s_r) V_r^T``; the setting keeps the
    Gram matrix of ``[mu; W_K; W_Q]`` (shape ``(1 + 2r, 1 + 2r)``,
    :meth:`RankSetting.from_vectors`). Orientation and a negative ``alpha`` are handled as in
    :func:`fit_setting` (every ``w_K^(k)`` changes sign and ``f`` becomes ``t -> f(-t)``), which
    is the case ``r = 1`` with the same theory.

    Parameters
    ----------
    f : Fit
        Fit of the *normalised* matrix (:func:`normalise`).
    mu : ndarray of shape (p,)
        Signal direction (``snr = ||mu||^2``).
    c : float
        Aspect ratio ``p / n``.
    nonlinearity : str or callable
    r : int
        Number of spikes, ``1 <= r <= k_max`` (the singular vectors kept by :func:`fit`).

    Raises
    ------
    TypeError, ValueError
        If ``r`` is not an integer in ``1..k_max``, ``mu`` has the wrong shape or ``alpha == 0``.
    """
    mu, r, sign, alpha, func = _fit_parts(f, mu, nonlinearity, r)
    w = np.sqrt(f.s[:r])[:, None]
    return RankSetting.from_vectors(c, mu, sign * w * f.U[:, :r].T, w * f.V[:, :r].T, f=func,
                                    alpha=alpha)


def matrix_theory(M: np.ndarray, mu: np.ndarray, c: float, nonlinearity: NonlinearityLike,
                  gammas: object, n: int | None = None) -> np.ndarray:
    """The any-matrix deterministic equivalent of the attention error with the matrix ``M`` itself.

    :func:`attn_lib.theory.attention_error` of ``MatrixSetting(c, M, mu, f)`` (entry-wise;
    :mod:`attn_lib.theory._matrix`: ``f`` linearised at the logit scale ``||M||_F / sqrt(p)``,
    ``1`` for a layer normalised by :func:`normalise`; with ``n``, plus the finite-size shift of the
    reduced model that keeps ``mu, M mu, M^T mu`` exactly), run with one BLAS thread
    (``O(p^3)`` per oracle call on ``p x p`` matrices: 3-16 s for three ``gamma`` at ``p = 768`` under
    load, about 5 s more with ``n``; more threads only oversubscribe a shared machine). No fit enters: the rank-r
    limit on the fits is :func:`fit_rank_setting`.

    Parameters
    ----------
    M : ndarray of shape (p, p)
        Key-query matrix in the book's orientation (rows: keys; :func:`paper_matrix`).
    mu : ndarray of shape (p,)
        Signal (``snr = ||mu||^2``).
    c : float
        ``p / n``.
    nonlinearity : str or callable
    gammas : array_like of shape (G,)
    n : int, optional
        Number of tokens (``round(c n) = p``) for the finite-size theory; the proportional limit
        without it.

    Returns
    -------
    ndarray of shape (G,)
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return attention_error(MatrixSetting(c=c, M=M, mu=mu, f=nonlinearity), gammas, n=n)


def heads_theory(W_Q: np.ndarray, W_K: np.ndarray, mu: np.ndarray, c: float,
                 nonlinearity: NonlinearityLike, gammas: object, scale: str = "unit",
                 n: int | None = None) -> np.ndarray:
    """The multi-head deterministic equivalent of the per-head model with a layer's own heads.

    :func:`attn_lib.theory.attention_error` of ``HeadsSetting(c, heads(W_Q, W_K, scale), mu, f)``
    (:mod:`attn_lib.theory._heads`: ``f`` applied to each head's logits, linearised at the head's
    own scale, the heads' residuals correlated as their logits are, each head writing its block
    of 64 feature rows; with ``n``, plus the finite-size shift of the heads' reduced models, each
    keeping ``mu, B_h mu, B_h^T mu`` exactly), run with one BLAS thread (``O(p^3)`` per
    evaluation; for three ``gamma`` at ``p = 768`` about 60 evaluations and 40 applications of
    the tangent map, tens of Monte Carlo trials of the same setting:
    ``benchmarks/theory_speed.py``; the shift adds a few seconds).

    Parameters
    ----------
    W_Q, W_K : ndarray of shape (768, 768)
        A layer's ``[in, out]`` weights (:func:`load_qk`).
    mu : ndarray of shape (768,)
        Signal (``snr = ||mu||^2``).
    c : float
        ``p / n``.
    nonlinearity : str or callable
    gammas : array_like of shape (G,)
    scale : {"unit", "gpt2"}, default "unit"
        The heads' scale (:func:`heads`).
    n : int, optional
        Number of tokens (``round(c n) = 768``) for the finite-size theory; the proportional
        limit without it.

    Returns
    -------
    ndarray of shape (G,)
    """
    s = HeadsSetting(c=c, heads=heads(W_Q, W_K, scale), mu=mu, f=nonlinearity)
    with threadpool_limits(limits=1, user_api="blas"):
        return attention_error(s, gammas, n=n)


def heads_shift(W_Q: np.ndarray, W_K: np.ndarray, mu: np.ndarray, c: float,
                nonlinearity: NonlinearityLike, gammas: object, scale: str, n: int) -> np.ndarray:
    """The finite-size shift of :func:`heads_theory`: ``heads_theory(..., n=n)`` minus the limit.

    :func:`attn_lib.theory.attention.heads_shift` of the same ``HeadsSetting`` (each head's
    reduced model, ``mu, B_h mu, B_h^T mu`` kept exactly, weighted by its 64 of the 768 feature
    rows), one BLAS thread: seconds, where the limit takes a minute. Parameters as
    :func:`heads_theory`; ``n`` with ``round(c n) = 768``.

    Returns
    -------
    ndarray of shape (G,)
    """
    s = HeadsSetting(c=c, heads=heads(W_Q, W_K, scale), mu=mu, f=nonlinearity)
    with threadpool_limits(limits=1, user_api="blas"):
        return theory_heads_shift(s, gammas, n=n)


# ----------------------------------------------------------------------------- Monte Carlo
class MonteCarlo(Trials):
    """Monte Carlo interpolation errors with fixed weight matrices.

    A :class:`~attn_lib.simulation.trials.Trials` with the curves ``("attention", matrix,
    direction)`` and ``("ridge", direction)``, each of shape ``(trials, G)``, and the feature
    scales ``("scale", matrix, direction)`` and ``("ridge_scale", direction)``, shape
    ``(trials,)``, viewed as nested dictionaries of :class:`~attn_lib.simulation.trials.Stats`.
    """

    def _by_matrix(self, tag: str) -> dict[str, dict[str, Stats]]:
        """``{matrix: {direction: Stats}}`` of the keys ``(tag, matrix, direction)``."""
        out: dict[str, dict[str, Stats]] = {}
        for key in self.values:
            if key[0] == tag:
                out.setdefault(key[1], {})[key[2]] = self.stats(key)
        return out

    def _by_direction(self, tag: str) -> dict[str, Stats]:
        """``{direction: Stats}`` of the keys ``(tag, direction)``."""
        return {key[1]: self.stats(key) for key in self.values if key[0] == tag}

    @property
    def attention(self) -> dict[str, dict[str, Stats]]:
        """``attention[matrix][direction]``: the attention error over trials."""
        return self._by_matrix("attention")

    @property
    def ridge(self) -> dict[str, Stats]:
        """``ridge[direction]``: ridge regression (``Phi = X``) on the same draws."""
        return self._by_direction("ridge")

    @property
    def scale(self) -> dict[str, dict[str, Stats]]:
        """``scale[matrix][direction]``: the measured ``tau = ||Phi||_F^2 / n^2`` of each draw."""
        return self._by_matrix("scale")

    @property
    def ridge_scale(self) -> dict[str, Stats]:
        """``ridge_scale[direction]``: ``tau = ||X||_F^2 / n^2`` of each draw."""
        return self._by_direction("ridge_scale")


def heads(W_Q: np.ndarray, W_K: np.ndarray, scale: str = "unit", head_dim: int = HEAD_DIM
          ) -> np.ndarray:
    """The 12 heads' matrices ``W_K^h (W_Q^h)^T`` of a layer, scaled for the kernel, shape ``(H, p, p)``.

    The kernel argument of :func:`simulate_matrices` is ``x_i^T B_h x_j / sqrt(p)``; ``scale``
    chooses ``B_h``:

    * ``"unit"`` -- ``B_h = A_h / (||A_h||_F / sqrt(p))`` (:func:`normalise` per head): every
      head's logits have unit variance on ``N(0, I_p)`` tokens, the scale on which the book reads
      ``f`` (and :func:`normalise` puts the summed matrix);
    * ``"gpt2"`` -- ``B_h = sqrt(p) A_h / 8``: GPT-2's own logit ``x_i^T A_h x_j / sqrt(64)``
      (``HEAD_DIM = 64``), for the book's ``N(0, I_p)`` tokens instead of GPT-2's layer-normed
      states (its logits are then far larger than one: ``f`` sees them saturated).
    """
    if scale not in ("unit", "gpt2"):
        raise ValueError(f"scale must be 'unit' or 'gpt2', got {scale!r}")
    H = np.shape(W_Q)[1] // head_dim
    mats = np.stack([head_matrix(W_Q, W_K, h, head_dim) for h in range(H)])
    p = mats.shape[1]
    if scale == "unit":
        return mats / (np.linalg.norm(mats, axis=(1, 2)) / np.sqrt(p))[:, None, None]
    return mats * (np.sqrt(p) / np.sqrt(head_dim))


def simulate_matrices(matrices: Mapping[str, np.ndarray], mus: Mapping[str, np.ndarray],
                f: NonlinearityLike, gammas: object, n: int, trials: int = 1,
                seed: int = 0, keep_diagonal: bool = False, attention: Attention = ENTRYWISE,
                relative: bool = False) -> MonteCarlo:
    """Interpolation errors of attention with fixed matrices ``A`` on ``X = mu y^T + Z``.

    For each trial, one draw of labels ``y`` (:func:`attn_lib.model.data.labels`) and then noise ``Z``
    (``p x n``, i.i.d. ``N(0, 1)``) is shared by every matrix and direction (common random
    numbers, so differences between them are not blurred by independent noise). For each
    direction ``mu`` and matrix ``A``: ``T = X^T A X / sqrt(p)``
    (:func:`attn_lib.model.kernel.matrix_logits`, one ``Z^T A Z`` for all directions),
    ``K = f_c(T) / sqrt(p)`` with zero diagonal (:func:`attn_lib.model.kernel.apply`), ``Phi = X K``
    and the error of :func:`attn_lib.simulation.resolvent.interpolation_error`; ridge uses ``Phi = X``.
    ``f_c = f - E f(sigma xi)`` with ``sigma = ||A||_F / sqrt(p)``, the standard deviation of the
    off-diagonal logits on pure noise (``sigma = 1`` for a :func:`normalise`-d matrix; for
    ``alpha I + w_K w_Q^T`` it is ``alpha`` up to ``O(1/p)``, as in
    :func:`attn_lib.simulation.simulate.draw_errors`). This is the draw and the arithmetic of
    :func:`attn_lib.simulation.simulate.errors` for a :class:`~attn_lib.model.setting.MatrixSetting`,
    which gives the same errors bit for bit for one matrix and one direction (``p < n``).
    Under ``attention=Softmax(beta)`` the kernel is ``A = softmax(beta T)`` column by column
    instead (:func:`attn_lib.model.kernel.softmax_columns`; ``f`` is ignored) and
    ``Phi = X A``, the raw output.

    **Multi-head attention, as GPT-2 computes it.** A matrix given as a stack ``(H, p, p)`` of
    head matrices ``B_h`` (:func:`heads`) applies ``f`` to each head's logits separately,
    ``K_h = f_c(X^T B_h X / sqrt(p)) / sqrt(p)`` (each head centred at its own ``sigma_h``; under
    softmax, each head's columns sum to one), and
    each head writes its own block of ``p / H`` output coordinates, as GPT-2's heads write
    their ``64``-dimensional values side by side: ``Phi = [X_1 K_1; ...; X_H K_H]``, ``X_h`` the
    rows ``h p/H .. (h+1) p/H - 1`` of ``X`` (the values are the identity, split into blocks, as
    the book's ``Phi = X K`` takes them whole). The features keep their count ``p``, so the
    comparison with one matrix is at the same ``c``. Summing the heads' logits instead is the
    single matrix ``sum_h B_h``: the book's model. (Concatenating every head's full ``X K_h``
    would give ``H p`` features, a model with ``H`` times the aspect ratio.) One stack and one
    direction give the errors of :func:`attn_lib.simulation.simulate.errors` for the
    :class:`~attn_lib.model.setting.HeadsSetting` bit for bit; :func:`heads_theory` is its
    deterministic equivalent.

    Parameters
    ----------
    matrices : mapping name -> ndarray of shape (p, p) or (H, p, p)
        Weight matrices ``A`` in the paper's orientation (rows: keys), normalised; a stack of
        ``H`` head matrices (``H`` dividing ``p`` or not: the blocks are
        :func:`attn_lib.model.kernel.head_blocks`, ``numpy.array_split``) is multi-head
        attention (above).
    mus : mapping name -> ndarray of shape (p,)
        Signal directions (their squared norm is the SNR).
    f : str or callable
        Nonlinearity (centred internally with ``E f(xi)``, ``xi ~ N(0, 1)``); ignored under
        softmax.
    gammas : array_like of shape (G,)
    n : int
        Number of tokens.
    trials : int, default 1
        Trial ``t`` uses ``SeedSequence(seed).spawn(trials)[t]``
        (:meth:`attn_lib.simulation.trials.Trials.run`).
    seed : int, default 0
    keep_diagonal : bool, default False
        Entry-wise attention only.
    attention : Entrywise or Softmax, default ``Entrywise()``
        The attention kind of every matrix.
    relative : bool, default False
        Read ``gammas`` in units of each model's measured feature scale on the draw,
        ``tau = tr(Phi^T Phi / n) / n = ||Phi||_F^2 / n^2`` (ridge: ``||X||_F^2 / n^2``): every
        model at ``gamma = g tau``, the book's equal-effective-regularisation convention
        (:func:`attn_lib.studies.sweeps.feature_scale`, here measured rather than predicted).

    Returns
    -------
    MonteCarlo
        Also the measured ``tau`` of each draw (:attr:`MonteCarlo.scale`,
        :attr:`MonteCarlo.ridge_scale`), with or without ``relative``.
    """
    g = np.atleast_1d(check_gammas(gammas))
    n = check_int(n, "n")
    trials = check_int(trials, "trials")
    seed = check_seed(seed)
    keep_diagonal = check_bool(keep_diagonal, "keep_diagonal")
    relative = check_bool(relative, "relative")
    if not isinstance(attention, (Entrywise, Softmax)):
        raise TypeError("attention must be attn_lib.Entrywise() or attn_lib.Softmax(beta), got "
                        f"{type(attention).__name__}")
    softmax = isinstance(attention, Softmax)
    if softmax and keep_diagonal:
        raise ValueError("keep_diagonal applies to entry-wise attention; softmax masks its "
                         "self-pairs with Softmax(beta, mask=True)")
    mats = {k: np.stack([check_square(h, f"matrices[{k!r}]") for h in v]) if np.ndim(v) == 3
            else check_square(v, f"matrices[{k!r}]")[None] for k, v in matrices.items()}
    if not mats or not mus:
        raise ValueError("matrices and mus must not be empty")
    p = next(iter(mats.values())).shape[1]
    for k, v in mats.items():
        if v.shape[1:] != (p, p):
            raise ValueError(f"matrices[{k!r}] has shape {v.shape[1:]}, expected ({p}, {p})")
    mu_arr = {}
    for k, v in mus.items():
        v = np.asarray(v, dtype=float)
        if v.shape != (p,):
            raise ValueError(f"mus[{k!r}] has shape {v.shape}, expected ({p},)")
        mu_arr[k] = v
    func = None if softmax else check_nonlinearity(f)
    # centring constant E f(sigma xi): the logits of N(0, I_p) tokens have std ||A||_F / sqrt(p)
    a0 = {m: [0.0 if softmax else hermite.coefficients(f, float(np.linalg.norm(A) / np.sqrt(p))).a0
              for A in stack] for m, stack in mats.items()}

    def kern(c0: list[float], h: int, T: np.ndarray) -> np.ndarray:
        """Head ``h``'s kernel of its logits ``T`` (``c0``: the centring constants of the heads)."""
        if isinstance(attention, Softmax):
            return kernel.softmax_columns(T, attention.beta, attention.mask)
        assert func is not None  # entry-wise
        return kernel.apply(func, T, p, keep_diagonal, c0[h], overwrite=True)

    def error(Phi: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
        tau = float(np.sum(Phi * Phi)) / n ** 2
        return interpolation_error(Phi, y, g * tau if relative else g), tau

    def trial(rng: np.random.Generator) -> dict[tuple[str, ...], np.ndarray | float]:
        y = data.labels(n, rng)
        Z = rng.standard_normal((p, n))
        X = {d: Z + np.outer(mu, y) for d, mu in mu_arr.items()}
        out: dict[tuple[str, ...], np.ndarray | float] = {}
        for d in mu_arr:
            out["ridge", d], out["ridge_scale", d] = error(X[d], y)
        for m, stack in mats.items():  # one matrix is one head writing every row
            step = functools.partial(kern, a0[m])
            for d, Phi in kernel.head_features(Z, y, X, mu_arr, stack, step).items():
                out["attention", m, d], out["scale", m, d] = error(Phi, y)
        return out

    return MonteCarlo.run(trial, trials=trials, seed=seed, gammas=g, n=n, p=p)

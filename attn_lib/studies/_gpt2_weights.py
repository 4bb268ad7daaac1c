r"""GPT-2 small's attention-input arrays, downloaded once by HTTP range requests and verified.

:func:`download` reads the public Hugging Face checkpoint at a pinned revision
(:data:`DOWNLOAD_URL`) without fetching all of it. A ``model.safetensors`` file is

``[8 bytes: header length N, little-endian u64] [N bytes: JSON header] [tensor data]``

and the header gives each tensor's ``dtype``, ``shape`` and ``data_offsets = [a, b]`` (relative to
the start of the data, byte ``8 + N``). So three kinds of ranged ``GET`` suffice: bytes ``0-7``,
bytes ``8 .. 8 + N - 1``, then for each needed tensor bytes ``8 + N + a .. 8 + N + b - 1``. The
needed tensors are, for each of the 12 layers, ``h.{i}.attn.c_attn.weight`` (``768 x 2304``,
query | key | value), ``h.{i}.attn.c_attn.bias`` and ``h.{i}.ln_1.{weight,bias}``, plus
``wpe.weight``: 88.4 MB of the 548 MB file. The value thirds are dropped after the transfer.

Every array kept (73 of them, the names of ``../shared/gpt2_small_qk/gpt2_small_qk.npz``) is
checked against its SHA-256 in ``gpt2_small_qk.sha256`` beside this module (the hash of the raw
little-endian ``float32`` bytes, C order, and the shape). Hugging Face publishes only the hash of
the whole file, which cannot check a partial download. Only when all arrays match is the ``.npz``
written, to a temporary file in the cache folder that is then renamed into place (atomic on one
file system): a failed or interrupted download leaves no file behind.

Environment variables: :data:`URL_VAR` replaces the checkpoint's URL (a mirror, or a test
server), :data:`CACHE_VAR` the cache folder (default ``$XDG_CACHE_HOME/attn-book/gpt2``, else
``~/.cache/attn-book/gpt2``), and :data:`NO_DOWNLOAD_VAR` (any value but ``""`` and ``"0"``)
forbids downloading.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import tempfile
import urllib.error
import urllib.request
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from tqdm import tqdm

#: Hugging Face revision (commit) of ``openai-community/gpt2`` the download is pinned to.
REVISION = "607a30d783dfa663caf39e06633721c8d4cfcd7e"
#: The public checkpoint, at :data:`REVISION`.
DOWNLOAD_URL = f"https://huggingface.co/openai-community/gpt2/resolve/{REVISION}/model.safetensors"
URL_VAR = "ATTN_BOOK_GPT2_URL"
CACHE_VAR = "ATTN_BOOK_GPT2_CACHE"
NO_DOWNLOAD_VAR = "ATTN_BOOK_GPT2_NO_DOWNLOAD"
NPZ_NAME = "gpt2_small_qk.npz"
HASHES = Path(__file__).with_name("gpt2_small_qk.sha256")
N_LAYERS = 12
_CHUNK = 1 << 20
_MAX_HEADER = 100_000_000  # GPT-2's header is 15 kB; a larger length means a wrong file


class DownloadError(OSError):
    """The weights could not be downloaded or did not verify (the message says which)."""


def url() -> str:
    """The checkpoint's URL: ``$ATTN_BOOK_GPT2_URL`` or :data:`DOWNLOAD_URL`."""
    return os.environ.get(URL_VAR, "").strip() or DOWNLOAD_URL


def downloads_allowed() -> bool:
    """False when ``$ATTN_BOOK_GPT2_NO_DOWNLOAD`` is set to anything but ``""`` or ``"0"``."""
    return os.environ.get(NO_DOWNLOAD_VAR, "").strip() in ("", "0")


def cache_path() -> Path:
    """``<cache folder>/gpt2_small_qk.npz`` (it may not exist)."""
    folder = os.environ.get(CACHE_VAR, "").strip()
    if folder:
        return Path(folder).expanduser() / NPZ_NAME
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or Path.home() / ".cache"
    return Path(base).expanduser() / "attn-book" / "gpt2" / NPZ_NAME


def expected() -> dict[str, tuple[str, tuple[int, ...]]]:
    """``{name: (sha256, shape)}`` of every array, from ``gpt2_small_qk.sha256``."""
    out = {}
    for line in HASHES.read_text().splitlines():
        if line.strip():
            digest, name, dtype, shape = line.split(None, 3)
            out[name] = (digest, tuple(int(d) for d in shape.strip("()").split(",") if d.strip()))
    return out


def sha256(a: np.ndarray) -> str:
    """SHA-256 of the raw little-endian ``float32`` bytes of ``a`` in C order."""
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def _get(address: str, start: int, stop: int, bar: tqdm[Any] | None, timeout: float) -> bytes:
    """Bytes ``start .. stop - 1`` of ``address`` by one ranged GET (``206`` required)."""
    req = urllib.request.Request(address, headers={"Range": f"bytes={start}-{stop - 1}",
                                                   "User-Agent": "attn-book"})
    want = stop - start
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            if resp.status != 206:
                raise DownloadError(f"{address} answered {resp.status} to a range request "
                                    f"(206 expected): the server does not serve byte ranges")
            parts, got = [], 0
            while got < want:
                chunk = resp.read(min(_CHUNK, want - got))
                if not chunk:
                    break
                parts.append(chunk)
                got += len(chunk)
                if bar is not None:
                    bar.update(len(chunk))
    except urllib.error.HTTPError as exc:
        exc.close()
        raise DownloadError(f"{address} answered {exc.code} {exc.reason} "
                            f"(bytes {start}-{stop - 1})") from exc
    except urllib.error.URLError as exc:
        raise DownloadError(f"cannot reach {address} ({exc.reason}): offline? Set "
                            f"ATTN_BOOK_GPT2 to a local copy of the weights, or "
                            f"{URL_VAR} to a mirror") from exc
    except (OSError, http.client.HTTPException) as exc:
        if isinstance(exc, DownloadError):
            raise
        raise DownloadError(f"transfer from {address} interrupted "
                            f"(bytes {start}-{stop - 1}): {exc!r}") from exc
    if got != want:
        raise DownloadError(f"transfer from {address} interrupted: got {got} of {want} bytes "
                            f"(bytes {start}-{stop - 1})")
    return b"".join(parts)


def _tensor(header: dict[str, Any], name: str, address: str) -> tuple[tuple[int, ...], int, int]:
    for key in (name, "transformer." + name):
        if key in header:
            info = header[key]
            break
    else:
        raise DownloadError(f"{address} has no tensor {name!r} (nor 'transformer.{name}')")
    shape = tuple(int(d) for d in info["shape"])
    a, b = (int(o) for o in info["data_offsets"])
    if info["dtype"] != "F32" or b - a != 4 * int(np.prod(shape)):
        raise DownloadError(f"{address}: tensor {name} is {info['dtype']} {shape} with "
                            f"{b - a} bytes; expected F32")
    return shape, a, b


def fetch(address: str, *, progress: bool | None = None,
          timeout: float = 60.0) -> dict[str, np.ndarray]:
    """The 73 verified ``float32`` arrays (names as in ``gpt2_small_qk.npz``) from ``address``.

    Parameters
    ----------
    address : str
        URL of a GPT-2 small ``model.safetensors`` served with byte ranges.
    progress : bool or None, default None
        Show a progress bar (``tqdm``) on stderr; ``None``: only when stderr is a terminal.
    timeout : float, default 60
        Seconds without data before a transfer is abandoned.

    Raises
    ------
    DownloadError
        When the server cannot be reached, answers with an error or without byte ranges, the
        transfer is cut short, or an array's SHA-256 or shape differs from the repository's.
    """
    from tqdm import tqdm

    want = expected()
    n = int.from_bytes(_get(address, 0, 8, None, timeout), "little")
    if not 2 <= n <= _MAX_HEADER:
        raise DownloadError(f"{address} is not a safetensors file (header length {n})")
    try:
        header = json.loads(_get(address, 8, 8 + n, None, timeout))
    except ValueError as exc:
        raise DownloadError(f"{address}: the safetensors header is not JSON ({exc})") from exc
    names = [f"h.{i}.{t}" for i in range(N_LAYERS)
             for t in ("attn.c_attn.weight", "attn.c_attn.bias", "ln_1.weight", "ln_1.bias")]
    names.append("wpe.weight")
    spans = {name: _tensor(header, name, address) for name in names}
    total = sum(b - a for _, a, b in spans.values())
    raw: dict[str, np.ndarray] = {}
    with tqdm(total=total, unit="B", unit_scale=True, desc="GPT-2 weights",
              disable=(None if progress is None else not progress)) as bar:
        for name, (shape, a, b) in spans.items():
            data = _get(address, 8 + n + a, 8 + n + b, bar, timeout)
            raw[name] = np.frombuffer(data, dtype="<f4").reshape(shape)
    arrays: dict[str, np.ndarray] = {"wpe": raw["wpe.weight"]}
    for i in range(N_LAYERS):
        w, bias = raw[f"h.{i}.attn.c_attn.weight"], raw[f"h.{i}.attn.c_attn.bias"]
        d = w.shape[-1] // 3
        arrays[f"h{i}.W_Q"], arrays[f"h{i}.W_K"] = w[:, :d], w[:, d:2 * d]
        arrays[f"h{i}.b_Q"], arrays[f"h{i}.b_K"] = bias[:d], bias[d:2 * d]
        arrays[f"h{i}.ln_1.weight"] = raw[f"h.{i}.ln_1.weight"]
        arrays[f"h{i}.ln_1.bias"] = raw[f"h.{i}.ln_1.bias"]
    bad = [name for name, (digest, shape) in want.items()
           if arrays[name].shape != shape or sha256(arrays[name]) != digest]
    if bad:
        raise DownloadError(f"{address}: {len(bad)} of {len(want)} arrays differ from the "
                            f"SHA-256 hashes in {HASHES.name} (first: {bad[0]}); nothing was "
                            f"saved")
    return {name: np.ascontiguousarray(arrays[name]) for name in want}


def download(dest: Path | None = None, *, progress: bool | None = None,
             timeout: float = 60.0) -> Path:
    """Fetch the arrays from :func:`url` (see :func:`fetch`) and save them as one ``.npz``.

    The file is written to a temporary name beside ``dest`` (default :func:`cache_path`) and
    renamed into place only once complete, so ``dest`` is either absent or whole.

    Returns
    -------
    Path
        ``dest``.
    """
    dest = cache_path() if dest is None else Path(dest)
    arrays = fetch(url(), progress=progress, timeout=timeout)
    dest.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub: **kwds vs allow_pickle
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return dest

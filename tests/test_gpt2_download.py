"""The GPT-2 download (attn_lib.studies._gpt2_weights) against a local HTTP server.

The machines that run the tests have no network, so each test starts a server on 127.0.0.1 that
serves a ``model.safetensors`` the test writes, with byte ranges (or, to test the failures,
without them, with a server error, or cut short). Small fake checkpoints (hidden size 8) come
with their own hash file; one test assembles the real layout from ``../shared`` and checks the
repository's hashes. The last test clones the repository without ``../shared`` and runs
``make test`` against such a server (opt-in: ``ATTN_BOOK_READER_TESTS=1``; about 8 minutes alone,
more under load).
"""

from __future__ import annotations

import contextlib
import http.server
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest
from safetensors.numpy import save_file

from attn_lib.studies import _gpt2_weights as W
from attn_lib.studies import gpt2

REPO = Path(__file__).resolve().parents[1]
SHARED = gpt2.default_path()
requires_shared = pytest.mark.skipif(
    not SHARED.is_file(), reason=f"the developer's copy of the GPT-2 arrays is absent ({SHARED})")


# ----------------------------------------------------------------------------- the server
class Handler(http.server.BaseHTTPRequestHandler):
    """GET with ``Range: bytes=a-b``; ``server.mode`` selects a failure, ``server.log`` the
    ranges served."""

    def log_message(self, format, *args):
        pass

    def do_GET(self):
        try:
            self._get()
        except (BrokenPipeError, ConnectionResetError):   # the client gave up: its test's case
            pass

    def _get(self):
        data, mode = self.server.data, self.server.mode
        if mode == "error":
            self.send_error(503, "Service Unavailable")
            return
        m = re.fullmatch(r"bytes=(\d+)-(\d+)", self.headers.get("Range", ""))
        if mode == "norange" or not m:
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        a, b = int(m.group(1)), min(int(m.group(2)), len(data) - 1)
        self.server.log.append((a, b + 1))
        body = data[a:b + 1]
        self.send_response(206)
        self.send_header("Content-Range", f"bytes {a}-{b}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if mode == "truncate" and len(body) > 1000:
            self.wfile.write(body[:len(body) // 2])   # then the connection closes
            self.close_connection = True
            return
        self.wfile.write(body)


@contextlib.contextmanager
def serve(data: bytes, mode: str = "ok"):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.data, srv.mode, srv.log = data, mode, []
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv, f"http://127.0.0.1:{srv.server_address[1]}/gpt2/model.safetensors"
    finally:
        srv.shutdown()
        srv.server_close()


# ----------------------------------------------------------------------------- checkpoints
def checkpoint(arrays: dict[str, np.ndarray], extra: int = 0) -> dict[str, np.ndarray]:
    """The Hugging Face tensors of the arrays named as in ``gpt2_small_qk.npz`` (value thirds
    zero), plus an ``extra``-element tensor the loader must not fetch."""
    tensors = {"wpe.weight": arrays["wpe"]}
    for i in range(W.N_LAYERS):
        wq, wk = arrays[f"h{i}.W_Q"], arrays[f"h{i}.W_K"]
        tensors[f"h.{i}.attn.c_attn.weight"] = np.concatenate([wq, wk, np.zeros_like(wq)], axis=1)
        bq, bk = arrays[f"h{i}.b_Q"], arrays[f"h{i}.b_K"]
        tensors[f"h.{i}.attn.c_attn.bias"] = np.concatenate([bq, bk, np.zeros_like(bq)])
        tensors[f"h.{i}.ln_1.weight"] = arrays[f"h{i}.ln_1.weight"]
        tensors[f"h.{i}.ln_1.bias"] = arrays[f"h{i}.ln_1.bias"]
    if extra:
        tensors["h.0.mlp.c_fc.weight"] = np.ones(extra, dtype="<f4")
    return {k: np.ascontiguousarray(v, dtype="<f4") for k, v in tensors.items()}


def fake_arrays(d: int = 8, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {"wpe": rng.standard_normal((16, d))}
    for i in range(W.N_LAYERS):
        out.update({f"h{i}.W_Q": rng.standard_normal((d, d)), f"h{i}.W_K": rng.standard_normal((d, d)),
                    f"h{i}.b_Q": rng.standard_normal(d), f"h{i}.b_K": rng.standard_normal(d),
                    f"h{i}.ln_1.weight": rng.standard_normal(d),
                    f"h{i}.ln_1.bias": rng.standard_normal(d)})
    return {k: v.astype("<f4") for k, v in out.items()}


def write_safetensors(path: Path, tensors: dict[str, np.ndarray]) -> bytes:
    save_file(tensors, str(path))
    return path.read_bytes()


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A small checkpoint, its hash file in place of the repository's, an empty user cache, no
    ``$ATTN_BOOK_GPT2`` and no ``../shared``: the download is the only source."""
    arrays = fake_arrays()
    hashes = tmp_path / "hashes.sha256"
    hashes.write_text("".join(f"{W.sha256(a)}  {k}  float32 {tuple(a.shape)}\n"
                              for k, a in sorted(arrays.items())))
    monkeypatch.setattr(W, "HASHES", hashes)
    monkeypatch.setattr(gpt2, "default_path", lambda: tmp_path / "no-shared" / W.NPZ_NAME)
    monkeypatch.setenv(W.CACHE_VAR, str(tmp_path / "cache"))
    monkeypatch.delenv(gpt2.ENV_VAR, raising=False)
    monkeypatch.delenv(W.NO_DOWNLOAD_VAR, raising=False)
    data = write_safetensors(tmp_path / "model.safetensors", checkpoint(arrays, extra=50_000))
    return arrays, data, tmp_path / "cache"


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


# ----------------------------------------------------------------------------- tests
def test_download_fetches_only_the_needed_ranges_and_caches(fake, monkeypatch):
    arrays, data, cache = fake
    with serve(data) as (srv, address):
        monkeypatch.setenv(W.URL_VAR, address)
        path = gpt2.find_source()
    assert path == cache / W.NPZ_NAME and leftovers(cache) == [W.NPZ_NAME]
    with np.load(path) as z:
        assert sorted(z.files) == sorted(arrays)
        for k, a in arrays.items():
            assert z[k].dtype == np.dtype("<f4") and np.array_equal(z[k], a), k
    # 2 header requests + 49 tensors, none of them the 200 kB extra tensor
    assert len(srv.log) == 2 + 4 * W.N_LAYERS + 1
    served = sum(b - a for a, b in srv.log)
    assert served == len(data) - 4 * 50_000, (served, len(data))  # all but the extra tensor
    # The second call reads the cache: the server is gone, nothing is requested.
    W_Q, W_K = gpt2.load_qk(5)
    assert np.array_equal(W_Q, arrays["h5.W_Q"]) and np.array_equal(W_K, arrays["h5.W_K"])
    assert gpt2.source_label(gpt2.find_source()) == f"user cache {cache}"


def test_precedence_variable_shared_cache_download(fake, tmp_path, monkeypatch):
    arrays, data, cache = fake
    cache.mkdir()
    np.savez(cache / W.NPZ_NAME, **fake_arrays(seed=1))
    assert gpt2.find_source() == cache / W.NPZ_NAME            # cache before download
    shared = tmp_path / "shared.npz"
    np.savez(shared, **fake_arrays(seed=2))
    monkeypatch.setattr(gpt2, "default_path", lambda: shared)
    assert gpt2.find_source() == shared                         # ../shared before the cache
    chosen = tmp_path / "chosen.npz"
    np.savez(chosen, **fake_arrays(seed=3))
    monkeypatch.setenv(gpt2.ENV_VAR, str(chosen))
    assert gpt2.find_source() == chosen                         # the variable before all


def test_hash_mismatch_saves_nothing(fake, monkeypatch, tmp_path):
    arrays, _, cache = fake
    tensors = checkpoint(arrays)
    tensors["h.7.attn.c_attn.weight"][3, 1] += 1e-3             # one key-free query entry
    data = write_safetensors(tmp_path / "bad.safetensors", tensors)
    with serve(data) as (_, address):
        monkeypatch.setenv(W.URL_VAR, address)
        with pytest.raises(W.DownloadError, match=r"1 of 73 arrays differ .*SHA-256.*h7\.W_Q"):
            gpt2.find_source()
    assert leftovers(cache) == []


def test_value_columns_are_not_checked(fake, monkeypatch, tmp_path):
    # The value third is downloaded (it sits inside c_attn) but not kept, so it may differ.
    arrays, _, cache = fake
    tensors = checkpoint(arrays)
    tensors["h.2.attn.c_attn.weight"][:, -1] = 7.0
    data = write_safetensors(tmp_path / "v.safetensors", tensors)
    with serve(data) as (_, address):
        monkeypatch.setenv(W.URL_VAR, address)
        assert gpt2.find_source() == cache / W.NPZ_NAME


@pytest.mark.parametrize("mode, message", [
    ("truncate", r"interrupted"),
    ("error", r"answered 503"),
    ("norange", r"does not serve byte ranges"),
])
def test_server_failures_give_clear_errors_and_no_file(fake, monkeypatch, mode, message):
    _, data, cache = fake
    with serve(data, mode) as (_, address):
        monkeypatch.setenv(W.URL_VAR, address)
        with pytest.raises(W.DownloadError, match=message) as exc:
            gpt2.load_qk(0)
    assert address in str(exc.value)
    assert leftovers(cache) == []


def test_offline_gives_a_clear_error_and_no_file(fake, monkeypatch):
    with socket.socket() as s:                                   # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv(W.URL_VAR, f"http://127.0.0.1:{port}/model.safetensors")
    with pytest.raises(W.DownloadError, match=r"cannot reach .*offline\?.*ATTN_BOOK_GPT2"):
        gpt2.load_layer(0)
    assert leftovers(fake[2]) == []


def test_opt_out_never_connects(fake, monkeypatch):
    _, data, cache = fake
    with serve(data) as (srv, address):
        monkeypatch.setenv(W.URL_VAR, address)
        monkeypatch.setenv(W.NO_DOWNLOAD_VAR, "1")
        with pytest.raises(FileNotFoundError, match=W.NO_DOWNLOAD_VAR) as exc:
            gpt2.load_qk(0)
        assert srv.log == []
        with pytest.raises(FileNotFoundError, match="not asked"):
            gpt2.find_source(download=False)
    msg = str(exc.value)
    assert str(cache / W.NPZ_NAME) in msg and gpt2.DOWNLOAD_URL in msg
    assert leftovers(cache) == []


def test_source_label_and_bad_download_flag(fake, monkeypatch):
    home_cache = Path.home() / ".cache" / "attn-book" / "gpt2" / W.NPZ_NAME
    assert gpt2.source_label(home_cache) == "user cache ~/.cache/attn-book/gpt2"
    with pytest.raises(TypeError, match="download must be bool"):
        gpt2.find_source(download=1)


def test_not_a_safetensors_file(fake, monkeypatch):
    with serve(b"<html>" + b"x" * 100) as (_, address):
        monkeypatch.setenv(W.URL_VAR, address)
        with pytest.raises(W.DownloadError, match="not a safetensors file"):
            gpt2.find_source()


def test_url_is_pinned_to_a_revision():
    assert re.fullmatch(r"[0-9a-f]{40}", W.REVISION)
    assert f"/resolve/{W.REVISION}/model.safetensors" in W.DOWNLOAD_URL
    assert gpt2.DOWNLOAD_URL == W.DOWNLOAD_URL


@requires_shared
def test_repository_hashes_are_the_shared_manifest():
    assert W.HASHES.read_text() == (SHARED.parent / "MANIFEST.sha256").read_text()
    with np.load(SHARED) as z:
        assert sorted(z.files) == sorted(W.expected())


@requires_shared
def test_real_layout_verifies_against_the_repository_hashes(tmp_path, monkeypatch):
    """The real arrays (value columns zero) in GPT-2's layout pass the repository's hashes."""
    with np.load(SHARED) as z:
        real = {k: z[k] for k in z.files}
    data = write_safetensors(tmp_path / "model.safetensors", checkpoint(real))
    dest = tmp_path / "cache" / W.NPZ_NAME
    with serve(data) as (_, address):
        monkeypatch.setenv(W.URL_VAR, address)
        assert W.download(dest, progress=False) == dest
    with np.load(dest) as z:
        for k, a in real.items():
            assert np.array_equal(z[k], a), k


# ----------------------------------------------------------------------------- a fresh clone
@pytest.mark.slow
@requires_shared
@pytest.mark.skipif(os.environ.get("ATTN_BOOK_READER_TESTS") != "1",
                    reason="opt-in (ATTN_BOOK_READER_TESTS=1): runs `make test` in a fresh clone, "
                           "about 8 minutes alone")
def test_fresh_clone_without_shared_passes_make_test(tmp_path):
    """A clone with no ``../shared`` beside it passes ``make test``, its GPT-2 weights downloaded
    from a local server that serves the real arrays in GPT-2's layout."""
    with np.load(SHARED) as z:
        real = {k: z[k] for k in z.files}
    data = write_safetensors(tmp_path / "model.safetensors", checkpoint(real))
    clone = tmp_path / "reader" / "attn-book"
    subprocess.run(["git", "clone", "--quiet", str(REPO), str(clone)], check=True)
    assert not (clone.parent / "shared").exists()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ATTN_BOOK", "PYTHON", "VIRTUAL_ENV", "PYTEST"))}
    env.update(ATTN_BOOK_GPT2_CACHE=str(tmp_path / "user-cache"),
               ATTN_BOOK_CACHE=str(tmp_path / "mc-cache"))
    with serve(data) as (srv, address):
        env[W.URL_VAR] = address
        run = subprocess.run(["make", "test", f"PYTHON={sys.executable}"], cwd=clone, env=env,
                             capture_output=True, text=True)
    tail = (run.stdout + run.stderr)[-4000:]
    assert run.returncode == 0, tail
    assert (tmp_path / "user-cache" / W.NPZ_NAME).is_file()
    assert srv.log, "the weights did not come from the test server"
    shutil.rmtree(clone / ".venv", ignore_errors=True)

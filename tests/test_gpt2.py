"""GPT-2 loader (npz and safetensors), the paper's matrix, the fit and the Monte Carlo."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

import attn_lib as al
from attn_lib.studies import gpt2

SHARED = gpt2.default_path()
MANIFEST = SHARED.parent / "MANIFEST.sha256"
requires_shared = pytest.mark.skipif(
    not SHARED.is_file(), reason=f"GPT-2 weights not present at {SHARED} (see its README)")

# From ../shared/gpt2_small_qk/README.md (rounded to 4 decimals there).
REF_Q0_ROW0 = [-0.4738, -0.2614, -0.0978, -0.3499, 0.2243, -0.0429, 0.4187, 0.1744, -0.1883,
               0.1836]
REF_Q0_ROW1 = [0.0874, 0.1473, 0.2387]
REF_Q0_ROW767 = [-0.4100, -0.1924, -0.2400]


@pytest.fixture(autouse=True)
def _no_env(monkeypatch, tmp_path):
    """Every test starts without ATTN_BOOK_GPT2 (the ones that need it set it), with an empty
    user cache and downloads forbidden (tests/test_gpt2_download.py tests the download)."""
    monkeypatch.delenv(gpt2.ENV_VAR, raising=False)
    monkeypatch.setenv("ATTN_BOOK_GPT2_CACHE", str(tmp_path / "user-cache"))
    monkeypatch.setenv("ATTN_BOOK_GPT2_NO_DOWNLOAD", "1")


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, dtype="<f4").tobytes()).hexdigest()


def _manifest() -> dict[str, str]:
    out = {}
    for line in MANIFEST.read_text().splitlines():
        if line.strip():
            digest, name = line.split()[:2]
            out[name] = digest
    return out


# ----------------------------------------------------------------------------- the shared file
@requires_shared
def test_reference_values():
    W_Q, W_K = gpt2.load_qk(0)
    assert W_Q.shape == W_K.shape == (768, 768)
    assert W_Q.dtype == W_K.dtype == np.float64
    assert np.allclose(W_Q[0, :10], REF_Q0_ROW0, atol=5.1e-5, rtol=0)
    assert np.allclose(W_Q[1, :3], REF_Q0_ROW1, atol=5.1e-5, rtol=0)
    assert np.allclose(W_Q[767, :3], REF_Q0_ROW767, atol=5.1e-5, rtol=0)


@requires_shared
def test_hashes_of_every_layer_match_manifest():
    man = _manifest()
    assert len([k for k in man if k.startswith("h")]) == 12 * 6
    for layer in range(12):
        L = gpt2.load_layer(layer)
        W_Q, W_K = gpt2.load_qk(layer)
        assert np.array_equal(W_Q, L.W_Q) and np.array_equal(W_K, L.W_K)
        arrays = {"W_Q": W_Q, "W_K": W_K, "b_Q": L.b_Q, "b_K": L.b_K,
                  "ln_1.weight": L.ln_weight, "ln_1.bias": L.ln_bias}
        for name, arr in arrays.items():
            # float32 -> float64 -> float32 is exact, so this checks the loader changed nothing.
            assert _sha(arr) == man[f"h{layer}.{name}"], f"h{layer}.{name}"


@requires_shared
def test_loader_returns_fresh_copies():
    W_Q, _ = gpt2.load_qk(2)
    W_Q[:] = 0.0
    assert np.any(gpt2.load_qk(2)[0] != 0.0)


# ----------------------------------------------------------------------------- bad input / sources
@pytest.mark.parametrize("layer", [True, False, 1.0, 3.5, "1", None, [1]])
def test_bad_layer_type(layer):
    with pytest.raises(TypeError, match=r"layer must be an integer in 0\.\.11"):
        gpt2.load_qk(layer)


@pytest.mark.parametrize("layer", [12, -1, 100, np.int64(12)])
def test_bad_layer_range(layer):
    with pytest.raises(ValueError, match=r"layer must be an integer in 0\.\.11"):
        gpt2.load_qk(layer)


def test_layer_is_checked_before_looking_for_files(monkeypatch, tmp_path):
    monkeypatch.setattr(gpt2, "default_path", lambda: tmp_path / "missing.npz")
    with pytest.raises(ValueError, match="layer"):
        gpt2.load_qk(12)


def test_missing_source_says_where_and_how(monkeypatch, tmp_path):
    missing = tmp_path / "nowhere" / "gpt2_small_qk.npz"
    monkeypatch.setattr(gpt2, "default_path", lambda: missing)
    with pytest.raises(FileNotFoundError) as exc:
        gpt2.load_qk(0)
    msg = str(exc.value)
    assert str(missing) in msg and gpt2.ENV_VAR in msg and gpt2.DOWNLOAD_URL in msg
    assert "model.safetensors" in msg


def test_env_var_to_missing_file_does_not_fall_back(monkeypatch, tmp_path):
    bad = tmp_path / "nope.safetensors"
    monkeypatch.setenv(gpt2.ENV_VAR, str(bad))
    with pytest.raises(FileNotFoundError) as exc:
        gpt2.load_qk(0)
    assert str(bad) in str(exc.value) and gpt2.DOWNLOAD_URL in str(exc.value)


def test_env_var_to_empty_folder(monkeypatch, tmp_path):
    monkeypatch.setenv(gpt2.ENV_VAR, str(tmp_path))
    with pytest.raises(FileNotFoundError, match="folder"):
        gpt2.load_qk(0)


def test_unknown_file_format(monkeypatch, tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a weights file")
    monkeypatch.setenv(gpt2.ENV_VAR, str(junk))
    with pytest.raises(ValueError, match="neither"):
        gpt2.load_qk(0)


def _fake_npz(path, layers, d=768, seed=0):
    rng = np.random.default_rng(seed)
    arrays = {}
    for i in layers:
        arrays[f"h{i}.W_Q"] = rng.standard_normal((d, d)).astype("<f4")
        arrays[f"h{i}.W_K"] = rng.standard_normal((d, d)).astype("<f4")
    np.savez(path, **arrays)
    return arrays


def test_env_var_takes_precedence_over_default(monkeypatch, tmp_path):
    # The default location is a real (fake-content) file too, so precedence is what is tested.
    default = tmp_path / "default.npz"
    _fake_npz(default, [3], d=8, seed=1)
    chosen = tmp_path / "chosen.npz"
    want = _fake_npz(chosen, [3], d=8, seed=2)
    monkeypatch.setattr(gpt2, "default_path", lambda: default)
    monkeypatch.setenv(gpt2.ENV_VAR, str(chosen))
    W_Q, W_K = gpt2.load_qk(3)
    assert np.array_equal(W_Q, want["h3.W_Q"]) and np.array_equal(W_K, want["h3.W_K"])
    monkeypatch.delenv(gpt2.ENV_VAR)
    assert not np.array_equal(gpt2.load_qk(3)[0], want["h3.W_Q"])
    assert gpt2.find_source() == default


@requires_shared
def test_env_var_precedence_over_shared_file(monkeypatch, tmp_path):
    chosen = tmp_path / "chosen.npz"
    want = _fake_npz(chosen, [0], d=768, seed=3)
    monkeypatch.setenv(gpt2.ENV_VAR, str(chosen))
    assert np.array_equal(gpt2.load_qk(0)[0], want["h0.W_Q"])
    monkeypatch.delenv(gpt2.ENV_VAR)
    assert np.allclose(gpt2.load_qk(0)[0][0, :10], REF_Q0_ROW0, atol=5.1e-5)


def test_npz_without_the_layer(monkeypatch, tmp_path):
    path = tmp_path / "w.npz"
    _fake_npz(path, [0], d=4)
    monkeypatch.setenv(gpt2.ENV_VAR, str(path))
    with pytest.raises(KeyError, match="h5.W_Q"):
        gpt2.load_qk(5)


# ----------------------------------------------------------------------------- safetensors
def _fake_safetensors(path, layers, d, prefix="", seed=0):
    from safetensors.numpy import save_file

    rng = np.random.default_rng(seed)
    t = {}
    for i in layers:
        t[f"{prefix}h.{i}.attn.c_attn.weight"] = rng.standard_normal((d, 3 * d)).astype(np.float32)
        t[f"{prefix}h.{i}.attn.c_attn.bias"] = rng.standard_normal(3 * d).astype(np.float32)
        t[f"{prefix}h.{i}.ln_1.weight"] = rng.standard_normal(d).astype(np.float32)
        t[f"{prefix}h.{i}.ln_1.bias"] = rng.standard_normal(d).astype(np.float32)
    t[f"{prefix}wpe.weight"] = rng.standard_normal((4, d)).astype(np.float32)
    save_file(t, str(path))
    return t


def test_safetensors_gpt2_layout(monkeypatch, tmp_path):
    """A Hugging Face-style file with the real 768 x 2304 shape, for two of the 12 layers."""
    path = tmp_path / "model.safetensors"
    t = _fake_safetensors(path, [0, 11], d=768)
    monkeypatch.setenv(gpt2.ENV_VAR, str(path))
    for i in (0, 11):
        W_Q, W_K = gpt2.load_qk(i)
        w = t[f"h.{i}.attn.c_attn.weight"]
        assert W_Q.shape == W_K.shape == (768, 768) and W_Q.dtype == np.float64
        assert np.array_equal(W_Q, w[:, :768]) and np.array_equal(W_K, w[:, 768:1536])
        L = gpt2.load_layer(i)
        b = t[f"h.{i}.attn.c_attn.bias"]
        assert np.array_equal(L.b_Q, b[:768]) and np.array_equal(L.b_K, b[768:1536])
        assert np.array_equal(L.ln_weight, t[f"h.{i}.ln_1.weight"])
        assert np.array_equal(L.ln_bias, t[f"h.{i}.ln_1.bias"])
    with pytest.raises(KeyError, match=r"h\.5\.attn\.c_attn\.weight"):
        gpt2.load_qk(5)


def test_safetensors_transformer_prefix_and_folder(monkeypatch, tmp_path):
    path = tmp_path / "model.safetensors"
    t = _fake_safetensors(path, range(12), d=6, prefix="transformer.", seed=4)
    monkeypatch.setenv(gpt2.ENV_VAR, str(tmp_path))  # a folder holding model.safetensors
    assert gpt2.find_source() == path
    for i in range(12):
        W_Q, W_K = gpt2.load_qk(i)
        w = t[f"transformer.h.{i}.attn.c_attn.weight"]
        assert np.array_equal(W_Q, w[:, :6]) and np.array_equal(W_K, w[:, 6:12])


def test_safetensors_bad_shape(monkeypatch, tmp_path):
    from safetensors.numpy import save_file

    path = tmp_path / "model.safetensors"
    save_file({"h.0.attn.c_attn.weight": np.zeros((4, 10), np.float32)}, str(path))
    monkeypatch.setenv(gpt2.ENV_VAR, str(path))
    with pytest.raises(ValueError, match="expected"):
        gpt2.load_qk(0)


@requires_shared
def test_safetensors_matches_npz(monkeypatch, tmp_path):
    """Rebuild layer 4's c_attn from the shared arrays: both readers agree bit for bit."""
    from safetensors.numpy import save_file

    L = gpt2.load_layer(4)
    w = np.concatenate([L.W_Q, L.W_K, np.zeros_like(L.W_Q)], axis=1).astype(np.float32)
    b = np.concatenate([L.b_Q, L.b_K, np.zeros_like(L.b_Q)]).astype(np.float32)
    path = tmp_path / "model.safetensors"
    save_file({"h.4.attn.c_attn.weight": w, "h.4.attn.c_attn.bias": b,
               "h.4.ln_1.weight": L.ln_weight.astype(np.float32),
               "h.4.ln_1.bias": L.ln_bias.astype(np.float32)}, str(path))
    monkeypatch.setenv(gpt2.ENV_VAR, str(path))
    L2 = gpt2.load_layer(4)
    for name in ("W_Q", "W_K", "b_Q", "b_K", "ln_weight", "ln_bias"):
        assert np.array_equal(getattr(L, name), getattr(L2, name)), name


# ----------------------------------------------------------------------------- orientation
def test_paper_matrix_is_sum_of_head_logits():
    """x_i^T A x_j equals GPT-2's per-head logits of query j attending to key i, summed (x 8)."""
    rng = np.random.default_rng(5)
    d, heads, hd = 12, 3, 4
    W_Q, W_K = rng.standard_normal((d, d)), rng.standard_normal((d, d))
    A = gpt2.paper_matrix(W_Q, W_K)
    x_key, x_query = rng.standard_normal(d), rng.standard_normal(d)
    logits = sum((x_query @ W_Q[:, hd * h:hd * (h + 1)]) @ (x_key @ W_K[:, hd * h:hd * (h + 1)])
                 for h in range(heads))
    assert np.isclose(x_key @ A @ x_query, logits, rtol=1e-12)
    assert not np.isclose(x_query @ A @ x_key, logits, rtol=1e-3)
    assert np.allclose(sum(gpt2.head_matrix(W_Q, W_K, h, hd) for h in range(heads)), A)


@requires_shared
def test_real_matrices_are_far_from_symmetric_and_scale():
    asym, scale = [], []
    for layer in range(12):
        W_Q, W_K = gpt2.load_qk(layer)
        A = gpt2.paper_matrix(W_Q, W_K)
        asym.append(gpt2.asymmetry(A))
        scale.append(gpt2.normalise(A)[1])
        if layer == 0:  # paper_matrix is W_K W_Q^T, not its transpose W_Q W_K^T
            assert np.array_equal(A, W_K @ W_Q.T) and not np.allclose(A, W_Q @ W_K.T)
    assert 1.1 < np.mean(asym) < 1.35 and min(asym) > 1.0 and max(asym) < 1.41
    assert 14.0 < min(scale) < 16.0 and 73.0 < max(scale) < 75.0  # ||A||_F / sqrt(p): 15 to 74


@requires_shared
def test_single_head_has_rank_64():
    W_Q, W_K = gpt2.load_qk(6)
    s = np.linalg.svd(gpt2.head_matrix(W_Q, W_K, 7), compute_uv=False)
    assert np.sum(s > 1e-8 * s[0]) == 64
    # the layer is the sum of its 12 heads (and so can have rank up to 768)
    A = sum(gpt2.head_matrix(W_Q, W_K, h) for h in range(12))
    assert np.allclose(A, gpt2.paper_matrix(W_Q, W_K))


# ----------------------------------------------------------------------------- analysis
def _planted(p=120, alpha=0.7, s=(9.0, 6.0, 4.0), seed=6):
    rng = np.random.default_rng(seed)
    Qm, _ = np.linalg.qr(rng.standard_normal((p, 2 * len(s))))
    U, V = Qm[:, :len(s)], Qm[:, len(s):]  # u_k orthogonal to v_l: tr(U diag(s) V^T) = 0
    return alpha * np.eye(p) + (U * np.asarray(s)) @ V.T, U, V


def test_fit_recovers_planted_full_plus_low_rank():
    A, U, V = _planted()
    f = gpt2.fit(A, k_max=5)
    assert np.isclose(f.alpha, 0.7, atol=1e-12)
    assert np.allclose(f.s[:3], [9.0, 6.0, 4.0], atol=1e-10) and np.all(f.s[3:] < 1e-10)
    for k in range(3):  # the same vectors up to a common sign
        sgn = np.sign(f.U[:, k] @ U[:, k])
        assert np.allclose(f.U[:, k], sgn * U[:, k], atol=1e-10)
        assert np.allclose(f.V[:, k], sgn * V[:, k], atol=1e-10)
    assert np.allclose(f.low_rank(3), A, atol=1e-10)
    total = 0.7 ** 2 * 120 + 81 + 36 + 16
    assert np.isclose(f.frob2, total)
    assert np.isclose(f.identity_share, 0.7 ** 2 * 120 / total)
    assert np.isclose(f.identity_norm_ratio, np.sqrt(f.identity_share))
    assert np.isclose(f.share(0), f.identity_share)
    assert np.isclose(f.share(1), (0.7 ** 2 * 120 + 81) / total)
    assert np.isclose(f.share(3), 1.0) and np.isclose(f.spike_share(2), 36 / total)
    assert f.k_for(0.99) == 3 and f.k_for(0.0) == 0
    assert np.all(np.diff(f.share(np.arange(10))) >= -1e-15)
    with pytest.raises(ValueError, match="k must be"):
        f.low_rank(6)


def test_fit_with_noise_and_identity_coefficient_is_least_squares():
    A, U, V = _planted(p=200, seed=7)
    rng = np.random.default_rng(8)
    A = A + 0.02 * rng.standard_normal(A.shape)
    f = gpt2.fit(A, k_max=3)
    grid = f.alpha + np.linspace(-0.05, 0.05, 11)
    res = [np.linalg.norm(A - a * np.eye(200)) for a in grid]
    assert np.argmin(res) == 5  # tr(A)/p minimises ||A - alpha I||_F
    assert abs(f.alpha - 0.7) < 0.01 and np.allclose(f.s[:3], [9, 6, 4], atol=0.3)
    assert abs(abs(f.U[:, 0] @ U[:, 0]) - 1) < 1e-3


def test_verdicts():
    A, _, _ = _planted(p=60, alpha=0.1, s=(30.0, 2.0, 1.0))
    assert gpt2.verdict(gpt2.fit(A)) == "holds"
    A, _, _ = _planted(p=60, alpha=0.1, s=(10.0,) * 6)
    assert gpt2.verdict(gpt2.fit(A)) == "holds with a few spikes"
    A, _, _ = _planted(p=60, alpha=-0.1, s=(30.0, 2.0))
    assert gpt2.verdict(gpt2.fit(A)) == "fails: alpha <= 0"
    A, _, _ = _planted(p=60, alpha=0.1, s=(10.0,) * 20)
    assert gpt2.verdict(gpt2.fit(A)).startswith("fails: spread (k50 = ")
    assert "k50" in gpt2.VERDICT_RULE


def test_shuffled_preserves_entries_and_is_seeded():
    A = np.arange(400.0).reshape(20, 20) ** 1.5
    S = gpt2.shuffled(A, np.random.default_rng(9))
    assert S.shape == A.shape and not np.array_equal(S, A)
    assert np.array_equal(np.sort(S.ravel()), np.sort(A.ravel()))
    assert np.array_equal(S, gpt2.shuffled(A, np.random.default_rng(9)))
    assert np.isclose(np.linalg.norm(S), np.linalg.norm(A))
    with pytest.raises(TypeError, match="Generator"):
        gpt2.shuffled(A, 9)


def test_spectrum_and_normalise():
    rng = np.random.default_rng(10)
    A = rng.standard_normal((30, 30)) * 5
    sp = gpt2.spectrum(A)
    assert np.allclose(sp.singular_values, np.linalg.svd(A, compute_uv=False))
    assert np.allclose(sp.sym_eigenvalues, np.sort(np.linalg.eigvalsh((A + A.T) / 2))[::-1])
    An, scale = gpt2.normalise(A)
    assert np.isclose(np.sum(An ** 2) / 30, 1.0) and np.allclose(An * scale, A)
    with pytest.raises(ValueError, match="square"):
        gpt2.normalise(np.ones((2, 3)))
    with pytest.raises(ValueError, match="zero"):
        gpt2.normalise(np.zeros((3, 3)))
    assert gpt2.asymmetry(np.eye(3)) == 0.0
    assert np.isclose(gpt2.asymmetry(np.array([[0.0, 1.0], [-1.0, 0.0]])), 2.0)


def test_directions():
    A, _, _ = _planted(p=50, s=(5.0,))
    A[:, :] += 0.3 * np.outer(np.eye(50)[0], np.eye(50)[1])  # u_1 . v_1 != 0
    f = gpt2.fit(A, k_max=2)
    c = f.cos_uv
    mu = gpt2.aligned_direction(f, 2.5)
    assert np.isclose(mu @ mu, 2.5)
    cu, cv = mu @ f.U[:, 0] / np.sqrt(2.5), mu @ f.V[:, 0] / np.sqrt(2.5)
    assert np.isclose(cu, np.sqrt((1 + abs(c)) / 2)) and np.isclose(cv, np.sign(c) * cu)
    r = gpt2.random_direction(50, 2.5, seed=3)
    assert np.isclose(r @ r, 2.5) and np.array_equal(r, gpt2.random_direction(50, 2.5, seed=3))
    assert not np.array_equal(r, gpt2.random_direction(50, 2.5, seed=4))


@pytest.mark.parametrize("alpha", [0.4, -0.4])
def test_fit_setting_reproduces_the_kernel(alpha):
    """The Setting's model alpha I + w_K w_Q^T gives the same kernel as the fitted matrix."""
    p, n = 40, 30
    rng = np.random.default_rng(11)
    u, v = np.linalg.qr(rng.standard_normal((p, 2)))[0].T
    v = (v + 0.5 * u) / np.linalg.norm(v + 0.5 * u)
    A = alpha * np.eye(p) + 3.0 * np.outer(u, v)
    f = gpt2.fit(A, k_max=1)
    mu = gpt2.aligned_direction(f, 1.7)
    s = gpt2.fit_setting(f, mu, c=p / n, nonlinearity="relu")
    assert isinstance(s, al.Setting)
    assert s.alpha == pytest.approx(abs(f.alpha)) and s.snr == pytest.approx(1.7)
    assert s.wk_norm == pytest.approx(np.sqrt(f.s[0])) and s.c == pytest.approx(p / n)
    # rebuild w_K, w_Q from the Setting's Gram matrix, aligned with mu
    X = rng.standard_normal((p, n)) + np.outer(mu, np.ones(n))
    want = np.maximum(X.T @ f.low_rank(1) @ X / np.sqrt(p), 0.0)
    w_K = np.sqrt(f.s[0]) * f.U[:, 0] * (1 if f.alpha > 0 else -1)
    w_Q = np.sqrt(f.s[0]) * f.V[:, 0]
    assert np.isclose(mu @ w_K, s.mu_wk) and np.isclose(mu @ w_Q, s.mu_wq)
    assert np.isclose(w_K @ w_Q / (s.wk_norm * s.wq_norm), s.cos_wk_wq)
    func = al.nonlinearity.check_nonlinearity(s.f)
    got = func(X.T @ (s.alpha * np.eye(p) + np.outer(w_K, w_Q)) @ X / np.sqrt(p))
    assert np.allclose(got, want, atol=1e-12)
    if alpha < 0:  # the reflected f has the mirrored kink and Hermite data of f(-t)
        h = al.hermite.coefficients(s.f, s.alpha)
        assert np.isclose(h.a1, -al.hermite.coefficients("relu", s.alpha).a1)


def test_fit_setting_needs_nonzero_alpha():
    A, _, _ = _planted(p=30, alpha=0.0, s=(3.0,))
    f = gpt2.fit(A, k_max=1)
    with pytest.raises(ValueError, match="alpha"):
        gpt2.fit_setting(f, gpt2.aligned_direction(f, 1.0), c=0.5, nonlinearity="tanh")


@pytest.mark.parametrize("alpha", [0.4, -0.4])
def test_fit_rank_setting_one_spike_is_fit_setting(alpha):
    """r = 1 is fit_setting: the same limit theory (and the same Gram matrix)."""
    A, _, _ = _planted(p=60, alpha=alpha, s=(5.0, 3.0, 2.0), seed=12)
    A[:, :] += 0.4 * np.outer(np.eye(60)[0], np.eye(60)[1])  # u_1 . v_1 != 0
    f = gpt2.fit(A, k_max=3)
    mu = gpt2.aligned_direction(f, 1.3)
    one = gpt2.fit_setting(f, mu, c=0.5, nonlinearity="tanh")
    rank = gpt2.fit_rank_setting(f, mu, c=0.5, nonlinearity="tanh", r=1)
    assert isinstance(rank, al.RankSetting) and rank.r == 1
    assert np.allclose(rank.gram, one.gram, atol=1e-12) and rank.alpha == one.alpha
    g = [1e-3, 0.1, 1.0]
    assert np.allclose(al.theory.attention_error(rank, g), al.theory.attention_error(one, g),
                       rtol=0, atol=1e-12)


@pytest.mark.parametrize("alpha", [0.3, -0.3])
def test_fit_rank_setting_gram_and_model(alpha):
    """The Gram matrix is that of [mu; sqrt(s_k) u_k (times sign alpha); sqrt(s_k) v_k], and the
    model |alpha| I + W_K^T W_Q with the setting's f gives the kernel of the fitted matrix."""
    p, n, r = 50, 20, 3
    A, _, _ = _planted(p=p, alpha=alpha, s=(6.0, 4.0, 3.0, 1.0), seed=13)
    f = gpt2.fit(A, k_max=4)
    mu = gpt2.random_direction(p, 0.8, seed=14)
    s = gpt2.fit_rank_setting(f, mu, c=p / n, nonlinearity="relu", r=r)
    sign = np.sign(alpha)
    W_K = sign * np.sqrt(f.s[:r])[:, None] * f.U[:, :r].T
    W_Q = np.sqrt(f.s[:r])[:, None] * f.V[:, :r].T
    V = np.vstack([mu, W_K, W_Q])
    assert s.r == r and s.alpha == pytest.approx(abs(f.alpha)) and s.c == pytest.approx(p / n)
    assert np.allclose(s.gram, V @ V.T, atol=1e-12)
    # the coherent shift is that of the fitted matrix, read through f(sign(alpha) t)
    assert s.signed_delta(n) == pytest.approx(sign * mu @ f.low_rank(r) @ mu / np.sqrt(p))
    X = np.random.default_rng(15).standard_normal((p, n)) + np.outer(mu, np.ones(n))
    want = np.maximum(X.T @ f.low_rank(r) @ X / np.sqrt(p), 0.0)
    func = al.nonlinearity.check_nonlinearity(s.f)
    got = func(X.T @ (s.alpha * np.eye(p) + W_K.T @ W_Q) @ X / np.sqrt(p))
    assert np.allclose(got, want, atol=1e-12)


def test_fit_rank_setting_bad_rank():
    A, _, _ = _planted(p=30, s=(3.0, 2.0))
    f = gpt2.fit(A, k_max=2)
    mu = gpt2.aligned_direction(f, 1.0)
    for r in (0, 3):
        with pytest.raises(ValueError, match=r"r must be an integer in 1\.\.2"):
            gpt2.fit_rank_setting(f, mu, c=0.5, nonlinearity="tanh", r=r)
    with pytest.raises(TypeError, match="r must be an integer"):
        gpt2.fit_rank_setting(f, mu, c=0.5, nonlinearity="tanh", r=2.0)
    with pytest.raises(ValueError, match="mu must have shape"):
        gpt2.fit_rank_setting(f, mu[:-1], c=0.5, nonlinearity="tanh", r=1)


def _direct_error(Phi, y, gamma):
    n = Phi.shape[1]
    Q = np.linalg.inv(Phi.T @ Phi / n + gamma * np.eye(n))
    return gamma ** 2 * y @ Q @ Q @ y / n


def test_monte_carlo_matches_definition_and_is_seeded():
    p, n = 20, 36
    rng = np.random.default_rng(12)
    A = rng.standard_normal((p, p)) / np.sqrt(p)
    mus = {"a": np.eye(p)[0] * 1.5, "b": np.eye(p)[1]}
    gammas = np.array([1e-3, 0.1, 2.0])
    mc = gpt2.simulate_matrices({"A": A, "I": np.eye(p)}, mus, "relu", gammas, n=n, trials=3, seed=5)
    assert mc.attention["A"]["a"].values.shape == (3, 3) and (mc.n, mc.p) == (n, p)
    # trial 1 by hand
    r = np.random.default_rng(np.random.SeedSequence(5).spawn(3)[1])
    y = al.data.labels(n, r)
    Z = r.standard_normal((p, n))
    for mname, M in {"A": A, "I": np.eye(p)}.items():
        a0 = al.hermite.coefficients("relu", np.linalg.norm(M) / np.sqrt(p)).a0
        for d, mu in mus.items():
            X = Z + np.outer(mu, y)
            K = (np.maximum(X.T @ M @ X / np.sqrt(p), 0) - a0) / np.sqrt(p)
            np.fill_diagonal(K, 0)
            want = [_direct_error(X @ K, y, g) for g in gammas]
            assert np.allclose(mc.attention[mname][d].values[1], want, rtol=1e-8)
            assert np.allclose(mc.ridge[d].values[1], [_direct_error(X, y, g) for g in gammas],
                               rtol=1e-8)
    fewer = gpt2.simulate_matrices({"A": A}, {"a": mus["a"]}, "relu", gammas, n=n, trials=2, seed=5)
    assert np.array_equal(fewer.attention["A"]["a"].values, mc.attention["A"]["a"].values[:2])


def test_multi_head_monte_carlo_matches_definition():
    # f on each head's logits, head h writing rows h p/H .. of Phi = [X_1 K_1; ...]: trial 0 by hand
    p, n, H = 12, 30, 3
    rng = np.random.default_rng(4)
    B = rng.standard_normal((H, p, p)) / np.sqrt(p)
    mus = {"a": np.eye(p)[0] * 1.2}
    gammas = np.array([1e-2, 0.5])
    mc = gpt2.simulate_matrices({"heads": B, "sum": B.sum(axis=0), "one": B[:1]}, mus, "tanh",
                                gammas, n=n, trials=2, seed=3)
    r = np.random.default_rng(np.random.SeedSequence(3).spawn(2)[0])
    y = al.data.labels(n, r)
    X = r.standard_normal((p, n)) + np.outer(mus["a"], y)
    feats = []
    for h, M in enumerate(B):
        a0 = al.hermite.coefficients("tanh", np.linalg.norm(M) / np.sqrt(p)).a0
        K = (np.tanh(X.T @ M @ X / np.sqrt(p)) - a0) / np.sqrt(p)
        np.fill_diagonal(K, 0)
        feats.append(X[4 * h:4 * (h + 1)] @ K)
    want = [_direct_error(np.vstack(feats), y, g) for g in gammas]
    np.testing.assert_allclose(mc.attention["heads"]["a"].values[0], want, rtol=1e-8)
    # one head as a stack is that head's single-matrix model, bit for bit
    single = gpt2.simulate_matrices({"B0": B[0]}, mus, "tanh", gammas, n=n, trials=2, seed=3)
    np.testing.assert_array_equal(mc.attention["one"]["a"].values, single.attention["B0"]["a"].values)
    # summing the logits is another model: it differs from the heads' on the same draws
    assert np.all(np.abs(mc.attention["sum"]["a"].values - mc.attention["heads"]["a"].values) > 1e-3)


def test_heads_scales():
    rng = np.random.default_rng(0)
    W_Q, W_K = rng.standard_normal((2, 16, 8))
    unit = gpt2.heads(W_Q, W_K, "unit", head_dim=4)
    assert unit.shape == (2, 16, 16)
    np.testing.assert_allclose(np.linalg.norm(unit, axis=(1, 2)) ** 2 / 16, 1.0)
    np.testing.assert_allclose(gpt2.heads(W_Q, W_K, "gpt2", head_dim=4)[1],
                               gpt2.head_matrix(W_Q, W_K, 1, 4) * 4 / 2)
    # the heads sum to the layer's matrix (GPT-2's summed logits)
    np.testing.assert_allclose(gpt2.heads(W_Q, W_K, "gpt2", head_dim=4).sum(axis=0) / 2,
                               gpt2.paper_matrix(W_Q, W_K))
    with pytest.raises(ValueError, match="scale must be"):
        gpt2.heads(W_Q, W_K, "raw", head_dim=4)


def test_monte_carlo_bad_input():
    with pytest.raises(ValueError, match="shape"):
        gpt2.simulate_matrices({"A": np.eye(4)}, {"m": np.ones(3)}, "tanh", [1.0], n=8)
    with pytest.raises(ValueError, match="square"):
        gpt2.simulate_matrices({"A": np.ones((4, 3))}, {"m": np.ones(4)}, "tanh", [1.0], n=8)
    with pytest.raises(ValueError, match="gammas"):
        gpt2.simulate_matrices({"A": np.eye(4)}, {"m": np.ones(4)}, "tanh", [-1.0], n=8)


@requires_shared
def test_real_fit_numbers_are_those_the_chapter_discusses():
    """Layer 0 has the largest identity part (norm ratio ~0.16); layers 1-3 have alpha < 0."""
    ratios = []
    for layer in range(12):
        A, _ = gpt2.normalise(gpt2.paper_matrix(*gpt2.load_qk(layer)))
        ratios.append(np.trace(A) / 768)  # alpha sqrt(p) / ||A||_F, as ||A||_F = sqrt(p) now
        if layer == 0:
            f = gpt2.fit(A, k_max=1)
            assert np.isclose(f.identity_norm_ratio, ratios[0]) and np.isclose(f.frob2, 768)
            assert 0.1 < f.share(1) - f.share(0) < 0.2  # the leading spike: ~13% of ||A||_F^2
    ratios = np.array(ratios)
    assert 0.15 < ratios[0] < 0.17 and np.all(ratios[1:4] < 0) and np.all(ratios[5:] > 0)


def test_summarise_small_matrix():
    A, _, _ = _planted(p=40, alpha=0.5, s=(8.0, 3.0))
    A = A * 7.0  # an arbitrary raw scale
    sm = gpt2.layer_summary(A, k_max=4, seed=[1, 2])
    assert np.isclose(sm.scale, np.linalg.norm(A) / np.sqrt(40))
    assert np.isclose(sm.fit.frob2, 40.0) and np.isclose(sm.fit.alpha, 0.5 * 7 / sm.scale)
    assert np.isclose(sm.asymmetry, gpt2.asymmetry(A))
    assert np.allclose(sm.spectrum.singular_values,
                       np.linalg.svd(A / sm.scale, compute_uv=False))
    assert sm.shuffled_shares.shape == (41,) and np.isclose(sm.shuffled_shares[-1], 1.0)
    assert sm.verdict == gpt2.verdict(sm.fit)
    again = gpt2.layer_summary(A, k_max=4, seed=[1, 2])
    assert np.array_equal(again.shuffled_spectrum.singular_values,
                          sm.shuffled_spectrum.singular_values)

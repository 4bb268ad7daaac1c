"""The theory's domain: a DomainWarning (or, strict, a DomainError) outside the measured conditions,
silence inside, at settings of the book's benchmarks (attn_lib.theory.domain)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import attn_lib as al
from attn_lib.theory import domain

G = np.array([1e-3, 0.1, 1.0])
# benchmarks/fidelity.py, "cos c=2 snr=2 aligned w=1": delta = 4 / 64 = 0.06 at n = 2048
INSIDE = al.Setting(c=2.0, f="cos", snr=2.0, wk_norm=1.0, wq_norm=1.0)
# the first example of the README before this check: delta = 10 / sqrt(p), 0.31 at n = 2048
SHIFTED = al.Setting(c=0.5, snr=2.0, f="tanh", wk_norm=2.0, wq_norm=2.0)


def _quiet(call, *args, **kwargs):
    """``call(*args, **kwargs)`` with every warning an error: it must raise none."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return call(*args, **kwargs)


def test_the_warning_and_the_error_are_public_and_of_the_right_kinds():
    assert issubclass(al.DomainWarning, UserWarning) and issubclass(al.DomainError, ValueError)
    assert al.theory.DomainWarning is al.DomainWarning is domain.DomainWarning


def test_the_limit_warns_at_a_large_coherent_shift_and_names_the_finite_size_theory():
    assert SHIFTED.delta(2048) > domain.LIMIT_DELTA > INSIDE.delta(2048)
    with pytest.warns(al.DomainWarning, match=r"coherent shift delta .* = 0\.313 at n = 2048") as rec:
        al.theory.attention_error(SHIFTED, G)
    text = str(rec[0].message)
    assert "1.04 times the bound 0.3" in text and "from n >= 2223" in text
    assert "attention_error(setting, gammas, n=n)" in text
    assert rec[0].filename == __file__  # points at the caller
    _quiet(al.theory.attention_error, INSIDE, G)
    _quiet(al.theory.attention_error, SHIFTED, G, n=1024)  # the finite-size theory holds there


def test_strict_raises_instead_and_the_values_are_those_of_the_warning_call():
    with pytest.raises(al.DomainError, match="coherent shift"):
        al.theory.attention_error(SHIFTED, G, strict=True)
    with pytest.raises(al.DomainError):
        al.theory.attention_resolvent_form(SHIFTED, G, strict=True)
    with pytest.raises(TypeError, match="strict"):
        al.theory.attention_error(INSIDE, G, strict="yes")
    np.testing.assert_array_equal(_quiet(al.theory.attention_error, INSIDE, G, strict=True),
                                  al.theory.attention_error(INSIDE, G))


def test_softmax_past_the_tail_edge_warns_and_names_the_row_factor_theory():
    # the practitioner's beta = 2: past tail_beta(2048) = 1.35 (benchmarks/softmax_grid.py)
    s = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(2.0))
    with pytest.warns(al.DomainWarning, match=r"beta = 2 is past the tail edge beta = 1\.35") as rec:
        al.theory.attention_error(s, G)
    assert "Instead: the row-factor theory attn_lib.theory.softmax.rows_error" in str(rec[0].message)
    with pytest.warns(al.DomainWarning, match="tail edge.*rows_error"):
        al.theory.attention_error(s, G, n=2048)
    # beta = 1 on the grid's random inputs: inside, limit and finite size
    inside = al.Setting(c=0.5, snr=1.0, attention=al.Softmax(1.0))
    _quiet(al.theory.attention_error, inside, G)
    _quiet(al.theory.attention_error, inside, G, n=2048)
    # beta = 1.5 at n = 2048: past the edge of the finite-size theory (softmax_strong.py)
    with pytest.warns(al.DomainWarning, match="tail edge"):
        al.theory.attention_error(al.Setting(c=0.75, attention=al.Softmax(1.5)), G, n=2048)


def test_softmax_beyond_the_regular_regime_names_the_finite_size_theory():
    s = al.Setting(c=0.5, snr=4.0, wk_norm=2.0, wq_norm=2.0, attention=al.Softmax(1.0))
    assert s.attention.beta * s.delta(2048) > domain.SOFTMAX_BETA_DELTA
    with pytest.warns(al.DomainWarning, match="regular regime") as rec:
        al.theory.attention_error(s, G)
    assert "finite-size theory" in str(rec[0].message)


def test_the_finite_size_theory_warns_below_256_tokens_and_beyond_a_shift_of_3():
    s = al.Setting(c=0.5, snr=1.0, f="quadratic")
    with pytest.warns(al.DomainWarning, match=r"n = 128 is below 256"):
        al.theory.attention_error(s, G, n=128)
    _quiet(al.theory.attention_error, s, G, n=256)
    big = al.Setting(c=0.5, snr=60.0, f="tanh")
    assert big.delta(512) > domain.FINITE_DELTA
    with pytest.warns(al.DomainWarning, match="largest shift at which the finite-size theory"):
        al.theory.attention_error(big, G[:1], n=512)


def _spiked_matrix(p: int, along: np.ndarray, weight: float) -> np.ndarray:
    rng = np.random.default_rng(3)
    u = along / np.linalg.norm(along)
    M = rng.standard_normal((p, p)) / np.sqrt(p) + weight * np.outer(u, u)
    return M / (np.linalg.norm(M) / np.sqrt(p))


def test_a_matrix_with_an_aligned_signal_warns_and_a_random_one_does_not():
    p = 128
    rng = np.random.default_rng(0)
    mu = rng.standard_normal(p) / np.sqrt(p)
    aligned = al.MatrixSetting(c=0.5, M=_spiked_matrix(p, mu, 40.0), mu=mu)
    with pytest.warns(al.DomainWarning, match=r"mu\^T M mu.*n=256") as rec:
        al.theory.attention_error(aligned, G[:1])
    assert "reduced model" in str(rec[0].message)
    _quiet(al.theory.attention_error, al.MatrixSetting(c=0.5, M=_spiked_matrix(p, rng.standard_normal(p), 0.0), mu=mu),
           G[:1])


def test_aligned_heads_warn_naming_the_finite_size_theory():
    p = 48
    rng = np.random.default_rng(1)
    mu = rng.standard_normal(p) / np.sqrt(p)
    heads = np.stack([_spiked_matrix(p, mu, 30.0), _spiked_matrix(p, rng.standard_normal(p), 0.0)])
    aligned = al.HeadsSetting(c=0.5, heads=heads, mu=mu)
    with pytest.warns(al.DomainWarning, match=r"mu\^T B_h mu.*n=96") as rec:
        al.theory.attention_error(aligned, G[:1])
    assert "reduced model" in str(rec[0].message)
    # the finite-size theory reads each head's shift at its scale, and the tokens
    with pytest.warns(al.DomainWarning, match="n = 96 is below 256"):
        al.theory.attention_error(aligned, G[:1], n=96)
    assert [v.condition for v in al.theory.domain.violations(aligned, 96)] == ["tokens"]
    calm = np.stack([_spiked_matrix(p, rng.standard_normal(p), 0.0) for _ in range(2)])
    _quiet(al.theory.attention_error, al.HeadsSetting(c=0.5, heads=calm, mu=mu), G[:1])


def test_a_raw_matrix_warns_in_the_theory_and_the_simulator_naming_the_normaliser():
    p = 64
    rng = np.random.default_rng(2)
    raw = 20.0 * _spiked_matrix(p, rng.standard_normal(p), 0.0)
    s = al.MatrixSetting(c=0.5, M=raw, mu=np.zeros(p))
    for call in (lambda: al.theory.attention_error(s, G[:1]),
                 lambda: al.simulate.errors(s, G[:1], n=128, trials=1)):
        with pytest.warns(al.DomainWarning, match=r"logit scale sigma = .* = 20, .*gpt2\.normalise"):
            call()
    M, sigma = al.studies.gpt2.normalise(raw)
    assert sigma == pytest.approx(20.0)
    _quiet(al.simulate.errors, al.MatrixSetting(c=0.5, M=M, mu=np.zeros(p)), G[:1], n=128, trials=1)


def test_a_batch_gives_one_warning_with_the_count():
    with pytest.warns(al.DomainWarning, match=r"1 condition\(s\) failed over 2 settings") as rec:
        al.theory.attention_error_batch([INSIDE, SHIFTED], 0.1)
    assert len(rec) == 1
    with pytest.raises(al.DomainError):
        al.theory.attention_error_batch([INSIDE, SHIFTED], 0.1, strict=True)


def test_violations_lists_the_failed_conditions_and_ignored_silences_them():
    assert domain.violations(INSIDE) == []
    (v,) = domain.violations(SHIFTED)
    assert v.condition == "coherent shift" and v.bound == domain.LIMIT_DELTA
    assert v.value == pytest.approx(SHIFTED.delta(2048))
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        with domain.ignored():
            al.theory.attention_error(SHIFTED, G)
    assert rec == []


def test_the_book_pages_ignore_the_warning():
    pytest.importorskip("myst_nb")
    from attn_lib.book import page

    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        page.setup("quick")
        al.theory.attention_error(SHIFTED, G)
    assert not [w for w in rec if issubclass(w.category, al.DomainWarning)]

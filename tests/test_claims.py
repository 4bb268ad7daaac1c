"""Checked findings (attn_lib.book.claims) and their gluing (attn_lib.book.page)."""

from __future__ import annotations

import pytest

from attn_lib.book import claims, page

W = ("holds", "is contradicted", "is undecided")


def test_exceeds_decides_beyond_z_standard_errors():
    assert claims.exceeds("a", 1.0, 0.1, 0.5, 0.1, wording=W).holds is True   # 0.5 / 0.141 = 3.5
    assert claims.exceeds("a", 1.0, 0.1, 0.6, 0.1, wording=W).holds is None   # 2.8 s.e.
    assert claims.exceeds("a", 0.5, 0.1, 1.0, 0.1, wording=W).holds is False
    assert claims.exceeds("a", 0.5, 0.1, 1.0, 0.1, wording=W).text == "is contradicted"
    assert claims.exceeds("a", 1.0, 0.0, 0.0, wording=W).holds is True        # exact numbers


def test_equivalent_needs_power():
    assert claims.equivalent("e", 1.0, 0.01, 1.01, 0.01, margin=0.1, wording=W).holds is True
    # same point estimates, ten times the noise: cannot tell, so not "equal"
    assert claims.equivalent("e", 1.0, 0.1, 1.01, 0.1, margin=0.1, wording=W).holds is None
    assert claims.equivalent("e", 1.0, 0.01, 1.5, 0.01, margin=0.1, wording=W).holds is False


def test_exact_and_bad_input():
    assert claims.exact("x", 1 < 2, "1 < 2", wording=W).holds is True
    with pytest.raises(TypeError, match="wording"):
        claims.exact("x", True, "e", wording=("a", "b"))
    with pytest.raises(TypeError, match="name"):
        claims.exact("not a name", True, "e", wording=W)
    with pytest.raises(ValueError, match="se_a"):
        claims.exceeds("a", 1.0, -1.0, wording=W)


def test_the_full_profile_fails_on_a_claim_that_does_not_hold(monkeypatch):
    glued = {}
    monkeypatch.setattr("myst_nb.glue", lambda name, value, display=True: glued.update({name: value}))
    monkeypatch.setattr(page, "_STATE", {"profile": "quick"})
    bad = claims.exceeds("worse", 0.5, 0.1, 1.0, 0.1, wording=W)
    page.glue({"worse": bad})                     # quick: reported, not fatal
    assert glued["worse"] == "is contradicted" and "s.e." in glued["worse_evidence"]
    monkeypatch.setattr(page, "_STATE", {"profile": "full"})
    with pytest.raises(claims.ClaimError, match="'worse' is contradicted"):
        page.glue({"worse": bad})
    undecided = claims.exceeds("u", 1.0, 0.1, 0.9, 0.1, wording=W)
    with pytest.raises(claims.ClaimError, match="undecided"):
        page.glue({"u": undecided})
    page.glue({"u": claims.exceeds("u", 1.0, 0.1, 0.9, 0.1, wording=W, required=False)})
    assert glued["u"] == "is undecided"


def test_few_draws_use_student_t():
    # 4.0 s.e. is decided for a normal law but not with 4 draws (t, 3 d.o.f.: 9.2 s.e.)
    assert claims.exceeds("a", 0.4, 0.1, wording=W).holds is True
    assert claims.exceeds("a", 0.4, 0.1, wording=W, draws=4).holds is None
    assert claims.exceeds("a", 1.0, 0.1, wording=W, draws=4).holds is True
    assert claims.threshold(3.0, 4) == pytest.approx(9.219, abs=1e-3)
    assert claims.threshold(3.0, 10**6) == pytest.approx(3.0, abs=1e-3)
    one = claims.exceeds("a", 100.0, 0.1, wording=W, draws=1)
    assert one.holds is None and "fewer than 2 draws" in one.evidence
    assert "3 d.o.f." in claims.exceeds("a", 1.2, 0.1, wording=W, draws=4).evidence
    with pytest.raises(ValueError, match="draws"):
        claims.exceeds("a", 1.0, 0.1, wording=W, draws=-1)
    assert claims.equivalent("e", 1.0, 0.01, 1.01, 0.01, margin=0.1, wording=W, draws=4).holds is None
    assert claims.equivalent("e", 1.0, 0.001, 1.01, 0.001, margin=0.1, wording=W, draws=4).holds


def test_less_reports_the_difference_in_the_order_of_the_prose():
    c = claims.less("below", 0.2, 0.01, 0.5, 0.01, wording=W)
    assert c.holds is True and c.evidence.startswith("difference -0.3 ")
    assert "-21.2 s.e." in c.evidence
    assert claims.less("below", 0.5, 0.01, 0.2, 0.01, wording=W).holds is False
    t = claims.less("below", 0.2, 0.01, 0.5, 0.01, wording=W, draws=8)
    assert t.holds is True and "t = -21.2, 7 d.o.f." in t.evidence

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

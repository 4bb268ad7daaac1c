"""The figures and numbers of the nonlinearity-atlas chapter, at tiny sizes (cache in tmp_path)."""

from __future__ import annotations

import pytest
from IPython.display import Markdown

from attn_lib.book.figures import nonlinearity_atlas as figs

from book_helpers import check_figure

pytestmark = pytest.mark.usefixtures("book_cache")

KW = dict(names=["tanh", "relu"], partners=["cos", "sign"], reflect=["relu"], n_sweep=1, n=24,
          trials=2, seed=0)
SETTINGS = ("random", "aligned", "orthogonal", "strong")


def test_overview():
    out = figs.overview(**KW)
    assert set(out) == ({"n_f", "n_tok", "p_tok", "n_trials", "gamma", "sign_de_gap"}
                        | {f"delta_{s}" for s in SETTINGS})
    assert (out["n_tok"], out["p_tok"], out["n_f"]) == (24, 48, 9)
    assert out["sign_de_gap"] < 1e-9


def test_gamma_choice():
    check_figure(figs.gamma_choice(), {f"contrast_{s}" for s in SETTINGS}, 4)


def test_tables():
    out = figs.tables(**KW)
    assert set(out) == ({"nu_err", "hermite_table", "errors_table", "groups_table"}
                        | {f"ridge_{s}" for s in SETTINGS})
    for name, rows in (("hermite_table", 9), ("errors_table", 9), ("groups_table", 3)):
        assert isinstance(out[name], Markdown)
        assert len(out[name].data.splitlines()) == 2 + rows, name


def test_error_ratio():
    check_figure(figs.error_ratio(**KW), {"random_monotone"} | {f"{k}_{s}" for s in SETTINGS
                                                                for k in ("r2", "de_range")}, 4)


def test_paired_deviations():
    names = {f"{k}_{w}" for w in ("small", "strong") for k in ("n_cells", "n_sig")}
    names |= {f"spread_{w}_{k}" for w in ("small", "strong") for k in ("median", "max")}
    names |= {"z_max", "sem_rel_small", "worst_small", "worst_small_z", "verdict_small",
              "dev_cos_strong", "dev_sign_strong", "dev_named_strong", "dev_min_strong",
              "dev_max_strong", "dev_min_label", "dev_max_label", "closest_kind"}
    check_figure(figs.paired_deviations(**KW), names, 4)


def test_shift_ladder():
    figure = figs.shift_ladder(**KW, n_ladder=[16, 24])
    check_figure(figure, {f"ladder_{k}" for k in ("n0", "n1", "d0", "d1", "spread0", "spread1",
                                                  "verdict", "conclusion")}, 2)
    assert (figure.numbers["ladder_n0"], figure.numbers["ladder_n1"]) == (16, 24)


def test_reflection():
    out = figs.reflection(**KW)
    assert set(out) == {"refl_z_small", "refl_rel_small", "refl_z_strong", "refl_rel_strong"}

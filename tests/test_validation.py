"""attn_lib._validation: the shared checks, and the bad inputs they now refuse."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attn_lib import Setting, data, simulate, theory
from attn_lib import _validation as v
from attn_lib.model.setting import ENTRYWISE, Attention, BaseSetting, Entrywise


@pytest.mark.parametrize("bad", ["0.1", b"0.1", np.array(["0.1"]), [0.1, "a"], True,
                                 np.array([0.1], dtype=object), 1j, [[0.1], [0.2, 0.3]]])
def test_gammas_must_be_numeric(bad):
    with pytest.raises(TypeError, match="gammas"):
        v.check_gammas(bad)


def test_attention_error_refuses_a_string_gamma():
    s = Setting(c=0.5)
    with pytest.raises(TypeError, match="gammas must be a positive float"):
        theory.attention_error(s, "0.1")
    np.testing.assert_array_equal(v.check_gammas([1, 2]), [1.0, 2.0])


def test_one_token_is_refused_with_the_reason():
    s = Setting(c=0.5)
    with pytest.raises(ValueError, match=r"n must be an integer >= 2 \(at least one token per class\)"):
        simulate.errors(s, [0.1], n=1, trials=1)
    with pytest.raises(ValueError, match="one token per class"):
        data.labels(1, np.random.default_rng(0))
    assert simulate.errors(s, [0.1], n=2, trials=1).n == 2
    with pytest.raises(TypeError, match="n must be an integer >= 2"):
        v.check_tokens(2.0)


def test_scalar_and_array_checks():
    assert v.check_int(3, "k", low=0, high=3) == 3
    with pytest.raises(ValueError, match=r"k must be an integer in 0\.\.3, got 4"):
        v.check_int(4, "k", low=0, high=3)
    assert v.check_index(-1, "i", 3, negative=True) == -1
    with pytest.raises(ValueError, match="i must be an index < 3"):
        v.check_index(3, "i", 3)
    with pytest.raises(ValueError, match=r"i must be an index in \[0, 2\]"):
        v.check_index(-1, "i", 3)
    with pytest.raises(TypeError, match="flag must be bool"):
        v.check_bool(1, "flag")
    with pytest.raises(ValueError, match="mode must be one of"):
        v.check_choice("c", "mode", ("a", "b"))
    with pytest.raises(ValueError, match="x must be strictly increasing"):
        v.check_array([0.0, 0.0], "x", increasing=True)
    with pytest.raises(TypeError, match="x must be a 1-D array of real numbers"):
        v.check_array(["a", "b"], "x")
    with pytest.raises(ValueError, match="A must be a non-empty square matrix"):
        v.check_square(np.ones((2, 3)))
    np.testing.assert_array_equal(v.check_sizes((8, 16)), [8, 16])
    with pytest.raises(TypeError, match="sequence of integers"):
        v.check_sizes(8)
    assert v.check_gamma(0.5) == 0.5
    with pytest.raises(TypeError, match="make must be a callable"):
        v.check_callable(3, "make", "(x, y) -> Setting")


@dataclasses.dataclass(frozen=True)
class _Future(Attention):
    beta: float = 1.0


def test_settings_carry_an_attention_kind_and_functions_state_what_they_support():
    s = Setting(c=0.5)
    assert s.attention == ENTRYWISE and isinstance(s.attention, Entrywise)
    assert isinstance(s, BaseSetting) and s.logit_scale == s.alpha
    later = Setting(c=0.5, attention=_Future(beta=2.0))
    with pytest.raises(ValueError, match=r"setting.attention must be one of \(Entrywise, Softmax\)"):
        theory.attention_error(later, 0.1)
    assert v.check_setting(later, attention=(Entrywise, _Future)) is later
    with pytest.raises(TypeError, match="attention must be an attention kind"):
        Setting(c=0.5, attention="softmax")
    with pytest.raises(TypeError, match="setting must be an attn_lib.Setting"):
        v.check_setting({"c": 0.5})
    assert v.check_settings(s) == [s]
    with pytest.raises(ValueError, match="settings must not be empty"):
        v.check_settings([])
    with pytest.raises(TypeError, match="settings must be a setting or a sequence"):
        v.check_settings(3)

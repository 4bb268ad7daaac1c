"""The glued Markdown tables of the chapters (attn_lib.book.page.markdown_table)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from attn_lib.book.page import markdown_table


def test_rows_formats_and_default_alignment():
    rows = [{"f": "tanh", "a1": np.float64(0.96461), "k": 3, "note": "a | b"},
            {"f": "cos", "a1": 0.0, "k": 12, "note": "-"}]
    assert markdown_table(rows, {"a1": ".3f"}).data.splitlines() == [
        "| f | a1 | k | note |",
        "|---|---:|---:|---|",
        r"| tanh | 0.965 | 3 | a \| b |",
        "| cos | 0.000 | 12 | - |"]


def test_left_and_explicit_right():
    rows = [{"layer": 0, "verdict": "holds"}]
    assert markdown_table(rows, left=True).data.splitlines()[1] == "|---:|:---|"
    assert markdown_table(rows, right=()).data.splitlines()[1] == "|---|---|"
    assert markdown_table(rows, right=["verdict"]).data.splitlines()[1] == "|---|---:|"


def test_data_frame_gives_its_index_as_the_first_columns():
    frame = pd.DataFrame({"layer": [0, 0], "SNR": [2.0, 4.0], "E": [0.125, np.nan],
                          "mu": ["aligned", "random"]}).set_index(["layer", "SNR"])
    assert markdown_table(frame, {"SNR": "g", "E": ".4f"}, left=True).data.splitlines() == [
        "| layer | SNR | E | mu |",
        "|---:|---:|---:|:---|",
        "| 0 | 2 | 0.1250 | aligned |",
        "| 0 | 4 | nan | random |"]


def test_empty_rows_are_refused():
    with pytest.raises(ValueError, match="rows must not be empty"):
        markdown_table([])
    with pytest.raises(ValueError, match="rows must not be empty"):
        markdown_table(pd.DataFrame({"a": []}))

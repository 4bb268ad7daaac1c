"""The README's examples run: every ``python`` code block of README.md, in order, in one namespace.

They are written at small sizes (seconds in all). The block that reads GPT-2's weights (its first
line says so) runs only when they are on this machine (``../shared`` or the user cache): the test
never downloads them.
"""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib.pyplot as plt

README = Path(__file__).resolve().parents[1] / "README.md"
GPT2_MARK = "# needs GPT-2's weights"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def _gpt2_local() -> bool:
    from attn_lib.studies import gpt2

    try:
        gpt2.find_source(download=False)
    except FileNotFoundError:
        return False
    return True


def test_the_readme_has_an_example_for_each_question():
    text = README.read_text()
    for title in ("The paper's model", "My attention matrix", "My data", "Softmax",
                  "Several heads", "A fair comparison with ridge"):
        assert f"### {title}" in text, title
    assert len(_blocks()) >= 6


def test_every_readme_example_runs(capsys):
    namespace: dict = {}
    ran = 0
    for code in _blocks():
        if code.startswith(GPT2_MARK) and not _gpt2_local():
            continue
        exec(compile(code, str(README), "exec"), namespace)
        ran += 1
    plt.close("all")
    assert ran >= len(_blocks()) - 1
    # the softmax block's strict call printed its DomainError
    assert "past the tail edge" in capsys.readouterr().out

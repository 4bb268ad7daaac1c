"""``benchmarks/book_time.py``: the time between cache writes charged to the later write's function."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "book_time.py"


def _write(root: Path, name: str, stem: str, t: float) -> None:
    d = root / name
    d.mkdir(exist_ok=True)
    f = d / f"{stem}.npz"
    f.write_bytes(b"")
    os.utime(f, (t, t))


def test_charges_and_kinds(tmp_path: Path) -> None:
    mc, th = "attn_lib.simulation.simulate.errors", "attn_lib.studies.gpt2.heads_theory"
    for stem, name, t in (("a", mc, 1000.0), ("b", mc, 1010.0), ("c", th, 1040.0), ("d", mc, 1045.0),
                          ("e", th, 5000.0)):
        _write(tmp_path, name, stem, t)
    out = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path), "--max-gap", "900"],
                         capture_output=True, text=True, check=True).stdout
    assert "5 cached results" in out and "charged 45 s" in out
    assert "15.0 s      2 results  Monte Carlo" in out       # 10 s and 5 s
    assert "30.0 s      1 results  theory" in out
    assert "left out: a gap of 3955 s before a result of " + th in out


def test_not_a_cache(tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "missing")], capture_output=True, text=True)
    assert r.returncode != 0 and "DIR must be a result cache folder" in r.stderr
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, check=True)

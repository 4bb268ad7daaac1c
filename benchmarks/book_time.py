"""Where a cold build of the book spends its time, read from the result cache that build filled.

A cold serial build (``make book`` with an empty result cache, ``ATTN_BOOK_CACHE=DIR``) writes each
cached result (``attn_lib.cache``: one folder per function, one file per call) the moment it is
computed. Sorted by their write times, the time between one result and the one before it is
charged to the function of the later one: its own computation plus whatever uncached work ran in
between (plotting, a theory computed outside the cache, a notebook's start). Gaps longer than
``--max-gap`` seconds (a pause, a later run writing into the same folder) are left out and listed.

Prints, per function and per kind of work (:data:`KIND`: Monte Carlo, training, theory, mixed,
other), the seconds charged and the number of results, and the span from the first write to the
last. The charge is an attribution, not a profile: a chapter's uncached theory counts towards the
next cached result, whatever it is.

Usage::

    python benchmarks/book_time.py DIR [--max-gap 900]
"""

from __future__ import annotations

import argparse
import collections
import datetime
import sys
from pathlib import Path

#: The kind of work of each cached function of the book (its folder name in the cache).
KIND = {
    "attn_lib.simulation.simulate.errors": "Monte Carlo",
    "attn_lib.simulation.simulate.subset_errors": "Monte Carlo",
    "attn_lib.simulation.simulate.self_weight": "Monte Carlo",
    "attn_lib.studies.gpt2.simulate_matrices": "Monte Carlo",
    "attn_lib.studies.real_tokens.class_surrogate_errors": "Monte Carlo",
    "attn_lib.studies.real_tokens.surrogate_errors": "Monte Carlo",
    "attn_lib.studies.softmax.normalisation_draws": "Monte Carlo",
    "attn_lib.studies.softmax.spectrum_draws": "Monte Carlo",
    "attn_lib.studies.strong_alignment.surrogate_errors": "Monte Carlo",
    "attn_lib.studies.hermite_linearisation.error_gap": "Monte Carlo",
    "attn_lib.studies.fine_tuning.train_seeds": "training",
    "attn_lib.book.figures.fine_tuning.along": "mixed (theory and Monte Carlo)",
    "attn_lib.book.figures.fine_tuning.check": "mixed (theory and Monte Carlo)",
    "attn_lib.studies.gpt2.heads_theory": "theory",
    "attn_lib.studies.gpt2.heads_shift": "theory",
    "attn_lib.studies.gpt2.matrix_theory": "theory",
    "attn_lib.theory.attention.attention_error_batch": "theory",
    "attn_lib.studies.explorer.grid": "theory",
    "attn_lib.book.figures.fine_tuning._flow": "theory",
    "attn_lib.book.figures.fine_tuning._optimum_case": "theory",
    "attn_lib.studies.gpt2.layer_summary": "other (GPT-2's weights)",
}


def writes(root: Path) -> list[tuple[float, str]]:
    """``(modification time, function)`` of every cached result under ``root``, in time order."""
    if not root.is_dir():
        raise ValueError(f"DIR must be a result cache folder, got {str(root)!r}")
    return sorted((f.stat().st_mtime, d.name) for d in root.iterdir() if d.is_dir()
                  for f in d.iterdir() if f.is_file())


def charges(rows: list[tuple[float, str]], max_gap: float
            ) -> tuple[dict[str, float], dict[str, int], list[tuple[float, str]]]:
    """Seconds and results charged to each function (the gap before each of its writes, gaps
    up to ``max_gap``), and the longer gaps ``(seconds, function)``."""
    seconds: dict[str, float] = collections.defaultdict(float)
    count: dict[str, int] = collections.defaultdict(int)
    skipped = []
    for (t0, _), (t1, name) in zip(rows, rows[1:]):
        if t1 - t0 > max_gap:
            skipped.append((t1 - t0, name))
            continue
        seconds[name] += t1 - t0
        count[name] += 1
    return seconds, count, skipped


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("cache", type=Path, metavar="DIR")
    ap.add_argument("--max-gap", type=float, default=900.0)
    args = ap.parse_args(argv)
    rows = writes(args.cache)
    if len(rows) < 2:
        raise ValueError(f"DIR holds {len(rows)} cached results: a cold build writes hundreds")
    seconds, count, skipped = charges(rows, args.max_gap)
    stamp = [datetime.datetime.fromtimestamp(t, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
             for t in (rows[0][0], rows[-1][0])]
    total = sum(seconds.values())
    print(f"{len(rows)} cached results written from {stamp[0]} to {stamp[1]} UTC "
          f"({(rows[-1][0] - rows[0][0]) / 60:.1f} min); charged {total:.0f} s")
    by_kind: dict[str, float] = collections.defaultdict(float)
    for name, s in sorted(seconds.items(), key=lambda kv: -kv[1]):
        kind = KIND.get(name, "unclassified")
        by_kind[kind] += s
        print(f"  {s:8.1f} s  {count[name]:5d} results  {kind:31s} {name}")
    print("by kind:")
    for kind, s in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {s:8.1f} s  ({s / 60:5.1f} min, {s / total:4.0%})  {kind}")
    for gap, name in skipped:
        print(f"  left out: a gap of {gap:.0f} s before a result of {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

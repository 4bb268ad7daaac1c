#!/usr/bin/env python
"""Dump every glued value of the executed chapters, or compare two dumps.

A refactor that must not change the book's numbers is checked in two steps::

    python scripts/glue_values.py dump before.json          # after `make book PROFILE=quick`
    # ... change the code, rebuild ...
    python scripts/glue_values.py dump after.json
    python scripts/glue_values.py compare before.json after.json --rtol 1e-9

``dump`` reads the executed notebooks in ``_executed/book/`` (written by ``scripts/build_book.py``)
and records, for each chapter, every ``glue`` output by name: its ``text/plain`` form, and its
``text/markdown`` form when there is one (tables). ``compare`` parses numbers in both forms and
reports, per value, whether it is bit-identical, equal within ``--rtol``, or different (with the
relative difference), and which names appear on one side only. It exits 1 when any value differs
beyond ``--rtol`` or a name is missing, unless the names are listed with ``--allow`` (values whose
random stream had to change; their agreement in standard errors is judged separately).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|nan|inf")
_PREFIX = "application/papermill.record/"


def glued(notebook: Path) -> dict[str, str]:
    """``name -> text`` of every glue output of one executed notebook."""
    nb = json.loads(notebook.read_text())
    out: dict[str, str] = {}
    for cell in nb["cells"]:
        for o in cell.get("outputs", []):
            meta = o.get("metadata", {}).get("scrapbook")
            if not meta:
                continue
            data = o.get("data", {})
            text = data.get(_PREFIX + "text/markdown") or data.get(_PREFIX + "text/plain", "")
            if isinstance(text, list):
                text = "".join(text)
            if _PREFIX + "image/png" in data:
                text = "<figure>"
            out[meta["name"]] = text
    return out


def dump(stage: Path) -> dict[str, dict[str, str]]:
    """``chapter stem -> glued values`` for every executed chapter under ``stage/book``."""
    return {re.sub(r"^\d+_", "", nb.stem): glued(nb)
            for nb in sorted((stage / "book").glob("*.ipynb")) if not nb.stem.endswith(".partial")}


def _numbers(text: str) -> list[float]:
    return [float(x) for x in _NUMBER.findall(text)]


def compare(old: dict, new: dict, rtol: float, allow: set[str]) -> int:
    """Print the comparison of two dumps; return the number of failures."""
    counts = {"identical": 0, "close": 0, "different": 0, "allowed": 0, "missing": 0}
    for chapter in sorted(set(old) | set(new)):
        a, b = old.get(chapter, {}), new.get(chapter, {})
        for name in sorted(set(a) | set(b)):
            key = f"{chapter}:{name}"
            if name not in a or name not in b:
                side = "new" if name not in a else "old"
                status = "allowed" if key in allow or name in allow else "missing"
                counts[status] += 1
                print(f"{status:9s} {key} (only in the {side} dump)")
                continue
            if a[name] == b[name]:
                counts["identical"] += 1
                continue
            xa, xb = _numbers(a[name]), _numbers(b[name])
            if len(xa) == len(xb) and xa:
                worst = max((abs(u - v) / max(abs(u), abs(v), 1e-300) if u != v else 0.0)
                            for u, v in zip(xa, xb))
            else:
                worst = float("inf")
            if worst <= rtol:
                status = "close"
            elif key in allow or name in allow:
                status = "allowed"
            else:
                status = "different"
            counts[status] += 1
            if status != "close" or worst > 0:
                print(f"{status:9s} {key}: rel {worst:.3g}\n          old {a[name][:200]!r}\n"
                      f"          new {b[name][:200]!r}")
    print("summary: " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return counts["different"] + counts["missing"]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("dump", help="write the glued values of _executed/ to a JSON file")
    d.add_argument("out", type=Path)
    d.add_argument("--stage", type=Path, default=REPO / "_executed")
    c = sub.add_parser("compare", help="compare two dumps")
    c.add_argument("old", type=Path)
    c.add_argument("new", type=Path)
    c.add_argument("--rtol", type=float, default=1e-9)
    c.add_argument("--allow", nargs="*", default=[], help="names (or chapter:name) allowed to change")
    args = ap.parse_args(argv)
    if args.cmd == "dump":
        values = dump(args.stage)
        args.out.write_text(json.dumps(values, indent=1, sort_keys=True))
        print(f"{sum(map(len, values.values()))} values from {len(values)} chapters -> {args.out}")
        return 0
    old, new = json.loads(args.old.read_text()), json.loads(args.new.read_text())
    return 1 if compare(old, new, args.rtol, set(args.allow)) else 0


if __name__ == "__main__":
    sys.exit(main())

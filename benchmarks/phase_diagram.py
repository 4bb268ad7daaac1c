"""Compute time of a 100 x 100 phase diagram of the deterministic equivalents (target: 60 s).

Times :func:`attn_lib.studies.phase.phase_map` (building the settings, the batched attention solver for
every cell, the ridge error per distinct ``(c, snr)``) on the two planes of the book's chapter
``09_phase_diagram`` at ``gamma = 1``, ``f = tanh``:

* ``snr-angle``: SNR in ``[0, 8]`` x angle in ``[0, 90]`` degrees, ``c = 1/2``, ``||w|| = 2``;
* ``c-norm``: ``c`` in ``[0.1, 4]`` (log) x ``||w||`` in ``[0, 4]``, SNR 2, aligned weights.

Prints the seconds of each (the minimum over ``--repeats``) and their ratio to the 60 s target.
Run it alone on an idle machine for a meaningful number.

Usage: ``python benchmarks/phase_diagram.py [--size 100] [--repeats 1] [--gamma 1.0]``
"""

from __future__ import annotations

import argparse

import numpy as np

from attn_lib.studies import phase

TARGET_SECONDS = 60.0


def planes(size: int) -> dict[str, tuple]:
    """The chapter's two planes on ``size x size`` grids: name -> (make, x, y)."""
    return {
        "snr-angle": (lambda snr, deg: phase.symmetric_weights(0.5, snr, 2.0, float(np.radians(deg))),
                      np.linspace(0.0, 8.0, size), np.linspace(0.0, 90.0, size)),
        "c-norm": (lambda c, w: phase.symmetric_weights(c, 2.0, w, 0.0),
                   np.geomspace(0.1, 4.0, size), np.linspace(0.0, 4.0, size)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=100, help="cells per axis")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--gamma", type=float, default=1.0)
    args = ap.parse_args()
    for name, (make, x, y) in planes(args.size).items():
        best = min(phase.phase_map(make, x, y, args.gamma).seconds for _ in range(args.repeats))
        print(f"{name}: {args.size} x {args.size} map in {best:.2f} s "
              f"({best / TARGET_SECONDS:.3f} of the {TARGET_SECONDS:.0f} s target)")


if __name__ == "__main__":
    main()

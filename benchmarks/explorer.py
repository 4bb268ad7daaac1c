"""The theory explorer page: its size and the cold cost of its grid, per book profile.

For each profile named, the page is written exactly as the book build writes it
(:func:`attn_lib.book.explorer.write` with the ``explorer`` section of
``book/params/<profile>.yaml``) into a temporary folder with a **fresh, empty result cache**,
so every part is computed: the grid of theory curves (:func:`attn_lib.studies.explorer.grid`:
the proportional limit of every setting, the finite-size theory at each ``n``, ridge), then the
Monte Carlo checks, then the HTML. Printed per profile: the grid's size (settings, curves,
values of ``gamma / tau``), the wall time of the grid alone (a separate call, cold), of the
whole page (its grid then a cache hit, the Monte Carlo and the HTML), and the page's bytes,
with the part of them that is BokehJS (the same page with an empty grid).

Run it alone on an idle machine (say under which load the numbers were taken). Usage:
``python benchmarks/explorer.py [--profiles quick full]``
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

REPO = Path(__file__).resolve().parents[1]


def measure(profile: str) -> None:
    params = yaml.safe_load((REPO / "book" / "params" / f"{profile}.yaml").read_text())["explorer"]
    with tempfile.TemporaryDirectory(prefix="attn-explorer-") as tmp:
        os.environ["ATTN_BOOK_CACHE"] = str(Path(tmp) / "cache")
        from attn_lib.book import explorer as page
        from attn_lib.studies import explorer

        axes = {a: params[a] for a in explorer.AXES}
        g = np.geomspace(*params["g_range"], params["n_g"])
        t0 = time.perf_counter()
        explorer.cached_grid(**axes, g=g, n=params["n"])
        t_grid = time.perf_counter() - t0
        t0 = time.perf_counter()
        info = page.write(Path(tmp) / "explorer.html", profile=profile, **params)
        t_page = time.perf_counter() - t0
        small = page.write(Path(tmp) / "empty.html", profile=profile,
                           **{**params, **{a: [v[0]] for a, v in axes.items()}, "n_g": 2,
                              "mc_points": [{a: v[0] for a, v in axes.items()}], "mc_g": [g[0]],
                              "mc_trials": 2})
    points = int(np.prod([len(v) for v in axes.values()]))
    print(f"{profile}: {points} settings x {len(g)} values of gamma/tau, finite size at "
          f"n = {params['n']}, {len(params['mc_points'])} Monte Carlo checks "
          f"(n = {params['mc_n']}, {params['mc_trials']} draws, {len(params['mc_g'])} gammas)")
    print(f"  grid, cold: {t_grid:.1f} s; the page after it (grid from the cache, Monte Carlo "
          f"cold, HTML): {t_page:.1f} s")
    print(f"  page: {info['bytes']:,} bytes, of which about {small['bytes']:,} are BokehJS and "
          f"the page's frame (a one-setting grid)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--profiles", nargs="+", default=["quick", "full"])
    args = ap.parse_args(argv)
    for profile in args.profiles:
        measure(profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())

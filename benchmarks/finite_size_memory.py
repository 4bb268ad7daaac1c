"""Bounded memory of the finite-size theory: GPT-2's fitted layers and small ``alpha``.

For each setting, ``attention_error(setting, [1e-3, 0.1, 1], n=1536)`` runs in this process under
an address-space limit (``resource.setrlimit(RLIMIT_AS)``, default 2 GiB), so that a regression
raises ``MemoryError`` instead of exhausting the machine. Printed per setting: the wall time, the
peak resident memory so far, the latent dimension ``r``, the largest latent shift ``max |h|`` after
the reduction to ``alpha = 1`` and the three errors (or the exception).

Settings:

* ``gpt2``: the one-spike fit of each of GPT-2's 12 *normalised* layers
  (:func:`attn_lib.studies.gpt2.fit_setting`, tanh, ``c = 1/2``) with ``mu`` random
  (``gpt2.random_direction(768, 1, 0)``) or aligned (``gpt2.aligned_direction(fit, 1)``); layer 4
  has ``alpha = 0.0041`` and needs shifts up to ``|h| ~ 3000``. Needs the weights
  (``../shared`` or the download of :mod:`attn_lib.studies.gpt2`).
* ``small-alpha``: tanh, relu and sign at ``alpha`` from ``1e-2`` to ``1e-6`` with aligned,
  non-parallel weights (``r = 3``).

Usage::

    python benchmarks/finite_size_memory.py [--cases gpt2 small-alpha] [--alphas 1e-2 1e-3 1e-4 1e-6]
                                          [--limit-gb 2] [--json]

Targets (issue 15): every setting returns, within 2 GB and 60 s for its 3-gamma curve. With
``--json`` one JSON list of rows is printed instead of the table (``tests/test_finite_size_memory.py``
runs this script that way).
"""

from __future__ import annotations

import argparse
import json
import math
import resource
import time
import warnings
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

GAMMAS = [1e-3, 0.1, 1.0]
N = 1536
ALPHAS = (1e-2, 1e-3, 1e-4, 1e-6)
GEOMETRY = dict(wk_norm=3.0, wq_norm=3.0, cos_mu_wk=0.8, cos_mu_wq=0.8, cos_wk_wq=0.7)


def gpt2_settings():
    """``(label, Setting)`` of the 24 GPT-2 fit settings."""
    from attn_lib.studies import gpt2

    for layer in range(12):
        fit = gpt2.fit(gpt2.normalise(gpt2.paper_matrix(*gpt2.load_qk(layer)))[0])
        for kind in ("random", "aligned"):
            mu = gpt2.random_direction(768, 1.0, 0) if kind == "random" else gpt2.aligned_direction(fit, 1.0)
            yield f"gpt2 layer {layer} {kind}", gpt2.fit_setting(fit, mu, 0.5, "tanh")


def small_alpha_settings(alphas=ALPHAS):
    """``(label, Setting)`` with ``alpha`` down to ``1e-6``."""
    from attn_lib import Setting

    for f in ("tanh", "relu", "sign"):
        for alpha in alphas:
            yield f"{f} alpha={alpha:g}", Setting(c=0.5, snr=1.0, f=f, alpha=alpha, **GEOMETRY)


CASES = {"gpt2": lambda args: gpt2_settings(),
         "small-alpha": lambda args: small_alpha_settings(args.alphas)}


def run(label, setting) -> dict:
    """One row: the curve, its time, the peak memory and the latent geometry."""
    from attn_lib.theory import attention_error
    from attn_lib.theory._finite_size import latent_law

    law = latent_law(setting.canonical(), setting.p(N))
    row = {"label": label, "setting": repr(setting), "r": law.r,
           "h_max": float(abs(law.shifts()).max())}
    t0 = time.perf_counter()
    try:
        row["E"] = [float(e) for e in attention_error(setting, GAMMAS, n=N)]
    except Exception as exc:  # reported, and the test fails on it
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    row["seconds"] = time.perf_counter() - t0
    row["peak_gb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # kB on Linux
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    ap.add_argument("--limit-gb", type=float, default=2.0, help="address-space limit (GiB)")
    ap.add_argument("--alphas", nargs="+", type=float, default=ALPHAS, help="for small-alpha")
    ap.add_argument("--json", action="store_true", help="print one JSON list of rows")
    args = ap.parse_args(argv)
    limit = int(args.limit_gb * 2 ** 30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rows = []
    for case in args.cases:
        for label, setting in CASES[case](args):
            rows.append(run(label, setting))
            if not args.json:
                r = rows[-1]
                out = r.get("error") or " ".join(f"{e:.4f}" for e in r["E"])
                print(f"{r['label']:<26} r={r['r']} max|h|={r['h_max']:9.4g} {r['seconds']:6.1f} s "
                      f"peak {r['peak_gb']:.2f} GB   {out}", flush=True)
    if args.json:
        print(json.dumps(rows))
    else:
        worst = max(rows, key=lambda r: r["seconds"])
        print(f"{sum('E' in r for r in rows)}/{len(rows)} returned under {args.limit_gb:g} GiB; "
              f"slowest {worst['seconds']:.1f} s ({worst['label']}); "
              f"peak {max(r['peak_gb'] for r in rows):.2f} GB")
    return 0 if all("E" in r and all(map(math.isfinite, r["E"])) for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""Multi-head attention as GPT-2 computes it, against the summed-logit model (issue 13, part 4).

GPT-2 applies its nonlinearity to each of its 12 heads' logits separately; the book's model (and
the paper's) applies ``f`` to the summed logits ``x_i^T A x_j`` of the layer's matrix
``A = sum_h W_K^h (W_Q^h)^T``. Per GPT-2 layer this prints, on common draws
(:func:`attn_lib.studies.gpt2.simulate_matrices`, tanh, ``c = p/n``, SNR 1, ``mu`` random and
``gpt2.aligned_direction``), the Monte Carlo error of

* ``summed``: ``f`` on the summed logits of the normalised layer matrix (:func:`gpt2.normalise`);
* ``heads/unit``: ``f`` on each head's logits at unit variance per head
  (:func:`gpt2.heads` ``scale="unit"``), each head writing its own block of ``p / 12 = 64``
  feature rows (GPT-2's side-by-side values, with the identity as the value map), so the
  features keep their count ``p``;
* ``heads/gpt2``: the same with GPT-2's own per-head scale ``1/8`` on the book's ``N(0, I)``
  tokens (``scale="gpt2"``; the logits are then far larger than one and tanh saturates);
* ridge regression on the same draws;

with standard errors, at the raw ``gamma`` = 1e-3, 0.1 and 1 (``summed`` and ``heads/unit`` read
``f`` on unit-variance logits, so their features are on one scale; ``heads/gpt2``'s saturated
``f`` has a larger one, and only its small-``gamma`` values compare). A theory for the per-head model needs the any-matrix theory (a head's matrix has rank
64 and no full part), which does not exist yet.

Usage::

    python benchmarks/multi_head.py [--layers 0 5 11] [--n 1536] [--trials 4]

Last result (layers 0, 5 and 11, n = 1536, 4 trials, s.e. 0.002-0.009, about 4 minutes under
load). With a random ``mu``, the per-head model at unit scale is below the summed-logit one at
every gamma and in every layer: at gamma = 1e-3, 0.295 / 0.306 / 0.295 against 0.333 / 0.343 /
0.365, and at gamma = 1, 0.51-0.54 against 0.65-0.69. Both stay above ridge, 0.247 and 0.391.
With the aligned ``mu``, the two are within 0.004-0.015 at gamma = 1e-3, 0.245-0.255, next to
ridge at 0.241-0.247, and the per-head model is lower at larger gamma. So applying ``f`` per head
changes the error by up to 0.07 on random inputs. A theory that sums the logits cannot stand for
GPT-2's own form.
"""

from __future__ import annotations

import argparse

import numpy as np

from attn_lib.studies import gpt2

GAMMAS = np.array([1e-3, 0.1, 1.0])


def layer_run(layer: int, n: int, trials: int, seed: int) -> None:
    W_Q, W_K = gpt2.load_qk(layer)
    A, _ = gpt2.normalise(gpt2.paper_matrix(W_Q, W_K))
    fit = gpt2.fit(A)
    mus = {"random": gpt2.random_direction(gpt2.P, 1.0, 0), "aligned": gpt2.aligned_direction(fit, 1.0)}
    mats = {"summed": A, "heads/unit": gpt2.heads(W_Q, W_K, "unit"), "heads/gpt2": gpt2.heads(W_Q, W_K, "gpt2")}
    mc = gpt2.simulate_matrices(mats, mus, "tanh", GAMMAS, n=n, trials=trials, seed=seed)
    for d in mus:
        rows = {**{m: mc.attention[m][d] for m in mats}, "ridge": mc.ridge[d]}
        for m, st in rows.items():
            cells = "  ".join(f"{v:.4f} ± {e:.4f}" for v, e in zip(st.mean, st.sem))
            print(f"  layer {layer:2d} {d:8s} {m:11s} {cells}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=list(range(gpt2.N_LAYERS)))
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--trials", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    print(f"tanh, p = {gpt2.P}, n = {args.n}, SNR 1, {args.trials} trials; E(gamma) at gamma = "
          + ", ".join(f"{g:g}" for g in GAMMAS) + " (mean ± s.e.)")
    for layer in args.layers:
        layer_run(layer, args.n, args.trials, args.seed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

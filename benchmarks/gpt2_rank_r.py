"""GPT-2's 12 layers against the rank-r proportional-limit theory (issue 13, stage 2).

For each layer, the normalised real matrix ``A`` (:func:`attn_lib.studies.gpt2.normalise`),
its fit ``A ~ alpha I + sum_k s_k u_k v_k^T`` (:func:`~attn_lib.studies.gpt2.fit`) and its
rank-``r`` truncations ``A_r = f.low_rank(r)`` for ``r = 1``, ``8`` and ``k50 = f.k_for(0.5)``
(the spikes that, with ``alpha I``, carry half of ``||A||_F^2``); tanh, ``c = 1/2``, ``p = 768``,
``n = 1536``, ``gamma`` in 1e-3, 0.1, 1, and two signals of SNR 1:

* ``random``: ``mu = random_direction(768, 1.0, 0)`` (the same in every layer);
* ``aligned``: ``mu = aligned_direction(f, 1.0)``, along both sides of the leading spike.

Monte Carlo of the real matrix and of the three fits on common draws
(:func:`~attn_lib.studies.gpt2.simulate_matrices`, one call per layer, seed = layer), and the
limit theory ``attention_error`` on the fits' settings
(:func:`~attn_lib.studies.gpt2.fit_rank_setting`). Per layer, direction, ``r`` and ``gamma``:
the fit's coherent shift ``delta = |mu^T A_r mu| / sqrt(p)``, the theory ``th_r``, the real
matrix's Monte Carlo (mean, s.e.), ``real - th_r`` (how well the rank-``r`` theory predicts the
real weights) and ``fit - th_r`` (the theory's own error on the matrix it models). Summary per
direction and ``r``: median and maximum of both absolute differences over layers and gammas, the
number of layers whose three gammas are all within 0.01, and the same split by ``delta <= 0.3``
(the regular regime; the finite-size theory for rank ``r``, which would cover large ``delta``,
does not exist yet). A ridge check (``Phi = X``, :func:`attn_lib.theory.ridge_error`) on the
same draws guards the Monte Carlo.

Usage::

    python benchmarks/gpt2_rank_r.py [--layers 0 1 ... 11] [--trials 6] [--n 1536]

Last result (all 12 layers, n = 1536, 16 trials: s.e. 0.0004-0.0062, above the 0.003 issue 13
asks for; 12 min under load). ``real - th_r``, median / maximum over layers and gammas:

=======  ================  ================  ================  ======================
mu       r = 1             r = 8             r = k50 (7-29)    real within 0.01
=======  ================  ================  ================  ======================
random   0.060 / 0.493     0.066 / 0.479     0.069 / 0.472     0 of 12 layers, every r
aligned  0.142 / 0.308     0.133 / 0.300     0.128 / 0.299     0 of 12 layers, every r
=======  ================  ================  ================  ======================

The rank-``r`` limit does not predict the real weights in any layer, and more spikes do not help
(the medians move by at most 0.014 from r = 1 to k50). The worst layers are 4 (``alpha =
+0.004``: ``real - th_1`` = -0.49 at gamma = 0.1, random ``mu``) and 6 (``alpha = +0.018``,
-0.40). With the aligned ``mu`` the theory lies above the real matrix's Monte Carlo at every
point (by 0.04-0.31). The theory also misses the Monte Carlo of the fit it models: ``fit - th_r``
has median / maximum 0.006 / 0.071, 0.036 / 0.088 and 0.046 / 0.122 (random ``mu``, r = 1, 8,
k50) and 0.022 / 0.052, 0.029 / 0.135 and 0.040 / 0.203 (aligned). The coherent shift is small
everywhere (``delta`` <= 0.006 random, 0.13-0.25 aligned), so the miss is not the finite-``delta``
correction of the rank-one theory. What the limit leaves out is the spikes' own noise: at
``p = 768`` they add ``sum_{k<=r} s_k^2 / p`` to the logit variance, 5 to 5752 times ``alpha^2``
for one spike and 19 to 30382 times for k50 (``alpha`` is 0.004 to 0.16 in absolute value). The
limit takes that ratio to 0 at fixed weights. ``fit - th_r`` grows with ``r``, as this ratio
does; a finite-size theory for rank ``r`` (not built yet) would have to keep it. The ridge check
is within 2.1 s.e. at all 72 points.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

import attn_lib as al
from attn_lib.studies import gpt2
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

GAMMAS = np.array([1e-3, 1e-1, 1.0])
F = "tanh"
SNR = 1.0
#: The regular regime of issue 13's targets.
DELTA_REGULAR = 0.3


def layer_rows(layer: int, n: int, trials: int) -> list[dict]:
    """One row per direction, rank label and gamma (see the module docstring)."""
    W_Q, W_K = gpt2.load_qk(layer)
    A, _ = gpt2.normalise(gpt2.paper_matrix(W_Q, W_K))
    p = A.shape[0]
    c = p / n
    f = gpt2.fit(A)
    ranks = {"1": 1, "8": 8, f"k50={f.k_for(0.5)}": f.k_for(0.5)}
    mus = {"random": gpt2.random_direction(p, SNR, 0), "aligned": gpt2.aligned_direction(f, SNR)}
    mats = {"real": A} | {name: f.low_rank(r) for name, r in ranks.items()}
    mc = gpt2.simulate_matrices(mats, mus, F, GAMMAS, n=n, trials=trials, seed=layer)
    rows = []
    for d, mu in mus.items():
        real = mc.attention["real"][d]
        ridge = mc.ridge[d]
        for name, r in ranks.items():
            s = gpt2.fit_rank_setting(f, mu, c, F, r)
            th = al.theory.attention_error(s, GAMMAS)
            ridge_th = al.theory.ridge_error(s, GAMMAS)
            fit_mc = mc.attention[name][d]
            for k, g in enumerate(GAMMAS):
                rows.append(dict(layer=layer, direction=d, rank=name, r=r, delta=s.delta(n),
                                 spikes=(f.share(r) - f.share(0)) / f.share(0), alpha=f.alpha,
                                 delta_real=abs(mu @ A @ mu) / np.sqrt(p), gamma=g, theory=th[k],
                                 real=real.mean[k], real_sem=real.sem[k], fit=fit_mc.mean[k],
                                 fit_sem=fit_mc.sem[k], ridge=ridge.mean[k] - ridge_th[k],
                                 ridge_sem=ridge.sem[k]))
    return rows


def summary(rows: list[dict]) -> None:
    """Median / maximum of |real - th_r| and |fit - th_r| per direction and r (see the docstring)."""
    print("\nsummary over layers x gammas: |real - th_r| and |fit - th_r| (median, max); "
          "layers with all three gammas within 0.01")
    for d in ("random", "aligned"):
        for r in ("1", "8", "k50"):
            sel = [w for w in rows if w["direction"] == d and w["rank"].split("=")[0] == r]
            layers = sorted({w["layer"] for w in sel})
            real = np.array([abs(w["real"] - w["theory"]) for w in sel])
            fit = np.array([abs(w["fit"] - w["theory"]) for w in sel])
            ok = sum(all(abs(w["real"] - w["theory"]) <= 0.01 for w in sel if w["layer"] == layer)
                     for layer in layers)
            deltas = np.array([w["delta"] for w in sel])
            spikes = np.array([w["spikes"] for w in sel])
            sem = np.array([w["real_sem"] for w in sel] + [w["fit_sem"] for w in sel])
            line = (f"{d:>7} r={r:<3}  delta {deltas.min():.3f}-{deltas.max():.3f}  spikes/alpha^2 "
                    f"{spikes.min():.0f}-{spikes.max():.0f}  s.e. <= {sem.max():.4f}  "
                    f"real-th {np.median(real):.4f} / {real.max():.4f}  "
                    f"fit-th {np.median(fit):.4f} / {fit.max():.4f}  "
                    f"real within 0.01: {ok}/{len(layers)}")
            for lo, label in ((True, f"delta<={DELTA_REGULAR}"), (False, f"delta>{DELTA_REGULAR}")):
                m = (deltas <= DELTA_REGULAR) == lo
                if m.any():
                    line += (f" | {label} ({m.sum() // len(GAMMAS)} layers): fit-th "
                             f"{np.median(fit[m]):.4f} / {fit[m].max():.4f}")
            print(line)
    ridge = [w for w in rows if w["rank"] == "1"]
    if all(w["ridge_sem"] > 0 for w in ridge):  # more than one trial
        z = np.array([w["ridge"] / w["ridge_sem"] for w in ridge])
        print(f"ridge check (Monte Carlo - ridge_error): |z| at most {np.abs(z).max():.1f} over "
              f"{z.size} points")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--layers", type=int, nargs="+", default=list(range(gpt2.N_LAYERS)))
    ap.add_argument("--trials", type=int, default=6)
    ap.add_argument("--n", type=int, default=1536)
    ap.add_argument("--blas-threads", type=int, default=1)
    args = ap.parse_args(argv)
    print(f"n = {args.n}, p = {gpt2.P}, {args.trials} trials, {F}, snr = {SNR}, "
          f"gammas {GAMMAS.tolist()}")
    print(f"{'layer':>5} {'mu':>7} {'r':>7} {'delta':>6} {'gamma':>6} {'th_r':>7} {'real':>7} "
          f"{'sem':>6} {'real-th':>8} {'fit-th':>8} {'sem':>6}")
    rows: list[dict] = []
    with threadpool_limits(args.blas_threads):
        for layer in args.layers:
            t0 = time.perf_counter()
            new = layer_rows(layer, args.n, args.trials)
            for w in new:
                print(f"{w['layer']:>5} {w['direction']:>7} {w['rank']:>7} {w['delta']:>6.3f} "
                      f"{w['gamma']:>6.0e} {w['theory']:>7.4f} {w['real']:>7.4f} "
                      f"{w['real_sem']:>6.4f} {w['real'] - w['theory']:>+8.4f} "
                      f"{w['fit'] - w['theory']:>+8.4f} {w['fit_sem']:>6.4f}")
            last = {w["direction"]: w for w in new}  # one row per direction
            spikes = {w["rank"]: w["spikes"] for w in new}
            print(f"  layer {layer}: alpha {new[0]['alpha']:+.3f}; logit variance of the spikes "
                  "over that of alpha I on noise, sum_{k<=r} s_k^2 / (p alpha^2): "
                  + ", ".join(f"r={k} {v:.1f}" for k, v in spikes.items())
                  + "; delta of the real matrix "
                  + ", ".join(f"{d} {w['delta_real']:.3f}" for d, w in last.items())
                  + f"; {time.perf_counter() - t0:.0f} s", flush=True)
            rows += new
    summary(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

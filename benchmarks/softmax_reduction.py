"""Softmax attention by reduction to the entry-wise theory: each step measured on its own.

Prints the numbers quoted by ``book/derivation_softmax.md``:

(a) the normalising sums ``D_j = (n - 1) e^{beta^2/2} (1 + eps_j)``: mean, std and max of
    ``eps`` against the predicted std (:func:`attn_lib.theory.softmax.normalisation_std`);
(b) the entry-wise error of ``(n - 1) A ~ 1 1^T - I + f_beta(T)``: ``max |eps / (1 + eps)|``;
(c) the scale identity (exact; checked to rounding);
(d) what the mean part ``X (1 1^T - I) / (n - 1)`` changes in ``E``, on the same draws;
(e) what the normalising-sum fluctuations add on top of it;
(f) the proportional-limit theory (``attention_error`` at the effective gamma) against Monte
    Carlo of ``X A``, and of the entry-wise kernel ``s X K`` of the same draws;
(g) the self-weight without the mask.

Every difference is a mean over seeded draws (``SeedSequence(seed).spawn(trials)``, the draws
of ``simulate.errors``) with its standard error. The derivation page includes the output:
``python benchmarks/softmax_reduction.py > book/derivation_softmax_output.txt`` (about 8 minutes
on 2 cores under load; ``--quick`` is a smoke run at small sizes).
"""

from __future__ import annotations

import argparse
import warnings

import numpy as np

import attn_lib as al
from attn_lib.model import data
from attn_lib.simulation.resolvent import interpolation_error, interpolation_errors
from attn_lib.simulation.trials import Trials
from attn_lib.theory import softmax
from attn_lib import DomainWarning

# This benchmark measures the theories where attn_lib.theory.domain would warn, on purpose.
warnings.filterwarnings("ignore", category=DomainWarning)

#: Effective ridge parameters gamma / s^2 (the units of the entry-wise kernel X K).
GEFF = np.logspace(-2, 1, 7)
#: Settings at small coherent shift delta: random (orthogonal) weights, random inputs, aligned.
SETTINGS = {
    "orthogonal c=0.5 snr=1": dict(c=0.5, snr=1.0, wk_norm=1.0, wq_norm=1.0, cos_mu_wk=0.0,
                                   cos_mu_wq=0.0, cos_wk_wq=0.0),
    "random inputs c=0.5": dict(c=0.5),
    "orthogonal c=1.5 snr=3 |w|=2": dict(c=1.5, snr=3.0, wk_norm=2.0, wq_norm=2.0, cos_mu_wk=0.0,
                                         cos_mu_wq=0.0, cos_wk_wq=0.0),
    "aligned c=1 snr=2 |w|=1": dict(c=1.0, snr=2.0, wk_norm=1.0, wq_norm=1.0),
}
CURVES = ("kernel", "kernel+fluct", "kernel+mean", "kernel+fluct, mean", "softmax", "centred",
          "projected")


def reduction(setting: al.Setting, n: int, trials: int, seed: int = 0) -> Trials:
    """Errors of the parts of ``X A`` on the same draws, at the effective gammas :data:`GEFF`.

    Curves: ``kernel`` (``B = X G / (n-1) = s X K``), ``kernel+fluct`` (``B D^{-1}``),
    ``kernel+mean`` (``B + X (1 1^T - I) / (n-1)``), ``kernel+fluct, mean`` (``B D^{-1}`` plus
    the mean part without fluctuations), ``softmax`` (``X A``: the mean part with them),
    ``centred`` (``B' P``, ``B' = B - X / (n-1)``, ``P = I - 1 1^T / n``) and ``projected``
    (``(I - w w^T / |w|^2) B' P``, ``w = X 1 / (n-1) + B' 1 / n``: the large-spike limit of the
    mean part), and the ``eps_mean``, ``eps_std``, ``eps_max`` of the normalising sums.
    """
    beta = setting.attention.beta
    g = GEFF * softmax.scale(setting, n) ** 2

    def trial(rng: np.random.Generator) -> dict:
        d = data.draw(setting, n, rng)
        parts = softmax.decompose(d.X, d.w_K, d.w_Q, beta, setting.alpha)
        fluct = parts.kernel / (1.0 + parts.eps)
        B = parts.kernel - d.X / (n - 1)
        centred = B - B.mean(axis=1, keepdims=True)
        w = d.X.sum(axis=1) / (n - 1) + B.mean(axis=1)
        w /= np.linalg.norm(w)
        feats = [parts.kernel, fluct, parts.kernel + parts.mean, fluct + parts.mean,
                 parts.features, centred, centred - np.outer(w, w @ centred)]
        out = dict(zip(CURVES, interpolation_errors(feats, d.y, g)))
        e = parts.eps
        out.update(eps_mean=e.mean(), eps_std=e.std(), eps_max=np.abs(e / (1 + e)).max())
        return out

    return Trials.run(trial, trials=trials, seed=seed, gammas=GEFF, n=n, p=setting.p(n))


def _diff(r: Trials, a: str, b: str) -> tuple[float, float]:
    """Largest mean |a - b| over gamma, and the standard error there."""
    d = r[a] - r[b]
    m = d.mean(axis=0)
    k = int(np.argmax(np.abs(m)))
    return float(m[k]), float(d[:, k].std(ddof=1) / np.sqrt(d.shape[0]))


def main(quick: bool) -> None:
    sizes = {512: 8, 2048: 6} if not quick else {256: 3, 512: 2}
    print("gammas (effective):", np.array2string(GEFF, precision=3))
    for beta in (0.5, 1.0):
        for name, kw in SETTINGS.items():
            s = al.Setting(**kw, attention=al.Softmax(beta))
            theory = al.theory.attention_error(s, GEFF)
            for n, trials in sizes.items():
                r = reduction(s, n, trials)
                print(f"\nbeta={beta} {name} n={n} p={s.p(n)} delta={s.delta(n):.3f} "
                      f"trials={trials}")
                print(f"  (a) eps: mean {r['eps_mean'].mean():+.4f}  std {r['eps_std'].mean():.4f}"
                      f"  predicted std {softmax.normalisation_std(s, n):.4f}")
                print(f"  (b) max_ij |(n-1) A_ij / (1 + G_ij) - 1| = max|eps/(1+eps)|: "
                      f"{r['eps_max'].mean():.3f}")
                for label, a, b in (("(d) mean part          ", "kernel+mean", "kernel"),
                                    ("(d)   centring P       ", "centred", "kernel"),
                                    ("(d)   removing w       ", "projected", "centred"),
                                    ("(d)   spike limit      ", "kernel+mean", "projected"),
                                    ("(e) fluct. on kernel   ", "kernel+fluct", "kernel"),
                                    ("(e) fluct. x mean part ", "softmax", "kernel+fluct, mean"),
                                    ("    softmax - kernel   ", "softmax", "kernel")):
                    m, se = _diff(r, a, b)
                    print(f"  {label}: max_gamma |mean diff| {m:+.4f} +- {se:.4f}")
                mc = r.stats("softmax")
                ok = (mc.mean > 0.05) & (mc.mean < 0.95)
                for curve in ("softmax", "kernel"):
                    err = np.abs(theory - r.mean(curve))[ok]
                    print(f"  (f) theory - {curve:7s} MC: median {np.median(err):.4f} "
                          f"max {err.max():.4f}  (s.e. <= {r.sem(curve)[ok].max():.4f}, "
                          f"{ok.sum()} gammas in (0.05, 0.95))")
                if n == max(sizes):
                    print("      theory ", np.array2string(theory, precision=4))
                    print("      softmax", np.array2string(mc.mean, precision=4))
    for beta in (0.5, 1.0):
        s = al.Setting(**SETTINGS["orthogonal c=0.5 snr=1"], attention=al.Softmax(beta, mask=False))
        for n in (256, 1024):
            w = al.simulate.self_weight(s, n=n, trials=2)
            print(f"\n(g) no mask, beta={beta} n={n} p={s.p(n)}: mean self-weight "
                  f"{w.mean('self_weight'):.6f}")
    # (c) exact: s Phi at gamma has the error of Phi at gamma / s^2
    rng = np.random.default_rng(0)
    Phi, y = rng.standard_normal((64, 128)), np.sign(rng.standard_normal(128))
    scale = 0.03
    a = interpolation_error(scale * Phi, y, GEFF * scale ** 2)
    b = interpolation_error(Phi, y, GEFF)
    print(f"\n(c) scale identity: max relative difference {np.abs(a / b - 1).max():.1e}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    main(parser.parse_args().quick)

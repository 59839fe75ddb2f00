"""Window adaptation: the checks of Figure 1, each with a kind, a source and a threshold stated before the runs.

Family 0 is the paper's (cosine tasks with their random offset), family 1 the same tasks less their mean over x
(no offset: linear attention loses nothing it cannot represent by construction, so softmax vs linear is about the
window). Settings 0-2 are the low-noise settings (small, medium, large L), setting 3 the noisier variant.
"""

from __future__ import annotations

import numpy as np

from ...records import Run
from .analysis import WindowAnalysis
from .sweeps import MODELS

FIG1 = "Collins et al. Fig. 1"
LOW_NOISE = [0, 1, 2]
#: Thresholds (stated before the runs; see the notebook's text for why).
NARROW_RATIO = 1.5            # half-width at the smallest L over the largest L
WIDEN_RATIO = 1.2             # half-width at sigma_noisy over sigma (medium L)
ADAPT_FACTOR = 2.0            # linear error / oracle error at the medium, large L and largest n: "clearly worse"
ORACLE_RATIO = 1.25           # trained softmax error / oracle error (n >= 16)


def _cells(ratio: np.ndarray, a: WindowAnalysis, settings: list[int]) -> str:
    """Where a ratio is >= 1: 'setting: n = ...' for each setting that has such n."""
    out = [f"{a.settings[i].label}: n = {', '.join(str(n) for n, r in zip(a.n, ratio[i]) if r >= 1)}"
           for i in settings if (ratio[i] >= 1).any()]
    return "; ".join(out) if out else "none"


def check_claims(run: Run, a: WindowAnalysis) -> None:
    """Every check of the chapter."""
    hw_s = a.halfwidth["softmax"][0]                                       # (setting, seed), the paper's family
    L_s = [s.L for s in a.settings]
    # 1) softmax window narrows as L grows (low-noise settings), in every seed
    narrowing = np.all(np.diff(hw_s[:3], axis=0) < 0, axis=0)
    ratio_L = hw_s[0].mean() / hw_s[2].mean()
    run.check("window-narrows-with-L", f"softmax half-width falls as L grows ({L_s[0]:g} -> {L_s[1]:g} -> {L_s[2]:g}), "
              "ratio smallest/largest L", ratio_L, bool(narrowing.all()) and ratio_L > NARROW_RATIO,
              f"> {NARROW_RATIO:g} and strictly decreasing in every seed", kind="claim",
              source=f"{FIG1}: the softmax window 'shrinks with increased Lipschitzness'")
    # 2) softmax window widens with the noise (medium L)
    ratio_sigma = hw_s[3].mean() / hw_s[1].mean()
    run.check("window-widens-with-sigma", f"softmax half-width at σ = {a.settings[3].sigma:g} over σ = "
              f"{a.settings[1].sigma:g} (L = {L_s[1]:g})", ratio_sigma,
              bool(np.all(hw_s[3] > hw_s[1])) and ratio_sigma > WIDEN_RATIO, f"> {WIDEN_RATIO:g}, and larger in "
              "every seed", kind="claim", source=f"{FIG1}: the window widens 'with higher noise'")
    # 3) softmax below linear, over the whole n range
    r = a.ratio("softmax", "linear")                                       # (family, setting, n)
    run.check("softmax-beats-linear", "worst ratio of softmax to linear ICL error (seed means), low-noise settings "
              f"of the paper's family, every n = {a.n[0]}..{a.n[-1]} (cells with ratio >= 1: "
              f"{_cells(r[0], a, LOW_NOISE)})", r[0, LOW_NOISE].max(), r[0, LOW_NOISE].max() < 1.0, "< 1",
              kind="claim", source=f"{FIG1}: softmax attention reaches a lower ICL error than linear attention")
    run.check("softmax-beats-linear-noisy", f"the same at σ = {a.settings[3].sigma:g} (L = {L_s[3]:g}), every n "
              f"(cells with ratio >= 1: {_cells(r[0], a, [3])})", r[0, 3].max(), r[0, 3].max() < 1.0, "< 1",
              kind="finding", source="beyond the papers (a noisier variant of Fig. 1's settings)")
    run.check("softmax-beats-linear-zero-mean", "the same on the zero-mean family (no offset), low-noise settings, "
              f"every n (cells with ratio >= 1: {_cells(r[1], a, LOW_NOISE)})", r[1, LOW_NOISE].max(),
              r[1, LOW_NOISE].max() < 1.0, "< 1", kind="finding",
              source="beyond the papers: is softmax's advantage the window, or the offset linear attention lacks?")
    # 4) linear attention cannot adapt its window: on zero-mean tasks that are not nearly linear along the circle
    #    (the medium and large L), its error stays well above the tuned NW oracle's at the largest n (where the
    #    oracle's window is narrowest); at the small L a linear readout is close to the right estimator
    for m in MODELS:
        ro = a.ratio(m, "oracle")[1, LOW_NOISE, -1]                        # (3,) zero-mean family, largest n
        above = bool(np.all(ro[1:] > ADAPT_FACTOR))
        if m == "linear":
            run.check("linear-does-not-adapt", f"linear attention on the zero-mean family at n = {a.n[-1]}: ICL "
                      f"error over the tuned NW oracle's at L = {', '.join(f'{L:g}' for L in L_s[:3])}", ro, above,
                      f"> {ADAPT_FACTOR:g} at L = {L_s[1]:g} and {L_s[2]:g}", kind="claim",
                      source="Collins et al. (slides): the adaptive window 'cannot be replicated by linear attention'")
        else:
            run.check("linear-does-not-adapt-control", f"the same for the softmax unit (zero-mean family, "
                      f"n = {a.n[-1]})", ro, above, f"> {ADAPT_FACTOR:g} at L = {L_s[1]:g} and {L_s[2]:g}",
                      kind="control", control_of="linear-does-not-adapt",
                      source="Collins et al. (slides), against the model that does adapt")
    # 5) beyond the paper: the trained softmax unit is close to the best-bandwidth Nadaraya-Watson oracle
    n_big = [i for i, n in enumerate(a.n) if n >= 16] or [len(a.n) - 1]
    for m in MODELS:
        gap = a.ratio(m, "oracle")[:, :, n_big].max()
        if m == "softmax":
            run.check("softmax-near-oracle", "worst ratio of trained-softmax to oracle-NW ICL error (both families, "
                      "every setting, n >= 16)", gap, gap < ORACLE_RATIO, f"< {ORACLE_RATIO:g}", kind="finding",
                      source="beyond the papers (SPEC 1.4: the best NW bandwidth as an oracle line)")
        else:
            run.check("softmax-near-oracle-control", "the same for the trained linear unit", gap,
                      gap < ORACLE_RATIO, f"< {ORACLE_RATIO:g}", kind="control", control_of="softmax-near-oracle",
                      source="beyond the papers, against the model without a window")
    run.record(softmax_over_linear=r, softmax_over_oracle=a.ratio("softmax", "oracle"),
               linear_over_oracle=a.ratio("linear", "oracle"),
               halfwidth_deg={m: a.halfwidth[m].mean(-1) for m in MODELS},
               w_norm={m: a.w[m].mean(-1) for m in MODELS},
               icl_error={m: a.error[m].mean(-1) for m in MODELS}, oracle=a.oracle, oracle_w=a.oracle_w,
               families=list(a.families), settings=[s.label for s in a.settings], n=a.n,
               linear_wins_at_n={f: {s.label: [int(n) for n, x in zip(a.n, r[k, i]) if x >= 1]
                                     for i, s in enumerate(a.settings)} for k, f in enumerate(a.families)})

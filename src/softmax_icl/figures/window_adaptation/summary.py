"""Window adaptation: the chapter's tables, as MyST markdown (``chapter.show(summary.key_numbers_table(result))``).

Numbers are rounded as they were printed (not compared character by character: nbval checks only the verdicts).
"""

from __future__ import annotations

from ...book.chapter import table
from .analysis import WindowAnalysis
from .sweeps import MODELS


def _setting(s) -> str:
    return f"$L = {s.L:g}$, $\\sigma = {s.sigma:g}$"


def _errors(values) -> str:
    return ", ".join(f"{v:.2g}" for v in values)


def key_numbers_table(a: WindowAnalysis) -> str:
    """Windows and ICL errors: one table per task family, one row per setting and model (and the oracle)."""
    ns = ", ".join(map(str, a.n))
    out = []
    for k, fam in enumerate(a.families):
        rows = []
        for i, s in enumerate(a.settings):
            for j, m in enumerate(MODELS):
                rows.append([_setting(s) if j == 0 else "", m, f"{a.w[m][k, i].mean():.3g}",
                             f"{a.halfwidth[m][k, i].mean():.3g}°", _errors(a.error[m][k, i].mean(-1))])
            rows.append(["", "NW oracle", "", "", _errors(a.mean_error("oracle")[k, i])])
            rows.append(["", "one NW window", "", "", _errors(a.mean_error("fixed")[k, i])])
        ratio = a.ratio("softmax", "linear")[k]
        wins = [f"{_setting(s)}: $n$ = {', '.join(str(n) for n, r in zip(a.n, ratio[i]) if r >= 1)}"
                for i, s in enumerate(a.settings) if (ratio[i] >= 1).any()]
        note = ("Linear attention beats softmax at " + ("; ".join(wins) if wins else "no setting and $n$") + ". "
                "Seed means; $\\lVert M\\rVert_2$: the learned inverse window; half-width of the attention window in "
                "degrees; NW oracle: the Nadaraya–Watson estimator at its best bandwidth per setting and $n$; one NW "
                "window: its one bandwidth per $n$ for every setting (both tuned on each seed's own tuning set).")
        out.append(table(["Setting", "Model", "$\\lVert M\\rVert_2$", "Half-width", f"ICL error at $n$ = {ns}"], rows,
                         title=f"Task family *{fam}*: windows and ICL errors at $n$ = {ns} (means over the trained units)",
                         folded=len(rows) > 8,
                         widths=[16, 12, 9, 15, 48], note=note))
    return "\n\n".join(out)


def ratio_table(a: WindowAnalysis) -> str:
    """Softmax over linear ICL error (means over the trained units): one table per task family, one row per n, one column per setting."""
    r = a.ratio("softmax", "linear")
    out = []
    for k, fam in enumerate(a.families):
        rows = [[str(n)] + [f"{r[k, i, j]:.2f}" for i in range(len(a.settings))] for j, n in enumerate(a.n)]
        out.append(table(["$n$"] + [_setting(s) for s in a.settings], rows,
                         title=f"Softmax / linear ICL error, task family *{fam}*", folded=len(rows) > 8,
                         note="Seed means; below 1, softmax attention has the smaller error."))
    return "\n\n".join(out)

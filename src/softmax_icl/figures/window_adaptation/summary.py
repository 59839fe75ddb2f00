"""Window adaptation: printed tables."""

from __future__ import annotations

from .analysis import WindowAnalysis
from .sweeps import MODELS


def key_numbers_table(a: WindowAnalysis) -> str:
    """Windows and ICL errors, one block per task family and one line per setting and model."""
    lines = []
    for k, fam in enumerate(a.families):
        lines.append(f"task family: {fam}")
        lines.append(f"{'setting':<18}{'model':<9}{'||M||':>8}{'half-width':>12}  ICL error at n = "
                     + ", ".join(map(str, a.n)))
        for i, s in enumerate(a.settings):
            for m in MODELS:
                e = a.error[m][k, i].mean(-1)
                lines.append(f"{s.label:<18}{m:<9}{a.w[m][k, i].mean():>8.3g}{a.halfwidth[m][k, i].mean():>10.3g}°  "
                             + ", ".join(f"{v:.2g}" for v in e))
            lines.append(f"{'':<18}{'oracle':<9}{'':>8}{'':>12}  " + ", ".join(f"{v:.2g}" for v in a.oracle[k, i]))
        ratio = a.ratio("softmax", "linear")[k]
        wins = [f"{s.label}: n = {', '.join(str(n) for n, r in zip(a.n, ratio[i]) if r >= 1)}"
                for i, s in enumerate(a.settings) if (ratio[i] >= 1).any()]
        lines.append("linear attention beats softmax at " + ("; ".join(wins) if wins else "no setting and n"))
        lines.append("")
    return "\n".join(lines).rstrip()


def ratio_table(a: WindowAnalysis) -> str:
    """Softmax over linear ICL error (seed means) for both families, every setting and n."""
    r = a.ratio("softmax", "linear")
    lines = [f"softmax / linear ICL error at n = {', '.join(map(str, a.n))}"]
    for k, fam in enumerate(a.families):
        for i, s in enumerate(a.settings):
            lines.append(f"{fam:<17}{s.label:<18}" + "".join(f"{v:>7.2f}" for v in r[k, i]))
    return "\n".join(lines)

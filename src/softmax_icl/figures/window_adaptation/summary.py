"""Window adaptation: printed tables."""

from __future__ import annotations

from .analysis import WindowAnalysis
from .sweeps import MODELS


def key_numbers_table(a: WindowAnalysis) -> str:
    """Rounded numbers behind the claims, one line per setting (stable for nbval)."""
    lines = [f"{'setting':<18}{'model':<9}{'||M||':>8}{'half-width':>12}  ICL error at n = " + ", ".join(map(str, a.n))]
    for i, s in enumerate(a.settings):
        for m in MODELS:
            e = a.error[m][i].mean(-1)
            lines.append(f"{s.label:<18}{m:<9}{a.w[m][i].mean():>8.3g}{a.halfwidth[m][i].mean():>10.3g}°  "
                         + ", ".join(f"{v:.2g}" for v in e))
        lines.append(f"{'':<18}{'oracle':<9}{'':>8}{'':>12}  " + ", ".join(f"{v:.2g}" for v in a.error["oracle"][i]))
    ratio = a.error["softmax"].mean(-1) / a.error["linear"].mean(-1)
    wins = [f"{s.label}: n = {', '.join(str(n) for n, r in zip(a.n, ratio[i]) if r >= 1)}"
            for i, s in enumerate(a.settings) if (ratio[i] >= 1).any()]
    lines.append("linear attention beats softmax at " + ("; ".join(wins) if wins else "no setting and n"))
    return "\n".join(lines)

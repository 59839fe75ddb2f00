"""Lines of code per layer of the package: the code that decides and shows verdicts against the science and the
engines that compute them.

    python tools/layers.py            # the table
    python tools/layers.py --json     # the same as JSON

Layers (paths under src/softmax_icl/; a file belongs to the first layer that matches it):

* decide and show: the book machinery (book/), the statistics of the verdicts, the profiles and the plotting
  helpers (stats.py, profiles.py, plotting.py), and each figure's checks, tables, answer box and plots
  (figures/*/claims.py, summary.py, answer.py, plots.py);
* engines: the compiled trainers and their Python side (engine/: .py, .c, .h);
* science: everything else (tasks, models, training, metrics, baselines, theory, classification, streams, base,
  and each figure's sweeps, analysis, rivals and parameters).

Lines are physical lines, blank lines and comments included, as ``wc -l`` counts them. tests/test_layout.py holds
the decide-and-show layer no larger than the science and the engines together.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "softmax_icl"
#: (layer, glob patterns relative to the package), first match wins.
LAYERS = (
    ("decide and show", ("book/*", "stats.py", "profiles.py", "plotting.py", "figures/*/claims.py",
                         "figures/*/summary.py", "figures/*/answer.py", "figures/*/plots.py")),
    ("engines", ("engine/*",)),
    ("science", ("*",)),
)
SUFFIXES = (".py", ".c", ".h")


def layer_of(rel: str) -> str:
    for name, patterns in LAYERS:
        if any(fnmatch.fnmatch(rel, p) for p in patterns):
            return name
    raise ValueError(rel)


def count(pkg: Path = PKG) -> dict[str, int]:
    """Layer -> lines of its files."""
    out = {name: 0 for name, _ in LAYERS}
    for path in sorted(pkg.rglob("*")):
        if path.suffix in SUFFIXES and "__pycache__" not in path.parts:
            out[layer_of(path.relative_to(pkg).as_posix())] += len(path.read_text(encoding="utf-8").splitlines())
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", action="store_true", help="print the counts as JSON")
    args = ap.parse_args()
    counts = count()
    if args.json:
        print(json.dumps(counts))
        return 0
    for name, n in counts.items():
        print(f"{name:16s} {n:6d}")
    print(f"{'science+engines':16s} {counts['science'] + counts['engines']:6d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

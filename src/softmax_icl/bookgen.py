"""Book pages generated from the code and the notebooks' records, so they cannot disagree with them.

* ``book/results_summary.md``: one row per claim, read from ``book/results/*.json``.
* ``book/settings.md``: the settings-and-deviations table, read from the figure registry
  (:mod:`softmax_icl.registry`) plus the project-wide choices listed here.
"""

from __future__ import annotations

import json
from pathlib import Path

from .profiles import PROFILES
from .registry import FIGURES
from .records import fmt

#: Choices that hold for every figure (SPEC marks each as *chosen* or leaves it open).
GENERAL_CHOICES = [
    ("Label noise", "Gaussian, eps ~ N(0, sigma^2)", "SPEC notation: chosen"),
    ("Pretraining", "online: fresh tasks every step; Adam; loss = squared error against the noiseless f(x_q)",
     "the slides' population loss; online pretraining is chosen"),
    ("Sweeps", "all configurations of a figure trained as one batched program; configurations with the same "
     "seed share inputs, task coefficients and noise draws (common random numbers)",
     "chosen: comparisons across L and sigma are not blurred by sampling noise"),
    ("Seeds", "separate seeds for initial weights, training data and the fixed evaluation set",
     "chosen, recorded in every notebook"),
    ("ICL error", "E[(f_hat(x_q) - f(x_q))^2] on a fixed evaluation set of fresh tasks (noisy context labels, "
     "noiseless target), >= 10^4 tasks at the default profile", "SPEC 1.1: chosen"),
    ("Linear attention", "weights x_i^T M x_q / n", "SPEC 1.1: the 1/n normalisation is chosen"),
    ("Key-query parameterisation", "M = M_K^T M_Q trained from a small random init (scale 0.1)",
     "slides' M_K, M_Q; init chosen"),
    ("Nadaraya-Watson oracle", "softmax attention with M = w I, w tuned per test setting on a separate tuning "
     "set (its own seed), reported on the evaluation set", "beyond the paper (SPEC 1.4)"),
]


def _md(x) -> str:
    return str(x).replace("|", "\\|")


def settings_markdown() -> str:
    out = ["# Settings and deviations", "",
           "Neither paper's appendix (with its exact hyperparameters) was available, so many settings are ours. "
           "This page is generated from the code (`softmax_icl.registry` and `softmax_icl.bookgen`), so it always "
           "shows what the notebooks actually use. *Source* says where a value comes from: **paper**/**slides** "
           "(stated by the authors), **spec** (fixed by our reproduction spec), **chosen** (our decision where "
           "the sources are silent). Every figure parameter can be overridden, see {doc}`intro`.", "",
           "## Choices shared by every figure", "", "| setting | our choice | source |", "|---|---|---|"]
    out += [f"| {_md(a)} | {_md(b)} | {_md(c)} |" for a, b, c in GENERAL_CHOICES]
    for fig in FIGURES.values():
        out += ["", f"## {fig.title}", "", f"Notebook `notebooks/{fig.notebook}` ({fig.paper}).", "",
                "| parameter | meaning | " + " | ".join(PROFILES) + " | source |",
                "|---|---|" + "---|" * len(PROFILES) + "---|"]
        for name, p in fig.params.items():
            vals = " | ".join(_md(fmt(p.value(pr))) for pr in PROFILES)
            out.append(f"| `{name}` | {_md(p.help)} | {vals} | {p.source} |")
        if fig.notes:
            out += [""] + [f"* {n}" for n in fig.notes]
        if fig.findings:
            out += ["", "Checks reported as *findings* (open tests, not the paper's claims): "
                    + ", ".join(f"`{f}`" for f in fig.findings) + "."]
    return "\n".join(out) + "\n"


def results_markdown(results_dir: Path) -> str:
    out = ["# Results summary", "",
           "Generated from the machine-readable records that each notebook writes to `book/results/` when it "
           "runs; CI re-executes the notebooks and compares these verdicts with the committed ones.", ""]
    order = {name: i for i, name in enumerate(FIGURES)}
    records = sorted(Path(results_dir).glob("*.json"), key=lambda p: (order.get(p.stem, len(order)), p.stem))
    if not records:
        return "\n".join(out + ["No notebook has been executed yet."]) + "\n"
    recs = [json.loads(p.read_text()) for p in records]
    kind = lambda c: c.get("kind", "claim")  # noqa: E731
    claims = [c for r in recs for c in r["claims"] if kind(c) == "claim"]
    finds = [c for r in recs for c in r["claims"] if kind(c) == "finding"]
    out += [f"**{sum(c['passed'] for c in claims)} of {len(claims)} of the papers' claims hold.** Besides them, "
            f"{len(finds)} *findings* test what the papers do not claim (an alternative version of a theory, a setting "
            "that breaks a theorem's condition, a comparison the spec asks us to report either way); "
            f"{sum(c['passed'] for c in finds)} of them hold. Which checks are findings is declared in the code "
            "(`Figure.findings`), before the runs; each chapter discusses its failures.", ""]
    timing = []
    for rec in recs:
        title = FIGURES[rec["notebook"]].title if rec["notebook"] in FIGURES else rec["notebook"]
        cl = [c for c in rec["claims"] if kind(c) == "claim"]
        fi = [c for c in rec["claims"] if kind(c) == "finding"]
        line = f"{sum(c['passed'] for c in cl)}/{len(cl)} claims hold"
        if fi:
            line += f", {sum(c['passed'] for c in fi)}/{len(fi)} findings hold"
        out += [f"## {title}", "", f"{{doc}}`../notebooks/{rec['notebook']}`, {rec['profile']} profile: {line}.", "",
                "| check | kind | verdict | value | required |", "|---|---|---|---|---|"]
        for c in rec["claims"]:
            out.append(f"| {_md(c['statement'])} | {kind(c)} | {'PASS' if c['passed'] else '**FAIL**'} | "
                       f"{_md(fmt(c['value']))} | {_md(c['threshold'])} |")
        out.append("")
        timing.append(f"| {rec['notebook']} | {rec['profile']} | {rec['provenance']['device']} | "
                      f"{rec['timings'].get('total', float('nan')):.0f} s |")
    out += ["## Wall time", "", "Of the last execution of each notebook (with the result cache as it was then):", "",
            "| notebook | profile | device | wall time |", "|---|---|---|---|"] + timing
    return "\n".join(out) + "\n"


def write_pages(book_dir: Path) -> list[Path]:
    book_dir = Path(book_dir)
    pages = {book_dir / "settings.md": settings_markdown(),
             book_dir / "results_summary.md": results_markdown(book_dir / "results")}
    for path, text in pages.items():
        path.write_text(text)
    return list(pages)

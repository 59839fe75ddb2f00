"""Book pages generated from the code and the notebooks' records, so they cannot disagree with them.

* ``book/results_summary.md``: the papers' claims counted (reproduced / not reproduced / inconclusive), findings
  and controls apart, one row per check with its source, kind and seed stability, read from ``book/results/*.json``
  and the audit records ``book/results/audit/*.json`` (:mod:`softmax_icl.audit`).
* ``book/settings.md``: the settings-and-deviations table, read from the figure registry
  (:mod:`softmax_icl.registry`) plus the project-wide choices listed here.
"""

from __future__ import annotations

import json
from pathlib import Path

from .profiles import PROFILES, fmt
from .registry import FIGURES
from .scales import cache_note, scales_markdown

#: Where a value comes from, in words a reader understands (``Param.source`` -> text).
SOURCES = {
    "paper": "the paper",
    "slides": "the authors' slides",
    "spec": "our choice, fixed before the runs",
    "chosen": "our choice (the papers are silent)",
}

#: Choices that hold for every figure: (setting, our choice, where it comes from).
GENERAL_CHOICES = [
    ("Label noise", "Gaussian, eps ~ N(0, sigma^2)", "our choice, fixed before the runs"),
    ("Pretraining", "online: fresh tasks every step; Adam; loss = squared error against the noiseless f(x_q)",
     "the authors' slides (population loss); online pretraining is our choice"),
    ("Sweeps", "all configurations of a figure trained as one batched program; configurations with the same "
     "seed share inputs, task coefficients and noise draws (common random numbers)",
     "our choice: comparisons across L and sigma are not blurred by sampling noise"),
    ("Seeds", "separate seeds for initial weights, training data and the fixed evaluation set",
     "our choice, recorded in every notebook"),
    ("ICL error", "E[(f_hat(x_q) - f(x_q))^2] on a fixed evaluation set of fresh tasks (noisy context labels, "
     "noiseless target), >= 10^4 tasks at the default profile", "our choice, fixed before the runs"),
    ("Linear attention", "weights x_i^T M x_q / n", "the papers; the 1/n normalisation is our choice"),
    ("Key-query parameterisation", "M = M_K^T M_Q trained from a small random init (scale 0.1)",
     "the authors' slides (M_K, M_Q); the init is our choice"),
    ("Nadaraya-Watson oracle", "softmax attention with M = w I, w tuned per test setting on a separate tuning "
     "set (its own seed), reported on the evaluation set", "beyond the papers (our baseline)"),
]


def _md(x) -> str:
    return str(x).replace("|", "\\|")


def settings_markdown() -> str:
    out = ["# Settings and deviations", "",
           "Neither paper's appendix (with its exact hyperparameters) was available, so many settings are ours. "
           "This page is generated from the code (`softmax_icl.registry` and `softmax_icl.bookgen`), so it always "
           "shows what the notebooks actually use. *Source* says where a value comes from: "
           + "; ".join(f"**{t}**" for t in SOURCES.values()) + ". Every figure parameter can be changed: the "
           "column *change with* gives the option of `softmax-icl run` (or set the same name in the notebook's "
           "parameters cell); see {doc}`intro`.", "",
           "## Choices shared by every figure", "", "| setting | our choice | source |", "|---|---|---|"]
    out += [f"| {_md(a)} | {_md(b)} | {_md(c)} |" for a, b, c in GENERAL_CHOICES]
    for fig in FIGURES.values():
        example = next(iter(fig.params))
        out += ["", f"(settings-{fig.name.replace('_', '-')})=", f"## {fig.title}", "",
                f"Notebook `notebooks/{fig.notebook}` ({fig.paper}). Change a setting with "
                f"`softmax-icl run {fig.name} -p NAME VALUE` (e.g. `softmax-icl run {fig.name} -p {example} "
                f"{_md(fmt(fig.params[example].value('default'))).replace(' ', '')}`), which writes to "
                f"`runs/{fig.name}-<profile>-custom/`, never the book.", "",
                "| parameter | meaning | " + " | ".join(PROFILES) + " | source | change with |",
                "|---|---|" + "---|" * len(PROFILES) + "---|---|"]
        for name, p in fig.params.items():
            vals = " | ".join(_md(fmt(p.value(pr))) for pr in PROFILES)
            out.append(f"| `{name}` | {_md(p.help)} | {vals} | {SOURCES.get(p.source, p.source)} | "
                       f"`-p {name} VALUE` |")
        if fig.notes:
            out += [""] + [f"* {n}" for n in fig.notes]
        if fig.tolerances:
            tol = lambda t: "not compared" if t is None else f"relative tolerance {t:g}"  # noqa: E731
            out += ["", "Regression check (`make test`, `softmax-icl compare`), exceptions to the default tolerance: "
                    + "; ".join(f"`{_md(k)}`: {tol(t)}" for k, t in fig.tolerances.items()) + "."]
    return "\n".join(out) + "\n"


def _link(rec: dict, claim: dict) -> str:
    """A link to where a check's verdict is explained: its anchor in the chapter, else the chapter."""
    if claim.get("anchor"):
        return f"{{ref}}`{_md(claim['id'])} <{claim['anchor']}>`"
    return f"`{_md(claim['id'])}` ({{doc}}`chapter <../notebooks/{rec['notebook']}>`)"


def results_markdown(results_dir: Path) -> str:
    from .audit import read_audit, speaks_for, stability, status

    results_dir = Path(results_dir)
    out = ["# Results summary", "",
           "Generated from the machine-readable records that each notebook writes to `book/results/` when it "
           "runs, and from the seed audit's records in `book/results/audit/` (`softmax-icl audit` reruns every "
           "figure with fresh seed sets). CI re-executes the notebooks and compares these verdicts exactly, and "
           "their numbers within declared tolerances, with the committed ones.", ""]
    order = {name: i for i, name in enumerate(FIGURES)}
    records = sorted(results_dir.glob("*.json"), key=lambda p: (order.get(p.stem, len(order)), p.stem))
    if not records:
        return "\n".join(out + ["No notebook has been executed yet."]) + "\n"
    recs = [json.loads(p.read_text()) for p in records]
    audits, stale = {}, []
    for r in recs:       # an audit of another committed run (other verdicts or values) does not speak for this one
        a = read_audit(results_dir, r["notebook"])
        if a and not speaks_for(a, r["notebook"], r["claims"], r.get("provenance", {}).get("git_revision")):
            a = None
            stale.append(r["notebook"])
        audits[r["notebook"]] = a
    kind = lambda c: c.get("kind", "claim")  # noqa: E731
    rows = [(r, c, status(c, audits[r["notebook"]])) for r in recs for c in r["claims"]]
    claims = [(r, c, st) for r, c, st in rows if kind(c) == "claim"]
    finds = [(r, c, st) for r, c, st in rows if kind(c) == "finding"]
    ctrls = [(r, c, st) for r, c, st in rows if kind(c) == "control"]
    count = lambda group, word: sum(st == word for _, _, st in group)  # noqa: E731
    audited = [n for n, a in audits.items() if a]
    out += [f"**{count(claims, 'reproduced')} of {len(claims)} of the papers' claims reproduced, "
            f"{count(claims, 'not reproduced')} not reproduced, {count(claims, 'inconclusive')} inconclusive.**", ""]
    out += ["A claim is *reproduced* when its check passes, *not reproduced* when it fails, and *inconclusive* when "
            "its verdict is not the same in the committed run and in every fresh seed set of the audit. "
            + (f"Audited: {len(audited)} of {len(recs)} chapters"
               + (f" (not yet: {', '.join(n for n in audits if not audits[n])})" if len(audited) < len(recs) else "")
               + "; a chapter not audited keeps its committed verdicts." if audited else
               "No chapter has been audited yet (`softmax-icl audit`): the verdicts are those of the committed "
               "runs.")
            + (f" The audit of {', '.join(stale)} was of another committed run (other verdicts or values), so it is "
               "not used here." if stale
               else ""), ""]
    for word in ("not reproduced", "inconclusive"):
        group = [(r, c) for r, c, st in claims if st == word]
        if group:
            out += [f"{word.capitalize()}, each explained in its chapter:", ""]
            out += [f"* {_link(r, c)}: {_md(c['statement'])}" for r, c in group]
            out.append("")
    if finds:
        out += [f"Besides the claims, {len(finds)} *findings* test questions the papers do not answer (either "
                f"verdict is a result): {count(finds, 'holds')} hold, {count(finds, 'does not hold')} do not, "
                f"{count(finds, 'inconclusive')} inconclusive."]
    if ctrls:
        out += [f"{count(ctrls, 'fails, as it must')} of {len(ctrls)} *controls* fail, as they must (a control runs "
                "a check against the wrong counterpart; one that passes means its check does not discriminate)"
                + (f"; {count(ctrls, 'inconclusive')} inconclusive" if count(ctrls, "inconclusive") else "") + "."]
    out += ["", "How the kinds were assigned, and corrected, is in {doc}`changelog`.", ""]
    timing = []
    for rec in recs:
        title = FIGURES[rec["notebook"]].title if rec["notebook"] in FIGURES else rec["notebook"]
        audit = audits[rec["notebook"]]
        parts = []
        for k, noun in (("claim", "claims reproduced"), ("finding", "findings hold"),
                        ("control", "controls fail, as they must")):
            group = [c for c in rec["claims"] if kind(c) == k]
            if group:
                good = sum(status(c, audit) in ("reproduced", "holds", "fails, as it must") for c in group)
                parts.append(f"{good}/{len(group)} {noun}")
        seeds = (f"audited with {len(audit['sets'])} fresh seed sets" if audit else "not audited")
        out += [f"## {title}", "",
                f"{{doc}}`../notebooks/{rec['notebook']}`, {rec['profile']} profile: {', '.join(parts)}; {seeds}.",
                "", "| check | kind | source | verdict | value | required | fresh seeds |",
                "|---|---|---|---|---|---|---|"]
        for c in rec["claims"]:
            st = stability(c["id"], audit, c["passed"])
            verdict = "PASS" if c["passed"] else "FAIL"
            if status(c, audit) == "inconclusive":
                verdict = f"**inconclusive** ({verdict} here)"
            elif (kind(c) == "control") == c["passed"]:
                verdict = f"**{verdict}**"
            what = kind(c) + (f" of `{c['control_of']}`" if c.get("control_of") else "")
            out.append(f"| `{_md(c['id'])}`: {_md(c['statement'])} | {what} | {_md(c.get('source') or 'not stated')} | {verdict} | "
                       f"{_md(fmt(c['value']))} | {_md(c['threshold'])} | {st.text() if st else '-'} |")
        out.append("")
        timing.append(f"| {rec['notebook']} | {rec['profile']} | {rec['provenance']['device']} | "
                      f"{rec['timings'].get('total', float('nan')):.0f} s{cache_note(rec)} |")
    out += ["## Wall time", "", "Of the last execution of each notebook (with the result cache as it was then):", "",
            "| notebook | profile | device | wall time |", "|---|---|---|---|"] + timing
    return "\n".join(out) + "\n"


def page_texts(book_dir: Path) -> dict[Path, str]:
    """The generated pages of the book (path -> text), from the registry and the committed records."""
    book_dir = Path(book_dir)
    return {book_dir / "settings.md": settings_markdown(),
            book_dir / "results_summary.md": results_markdown(book_dir / "results"),
            book_dir / "scales.md": scales_markdown(book_dir / "results", figures=list(FIGURES),
                                                    titles={k: f.title for k, f in FIGURES.items()})}


def write_pages(book_dir: Path) -> list[Path]:
    pages = page_texts(book_dir)
    for path, text in pages.items():
        path.write_text(text)
    return list(pages)

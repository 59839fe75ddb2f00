"""Book pages generated from the code and the notebooks' records, so they cannot disagree with them.

* ``book/claims_table.md``: the landing page's table (included by ``book/intro.md``): one row per entry of the claims
  ledger, its verdict at the default and the paper scale and a one-line reason;
* ``book/results_summary.md``: the ledger's claims counted in four categories (reproduced, not reproduced,
  inconclusive, depends on a setting the sources leave open) at both scales, each with its quote, scope, checks and
  baselines; findings and controls apart; every chapter's checks (:mod:`softmax_icl.book.verdicts`).
* ``book/settings.md``: the settings-and-deviations table, read from the figure registry
  (:data:`softmax_icl.figures.FIGURES`, handed in) plus the project-wide choices listed here.
"""

from __future__ import annotations

from pathlib import Path

from collections.abc import Mapping

from ..profiles import PROFILES, Figure, fmt
from . import ledger as lg
from .myst import nobreak
from .scales import cache_note, scales_markdown
from .verdicts import BookVerdicts, check_word

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
    """Text for a list-table cell or a heading: word-internal hyphens non-breaking (:func:`nobreak`)."""
    return nobreak(str(x))


def _list_table(header: list[str], rows: list[list[str]], widths: list[int]) -> list[str]:
    out = ["```{list-table}", ":header-rows: 1", ":class: check-table", ":widths: " + " ".join(map(str, widths)), ""]
    for r in [header, *rows]:
        out += [f"* - {r[0]}"] + [f"  - {x}" for x in r[1:]]
    return out + ["```"]


def settings_markdown(registry: Mapping[str, Figure]) -> str:
    """The page "Settings and deviations": the shared choices, then every parameter of each figure of ``registry``."""
    out = ["# Settings and deviations", "",
           "Neither paper's appendix (with its exact hyperparameters) was available, so many settings are ours. "
           "This page is generated from the code (`softmax_icl.figures` and `softmax_icl.book.pages`), so it always "
           "shows what the notebooks actually use. *Source* says where a value comes from: "
           + "; ".join(f"**{t}**" for t in SOURCES.values()) + ". Every figure parameter can be changed with "
           "`softmax-icl run FIGURE -p NAME VALUE` (or the same name in the notebook's parameters cell), which writes "
           "to `runs/FIGURE-<profile>-custom/`, never the book; see {doc}`intro`. Each figure's parameters are grouped "
           "by where their value comes from, with one column per profile (one value where all profiles agree); its "
           "deviations and the readings of the sources it had to choose are folded under the tables.", "",
           "## Choices shared by every figure", ""]
    out += _list_table(["Setting", "Our choice", "Source"], [[_md(a), _md(b), _md(c)] for a, b, c in GENERAL_CHOICES],
                       [22, 48, 30])
    for fig in registry.values():
        out += ["", f"(settings-{fig.name.replace('_', '-')})=", f"## {fig.title}", "",
                f"Notebook `notebooks/{fig.notebook}` ({fig.paper}). Change any value with "
                f"`softmax-icl run {fig.name} -p NAME VALUE`.", ""]
        for source in [*SOURCES, *sorted({p.source for p in fig.params.values()} - set(SOURCES))]:
            group = {n: p for n, p in fig.params.items() if p.source == source}
            if not group:
                continue
            out += [f"**{_md(SOURCES.get(source, source)).capitalize()}**", ""]
            same, per_profile = [], []
            for name, p in group.items():
                vals = [_md(fmt(p.value(pr))) for pr in PROFILES]
                if len(set(vals)) > 1:
                    per_profile.append([f"`{name}`", _md(p.help), *vals])
                else:
                    same.append([f"`{name}`", _md(p.help), vals[0]])
            if same:
                out += _list_table(["Parameter", "Meaning", "Value (every profile)"], same, [20, 52, 28]) + [""]
            if per_profile:
                out += _list_table(["Parameter", "Meaning", *PROFILES], per_profile, [18, 40, 14, 14, 14]) + [""]
        if fig.notes:
            out += [f":::{{dropdown}} Deviations and readings ({len(fig.notes)})"] + [f"* {n}" for n in fig.notes]
            if fig.tolerances:
                tol = lambda t: "not compared" if t is None else f"relative tolerance {t:g}"  # noqa: E731
                out += ["", "Regression check (`make test`, `softmax-icl compare`), exceptions to the default "
                        "tolerance: " + "; ".join(f"`{k}`: {tol(t)}" for k, t in fig.tolerances.items()) + "."]
            out += [":::"]
    return "\n".join(out) + "\n"


# -- verdicts: badges, the landing table, the results summary ---------------------------------------------------

#: How each status reads on a page: a sphinx-design badge (muted colours: a claim that does not hold is a result, not
#: an alarm).
BADGE = {lg.REPRODUCED: "bdg-success", lg.NOT_REPRODUCED: "bdg-secondary", lg.INCONCLUSIVE: "bdg-warning-line",
         lg.DEPENDS: "bdg-info", None: "bdg-light"}
#: The short word of each status in a badge.
SHORT = {lg.REPRODUCED: "reproduced", lg.NOT_REPRODUCED: "not reproduced", lg.INCONCLUSIVE: "inconclusive",
         lg.DEPENDS: "depends on setting", None: "no record"}


def badge(status: str | None) -> str:
    return f"{{{BADGE[status]}}}`{SHORT[status]}`"


def _title(check: dict) -> str:
    """A check's name in a table: its title, else its id in words."""
    return check.get("title") or check["id"].replace("-", " ")


def _short_threshold(t: str, limit: int = 28) -> str:
    """A threshold short enough for a table cell (cut at its first clause, else at a word); a longer one is given in
    full in the method below the table."""
    if len(t) <= limit:
        return t
    for sep in (":", ",", " and ", " ("):
        head = t.split(sep)[0].strip()
        if 1 < len(head) <= limit:
            return head + " …"
    return t[:limit].rsplit(" ", 1)[0] + " …"


def _value_cell(check: dict | None) -> str:
    if check is None:
        return "—"
    return f"{_md(fmt(check.get('value')))} (required {_md(_short_threshold(check.get('threshold', '')))})"


def reason(book: BookVerdicts, ev, scale: str = "default") -> str:
    """One line on why an entry has its verdict, printed from the records: the failing or unstable checks with
    their values, the readings each way for a map, else how many checks pass and baselines fail."""
    v = ev.default if scale == "default" else ev.paper
    if v is None:
        return "no record at this scale"
    if v.status == lg.DEPENDS:
        ways = {}
        for r, st in v.parts.items():
            ways.setdefault(st, []).append(r)
        return "; ".join(f"{SHORT[st]}: {', '.join(rs)}" for st, rs in ways.items())
    bad = [k for k, st in v.parts.items() if st != lg.REPRODUCED] if not ev.entry.is_map else \
        [c for r, st in v.parts.items() if st != lg.REPRODUCED for c in ev.entry.readings[r]]
    if not bad:
        n_base = sum(len(book.controls_of(k)) for k in ev.entry.all_checks())
        what = "readings hold" if ev.entry.is_map else ("checks pass" if len(v.parts) > 1 else "check passes")
        return (f"{len(v.parts)} of {len(v.parts)} {what}"
                + (f"; {n_base} baseline{'s fail' if n_base != 1 else ' fails'}, as {'they' if n_base != 1 else 'it'} "
                   "must" if n_base else ""))
    out, thresholds = [], []
    for key in bad:
        fv, c = book.check(key)
        if c is None:
            continue
        if scale == "paper":
            c = fv.paper_check(c["id"]) or c
        fresh = fv.fresh(c) if scale == "default" else []
        agree = sum(f == bool(c.get("passed")) for f in fresh)
        out.append(f"{_title(c)}: {fmt(c.get('value'))}"
                   + (f" ({agree}/{len(fresh)} fresh seed sets agree)" if fresh and agree < len(fresh) else ""))
        thresholds.append(str(c.get("threshold")))
    if len(set(thresholds)) == 1:                      # one requirement for all: said once
        return "; ".join(out) + f" (required {thresholds[0]})"
    return "; ".join(f"{o}, required {t}" for o, t in zip(out, thresholds))


def scale_difference(book: BookVerdicts, ev) -> str:
    """Why an entry's verdict differs between the two scales, printed from the two records ("" where it does not):
    each check whose status differs, with its value at both scales, and every setting in which the two runs differ
    (with the parameter's meaning from the figure registry). Both runs come from the same code (the paper record is
    set aside otherwise), so the change comes from these settings or from the paper run's seed set, which is not
    audited."""
    if not (ev.default and ev.paper) or ev.default.status == ev.paper.status:
        return ""
    moved, figures = [], []
    for key in ev.entry.all_checks():
        fv, c = book.check(key)
        pc = fv.paper_check(c["id"]) if c is not None else None
        if pc is None:
            continue
        if fv.status(c) != fv.paper_status(c["id"]):
            moved.append(f"{_title(c)}: {fmt(c.get('value'))} ({check_word(c, fv.status(c))}) at the default scale, "
                         f"{fmt(pc.get('value'))} ({check_word(pc)}) at the paper scale, required {c.get('threshold')}")
            if fv not in figures:
                figures.append(fv)
    settings = []
    for fv in figures:
        a = (fv.record or {}).get("parameters") or {}
        b = (fv.paper or {}).get("parameters") or {}
        params = book.registry[fv.figure].params if fv.figure in book.registry else {}
        for k in sorted(set(a) | set(b)):
            if k == "profile" or k not in a or k not in b or a[k] == b[k]:
                continue
            what = f" ({params[k].help})" if k in params and params[k].help else ""
            settings.append(f"`{k}` {fmt(a[k])} → {fmt(b[k])}{what}")
    out = "The verdict changes with scale. " + "; ".join(moved) + "."
    if settings:
        out += (" The two runs share their code and differ only in these settings: " + "; ".join(settings) + ". "
                "The change comes from them or from the paper run's own seeds (one set, not audited).")
    return out


def _entry_ref(e: lg.Entry, text: str) -> str:
    return f"{{ref}}`{_md(text)} <{e.anchor}>`"


def landing_table(book: BookVerdicts) -> str:
    """The landing page's table: one row per ledger entry, its verdict at both scales and a one-line reason."""
    rows = ["```{list-table}", ":header-rows: 1", ":class: claims-ledger", ":widths: 36 19 19 26", "",
            "* - Claim of the papers", "  - Default scale", "  - Paper scale", "  - Why"]
    for ev in book.entries:
        e = ev.entry
        paper = book.ledger.papers[e.paper]["short"]
        rows += [f"* - {nobreak(e.claim)} ({paper}, {e.figure.get('paper', '')}; {_entry_ref(e, 'details')})",
                 f"  - {badge(ev.default.status if ev.default else None)}",
                 f"  - {badge(ev.paper.status if ev.paper else None)}",
                 f"  - {_md(reason(book, ev))}"]
    return "\n".join(rows + ["```"])


#: Colours of the overview figure's cells, by status (the badges' palette, muted).
CELL_COLOURS = {lg.REPRODUCED: "#2e7d32", lg.NOT_REPRODUCED: "#6c757d", lg.INCONCLUSIVE: "#b8860b",
                lg.DEPENDS: "#1565c0", None: "#ffffff"}


def overview_figure(book: BookVerdicts, path: Path) -> list[Path]:
    """The landing page's figure: every claim of the ledger (rows, grouped by paper) at the default and the paper
    scale (columns), coloured by verdict; saved as PNG and PDF with the text-size metadata
    (:func:`softmax_icl.plotting.save`)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch, Rectangle

    from ..plotting import save, use_style

    use_style()
    evs = book.entries
    fig, ax = plt.subplots(figsize=(6.4, 0.24 * len(evs) + 1.0))
    for i, ev in enumerate(evs):
        for j, v in enumerate((ev.default, ev.paper)):
            st = v.status if v is not None else None
            ax.add_patch(Rectangle((j, i), 0.96, 0.9, facecolor=CELL_COLOURS[st],
                                   edgecolor="#999999" if st is None else "none"))
    ax.set_xlim(0, 2)
    ax.set_ylim(len(evs), -0.1)
    ax.set_yticks([i + 0.45 for i in range(len(evs))],
                  [f"{book.ledger.papers[ev.entry.paper]['short'].split()[0]}: {ev.entry.label}" for ev in evs])
    ax.set_xticks([0.48, 1.48], ["default scale", "paper scale"])
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    ax.grid(False)
    ax.legend(handles=[Patch(facecolor=CELL_COLOURS[k], edgecolor="#999999" if k is None else "none", label=SHORT[k])
                       for k in (*lg.CATEGORIES, None)], loc="upper center", bbox_to_anchor=(0.5, 0.0),
              ncols=3, frameon=False)
    return save(fig, Path(path).parent, Path(path).stem, show=False)


def landing_markdown(book: BookVerdicts) -> str:
    """What the landing page includes under its title (``book/claims_table.md``): the headline counts, the table
    of claims and the overview figure."""
    return "\n".join(headline(book) + ["", landing_table(book), "",
                                       "```{figure} figures/claims_overview.png", ":name: fig-claims-overview",
                                       ":alt: every claim's verdict at the default and the paper scale", "",
                                       "Every claim of the two papers (rows) at the default and the paper scale: "
                                       "green reproduced, grey not reproduced, gold inconclusive over seed sets, "
                                       "blue depends on a setting the sources leave open.", "```"])


def headline(book: BookVerdicts) -> list[str]:
    """The counts of the ledger's entries in the four categories, at both scales."""
    n = len(book.entries)
    audited = [f for f, fv in book.figures.items() if fv.audit]
    sets = sorted({len(fv.audit.get("sets", [])) for fv in book.figures.values() if fv.audit})
    out = []
    for scale, what in (("default", f"default scale ({'audited with ' + ' or '.join(map(str, sets)) + ' fresh seed sets' if sets else 'not audited'})"),
                        ("paper", "paper scale (one seed set, not audited)")):
        c = book.counts(scale)
        stale = [f for f, fv in book.figures.items() if fv.paper_note] if scale == "paper" else []
        parts = [f"{c[k]} {SHORT[k] if k != lg.DEPENDS else 'depend on a setting the sources leave open'}"
                 for k in lg.CATEGORIES] + ([f"{c['missing']} without a record"] if c["missing"] else [])
        out.append(f"* **At the {what}:** {', '.join(parts)} (of {n} claims)." + (
            f" The paper runs of {len(stale)} of {len(book.figures)} chapters were computed by earlier code and are "
            "not counted until they are rerun (see {doc}`scales`)." if stale else ""))
    out += ["", f"The headline counts the default scale: its verdicts are audited against fresh seed sets "
            f"({len(audited)} of {len(book.figures)} chapters), while the paper scale is one run per chapter. The "
            "paper profile is the more faithful scale (longer training, more seeds, larger contexts); where the two "
            "disagree, both are shown and the chapter gives the cause."]
    return out


def results_markdown(book: BookVerdicts) -> str:
    """The results summary: the ledger's claims counted in four categories at both scales, each claim with its quote,
    scope, checks, baselines and findings (folded), then every chapter's checks (folded)."""
    out = ["# Results summary", "",
           "Generated from the claims ledger (`book/claims.yml`: every statement of the authors the book tests, quoted "
           "from their own words), the records each notebook writes (`book/results/`), the seed audits "
           "(`book/results/audit/`) and the paper-profile records (`book/results/paper/`). CI re-executes the "
           "notebooks and compares their verdicts exactly, and their numbers within declared tolerances, with the "
           "committed ones.", ""]
    if not any(fv.record for fv in book.figures.values()):
        return "\n".join(out + ["No notebook has been executed yet."]) + "\n"
    out += ["## The headline", ""] + headline(book) + [
        "", "A claim is *reproduced* when every check of it passes at the scope its sentence gives, in the committed "
        "run and in every fresh seed set; *not reproduced* when a check fails in all of them; *inconclusive* when a "
        "check's verdict differs between seed sets; and *depends on a setting the sources leave open* when it is "
        "tested under several readings of such a setting and they disagree.", ""]
    changed = [ev for ev in book.entries if ev.default and ev.paper and ev.default.status != ev.paper.status]
    if changed:
        out += ["Claims whose verdict changes with scale (each chapter says why):", ""]
        out += [f"* {ev.entry.claim} ({_entry_ref(ev.entry, 'details')}): {SHORT[ev.default.status]} at the default "
                f"scale, {SHORT[ev.paper.status]} at the paper scale." for ev in changed] + [""]
    out += ["## The claims", "", "Each claim with the authors' sentence, its scope, its checks at both scales, the "
            "baselines that must fail them and the findings that push it further (folded).", ""]
    for ev in book.entries:
        out += entry_block(book, ev)
    out += findings_block(book)
    return "\n".join(out) + "\n"


def entry_block(book: BookVerdicts, ev, title: str | None = None, where: bool = True) -> list[str]:
    """One claim folded: the authors' sentence, the scope, each check and its baselines at both scales, the baselines
    named by the ledger and the findings beyond it. ``title`` of the fold (default: the claim and its verdicts);
    ``where``: a link to its chapter's paragraph (not in that paragraph itself)."""
    e = ev.entry
    paper = book.ledger.papers[e.paper]["short"]
    head = title or (f"{e.claim} — default: {SHORT[ev.default.status if ev.default else None]}, paper: "
                     f"{SHORT[ev.paper.status if ev.paper else None]}")
    out = [f"`````{{admonition}} {_md(head)}", ":class: dropdown claim-entry", "",
           f"> {lg.render_quote(e.source.quote)}", ">",
           f"> — {paper}, `{e.source.file}` ({_md(e.source.section)})", "",
           f"**Scope.** {_md(e.scope)}", ""] + ([f"**Where.** {_entry_ref(e, 'its chapter')}.", ""] if where else [])
    groups = e.readings.items() if e.is_map else [("", e.checks)]
    out += ["````{list-table}", ":header-rows: 1", ":class: check-table", ":widths: 36 32 32", "",
            "* - Check", "  - Default scale", "  - Paper scale"]
    for reading, keys in groups:
        for key in keys:
            fv, c = book.check(key)
            if c is None:
                out += [f"* - `{key}`" + (f" ({reading})" if reading else ""), "  - no record", "  - no record"]
                continue
            pc = fv.paper_check(c["id"])
            rows = [(c, pc, "")] + [(k, fv.paper_check(k["id"]), "baseline: ") for _, k in book.controls_of(key)]
            for chk, pchk, tag in rows:
                out += [f"* - {tag}{_md(_title(chk))}" + (f" ({_md(reading)})" if reading and not tag else ""),
                        f"  - {check_word(chk, fv.status(chk))}: {_value_cell(chk)}",
                        f"  - {check_word(pchk) + ': ' + _value_cell(pchk) if pchk else 'no record'}"]
    out += ["````", ""]
    if e.baselines:
        out += ["**Baselines that must fail:** " + "; ".join(_md(b) for b in e.baselines) + ".", ""]
    if e.beyond:
        out += ["**Findings beyond its scope:** " + ", ".join(f"`{b.split('/', 1)[1]}`" for b in e.beyond) + ".", ""]
    return out + ["`````", ""]


def findings_block(book: BookVerdicts) -> list[str]:
    """Findings and controls counted, and every chapter's checks in a folded table."""
    from .audit import status as audit_status

    finds = [(fv, c) for fv in book.figures.values() for c in fv.checks() if c.get("kind") == "finding"]
    ctrls = [(fv, c) for fv in book.figures.values() for c in fv.checks() if c.get("kind") == "control"]
    st = lambda fv, c: audit_status(c, fv.audit)  # noqa: E731
    out = ["## Findings and controls", "",
           f"Besides the claims, {len(finds)} *findings* test questions the papers do not answer, or push a claim "
           f"past its scope (either verdict is a result): {sum(st(*x) == 'holds' for x in finds)} hold, "
           f"{sum(st(*x) == 'does not hold' for x in finds)} do not, {sum(st(*x) == 'inconclusive' for x in finds)} "
           f"inconclusive. {sum(st(*x) == 'fails, as it must' for x in ctrls)} of {len(ctrls)} *controls* fail, as "
           "they must (a control runs a check on a baseline or against the wrong counterpart; one that passes means "
           "its check does not discriminate). How checks were re-scoped, and why, is in {doc}`changelog`.", ""]
    for name, fv in book.figures.items():
        if fv.record is None:
            continue
        title = book.registry[name].title if name in book.registry else name
        out += [f"````{{admonition}} Every check of the chapter “{_md(title)}”", ":class: dropdown", "",
                f"Chapter: {{doc}}`../notebooks/{name}`.", "", "```{list-table}", ":header-rows: 1", ":class: check-table", ":widths: 40 12 28 20", "",
                "* - Check", "  - Kind", "  - Verdict and value", "  - Fresh seed sets"]
        for c in fv.checks():
            fresh = fv.fresh(c)
            agree = sum(f == bool(c.get("passed")) for f in fresh)
            out += [f"* - {_md(_title(c))}", f"  - {c.get('kind', 'claim')}",
                    f"  - {check_word(c, fv.status(c) if c.get('kind') == 'claim' else None)}: {_value_cell(c)}",
                    f"  - {f'{agree}/{len(fresh)} agree' if fresh else 'not audited'}"]
        rec = fv.record
        out += ["```", "", f"{rec['profile']} profile, device `{rec['provenance']['device']}`, "
                f"{rec['timings'].get('total', float('nan')):.0f} s of notebook compute{cache_note(rec)}.", "", "````",
                ""]
    return out


def page_texts(book_dir: Path, registry: Mapping[str, Figure]) -> dict[Path, str]:
    """The generated pages of the book (path -> text), from the figures of ``registry`` and the committed records."""
    book_dir = Path(book_dir)
    book = BookVerdicts.read(book_dir / "results", registry)
    return {book_dir / "settings.md": settings_markdown(registry),
            book_dir / "claims_table.md": landing_markdown(book) + "\n",
            book_dir / "results_summary.md": results_markdown(book),
            book_dir / "scales.md": scales_markdown(book_dir / "results", figures=list(registry),
                                                    titles={k: f.title for k, f in registry.items()})}


def write_pages(book_dir: Path, registry: Mapping[str, Figure]) -> list[Path]:
    """Write the generated pages and the landing page's overview figure (``book/figures/claims_overview``)."""
    pages = page_texts(book_dir, registry)
    for path, text in pages.items():
        path.write_text(text)
    figure = overview_figure(BookVerdicts.read(Path(book_dir) / "results", registry),
                             Path(book_dir) / "figures" / "claims_overview")
    return list(pages) + figure

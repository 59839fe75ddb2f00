"""Book pages generated from the code and the notebooks' records, so they cannot disagree with them.

* ``book/landing_answer.md``: what the landing page (``book/intro.md``) shows first: what each paper claims and what
  the book finds, in words (:mod:`softmax_icl.book.landing`), and the overview figure (``book/figures/claims_overview``);
* ``book/claims_table.md``: the landing page's tables (included by ``book/intro.md``), one per paper, folded: one row
  per entry of the claims ledger, the claim in words and its verdict at the default and the paper scale;
* ``book/scales.md``: the results appendix: every check at both scales (:mod:`softmax_icl.book.scales`), then the
  ledger's claims, each with its quote, scope, checks and baselines (folded); findings and controls apart; every
  chapter's checks (:mod:`softmax_icl.book.verdicts`).
* ``book/settings.md``: the settings-and-deviations table (:mod:`softmax_icl.book.settings_page`), read from the
  figure registry (:data:`softmax_icl.figures.FIGURES`, handed in) plus the project-wide choices;
* the verdict colours of ``_static/book.css`` (:mod:`softmax_icl.book.palette`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..profiles import Figure, fmt
from . import ledger as lg
from .landing import answer_markdown
from .deciding import bound_text, decided_number, in_words
from .myst import nobreak
from .scales import cache_note, scales_markdown
from .overview import BADGE, SHORT, badge, by_paper, overview_figure  # noqa: F401 (the badges: chapter.py, tests)
from .palette import css_text
from .more_figures import more_figures_markdown
from .scale_panels import panel_texts
from .schematic import setting_figure
from .settings_page import _md, settings_markdown
from .verdicts import BookVerdicts, check_word

# -- verdicts: badges, the landing table, the results summary ---------------------------------------------------



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
    decided = decided_number(check)
    if decided is not None:
        return typeset(_md(decided))
    return f"{_md(fmt(check.get('value')))} (required {_md(_short_threshold(check.get('threshold', '')))})"


#: A threshold that opens with a comparison and a number (``> 1.5 and ...``, ``<= 1e-05``): its side and value.
_THRESHOLD = re.compile(r"\s*(<=|>=|<|>|≤|≥)\s*(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)")


def clearance(check: dict) -> float | None:
    """How far a check's value lies on the passing side of its threshold (negative: on the failing side), where the
    threshold opens with a comparison and a number and the value is one number; else None. None also where the sign
    disagrees with the recorded verdict (the threshold then has further conditions, e.g. "in every seed")."""
    m = _THRESHOLD.match(str(check.get("threshold", "")))
    v = check.get("value")
    if m is None or isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    t = float(m.group(2))
    by = float(v) - t if m.group(1) in (">", ">=", "≥") else t - float(v)
    if check.get("passed") is None:
        return None
    return by if (by >= 0) == bool(check.get("passed")) else None


def _closeness(check: dict) -> float:
    """A check's clearance relative to the size of its numbers (smallest: closest to its threshold); a check without
    one sorts last."""
    by = clearance(check)
    if by is None:
        return float("inf")
    t = float(_THRESHOLD.match(str(check["threshold"])).group(2))
    return abs(by) / max(abs(t), abs(float(check["value"])), 1e-300)


def _what(check: dict, limit: int = 48) -> str:
    """What a check's value is, where its statement ends on a short clause saying so ("...; worst mean CE ratio
    softmax/linear"), else ""."""
    tail = str(check.get("statement", "")).rsplit("; ", 1)
    return tail[1].strip() if len(tail) == 2 and 0 < len(tail[1].strip()) <= limit else ""


def _agreement(fresh) -> str:
    """``fresh`` (a :class:`~softmax_icl.book.audit.Stability`, or (agreeing, all)) in words where its seed sets
    disagree with the committed status, else ""."""
    agree, n = (fresh.agree, fresh.ran) if hasattr(fresh, "agree") else fresh if fresh else (0, 0)
    return f"{agree} of {n} seed sets agree" if fresh and agree < n else ""


def decisive(check: dict, required: bool = True, fresh=None, what: bool = False, cell: bool = True) -> str:
    """A check's deciding number: its title, its value (with ``what``: what the value is, :func:`_what`), its
    threshold (with ``required``) and by how much the value clears or misses it; ``fresh``: the audit's seed sets
    (a :class:`~softmax_icl.book.audit.Stability` or (agreeing, all)), said where they disagree. A check decided by
    the design says its deciding bound (:func:`decided_number`)."""
    decided = decided_number(check, cell)
    if decided is not None:
        note = f"; {_agreement(fresh)}" if _agreement(fresh) else ""
        return f"{_title(check)}: {decided}{note}"
    by = clearance(check)
    notes = [] if by is None else [
        f"{'clears' if by >= 0 else 'misses'} {_THRESHOLD.match(str(check['threshold'])).group(2)} by {fmt(abs(by))}"]
    if what and _what(check):
        notes.insert(0, _what(check))
    if check.get("margin") is not None:
        notes.append(f"margin {fmt(check['margin'])}")
    if _agreement(fresh):
        notes.append(_agreement(fresh))
    return (f"{_title(check)}: {fmt(check.get('value'))}" + (f", required {check.get('threshold')}" if required else "")
            + (f" ({'; '.join(notes)})" if notes else ""))


def _scale_check(book: BookVerdicts, key: str, scale: str):
    """The check ``key`` at ``scale`` and its agreement over the audit's seed sets (default scale only; a
    :class:`~softmax_icl.book.audit.Stability`, None where no audit applies): (check, agreement) or None."""
    fv, c = book.check(key)
    if c is None:
        return None
    if scale == "paper":
        c = fv.paper_check(c["id"])
        return None if c is None else (c, None)
    return c, fv.stability(c)


def deciding_checks(book: BookVerdicts, ev, scale: str = "default") -> list[tuple[dict, tuple | None]]:
    """The checks that decide an entry's verdict at ``scale``: those not reproduced (failing, or unstable over seed
    sets) where there are any, else the passing check that lies closest to its threshold. Each with its seed
    sets' agreement (:func:`_scale_check`)."""
    v = ev.default if scale == "default" else ev.paper
    if v is None:
        return []
    keys = list(ev.entry.all_checks())
    bad = [k for k, st in v.parts.items() if st != lg.REPRODUCED] if not ev.entry.is_map else \
        [c for r, st in v.parts.items() if st != lg.REPRODUCED for c in ev.entry.readings[r]]
    found = [x for x in (_scale_check(book, k, scale) for k in (bad or keys)) if x is not None]
    if bad:
        return found
    return sorted(found, key=lambda x: _closeness(x[0]))[:1]


def reason(book: BookVerdicts, ev, scale: str = "default", cell: bool = True) -> str:
    """One line on why an entry has its verdict, printed from the records: the deciding checks
    (:func:`deciding_checks`) with their values, thresholds and by how much they clear or miss them; for a map, the
    readings each way too; then how many baselines fail. ``cell``: name the cell that decides a check decided by
    the design."""
    v = ev.default if scale == "default" else ev.paper
    if v is None:
        return "no record at this scale"
    checks = deciding_checks(book, ev, scale)
    thresholds = {str(c.get("threshold")) for c, _ in checks}
    one = len(thresholds) == 1 and len(checks) > 1            # one requirement for all: said once, at the end
    text = "; ".join(decisive(c, not one, fresh, cell=cell) for c, fresh in checks)
    if one:
        text += f" (required {thresholds.pop()})"
    n_parts = len(v.parts)
    ok = sum(st == lg.REPRODUCED for st in v.parts.values())
    if ev.entry.is_map:
        ways = {}
        for r, st in v.parts.items():
            ways.setdefault(st, []).append(r)
        head = "; ".join(f"{SHORT[st]}: {' / '.join(rs)}" for st, rs in ways.items())
        text = head + (f". {text}" if text else "")
    elif n_parts > 1 and ok == n_parts:
        text = f"{ok} of {n_parts} checks pass; closest to its threshold: {text}"
    n_base = sum(len(book.controls_of(k)) for k in ev.entry.all_checks())
    if n_base and v.status == lg.REPRODUCED:
        text += f"; {n_base} baseline{'s fail' if n_base != 1 else ' fails'}, as {'they' if n_base != 1 else 'it'} must"
    return typeset(text)


def words(book: BookVerdicts, ev, scale: str = "default", titled: bool = True) -> str:
    """One line on an entry's verdict in a reader's words, for the chapters (:func:`reason` keeps the machinery's
    numbers for the appendix): the check that decides it (named unless not ``titled``), with where its number lies
    and where the claim needs it (:func:`softmax_icl.book.deciding.in_words`); for a map, how many of its readings
    hold; for a statistic still moving, that it was."""
    v = ev.default if scale == "default" else ev.paper
    if v is None:
        return "no record at this scale"
    checks = deciding_checks(book, ev, scale)
    shown = 1 if ev.entry.is_map else 2
    rival = lambda c: book.passing_rivals(c, scale)[:1]  # noqa: E731  (a rival that leaves the claim undecided)
    text = "; ".join((f"{_title(c)}: " if titled else "") + in_words(c) + "".join(
        f"; but its rival, {_title(r)}, passes too ({in_words(r).split(', where')[0]})" for r in rival(c))
        for c, _ in checks[:shown])
    if v.status == lg.NOT_SETTLED:
        text = f"{text} (still changing when training stopped)"
    if len(checks) > shown and not ev.entry.is_map:        # (a map says how many of its readings hold)
        text += f"; and {len(checks) - shown} more"
    if ev.entry.is_map:
        held = sum(st == lg.REPRODUCED for st in v.parts.values())
        text = f"holds in {held} of {len(v.parts)} readings" + (f"; {text}" if text else "")
    return typeset(text)


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
                         f"{fmt(pc.get('value'))} ({check_word(pc)}) at the paper scale, required "
                         f"{str(c.get('threshold')).replace('_', ' ')}")   # metric names (label_row) in words
            if fv not in figures:
                figures.append(fv)
    settings = []
    for fv in figures:
        a = (fv.record or {}).get("parameters") or {}
        b = (fv.paper or {}).get("parameters") or {}
        for k in sorted(set(a) | set(b)):
            if k == "profile" or k not in a or k not in b or a[k] == b[k]:
                continue
            settings.append(f"`{k}` {fmt(a[k])} → {fmt(b[k])}")
    out = "The verdict changes with scale. " + "; ".join(typeset(m) for m in moved) + "."
    if settings:
        out += (" The two runs share their code and differ only in these settings (their meanings: "
                "{doc}`/book/settings`): " + "; ".join(settings) + ". The change comes from them or from the paper "
                "run's own seeds (one set, not audited).")
    return out


#: Greek names the records' words spell out, as the letters a reader expects in running text.
_GREEK = {"sigma": "σ", "rho": "ρ", "tau": "τ", "beta": "β", "gamma": "γ", "eta": "η"}


def typeset(text: str) -> str:
    """``text`` with the Greek letters the records spell out as names (``L/sigma``, ``rho_2``) written as letters
    (a TeX command such as ``\\sigma`` in a title's maths is left as it is)."""
    return re.sub(r"(?<!\\)\b(sigma|rho|tau|beta|gamma|eta)\b", lambda m: _GREEK[m.group(1)], text)


def _entry_ref(e: lg.Entry, text: str) -> str:
    return f"{{ref}}`{_md(text)} <{e.anchor}>`"


def landing_table(book: BookVerdicts) -> str:
    """The landing page's table, one per paper, folded under its name: one row per ledger entry, the claim in words
    with the paper's figure and a link to the chapter's paragraph that explains its verdict, and its verdict at both scales
    (why, with the deciding numbers: the results appendix, :func:`results_markdown`)."""
    out = []
    for key, evs in by_paper(book):
        paper = book.ledger.papers[key]
        # folded: the overview figure above shows every verdict; the fold gives each claim in words and its link
        out += [f"````{{admonition}} {_md(paper['short'])}: its {len(evs)} claims in words",
                ":class: dropdown claims-by-paper", "", f"*{_md(paper.get('title', ''))}*", "",
                "```{list-table}", ":header-rows: 1", ":class: claims-ledger", ":widths: 64 18 18", "",
                "* - Claim of the paper", "  - Default scale", "  - Paper scale"]
        for ev in evs:
            e = ev.entry
            where = e.figure.get("paper", "")
            where = f"{where}; " if where and where not in e.claim else ""     # a claim that names it already
            out += [f"* - {nobreak(e.claim)} ({where}{_entry_ref(e, 'why')})",
                    f"  - {badge(ev.default.status if ev.default else None)}",
                    f"  - {badge(ev.paper.status if ev.paper else None)}"]
        out += ["```", "````", ""]
    return "\n".join(out).rstrip("\n")


def audit_scope(book: BookVerdicts) -> tuple[str, str]:
    """What the seed audit covers, for the counts: (a short note for the default scale's line, a sentence naming the
    audited chapters, how many seed sets reran each and whether the earlier pool is one of them). A chapter is audited
    where its audit speaks for its committed run and for at least one of its checks."""
    from .audit import EARLIER_POOL, sets_of

    audited = [f for f, fv in book.figures.items() if fv.audit and any(fv.stability(c) for c in fv.checks())]
    if not audited:
        return "not audited", ("No chapter's seed audit applies to its committed run: the default scale's verdicts "
                               "rest on each chapter's committed run alone.")
    groups: dict = {}                   # (sets, the earlier pool among them) -> chapters
    for f in audited:
        sets = sets_of(book.figures[f].audit)
        groups.setdefault((len(sets), any(s["offset"] == EARLIER_POOL for s in sets)), []).append(
            f"“{_md(chapter_title(book, f).split(': ')[0])}”")

    def sets_text(n: int, earlier: bool) -> str:
        return (f"{n} seed sets, the earlier pool (the seeds of the committed runs before the book's own pool) and "
                f"{n - 1} fresh sets no committed run used" if earlier else
                f"{n} fresh seed sets (the earlier pool not among them)")

    join = lambda xs: xs[0] if len(xs) == 1 else ", ".join(xs[:-1]) + " and " + xs[-1]  # noqa: E731
    parts = [f"{join(chs)} with {sets_text(*k)}" for k, chs in groups.items()]
    n_sets = sorted({k[0] for k in groups})
    short = (f"{len(audited)} of {len(book.figures)} chapters audited, with {' or '.join(map(str, n_sets))} seed "
             "sets each" + (", the earlier pool among them" if all(k[1] for k in groups) else ""))
    rest = len(book.figures) - len(audited)
    long = (f"The seed audit reran {len(audited)} of {len(book.figures)} chapters: {'; '.join(parts)}. A seed set "
            "agrees with a check where it gives the check's committed status." + (
                f" The other {rest} chapter{'s' if rest != 1 else ''} {'have' if rest != 1 else 'has'} no audit of "
                "the committed run: their verdicts rest on that run alone." if rest else ""))
    return short, long


def headline(book: BookVerdicts) -> list[str]:
    """The counts of the ledger's entries in the four categories, at both scales, and what the seed audit covers."""
    n = len(book.entries)
    out = []
    audit, audited = audit_scope(book)
    for scale, what in (("default", f"default scale ({audit})"), ("paper", "paper scale (one run per chapter, not "
                                                                          "audited)")):
        c = book.counts(scale)
        stale = [f for f, fv in book.figures.items() if fv.paper_note] if scale == "paper" else []
        long = {lg.DEPENDS: "depend{} on a setting the sources leave open", lg.NOT_SETTLED: lg.NOT_SETTLED}
        parts = [f"{c[k]} {long.get(k, SHORT[k]).format('s' if c[k] == 1 else '')}" for k in lg.CATEGORIES] + ([f"{c['missing']} without a record"] if c["missing"] else [])
        out.append(f"* **At the {what}:** {', '.join(parts)} (of {n} claims)." + (
            f" The paper runs of {len(stale)} of {len(book.figures)} chapters were computed by earlier code and are "
            "not counted until they are rerun (see {doc}`scales`)." if stale else ""))
    out += ["", audited, "", "The landing page counts the default scale, whose runs the seed audit reruns with other "
            "seeds, while the paper scale is one run per chapter. The paper scale is the more faithful one (longer "
            "training, larger contexts); where the two disagree, both are shown and the chapter gives the cause."]
    return out


def results_markdown(book: BookVerdicts, scales: str) -> str:
    """The results appendix: ``scales`` (the page of :func:`softmax_icl.book.scales.scales_markdown`: every check at
    both scales, folded per chapter), then each claim with its quote, scope, checks, baselines and findings (folded),
    then the findings and controls counted with every chapter's checks (folded)."""
    if not any(fv.record for fv in book.figures.values()):
        return scales + "\n"
    out = [scales.rstrip("\n"), "", "## The counts", ""] + headline(book) + ["", "## Every claim in full", "",
           "Each claim with the authors' sentence, its scope, its checks at both scales, the baselines that must fail "
           "them and the findings that push it further (folded). A check is decided as {doc}`design` says.", ""]
    for ev in book.entries:
        out += entry_block(book, ev)
    out += findings_block(book)
    return "\n".join(out) + "\n"


def entry_block(book: BookVerdicts, ev, title: str | None = None, where: bool = True) -> list[str]:
    """One claim folded: the authors' sentence, the scope, each check and its baselines at both scales, the baselines
    named by the ledger and the findings beyond it. ``title`` of the fold (default: the entry's label and its
    verdicts, with the claim in words as the fold's first line);
    ``where``: a link to its chapter's paragraph (not in that paragraph itself)."""
    e = ev.entry
    paper = book.ledger.papers[e.paper]["short"]
    # folded, the title is all a reader sees: kept to the entry's label and its verdicts, the claim opens the fold
    head = title or (f"{e.label} — default: {SHORT[ev.default.status if ev.default else None]}, paper: "
                     f"{SHORT[ev.paper.status if ev.paper else None]}")
    out = [f"`````{{admonition}} {_md(head)}", ":class: dropdown claim-entry", ""]
    if title is None:
        out += [f"**Claim.** {nobreak(e.claim)}", ""]
    out += [f"> {lg.render_quote(e.source.quote)}", ">",
           f"> — {paper}, `{e.source.file}` ({_md(e.source.section)})", "",
           f"**Scope.** {_md(e.scope)}", ""] + ([f"**Where.** {_entry_ref(e, 'its chapter')}.", ""] if where else [])
    groups = e.readings.items() if e.is_map else [("", e.checks)]
    out += ["````{list-table}", ":header-rows: 1", ":class: check-table", ":widths: 36 32 32", "",
            "* - Check", "  - Default scale", "  - Paper scale"]
    for reading, keys in groups:
        for key in keys:
            fv, c = book.check(key)
            if c is None:
                # the check's id without its chapter (the fold names the chapter), so it fits its column
                out += [f"* - `{key.split('/', 1)[-1]}`" + (f" ({reading})" if reading else ""), "  - no record",
                        "  - no record"]
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


def chapter_title(book: BookVerdicts, name: str) -> str:
    """A chapter's title as its page shows it (the first heading of its notebook), else its figure's title."""
    fig = book.registry.get(name)
    try:
        import json

        nb = json.loads((lg.ROOT / "notebooks" / fig.notebook).read_text(encoding="utf-8"))
        for cell in nb["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    if line.startswith("# "):
                        return line[2:].strip()
    except (AttributeError, OSError, ValueError, KeyError):
        pass
    return fig.title if fig is not None else name


def findings_block(book: BookVerdicts) -> list[str]:
    """Findings and controls counted, and every chapter's checks in a folded table."""
    from .audit import status as audit_status

    finds = [(fv, c) for fv in book.figures.values() for c in fv.checks() if c.get("kind") == "finding"]
    ctrls = [(fv, c) for fv in book.figures.values() for c in fv.checks() if c.get("kind") == "control"]
    st = lambda fv, c: audit_status(c, fv.audit)  # noqa: E731
    ns = sum(st(*x) == "not settled" for x in finds)
    unsettled = f", {ns} not settled at this training length" if ns else ""
    out = ["## Findings and controls", "",
           f"Besides the claims, {len(finds)} *findings* test questions the papers do not answer, or push a claim "
           f"past its scope (either verdict is a result): {sum(st(*x) == 'holds' for x in finds)} hold, "
           f"{sum(st(*x) == 'does not hold' for x in finds)} do not, {sum(st(*x) == 'inconclusive' for x in finds)} "
           f"inconclusive{unsettled}. {sum(st(*x) == 'fails, as it must' for x in ctrls)} of {len(ctrls)} *controls* "
           "fail, as they must (a control runs a check on a baseline or against the wrong counterpart; one that passes means "
           "its check does not discriminate). How checks were re-scoped, and why, is in {doc}`changelog`.", ""]
    for name, fv in book.figures.items():
        if fv.record is None:
            continue
        title = chapter_title(book, name)
        # the chapter's title as far as its first colon: a folded block's title stays within two lines
        out += [f"````{{admonition}} Every check of the chapter “{_md(title.split(': ')[0])}”", ":class: dropdown",
                "",
                f"Chapter: {{doc}}`../notebooks/{name}`.", "", "```{list-table}", ":header-rows: 1",
                ":class: check-table", ":widths: 40 12 28 20", "",
                "* - Check", "  - Kind", "  - Verdict and value", "  - Seed sets"]
        for c in fv.checks():
            st = fv.stability(c)
            out += [f"* - {_md(_title(c))}", f"  - {c.get('kind', 'claim')}",
                    f"  - {check_word(c, fv.status(c) if c.get('kind') == 'claim' else None)}: {_value_cell(c)}",
                    f"  - {nobreak(st.text(lambda b, c=c: bound_text(c, b))) if st else 'not audited'}"]
        rec = fv.record
        out += ["```", "", f"{rec['profile']} profile, device `{rec['provenance']['device']}`, "
                f"{rec['timings'].get('total', float('nan')):.0f} s of notebook compute{cache_note(rec)}.", "", "````",
                ""]
    return out


def paper_answers(book_dir: Path, registry: Mapping[str, Figure]) -> dict[str, str]:
    """Each chapter's paper-scale answer box, as its published paper run glued it
    (``results/paper/<figure>.answer.md``, :func:`softmax_icl.book.publish.glued_answer`), where there is one."""
    return {f: p.read_text(encoding="utf-8") for f in registry
            if (p := Path(book_dir) / "results" / "paper" / f"{f}.answer.md").is_file()}


def page_texts(book_dir: Path, registry: Mapping[str, Figure]) -> dict[Path, str]:
    """The generated pages of the book (path -> text), from the figures of ``registry`` and the committed records;
    with them the stylesheet ``_static/book.css`` beside the book's folder, its verdict colours from
    :mod:`softmax_icl.book.palette` (where the stylesheet has them or the book's folder is a checkout's)."""
    book_dir = Path(book_dir)
    book = BookVerdicts.read(book_dir / "results", registry)
    scales = scales_markdown(book_dir / "results", figures=list(registry), titles={k: f.title for k, f in registry.items()})
    pages = {book_dir / "settings.md": settings_markdown(registry),
             book_dir / "landing_answer.md": answer_markdown(book),
             book_dir / "claims_table.md": landing_table(book) + "\n",
             book_dir / "scales.md": results_markdown(book, scales)}
    pages.update(panel_texts(book, book_dir / "scale_panels", words, scale_difference,
                             paper_answers(book_dir, registry)))
    notebooks = book_dir.parent / "notebooks"
    if notebooks.is_dir():
        pages[book_dir / "more_figures.md"] = more_figures_markdown(
            notebooks, registry, {k: chapter_title(book, k) for k in registry})
    css = book_dir.parent / "_static" / "book.css"
    if css.is_file():
        pages[css] = css_text(css.read_text(encoding="utf-8"))
    return pages


def write_pages(book_dir: Path, registry: Mapping[str, Figure]) -> list[Path]:
    """Write the generated pages (the chapters' scale panels among them), the landing page's overview figure (``book/figures/claims_overview``) and the
    Setting page's schematic (``book/figures/setting_window``)."""
    pages = page_texts(book_dir, registry)
    for path, text in pages.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    figure = overview_figure(BookVerdicts.read(Path(book_dir) / "results", registry),
                             Path(book_dir) / "figures" / "claims_overview")
    figure += setting_figure(Path(book_dir) / "figures" / "setting_window")
    return list(pages) + figure

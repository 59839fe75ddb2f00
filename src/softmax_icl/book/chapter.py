"""Reader-first chapters: what a figure notebook shows *before* its code, computed by its code.

A chapter opens with its question, the paper's figure it reproduces, and a **verdict box**: the run's
claims with their status. The box is computed at the end of the notebook (after the claim checks) and
*glued* into a markdown cell near the top with myst-nb's ``{glue:md}`` directive, so the reader meets the
result first while the code that computes it still runs in order (``notebooks/LAYOUT.md``)::

    # last cells of a figure notebook
    print(run.finish())            # nbval-checked verdict lines (unchanged)
    chapter.glue_verdicts(run)     # a separate cell: stores the box under the key "verdicts"

    <!-- markdown cell right after the title -->
    ```{glue:md} verdicts
    :format: myst
    ```

The claim checks are read with attribute defaults, so records written before a field existed (``kind``,
``source``) still render.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, is_dataclass
from typing import Any, Iterable

from ..profiles import Figure, fmt
from .glue import glue_markdown
from .myst import nobreak
from .provenance import BOOK_PROFILE, repo_root
from .records import plain

#: The glue key under which :func:`glue_verdicts` stores the verdict box; the markdown cell pastes it.
VERDICT_KEY = "verdicts"

def _get(claim: Any, name: str, default: Any = None) -> Any:
    """A claim's field, from a :class:`~softmax_icl.book.records.Claim` or from its dict in a JSON record."""
    if isinstance(claim, dict):
        return claim.get(name, default)
    return getattr(claim, name, default)


def _as_dict(claim: Any) -> dict:
    return asdict(claim) if is_dataclass(claim) else dict(claim)


def _cell(text: Any) -> str:
    """Text for one cell of a list-table: no line breaks, word-internal hyphens non-breaking (a list-table needs no
    escaped pipes, and maths such as ``$\\|M\\|$`` must reach MathJax as written)."""
    return nobreak(" ".join(str(text).split()))


def box_class(statuses: list[str]) -> str:
    """The verdict box's colour, from its claims' statuses: every one reproduced, none, or a mix (no alarm colours:
    a claim that does not hold is a result)."""
    from .ledger import REPRODUCED

    if statuses and all(st == REPRODUCED for st in statuses):
        return "verdict-reproduced"
    if statuses and not any(st == REPRODUCED for st in statuses):
        return "verdict-not"
    return "verdict-mixed"


def verdict_markdown(claims: Iterable[Any], title: str = "Verdict", audit: dict | None = None,
                     paper: dict | None = None, figure: str = "") -> str:
    """The chapter's verdict table as MyST markdown: one block per claim of the papers (ledger entry) tested here,
    its checks and their baselines, then the findings; a folded section per claim with the authors' sentence, the
    scope and each check's method.

    ``claims``: :class:`~softmax_icl.book.records.Claim` objects or their record dicts; ``audit``: the chapter's seed
    audit (a "seed sets" column: how many of them agree); ``paper``: the chapter's paper-profile record computed by the
    same code (a "paper scale" column). Columns: claim (rendered maths) · verdict · value (required) · seed sets · paper scale.
    """
    from . import ledger as lg
    from .deciding import decided_number
    from .pages import SHORT, _short_threshold, _title, badge, typeset
    from .verdicts import FigureVerdicts, check_word

    checks = [_as_dict(c) for c in claims]
    record = {"notebook": figure, "claims": checks, "provenance": (paper or {}).get("provenance", {})}
    fv = FigureVerdicts(figure, record, audit, paper)
    led = lg.load()
    entries = list(dict.fromkeys(c["ledger"] for c in checks if c.get("kind") == "claim" and c.get("ledger")))

    def fresh_cell(c: dict) -> str:
        st = fv.stability(c)
        if st is None:
            return "not audited"
        # a check without a decided status rests on the sets: one that disagrees makes it inconclusive
        return st.short() + (": inconclusive" if c.get("status") is None and not st.stable else "")

    def paper_cell(c: dict) -> str:
        pc = fv.paper_check(c["id"])
        return "no record" if pc is None else f"{check_word(pc)} ({_cell(fmt(pc.get('value')))})"

    def value_cell(c: dict) -> str:
        decided = decided_number(c)
        if decided is not None:
            return _cell(typeset(decided))
        return f"{_cell(fmt(c.get('value')))} (required {_cell(_short_threshold(c.get('threshold', '')))})"

    def row(c: dict, label: str) -> list[str]:
        word = check_word(c, fv.status(c) if c.get("kind") == "claim" else None)
        return [f"* - {label}", f"  - {word}", f"  - {value_cell(c)}", f"  - {fresh_cell(c)}", f"  - {paper_cell(c)}"]

    def table(cls: str) -> list[str]:
        return ["```{list-table}", ":header-rows: 1", f":class: verdict-table {cls}", ":widths: 32 17 19 16 16", "",
                "* - Claim and its checks", "  - Verdict", "  - Value (required)", "  - Seed sets",
                "  - Paper scale"]

    statuses, body, methods = [], table("claims"), []
    for eid in entries:
        e = led.by_id(eid)
        mine = [c for c in checks if c.get("ledger") == eid and c.get("kind") == "claim"]
        st = lg.verdict(e, {f"{figure}/{c['id']}": fv.status(c) for c in mine}, partial=True)
        status = st.status or None
        # an entry tested in several chapters shows this chapter's part; its verdict over all is on the landing page
        elsewhere = [k for k in e.all_checks() if not k.startswith(figure + "/")]
        statuses.append(status)
        body += [f"* - **{nobreak(e.claim)}**" + (" (with checks in other chapters)" if elsewhere else ""),
                 f"  - {badge(status)}", "  - ", "  - ", "  - "]
        for c in mine:
            body += row(c, "↳ " + _cell(_title(c)))
            body += [x for k in checks if k.get("control_of") == c["id"]
                     for x in row(k, "↳ baseline: " + _cell(_title(k)))]
        methods += method_block(e, mine, checks)
    body += ["```"]
    finds = [c for c in checks if c.get("kind") == "finding"]
    fbody = table("findings")
    for c in finds:
        fbody += row(c, _cell(_title(c)))
        fbody += [x for k in checks if k.get("control_of") == c["id"]
                  for x in row(k, "↳ baseline: " + _cell(_title(k)))]
    fbody += ["```"]
    count = {s_: statuses.count(s_) for s_ in dict.fromkeys(statuses)}
    summary = ", ".join(f"{n} {SHORT[s_]}" for s_, n in count.items()) or "no claim of the papers is tested here"
    folded = "dropdown " if len(body) > 5 * 14 else ""          # more than about a dozen rows: folded
    lines = [f"`````{{admonition}} {title}: {summary}", f":class: {folded}verdict-box {box_class(statuses)}", ""]
    lines += body if entries else ["No check of this chapter tests a claim of the papers."]
    lines += ["", "Each value is computed by this chapter's code from the run shown on this page and written to its "
              "JSON record; *seed sets*: the same chapter rerun with other seeds (`softmax-icl audit`): the earlier "
              "pool, which the committed runs used before the book's own pool, and fresh sets no committed run used; "
              "a set agrees where it gives the check the status it has here; *paper scale*: the record of the "
              "`paper` profile, computed by the same code.", "", "`````", ""]
    if finds:
        lines += [f"`````{{admonition}} Findings of ours ({sum(bool(c.get('passed')) for c in finds)} of {len(finds)} "
                  "hold)", ":class: dropdown findings-box", "",
                  "Questions the papers do not answer, or a claim pushed past its scope: either verdict is a result.",
                  ""] + fbody + ["", "`````", ""]
    if methods:
        lines += ["`````{admonition} The authors' sentences, the scopes and the methods", ":class: dropdown", ""]
        lines += methods + ["`````"]
    return "\n".join(lines)


def method_block(e, mine: list[dict], checks: list[dict]) -> list[str]:
    """One claim's quote, scope and, per check, its id, exact statement and threshold (folded under the table)."""
    from .ledger import render_quote

    out = [f"**{e.claim}**", "", f"> {render_quote(e.source.quote)}", ">",
           f"> — `{e.source.file}` ({_cell(e.source.section)})", "", f"*Scope.* {e.scope}", ""]
    for c in mine + [k for c in mine for k in checks if k.get("control_of") == c["id"]]:
        out += [f"* `{c['id']}` ({c.get('kind', 'claim')}): {_cell(c.get('statement', ''))}; required: "
                f"{_cell(c.get('threshold', ''))}"]
    return out + [""]


def table(header: list[str], rows: list[list[Any]], *, title: str = "", folded: bool = False,
          widths: list[int] | None = None, note: str = "") -> str:
    """A table as MyST markdown (a ``list-table``: cells may hold ``$...$`` maths and roles), optionally inside an
    admonition titled ``title``, folded (a dropdown) with ``folded``. ``note`` is a paragraph under the table.

    Cells are converted with ``str``; numbers should be formatted by the caller (e.g. :func:`softmax_icl.profiles.fmt`).
    """
    if any(len(r) != len(header) for r in rows):
        raise ValueError(f"every row needs {len(header)} cells (the header's), got {sorted({len(r) for r in rows})}")
    lines = ["```{list-table}", ":header-rows: 1", ":class: data-table"]
    if widths:
        lines.append(":widths: " + " ".join(str(w) for w in widths))
    lines.append("")
    for r in [header, *rows]:
        lines += [f"* - {_cell(r[0])}"] + [f"  - {_cell(x)}" for x in r[1:]]
    lines.append("```")
    if note:
        lines += ["", note]
    if not title:
        return "\n".join(lines)
    return "\n".join([f"````{{admonition}} {title}", f":class: {'dropdown ' if folded else ''}table-box", ""] + lines
                     + ["````"])


def show(markdown: str) -> None:
    """Display MyST markdown as a notebook cell's output (the book renders it; nbval does not compare it)."""
    try:
        from IPython.display import Markdown, display
    except ImportError:      # outside IPython: print it
        print(markdown)
        return
    display(Markdown(markdown))


def glue_verdicts(run: Any, key: str = VERDICT_KEY, store: bool = True) -> str:
    """Store the verdict box of ``run`` (a :class:`~softmax_icl.book.run.Run` after its claim checks) in the
    notebook under ``key`` (unless not ``store``), without displaying it here; returns the markdown.

    Call it in its own cell after the cell that prints ``run.finish()``. Outside a notebook kernel it only
    returns the markdown.
    """
    text = verdict_markdown(getattr(run, "claims", []), audit=book_audit(run), paper=book_paper_record(run),
                            figure=getattr(run, "figure", ""))
    if store:
        glue_markdown(key, text)
    return text


def book_audit(run: Any) -> dict | None:
    """The committed seed audit of ``run``'s figure (``book/results/audit/<figure>.json``) when ``run`` is at the
    book's settings (the book's profile, no parameter overridden) and reproduces the audited run (same verdicts,
    values within tolerance: :func:`softmax_icl.book.audit.speaks_for`): the audit reran exactly those settings with
    other seeds, so it says how far this run's verdicts hold. None for any other run, or where there is no audit."""
    from .audit import read_audit, speaks_for

    if not _at_book_settings(run):
        return None
    root = repo_root()
    audit = None if root is None else read_audit(root / "book" / "results", run.figure)
    claims = [asdict(c) if is_dataclass(c) else dict(c) for c in getattr(run, "claims", [])]
    return audit if speaks_for(audit, run.figure, claims, getattr(run, "revision", None),
                               run.definition.tolerances) else None


def _at_book_settings(run: Any) -> bool:
    """Whether ``run`` is the book's own run of its figure: the book's profile, no parameter overridden."""
    fig = getattr(run, "definition", None)
    return (fig is not None and getattr(run, "profile", None) == BOOK_PROFILE
            and not getattr(run, "custom", True))


def run_verdicts(run: Any, registry: Mapping[str, Figure]):
    """The book's verdicts (:class:`softmax_icl.book.verdicts.BookVerdicts`) over the figures of ``registry``, with
    ``run`` in place of its figure's committed record: the other chapters' parts of a claim come from their committed
    records."""
    from .verdicts import BookVerdicts, FigureVerdicts

    from . import ledger as lg

    root = repo_root()
    book = (BookVerdicts.read(root / "book" / "results", registry) if root is not None
            else BookVerdicts({f: FigureVerdicts(f, None) for f in registry}, lg.load(), registry=registry))
    claims = [asdict(c) if is_dataclass(c) else dict(c) for c in getattr(run, "claims", [])]
    record = {"notebook": run.figure, "profile": getattr(run, "profile", None), "claims": claims,
              "parameters": plain(dict(getattr(run, "cfg", None) or {})),
              "provenance": {"code_fingerprint": getattr(run, "fingerprint", None)}}
    book.figures[run.figure] = FigureVerdicts(run.figure, record, book_audit(run), book_paper_record(run))
    book.entries = [book.entry_verdict(e) for e in book.ledger.entries]
    return book


def answer_markdown(run: Any, registry: Mapping[str, Figure], lead: str = "") -> str:
    """The chapter's short answer, for the top of the page, above its headline figure: ``lead`` (at most three lines
    with the run's numbers, from the figure's ``answer.short``) in the answer box."""
    return "\n".join(["````{admonition} The answer", ":class: answer-box", "", lead, "````"])


def answer_details_markdown(run: Any, registry: Mapping[str, Figure]) -> str:
    """The rest of the answer, under the headline figure: one line per claim of the papers tested here (its short
    label; the claim in full heads its paragraph), with its verdict (one badge where the two scales agree, default →
    paper where they differ), the deciding number in words (:func:`softmax_icl.book.pages.words`) and a link to its
    paragraph. This is where the chapter states each claim's verdict; the run's numbers as the checks read them, with
    their bounds (the figure's ``answer.lead``), open the folded block of checks instead (:func:`glue_chapter`)."""
    from .pages import badge, words

    book = run_verdicts(run, registry)
    lines = ["Each claim tested here, with what this run finds (verdict: default scale → paper scale, where they "
             "differ):", ""]
    for ev in book.entries:
        if not any(k.startswith(run.figure + "/") for k in ev.entry.all_checks()):
            continue
        e = ev.entry
        differs = ev.paper and (ev.default is None or ev.paper.status != ev.default.status)
        paper = f" → {badge(ev.paper.status)}" if differs else ""
        link = (f"{{ref}}`the claim <{e.anchor}>`" if e.chapter == run.figure
                else f"{{doc}}`its chapter <{e.chapter}>`")
        there = "" if not differs else "; at the paper scale, " + (
            words(book, ev, "paper").split(";")[0] if e.is_map else words(book, ev, "paper", titled=False))
        lines.append(f"* {badge(ev.default.status if ev.default else None)}{paper} **{e.label}**: "
                     f"{_cell(words(book, ev) + there)} ({link})")
    return "\n".join(lines)


def claim_markdown(run: Any, entry_id: str, registry: Mapping[str, Figure]) -> str:
    """The paragraph of one claim in its chapter: the authors' sentence and the claim in plain terms (the ledger's
    ``claim``); where the two scales disagree, why is in the paper scale's tab (:mod:`.scale_panels`). The verdict
    itself is stated once, under the headline figure (:func:`answer_details_markdown`); every check with its
    baselines is in the folded block at the chapter's end."""
    from .ledger import render_quote

    book = run_verdicts(run, registry)
    e = next(x for x in book.entries if x.entry.id == entry_id).entry
    paper = book.ledger.papers[e.paper]["short"]
    return "\n".join([f"> {render_quote(e.source.quote)} — {paper}, `{e.source.file}`", "",
                      f"In plain terms: {' '.join(str(e.claim).split())}"])


def provenance_markdown(run: Any) -> str:
    """"How this page was computed", folded: provenance, settings, each stage's time and cache use."""
    prov = run.provenance()
    rows = [f"* **{k.replace('_', ' ')}**: `{_cell(v)}`" for k, v in prov.items() if k not in ("peak_memory_mb",)]
    peak = prov.get("peak_memory_mb") or {}
    rows.append("* **peak memory**: " + (", ".join(f"{k} {v:.0f} MB" for k, v in peak.items()) or "not measured"))
    rows.append("* **settings**: " + ", ".join(f"`{k}={_cell(fmt(v))}`" for k, v in run.cfg.items() if k != "profile"))
    stages = ["```{list-table}", ":header-rows: 1", ":widths: 40 20 20 20", "",
              "* - Stage", "  - This run (s)", "  - Read from the cache", "  - Its computation (s)"]
    for tag, t in run.timings.items():
        hit = run.cache_hits.get(tag)
        took = run.compute_seconds.get(tag)
        stages += [f"* - `{tag}`", f"  - {t:.1f}", f"  - {'yes' if hit else ('no' if hit is not None else '—')}",
                   f"  - {'—' if took is None else f'{took:.1f}'}"]
    return "\n".join(["````{admonition} How this page was computed", ":class: dropdown provenance-box", "",
                       "The run that produced this page, as its record (`book/results/<figure>.json`) keeps it. Same "
                       "seed, profile and device give the same numbers.", ""] + rows + [""] + stages + ["```", "````"])


def glue_chapter(run: Any, registry: Mapping[str, Figure], lead: str = "", short: str = "") -> None:
    """Glue everything a chapter shows from its run (call after the claim checks): the short answer above the
    headline figure (``answer``: ``short``), each claim's verdict in words under the figure (``answer-details``),
    the folded block's numbers and verdict table (``verdicts``: ``lead``, then every check), the paragraph of each
    claim tested here (``claim-<entry id>``), the seed audit (``audit``) and the provenance (``provenance``). ``registry``: the book's
    figures (:data:`softmax_icl.figures.FIGURES`), whose committed records give a claim's parts in other chapters."""
    from . import ledger as lg

    numbers = f"**The run's numbers, as the checks read them.** {lead}" if (short and lead) else ""
    glue_markdown(VERDICT_KEY, "\n\n".join(x for x in (numbers, glue_verdicts(run, store=False)) if x))
    glue_markdown("answer", answer_markdown(run, registry, short or lead))
    glue_markdown("answer-details", answer_details_markdown(run, registry))
    for eid in dict.fromkeys(c.ledger for c in run.claims if c.kind == "claim" and c.ledger):
        if lg.load().by_id(eid).chapter == run.figure:
            glue_markdown(f"claim-{eid}", claim_markdown(run, eid, registry))
    head, *rest = audit_summary(run).splitlines()
    glue_markdown("audit", "\n".join([head, ""] + [f"* {_cell(x)}" for x in rest]))
    glue_markdown("provenance", provenance_markdown(run))


def book_paper_record(run: Any) -> dict | None:
    """The committed paper-profile record of ``run``'s figure (``book/results/paper/<figure>.json``) when ``run`` is
    the book's own (its profile, no parameter overridden) and the record was computed by the same code (the result
    cache's fingerprint): its verdicts sit beside this run's. None otherwise."""
    import json

    if not _at_book_settings(run):
        return None
    root = repo_root()
    path = None if root is None else root / "book" / "results" / "paper" / f"{run.figure}.json"
    if path is None or not path.is_file():
        return None
    rec = json.loads(path.read_text())
    same = (rec.get("provenance") or {}).get("code_fingerprint") == getattr(run, "fingerprint", None)
    return rec if same else None


def audit_summary(run: Any) -> str:
    """The seed audit of ``run`` in words, for a chapter to print under its claim checks: which seed sets reran the
    chapter (the earlier pool and the fresh sets, by their offsets), then per check how many sets give its status
    here and the range of their deciding bounds (and, where they disagree, each set's status), from the committed
    audit record (:func:`book_audit`). Says so where no audit applies to ``run``."""
    from ..profiles import BOOK_POOL
    from .audit import EARLIER_POOL, sets_of, stability
    from .deciding import bound_text

    audit = book_audit(run)
    if audit is None:
        return ("No seed audit applies to this run: the audit (`softmax-icl audit`) reruns the book's own run with "
                "other seeds, and this run has other settings or results, or its chapter has not been audited yet.")
    sets = sets_of(audit)
    fresh = [s for s in sets if s["offset"] != EARLIER_POOL]
    offsets = ", ".join(str(s["offset"]) for s in fresh)
    which = (f"the earlier pool (offset 0: the seeds of the committed runs before the book's own pool) and "
             f"{len(fresh)} fresh sets (offsets {offsets})" if len(fresh) < len(sets) else
             f"{len(fresh)} fresh sets (offsets {offsets})")
    lines, kept = [], 0
    for c in getattr(run, "claims", []):
        check = _as_dict(c)
        st = stability(check["id"], audit, check)
        title = f"{_get(c, 'title') or check['id']} [{check.get('kind', 'claim')}]"
        here = check.get("status") or ("pass" if check.get("passed") else "fail")
        if st is None:
            lines.append(f"{title}: {here} here; not audited (the check is newer than the audit)")
            continue
        kept += st.stable
        show = lambda b: bound_text(check, b)  # noqa: E731  (as the verdict table shows the check's own bound)
        line = f"{title}: {here} here; {st.text(show)}"
        if not st.stable:
            line += "; by set: " + ", ".join(
                f"{s['name']} {'did not run' if r is None else r.get('status') or 'no record of it'}"
                + ("" if b is None else f" ({show(b)})") for s, r, b in zip(sets, st.statuses, st.bounds))
        lines.append(line)
    head = (f"Seed audit: this chapter rerun with {len(sets)} seed sets, {which}; a set's seeds lie its offset above "
            f"the seed parameters' base values, the book's own run at {BOOK_POOL} (book/results/audit/{run.figure}.json). {kept} of {len(lines)} checks have "
            "their status here in every set that ran; per check, how many sets agree and the range of their "
            "deciding bounds:")
    return "\n".join([head] + lines)

"""The claims ledger (``book/claims.yml``): the papers' statements in their authors' words, and the checks that test
them.

Each entry quotes one statement of the authors verbatim; the checks of kind *claim* that test it name it in the
statistical design (``book/design.yml``: ``claim``, and ``reading`` for a statement whose test turns on a setting the
sources leave open), which this module reads for the join, so a check is written once. This module loads
the ledger, knows which parts of the source files hold the authors' own words (``sources/papers/SOURCES.md``), and
turns the checks' verdicts into an entry's verdict:

* **not reproduced**: a check fails in the committed run and in every fresh seed set of the audit;
* **inconclusive**: otherwise, a check's verdict differs between seed sets;
* **reproduced**: otherwise (every check passes, in every seed set);
* **depends on an unspecified setting**: a map entry whose readings' verdicts differ (when they agree, their common
  verdict).

The layer is a bottom one: it imports nothing from the package, so records, pages and tests can all use it.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[3]
#: The ledger file of the checkout this package was installed from.
LEDGER_PATH = ROOT / "book" / "claims.yml"
#: The copy of the source material kept with the code (the master is the project's shared/papers/).
SOURCES_DIR = ROOT / "sources" / "papers"

REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, DEPENDS = ("reproduced", "not reproduced", "inconclusive",
                                                     "depends on an unspecified setting")
#: The verdict of a claim whose statistic was still moving towards another verdict at the end of training.
NOT_SETTLED = "not settled at this training length"
#: The headline's categories, in the order it lists them.
CATEGORIES = (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, DEPENDS, NOT_SETTLED)
#: A decided check's status (softmax_icl.stats: pass, fail, inconclusive, not settled) as a ledger status.
FROM_DECISION = {"pass": REPRODUCED, "fail": NOT_REPRODUCED, "inconclusive": INCONCLUSIVE, "not settled": NOT_SETTLED}


@dataclass(frozen=True)
class Quote:
    file: str
    section: str
    quote: str


@dataclass(frozen=True)
class Entry:
    """One statement of the authors: see the header of ``book/claims.yml`` for every field."""

    id: str
    paper: str
    source: Quote
    claim: str
    figure: dict
    scope: str
    checks: tuple = ()                           # "chapter/check-id"
    readings: dict = field(default_factory=dict)  # reading -> tuple of "chapter/check-id"
    setting: str = ""                            # the unspecified setting a map entry's readings vary
    baselines: tuple = ()
    beyond: tuple = ()
    also: tuple = ()                             # more Quotes that say the same
    label: str = ""                              # a few words, for the overview figure

    @property
    def chapter(self) -> str:
        return self.figure.get("chapter", "")

    @property
    def anchor(self) -> str:
        """The MyST label, in the chapter, of the paragraph that explains this entry's verdict."""
        return f"claim-{self.id}"

    @property
    def is_map(self) -> bool:
        return bool(self.readings)

    def all_checks(self) -> tuple:
        """Every check of kind claim that tests this entry (a map's over all its readings)."""
        if self.is_map:
            return tuple(c for cs in self.readings.values() for c in cs)
        return self.checks


@dataclass(frozen=True)
class Ledger:
    papers: dict
    entries: tuple
    not_counted: tuple

    def by_id(self, eid: str) -> Entry:
        for e in self.entries:
            if e.id == eid:
                return e
        raise KeyError(f"no ledger entry {eid!r}; entries: {', '.join(e.id for e in self.entries)}")

    def quotes(self):
        """Every quote of the ledger (entries, their ``also`` quotes, and the statements not counted)."""
        for e in self.entries:
            yield e.id, e.source
            for q in e.also:
                yield e.id, q
        for k, q in enumerate(self.not_counted):
            yield f"not_counted[{k}]", q


def _quote(d: dict) -> Quote:
    src = d.get("source", d)
    return Quote(str(src["file"]), str(src.get("section", "")), str(d["quote"]))


#: The statistical design, which names each check's ledger entry (the ledger names none of its checks).
DESIGN_PATH = ROOT / "book" / "design.yml"


def _links(design_path: Path, ids: set) -> tuple[dict, dict, dict, dict]:
    """From the design: entry -> its checks, entry -> reading -> checks, entry -> findings beyond it, and the checks
    flagged ``headline``, each in the design's order (a check names its entry with ``claim`` or ``beyond``)."""
    checks, readings, beyond, headline = {}, {}, {}, {}
    for key, d in yaml.safe_load(design_path.read_text(encoding="utf-8"))["checks"].items():
        eid = d.get("claim") or d.get("beyond")
        if eid is None:
            continue
        if eid not in ids or (d.get("claim") and d.get("beyond")):
            raise ValueError(f"{design_path}: check {key!r} names {'claim' if d.get('claim') else 'beyond'} "
                             f"{eid!r}, which must be one ledger entry; entries: {', '.join(sorted(ids))}")
        if d.get("beyond"):
            beyond.setdefault(eid, []).append(key)
        elif d.get("reading"):
            readings.setdefault(eid, {}).setdefault(str(d["reading"]), []).append(key)
        else:
            checks.setdefault(eid, []).append(key)
        if d.get("headline"):
            headline.setdefault(eid, []).append(key)
    return checks, readings, beyond, headline


@functools.lru_cache(maxsize=4)
def load(path: str | Path | None = None, design_path: str | Path | None = None) -> Ledger:
    """Read and validate the ledger (default: ``book/claims.yml`` of this checkout), its entries' checks taken from
    the statistical design (default: ``book/design.yml``)."""
    path = Path(path or LEDGER_PATH)
    design_path = Path(design_path or DESIGN_PATH)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    ids = [raw["id"] for raw in data["claims"]]
    checks, readings, beyond, headline = _links(design_path, set(ids))
    entries, seen = [], set()
    for raw in data["claims"]:
        if raw["id"] in seen:
            raise ValueError(f"{path}: ledger entry {raw['id']!r} appears twice")
        seen.add(raw["id"])
        if raw["paper"] not in data["papers"]:
            raise ValueError(f"{path}: entry {raw['id']!r} names paper {raw['paper']!r}; allowed: "
                             f"{', '.join(data['papers'])}")
        eid = raw["id"]
        if bool(checks.get(eid)) == bool(readings.get(eid)):
            raise ValueError(f"{design_path}: entry {eid!r} needs checks that name it (claim: {eid}), all with a "
                             "reading or all without")
        if bool(readings.get(eid)) != bool(raw.get("setting")):
            raise ValueError(f"{path}: entry {eid!r}: a 'setting' goes with checks that have a reading, and only then")
        entries.append(Entry(
            id=eid, paper=raw["paper"], source=_quote(raw), claim=" ".join(str(raw["claim"]).split()),
            figure=dict(raw["figure"]), scope=" ".join(str(raw["scope"]).split()),
            checks=tuple(checks.get(eid, ())),
            readings={k: tuple(v) for k, v in readings.get(eid, {}).items()},
            setting=str(raw.get("setting", "")), baselines=tuple(raw.get("baselines") or ()),
            beyond=tuple(beyond.get(eid, ())), also=tuple(_quote(q) for q in raw.get("also") or ()),
            label=str(raw.get("label") or eid)))
    by_id = {e.id: e for e in entries}
    papers = {}
    for key, paper in data["papers"].items():
        papers[key] = dict(paper)
        lines = []
        for h in paper.get("headline") or ():
            e = by_id.get(h.get("entry"))
            if e is None or e.paper != key:
                raise ValueError(f"{path}: paper {key!r}: headline entry {h.get('entry')!r} is not one of its entries; "
                                 f"allowed: {', '.join(x.id for x in entries if x.paper == key)}")
            flagged = headline.get(e.id, [])
            if (len(flagged) != 1 and not e.is_map) or (flagged and e.is_map):
                raise ValueError(f"{design_path}: headline entry {e.id!r} needs "
                                 + ("no check flagged headline (its sentence counts its readings)" if e.is_map else
                                    f"exactly one of its checks flagged 'headline: true' (flagged: "
                                    f"{', '.join(flagged) or 'none'}; checks: {', '.join(e.checks)})"))
            lines.append({**h, **({"check": flagged[0]} if flagged else {})})
        if lines:
            papers[key]["headline"] = lines
    stray = sorted(k for eid, ks in headline.items() for k in ks if eid not in
                   {h["entry"] for p in papers.values() for h in p.get("headline") or ()})
    if stray:
        raise ValueError(f"{design_path}: checks flagged headline whose entry the landing page does not report: "
                         f"{', '.join(stray)}")
    return Ledger(papers=papers, entries=tuple(entries),
                  not_counted=tuple(_quote(q) for q in data.get("not_counted") or ()))


# -- the authors' own words ----------------------------------------------------------------------------------

#: Files whose every line is the authors' (SOURCES.md).
ALL_AUTHORS = ("collins2024_abstract.md", "collins2024_talk_slides.md")
#: Markers of the rebuttal file: an authors' reply runs from AUTHOR_REPLY to the next of the others.
AUTHOR_REPLY = "作者回复"
OTHER_BLOCKS = ("评论", "审稿意见", "最终决定")


def _rebuttal_replies(text: str) -> str:
    """The authors' replies of the review file (reviews, comments and the meta-review are not theirs)."""
    out, inside = [], False
    for line in text.splitlines():
        tag = line.strip()
        if tag == AUTHOR_REPLY:
            inside = True
        elif tag in OTHER_BLOCKS:
            inside = False
        elif inside:
            out.append(line)
    return "\n".join(out)


def _paper2_authors(text: str) -> str:
    """The title, the Abstract, the statement of Proposition 3.1 and the figure captions of the paper-2 summary page
    (its TL;DRs and the page's own text are machine-written)."""
    lines = text.splitlines()
    out = [ln for ln in lines[:6] if ln.startswith("Softmax")]                         # the title
    for k, ln in enumerate(lines):
        if ln.strip() == "Abstract" and k + 2 < len(lines):
            out.append(lines[k + 2])
        if ln.strip() == "Proposition 3.1" and k + 2 < len(lines):
            out.append(lines[k + 2])
        m = re.match(r"\s*[*•]\s+Figure \d+:\s*(.*)", ln)
        if m:
            out.append(m.group(1))
    return "\n".join(out)


def authors_words(papers_dir: str | Path | None = None) -> dict[str, str]:
    """File name -> the text in it that is the authors' own words (SOURCES.md: secondary text left out)."""
    d = Path(papers_dir or SOURCES_DIR)
    out = {name: (d / name).read_text(encoding="utf-8") for name in ALL_AUTHORS}
    out["collins2024_reviews_and_rebuttal.md"] = _rebuttal_replies(
        (d / "collins2024_reviews_and_rebuttal.md").read_text(encoding="utf-8"))
    out["dragutinovic2025_overview.md"] = _paper2_authors((d / "dragutinovic2025_overview.md").read_text(encoding="utf-8"))
    return out


def render_quote(text: str) -> str:
    """A quote for a MyST page: whitespace collapsed, its ``$...$`` maths kept (it renders), its ``$$...$$`` set as
    ``$\\displaystyle ...$``.

    Outside maths, a run of tokens holding backslashes is TeX that the source file kept from a PDF's extraction,
    glued to the extraction's plain-text copy of the same symbols (``MKMQ\\mathbf{M}_K^\\top \\mathbf{M}_Q``): the
    plain copy before the first backslash is dropped and the TeX set as maths (``$\\mathbf{M}_K^\\top
    \\mathbf{M}_Q$``), trailing punctuation left outside, so the page shows the symbols and no raw TeX. The quote in
    the ledger stays verbatim (:func:`quote_found` compares that)."""
    # display maths inside a sentence ($$...$$) is set inline ($\displaystyle ...$): the page's MyST reads $$ as
    # display maths only where it opens a block, and would leave the outer dollars as text
    text = re.sub(r"\$\$(.+?)\$\$", lambda m: "$\\displaystyle " + m.group(1).strip() + "$", " ".join(text.split()))
    text = re.sub(r"\\bold\b\s*", r"\\mathbf ", text)                 # a PDF extraction's \bold: MathJax knows \mathbf
    out, in_math, run = [], False, []

    def flush():
        if run:
            body = " ".join(run)
            tail = body[len(body.rstrip(",.;:")):]
            out.append(f"${body[:len(body) - len(tail)]}${tail}")
            run.clear()

    for tok in text.split():
        delimiters = tok.count("$$") + tok.replace("$$", "").count("$")
        if not in_math and not delimiters and "\\" in tok:
            run.append(tok if run else tok[tok.index("\\"):])
            continue
        flush()
        in_math ^= delimiters % 2 == 1
        out.append(tok)
    flush()
    return " ".join(out)


def normalise(text: str) -> str:
    """Whitespace collapsed, markdown emphasis (``*``, ``_``) and quote marks dropped, lower case: how a quote is
    compared with its source (line breaks and bold type are not part of a sentence)."""
    return re.sub(r"\s+", " ", re.sub(r"[*_`“”\"'’‘>]", "", text)).strip().lower()


def quote_found(q: Quote, words: dict[str, str]) -> bool:
    """Whether quote ``q`` occurs verbatim in the authors' words of its file."""
    return q.file in words and normalise(q.quote) in normalise(words[q.file])


# -- verdicts -------------------------------------------------------------------------------------------------

def check_status(passed: bool, audit_sets: list[bool] | None, status: str | None = None) -> str:
    """One check. A check decided on its pooled seeds (``status``, :meth:`softmax_icl.book.run.Run.decide`) has the
    status of its decision, and the audit's seed sets are a robustness display beside it. Any other check: PASS/FAIL
    in the committed run and, where audited, in every fresh seed set."""
    if status is not None:
        return FROM_DECISION[status]
    verdicts = [bool(passed), *(audit_sets or [])]
    if all(verdicts):
        return REPRODUCED
    if not any(verdicts):
        return NOT_REPRODUCED
    return INCONCLUSIVE


def combine(statuses: list[str]) -> str:
    """An entry (or a reading) from its checks' statuses: a settled failure wins, then a statistic still moving at
    the end of training, then an undecided test (or disagreement between seed sets)."""
    if not statuses:
        raise ValueError("an entry with no check has no verdict")
    if NOT_REPRODUCED in statuses:
        return NOT_REPRODUCED
    if NOT_SETTLED in statuses:
        return NOT_SETTLED
    if INCONCLUSIVE in statuses:
        return INCONCLUSIVE
    return REPRODUCED


@dataclass(frozen=True)
class Verdict:
    """An entry's verdict at one scale, with the statuses it was combined from (per check, or per reading)."""

    status: str
    parts: dict                       # check key or reading -> status
    missing: tuple = ()               # checks the records do not hold (the verdict is then None)


def verdict(entry: Entry, status_of: dict[str, str], partial: bool = False) -> Verdict:
    """``status_of``: "chapter/check-id" -> status (:func:`check_status`). Where a check has no status, the verdict
    has no ``status`` and names the checks in ``missing``; with ``partial`` it is the verdict of the checks that have
    one (a chapter's part of an entry tested in several chapters)."""
    missing = tuple(c for c in entry.all_checks() if c not in status_of)
    if missing and (not partial or len(missing) == len(entry.all_checks())):
        return Verdict("", {}, missing)
    if not entry.is_map:
        parts = {c: status_of[c] for c in entry.checks if c in status_of}
        return Verdict(combine(list(parts.values())), parts)
    parts = {r: combine([status_of[c] for c in cs if c in status_of]) for r, cs in entry.readings.items()
             if any(c in status_of for c in cs)}
    definite = {s for s in parts.values() if s not in (INCONCLUSIVE, NOT_SETTLED)}
    if len(definite) > 1:
        return Verdict(DEPENDS, parts)
    return Verdict(combine(list(parts.values())), parts)

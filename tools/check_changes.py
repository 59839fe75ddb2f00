"""Every check whose kind, scope (statement) or threshold changed between two versions of the book's records, with
the ledger entry that justifies it and its verdict before and after: the record of a re-scoping, for the changelog.

usage: python tools/check_changes.py OLD_REV [--results book/results] [--figures f1 f2 ...]
       python tools/check_changes.py OLD_REV --results book/results/paper   (the paper scale's records)

OLD_REV is a git revision whose records in the folder of ``--results`` (``<folder>/<figure>.json``) are the records
before the change (read with ``git show``); the records after are the files in ``--results``. Prints MyST markdown:
one folded table per chapter (check, what changed, before, after, the ledger entry) and the checks that were removed
or added. A check whose id changed is matched by the ledger (its entry's checks) only where the entry says so;
otherwise it is listed as removed and added.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from softmax_icl.book import ledger as lg  # noqa: E402
from softmax_icl.book.compare import verdict_word  # noqa: E402
from softmax_icl.book.pages import nobreak  # noqa: E402
from softmax_icl.profiles import fmt  # noqa: E402
from softmax_icl.figures import FIGURES  # noqa: E402


def old_record(rev: str, figure: str, folder: str = "book/results") -> dict | None:
    """The record of ``figure`` in ``folder`` (relative to the checkout: ``book/results``, ``book/results/paper``) at
    git revision ``rev``."""
    out = subprocess.run(["git", "show", f"{rev}:{folder}/{figure}.json"], cwd=ROOT, capture_output=True,
                         text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def _verdict(c: dict | None) -> str:
    if c is None:
        return "—"
    return f"{verdict_word(c)} ({fmt(c.get('value'))})"


def _cell(x) -> str:
    """One list-table cell: one line (list-tables need no escaped pipes) whose tokens a narrow column keeps whole: a
    token of more than 20 characters split into words at its hyphens, other word-internal hyphens non-breaking, and
    no line break inside a token that holds a ``|``, ``/``, ``(`` or ``*`` (word joiners between its characters)."""
    words = [" ".join(w.split("-")) if len(w) > 20 and "-" in w.strip("-") else w
             for w in " ".join(str(x).split()).replace("->", "→").split(" ")]
    return " ".join("\u2060".join(w) if re.search(r"[|/(*]", w) and len(w) <= 20 else w
                    for w in nobreak(" ".join(words)).split(" "))


def _words(cid: str) -> str:
    """A check's or entry's id as words, so a narrow cell can wrap it."""
    return cid.replace("-", " ")


def changes(old: dict, new: dict) -> tuple[list, list, list]:
    """(changed, removed, added): changed = [(id, fields that changed, old check, new check)]."""
    a = {c["id"]: c for c in old.get("claims", [])}
    b = {c["id"]: c for c in new.get("claims", [])}
    changed = []
    for cid in a.keys() & b.keys():
        fields = [f for f in ("kind", "threshold", "statement") if a[cid].get(f, "claim" if f == "kind" else None)
                  != b[cid].get(f, "claim" if f == "kind" else None)]
        if fields:
            changed.append((cid, fields, a[cid], b[cid]))
    order = list(b)
    changed.sort(key=lambda t: order.index(t[0]))
    return changed, [a[k] for k in a if k not in b], [b[k] for k in b if k not in a]


def markdown(rev: str, results: Path, figures: list[str]) -> str:
    led = lg.load()
    out = []
    for fig in figures:
        folder = results.resolve().relative_to(ROOT).as_posix() if results.resolve().is_relative_to(ROOT) \
            else "book/results"
        old, new = old_record(rev, fig, folder), json.loads((results / f"{fig}.json").read_text())
        if old is None:
            continue
        changed, removed, added = changes(old, new)
        chapter = FIGURES[fig].title.split(":")[0]            # the short name: the folded title fits one line
        out += [f"````{{admonition}} {chapter}: {len(changed)} checks changed, {len(removed)} removed, "
                f"{len(added)} added", ":class: dropdown", "", "```{list-table}", ":header-rows: 1",
                ":class: check-table", ":widths: 17 13 27 27 16", "",
                "* - Check", "  - What changed", "  - Before", "  - After", "  - Ledger entry"]
        for cid, fields, a, b in changed:
            entry = b.get("ledger") or next((e.id for e in led.entries if f"{fig}/{cid}" in e.beyond), "—")
            before = f"{a.get('kind', 'claim')}; required {a.get('threshold')}; {_verdict(a)}"
            after = f"{b.get('kind')}; required {b.get('threshold')}; {_verdict(b)}"
            if "statement" in fields:
                before += f"; tests: {a.get('statement')}"
                after += f"; tests: {b.get('statement')}"
            out += [f"* - {_words(cid)}", f"  - {', '.join(fields)}", f"  - {_cell(before)}", f"  - {_cell(after)}",
                    f"  - {_words(entry)}"]
        for c in removed:
            out += [f"* - {_words(c['id'])}", "  - removed", f"  - {_cell(c.get('kind', 'claim'))}; {_verdict(c)}",
                    "  - —", "  - —"]
        for c in added:
            out += [f"* - {_words(c['id'])}", "  - added", "  - —",
                    f"  - {_cell(c.get('kind'))}; required {_cell(c.get('threshold'))}; {_verdict(c)}",
                    f"  - {_words(c.get('ledger') or c.get('control_of') and 'baseline of ' + c['control_of'] or '—')}"]
        out += ["```", "````", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("rev")
    p.add_argument("--results", default=str(ROOT / "book" / "results"))
    p.add_argument("--figures", nargs="*", default=list(FIGURES))
    a = p.parse_args(argv)
    print(markdown(a.rev, Path(a.results), a.figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

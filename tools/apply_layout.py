"""Apply the mechanical part of notebooks/LAYOUT.md to figure notebooks (idempotent: a second run changes nothing).

    python tools/apply_layout.py                  # every notebooks/*.ipynb
    python tools/apply_layout.py --check          # exit 1 and list what would change, write nothing
    python tools/apply_layout.py path/to/nb.ipynb ...

For each notebook it:

* tags the ``parameters`` cell ``hide-input`` and the cell that constructs the ``Run`` ``hide-input`` (it prints
  nothing: the provenance is in the folded "How this page was computed" block);
* tags the claim-check cell (``# NBVAL_CHECK_OUTPUT`` ... ``print(run.finish())``) ``remove-cell``: nbval still
  executes and compares it, the reader sees the verdicts in the tables instead of a second printout;
* makes sure the short answer (``{glue:md} answer``) follows the title cell, and the rest of it
  (``{glue:md} answer-details``) the headline figure;
* makes sure the chapter's claim sections and its closing block exist (appended at the end where missing; their
  place is the author's: the claims right after the headline figure, the block before the Summary): one paragraph per
  claim of the ledger whose chapter this is (label ``(claim-<id>)=``, heading, ``{glue:md} claim-<id>``), and one
  folded block with how each claim is tested, every check (``{glue:md} verdicts``), the seed audit
  (``{glue:md} audit``) and the provenance (``{glue:md} provenance``); and that a ``remove-cell`` code cell after the
  claim checks glues them (``chapter.glue_chapter``). The chapter's Summary and Exercises are the author's.

It leaves everything else as it is (the headline figure and the text are the author's). Cells it inserts have no
outputs until the notebook is executed again, and the strict book build fails on a glue key until then: re-execute
the notebooks after applying it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from softmax_icl.book import ledger as lg  # noqa: E402  (torch-free)

RUN_CALL = re.compile(r"\bRun(\.from_notebook)?\s*\(")
FINISH_CALL = re.compile(r"\brun\.finish\(\)")


def glue_md(key: str) -> str:
    return f"```{{glue:md}} {key}\n:format: myst\n```"


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _tag(cell: dict, *tags: str) -> bool:
    current = cell.setdefault("metadata", {}).setdefault("tags", [])
    missing = [t for t in tags if t not in current]
    current.extend(missing)
    return bool(missing)


def _untag(cell: dict, *tags: str) -> bool:
    current = cell.setdefault("metadata", {}).setdefault("tags", [])
    gone = [t for t in tags if t in current]
    for t in gone:
        current.remove(t)
    return bool(gone)


def _markdown(source: str) -> dict:
    return {"cell_type": "markdown", "metadata": {}, "source": source.splitlines(keepends=True)}


def _code(source: str, tags: list[str]) -> dict:
    return {"cell_type": "code", "execution_count": None, "metadata": {"tags": tags}, "outputs": [],
            "source": source.splitlines(keepends=True)}


def heading(label: str) -> str:
    """A ledger label as a heading: its first word capitalised, unless that word is a symbol (``n → ∞``, ``σ``)."""
    first = label.split(" ")[0]
    return label[0].upper() + label[1:] if len(first) > 1 and first[:2].isalpha() else label


def closing_cells(figure: str) -> list[str]:
    """The markdown of the closing sections, in order (see the module docstring)."""
    mine = [e for e in lg.load().entries if e.chapter == figure]
    out = []
    if mine:
        out.append("## What the authors claim\n\nEach claim tested here, in the authors' words and then in plain terms; its "
                   "verdict is in the list above, how it is\ntested in the folded block at the end of the chapter.")
        out += [f"({e.anchor})=\n### {heading(e.label)}\n\n{glue_md(f'claim-{e.id}')}" for e in mine]
        out.append(f"```{{glue:figure}} seeds\n:name: fig-{figure}-seeds\n\nThe trained units behind each claim "
                   "tested here.\n```")
    out.append("## How the verdicts were reached\n\n``````{dropdown} How each claim is tested, every check, the seed "
               "audit, the provenance\n:class-container: checks-appendix\n:class-body: sd-p-0\n\n"
               + "\n\n".join(glue_md(k) for k in ("verdicts", "audit", "provenance")) + "\n``````")
    return out


def apply(nb: dict, figure: str) -> list[str]:
    """Apply the layout to the notebook ``nb`` of ``figure`` (a dict, changed in place); returns what changed."""
    cells = nb["cells"]
    changes: list[str] = []
    for cell in cells:
        if cell["cell_type"] != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        src = _source(cell)
        if "parameters" in tags and _tag(cell, "hide-input"):
            changes.append("parameters cell: hide-input")
        if "injected-parameters" not in tags and "parameters" not in tags and RUN_CALL.search(src) \
                and re.search(r"^\s*run\s*=", src, re.M):
            if _tag(cell, "hide-input") | _untag(cell, "hide-output"):
                changes.append("Run cell: hide-input")
        if FINISH_CALL.search(src) and _tag(cell, "remove-cell"):
            changes.append("claim-check cell: remove-cell")

    if not any(c["cell_type"] == "markdown" and "{glue:md} answer" in _source(c) for c in cells):
        title = next((i for i, c in enumerate(cells)
                      if c["cell_type"] == "markdown" and _source(c).lstrip().startswith("# ")), None)
        if title is None:
            changes.append("NOT DONE: no title cell ('# ...') to put the answer under")
        else:
            cells.insert(title + 1, _markdown(glue_md("answer")))
            changes.append("answer inserted after the title cell")

    if not any(c["cell_type"] == "markdown" and "{glue:md} answer-details" in _source(c) for c in cells):
        head = next((i for i, c in enumerate(cells)
                     if c["cell_type"] == "markdown" and "{glue:figure} headline" in _source(c)), None)
        if head is None:
            changes.append("NOT DONE: no headline figure ('{glue:figure} headline') to put the answer's rest under")
        else:
            cells.insert(head + 1, _markdown(glue_md("answer-details")))
            changes.append("answer details inserted after the headline figure")

    if not any(c["cell_type"] == "code" and "glue_chapter(" in _source(c) for c in cells):
        finish = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and FINISH_CALL.search(_source(c))]
        if not finish:
            changes.append("NOT DONE: no cell calls run.finish() to put chapter.glue_chapter(run, FIGURES) after")
        else:
            glue = ("from softmax_icl.book import chapter\nfrom softmax_icl.figures import FIGURES\n\n"
                    "chapter.glue_chapter(run, FIGURES)")
            cells.insert(finish[-1] + 1, _code(glue, ["remove-cell"]))
            changes.append("chapter.glue_chapter(run, FIGURES) cell inserted after the claim checks")

    wanted = closing_cells(figure)
    have = [_source(c) for c in cells if c["cell_type"] == "markdown"]
    for text in wanted:
        key = text.split("{glue:md} ")[1].split("\n")[0] if "{glue:md} " in text else text.splitlines()[0]
        if not any(f"{{glue:md}} {key}\n" in h or h.startswith(key) for h in have):
            cells.append(_markdown(text))
            changes.append(f"closing section added: {key}")
    return changes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: notebooks/*.ipynb")
    parser.add_argument("--check", action="store_true", help="report what would change, write nothing")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(p for p in (ROOT / "notebooks").glob("*.ipynb")   # not a run in progress
                                     if not p.name.startswith(".") and not p.name.endswith(".failed.ipynb"))
    pending = False
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        changes = apply(nb, path.stem)
        for change in changes:
            print(f"{path.name}: {change}")
        if not [c for c in changes if not c.startswith("NOT DONE")]:
            if not changes:
                print(f"{path.name}: already laid out")
            continue
        pending = True
        if not args.check:
            # nbformat's own layout (indent 1, sorted keys, final newline), so a diff shows only the change
            path.write_text(json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return 1 if (args.check and pending) else 0


if __name__ == "__main__":
    sys.exit(main())

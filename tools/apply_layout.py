"""Apply the mechanical part of notebooks/LAYOUT.md to figure notebooks (idempotent: a second run changes nothing).

    python tools/apply_layout.py                  # every notebooks/*.ipynb
    python tools/apply_layout.py --check          # exit 1 and list what would change, write nothing
    python tools/apply_layout.py path/to/nb.ipynb ...

For each notebook it:

* tags the ``parameters`` cell ``hide-input`` (collapsed, still executed);
* tags the cell that constructs the ``Run`` (``Run(...)`` or ``Run.from_notebook(...)``) ``hide-input`` and
  ``hide-output`` (its provenance print is collapsed too);
* inserts the verdict-box markdown cell (``{glue:md}`` of ``chapter.VERDICT_KEY``) right after the title cell;
* inserts a ``chapter.glue_verdicts(run)`` code cell, tagged ``remove-cell``, right after the cell that prints
  ``run.finish()``;
* inserts, right after that, a short markdown cell and a ``print(chapter.audit_summary(run))`` code cell: the seed
  audit's verdict on the checks (which of them flip under fresh seeds, with their verdicts and values).

It leaves everything else (sources, outputs, other metadata) as it is. The inserted code cell has no outputs
until the notebook is executed again, and the book's strict build fails on the verdict box until then
(``glue key 'verdicts' not found``): re-execute the notebooks after applying it.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VERDICT_KEY = "verdicts"  # softmax_icl.chapter.VERDICT_KEY (not imported: this script needs no torch)
VERDICT_CELL = f"```{{glue:md}} {VERDICT_KEY}\n:format: myst\n```"
GLUE_CELL = "from softmax_icl import chapter\n\nchapter.glue_verdicts(run)"
AUDIT_TEXT = ("**Stability under fresh seeds.** The verdicts above are those of one run. The seed audit reruns the "
              "chapter with seeds that no committed run used (`softmax-icl audit`); the last column of the verdict "
              "box says, for each check, in how many fresh seed sets it keeps its verdict, and the lines below name "
              "the checks that do not, with their verdict and value in each set. A claim among them is counted as "
              "*inconclusive* in the results summary, neither reproduced nor refuted.")
AUDIT_CELL = "print(chapter.audit_summary(run))"
RUN_CALL = re.compile(r"\bRun(\.from_notebook)?\s*\(")
FINISH_CALL = re.compile(r"\brun\.finish\(\)")


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _tag(cell: dict, *tags: str) -> bool:
    current = cell.setdefault("metadata", {}).setdefault("tags", [])
    missing = [t for t in tags if t not in current]
    current.extend(missing)
    return bool(missing)


def _markdown(source: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source.splitlines(keepends=True)}


def _code(source: str, tags: list[str], cell_id: str) -> dict:
    return {"cell_type": "code", "execution_count": None, "id": cell_id, "metadata": {"tags": tags},
            "outputs": [], "source": source.splitlines(keepends=True)}


def apply(nb: dict) -> list[str]:
    """Apply the layout to the notebook ``nb`` (a dict, changed in place); returns what was changed."""
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
                and re.search(r"^\s*run\s*=", src, re.M) and _tag(cell, "hide-input", "hide-output"):
            changes.append("Run cell: hide-input, hide-output")

    if not any(c["cell_type"] == "markdown" and f"{{glue:md}} {VERDICT_KEY}" in _source(c) for c in cells):
        title = next((i for i, c in enumerate(cells)
                      if c["cell_type"] == "markdown" and _source(c).lstrip().startswith("# ")), None)
        if title is None:
            changes.append("NOT DONE: no title cell ('# ...') to put the verdict box under")
        else:
            cells.insert(title + 1, _markdown(VERDICT_CELL, "verdict-box"))
            changes.append("verdict box inserted after the title cell")

    if not any(c["cell_type"] == "code" and "glue_verdicts(" in _source(c) for c in cells):
        finish = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and FINISH_CALL.search(_source(c))]
        if not finish:
            changes.append("NOT DONE: no cell calls run.finish() to put chapter.glue_verdicts(run) after")
        else:
            cells.insert(finish[-1] + 1, _code(GLUE_CELL, ["remove-cell"], "glue-verdicts"))
            changes.append("chapter.glue_verdicts(run) cell inserted after the run.finish() cell")

    if not any(c["cell_type"] == "code" and "audit_summary(" in _source(c) for c in cells):
        glue = [i for i, c in enumerate(cells) if c["cell_type"] == "code" and "glue_verdicts(" in _source(c)]
        if glue:
            cells[glue[-1] + 1:glue[-1] + 1] = [_markdown(AUDIT_TEXT, "audit-text"),
                                                 _code(AUDIT_CELL, [], "audit-summary")]
            changes.append("seed-audit cells inserted after the glue cell")
    if nb.get("nbformat", 4) == 4 and nb.get("nbformat_minor", 0) < 5:  # cell ids exist from nbformat 4.5 on
        for cell in cells:
            if cell.get("id") in ("verdict-box", "glue-verdicts", "audit-text", "audit-summary"):
                del cell["id"]
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
        text = path.read_text(encoding="utf-8")
        nb = json.loads(text)
        changes = apply(nb)
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

"""The appendix page "More figures" (``book/more_figures.md``): the figures a chapter's run draws beyond the papers'
own (findings of ours, diagnostics of the runs), so that a chapter shows its figures without a click and stays short.

A figure goes here when its notebook cell carries the tag ``more-figures`` (with ``remove-output``: the chapter does
not show it): the run still draws and saves it (``book/figures/<figure>_<name>.png``), and this page shows the saved
image with the caption of the cell's metadata (``mystnb.figure``), under the same name, so the chapter's references
to it (``{ref}`the scan <fig-norm_scaling-scan>```) land here."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

from ..profiles import Figure

#: The tag of a notebook cell whose figure this page shows instead of the chapter.
TAG = "more-figures"
_SAVE = re.compile(r'run\.savefig\(\s*fig\s*,\s*"(\w+)"')
# A role whose target is a path relative to notebooks/ (a {doc} without a folder, a {download} into ../book/).
_DOC = re.compile(r"\{doc\}`([^`<]*<)?([\w-]+)(>?)`")


def _relocate(text: str) -> str:
    """A caption written for ``notebooks/`` as it reads from ``book/``."""
    text = text.replace("../book/", "")
    return _DOC.sub(lambda m: f"{{doc}}`{m.group(1) or ''}../notebooks/{m.group(2)}{m.group(3)}`", text)


def moved_figures(notebook: Path) -> list[tuple[str, str, str]]:
    """``(name, label, caption)`` of every figure of ``notebook`` whose cell carries :data:`TAG`, in order."""
    out = []
    for cell in json.loads(notebook.read_text(encoding="utf-8"))["cells"]:
        meta = cell.get("metadata", {})
        if cell["cell_type"] != "code" or TAG not in meta.get("tags", []):
            continue
        found = _SAVE.search("".join(cell["source"]))
        fig = (meta.get("mystnb") or {}).get("figure") or {}
        if found is None or not fig.get("name") or not fig.get("caption"):
            raise ValueError(f"{notebook.name}: a cell tagged {TAG!r} must save one figure (run.savefig(fig, "
                             "\"NAME\")) and carry its name and caption (metadata mystnb.figure)")
        out.append((found.group(1), fig["name"], fig["caption"]))
    return out


def more_figures_markdown(notebooks: Path, registry: Mapping[str, Figure], titles: Mapping[str, str]) -> str:
    """The page: per chapter (``titles``: figure -> chapter title) its moved figures, from the saved images."""
    out = ["# More figures", "",
           "Figures each chapter's run draws beyond the papers' own: findings of ours and diagnostics of the runs, at "
           "the default scale. Each chapter links here where its text uses one; the chapters show the papers' figures "
           "themselves.", ""]
    for name, fig in registry.items():
        moved = moved_figures(notebooks / fig.notebook) if (notebooks / fig.notebook).is_file() else []
        if not moved:
            continue
        out += [f"## {titles.get(name, fig.title)}", "", f"From the chapter {{doc}}`../notebooks/{name}`.", ""]
        for figure, label, caption in moved:
            alt = re.sub(r"[`{}$\\*]", "", caption.split("\n")[0]).split(". ")[0][:150]
            out += [f"```{{figure}} figures/{name}_{figure}.png", f":name: {label}", f":alt: {alt}", "",
                    _relocate(caption), "```", ""]
    return "\n".join(out).rstrip() + "\n"

"""``softmax-icl build --profile paper --publish``: a paper-profile build's records and headline figures beside the
book's (``book/results/paper/``, ``book/figures/paper/``), for the results appendix "Results at both scales" and the chapters'
scale switch."""

from __future__ import annotations

import json
from pathlib import Path

from ..profiles import ParameterError


def headline_name(notebook: Path) -> str:
    """The name under which a chapter saves its headline figure: the ``NAME`` of its
    ``run.savefig(fig, "NAME", glue="headline")`` (``headline`` when the notebook does not say)."""
    import re

    text = notebook.read_text() if notebook.is_file() else ""
    m = re.search(r'savefig\(fig, \\?"(\w+)\\?", glue=\\?"headline\\?"\)', text)
    return m.group(1) if m else "headline"


def glued_answer(notebook: Path) -> str | None:
    """The chapter's answer box as the run glued it (``answer``, :func:`softmax_icl.book.chapter.glue_chapter`) in
    its executed ``notebook``, as MyST; None where the notebook has none."""
    if not notebook.is_file():
        return None
    for cell in json.loads(notebook.read_text(encoding="utf-8")).get("cells", []):
        for out in cell.get("outputs", []):
            if ((out.get("metadata") or {}).get("scrapbook") or {}).get("name") == "answer":
                data = out.get("data") or {}
                text = data.get("application/papermill.record/text/markdown") or data.get("text/markdown")
                return "".join(text) if isinstance(text, list) else text
    return None


def publish_records(root: Path, names: list[str], profile: str) -> list[Path]:
    """Copy the records of a ``profile`` build (``runs/<figure>-<profile>/results/``) to ``book/results/<profile>/``,
    where the results appendix "Results at both scales" reads them (:mod:`softmax_icl.book.scales`), with the answer box
    the run glued (``<figure>.answer.md``, :func:`glued_answer`, for the chapter's paper-scale tab), and its headline figure
    (the one the book's notebook glues as ``headline``: :func:`headline_name`) to
    ``book/figures/<profile>/<figure>_headline.png``, which the chapter shows
    beside the default scale's, and every other figure of the run under its own name
    (``book/figures/<profile>/<figure>_<name>.png``, for the chapters' figures whose verdict changes with the scale;
    figures of an earlier publish that the run no longer draws are removed); the book's own records and chapters are
    not touched."""
    from ..base import atomic_write_bytes
    from .scales import PAPER_SUBDIR

    out = []
    for name in names:
        run = root / "runs" / f"{name}-{profile}"
        src = run / "results" / f"{name}.json"
        rec = json.loads(src.read_text())
        if rec.get("profile") != profile:
            raise ParameterError(f"{src} is a record of profile {rec.get('profile')!r}, not {profile!r}")
        dest = root / "book" / "results" / PAPER_SUBDIR / f"{name}.json"
        atomic_write_bytes(dest, src.read_bytes())
        out.append(dest)
        # the run's own answer box, which the chapter's paper-scale tab shows beside its figure
        answer, said = glued_answer(run / f"{name}.ipynb"), dest.with_name(f"{name}.answer.md")
        if answer:
            atomic_write_bytes(said, (answer.rstrip() + "\n").encode())
            out.append(said)
        else:
            said.unlink(missing_ok=True)
        figure = run / "figures" / f"{name}_{headline_name(root / 'notebooks' / f'{name}.ipynb')}.png"
        figures = root / "book" / "figures" / PAPER_SUBDIR
        alias = f"{name}_headline.png"               # what the chapter's switch shows as the headline
        drawn = [f for f in sorted((run / "figures").glob(f"{name}_*.png")) if f.name != alias] \
            if (run / "figures").is_dir() else []
        for old in figures.glob(f"{name}_*.png") if figures.is_dir() else []:
            if old.name != alias and old.name not in {f.name for f in drawn}:
                old.unlink()
        for f in drawn:
            figures.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(figures / f.name, f.read_bytes())
            out.append(figures / f.name)
        if figure.is_file():
            figures.mkdir(parents=True, exist_ok=True)
            atomic_write_bytes(figures / alias, figure.read_bytes())
            out.append(figures / alias)
    return out

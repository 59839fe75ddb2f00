"""Sphinx hooks of the book, loaded through ``sphinx: local_extensions`` in _config.yml.

* **MathJax offline.** MathJax 3 comes from the ``django-static-mathjax`` wheel (MathJax's own ``es5``
  distribution, version pinned in pyproject.toml, installed by ``make setup``); its ``es5`` folder is copied into
  the HTML output as ``_static/mathjax/`` and ``mathjax_path`` points there, so no page needs the network. (Not in
  the book's ``_static/``: Jupyter Book adds every ``.js`` file found there to every page.)
* **API pages.** autosummary writes one page per module into ``book/api/`` at every build; pages of modules that
  no longer exist would stay behind and fail to import, so the folder is emptied first, at config-inited before
  sphinx-external-toc lists the files outside the ToC (``only_build_toc_files``) to exclude: the pages autosummary
  then writes at builder-inited are not on that list and are built, reached through the API page's toctree.
* **Docstrings are plain text with maths**, not reStructuredText: ``|x|`` there is a norm, not a substitution
  reference, so a ``|`` that does not start a table row is escaped before docutils reads it.
* **Each script once.** sphinx-thebe registers its inline configuration script once per read phase; a second copy
  redeclares ``const THEBE_JS_URL`` and is a console error, so repeated scripts are dropped from each page.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

API_DIR = Path("book") / "api"
_BAR = re.compile(r"(?<!\\)\|")


def mathjax_source() -> Path:
    import mathjax  # the django-static-mathjax wheel (no Django needed to read its files)

    es5 = Path(mathjax.__file__).resolve().parent / "static" / "mathjax" / "es5"
    if not (es5 / "tex-chtml.js").is_file():
        raise RuntimeError(f"MathJax's tex-chtml.js is not in {es5}: reinstall with `make setup`")
    return es5


def copy_mathjax(app, exception) -> None:
    if app.builder.format != "html":
        return
    shutil.copytree(mathjax_source(), Path(app.outdir) / "_static" / "mathjax", dirs_exist_ok=True)


def clear_generated_pages(app, config=None) -> None:
    for page in (Path(app.srcdir) / API_DIR).glob("*.rst"):
        page.unlink()


def escape_bars(app, what, name, obj, options, lines: list[str]) -> None:
    for i, line in enumerate(lines):
        if "|" in line and not line.lstrip().startswith(("|", "+")):
            lines[i] = _BAR.sub(r"\\|", line)


def nobreak_summary(app, what, name, obj, options, lines: list[str]) -> None:
    """A module's first line (its one-line summary in the API index's table) with word-internal hyphens non-breaking,
    outside ``code``: a table cell must not split a hyphenated word over two lines."""
    if what == "module" and lines:
        parts = re.split(r"(``[^`]*``)", lines[0])
        lines[0] = "".join(p if p.startswith("``") else re.sub(r"(?<=\w)-(?=\w)", "\u2011", p) for p in parts)


def unique_scripts(app, pagename, templatename, context, doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for script in scripts:
        # an inline script is registered once with filename None and once with '' (sphinx-thebe): same script
        filename = getattr(script, "filename", script) or ""
        key = (str(filename), tuple(sorted((k, str(v)) for k, v in getattr(script, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            kept.append(script)
    scripts[:] = kept


def setup(app):
    mathjax_source()  # fail at the start of the build, not after it, when MathJax is not installed
    app.connect("config-inited", clear_generated_pages, priority=100)  # before sphinx-external-toc (900)
    app.connect("autodoc-process-docstring", escape_bars)
    app.connect("autodoc-process-docstring", nobreak_summary)
    # first: a handler that returns a template name ends html-page-context (emit_firstresult) for later ones
    app.connect("html-page-context", unique_scripts, priority=1)
    app.connect("build-finished", copy_mathjax)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

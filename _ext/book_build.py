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
* **No path of the builder's machine.** A module constant computed from the package's location
  (``LEDGER_PATH = ROOT / "book" / "claims.yml"``) or from the interpreter (``sys.executable``) has a value that
  names the folders of whoever built the book; its page shows the assignment's source text instead of that value
  (and ``autodoc_preserve_defaults`` in _config.yml does the same for default arguments), so the published pages are
  the same wherever the book is built. The notebooks' copies offered for download (``_sources/``) keep papermill's
  ``input_path`` and ``output_path`` as the notebook's own path in the book, not the folder it was executed in.
* **Each script once.** sphinx-thebe registers its inline configuration script once per read phase; a second copy
  redeclares ``const THEBE_JS_URL`` and is a console error, so repeated scripts are dropped from each page.
"""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import shutil
import sys
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


def relative_notebook_paths(app, exception) -> None:
    """Papermill's record of where a notebook was executed, in the HTML's copy of it, as its path in the book."""
    if exception is not None or app.builder.format != "html":
        return
    sources = Path(app.outdir) / "_sources"
    for nb in sources.rglob("*.ipynb"):
        data = json.loads(nb.read_text(encoding="utf-8"))
        pm = data.get("metadata", {}).get("papermill", {})
        changed = False
        for key in ("input_path", "output_path"):
            if isinstance(pm.get(key), str) and Path(pm[key]).is_absolute():
                pm[key] = (nb.parent.relative_to(sources) / Path(pm[key]).name).as_posix()
                changed = True
        if changed:
            nb.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


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


def machine_paths(srcdir) -> list[str]:
    """Absolute folders of the machine that builds the book: the checkout, the Python environment, the home folder."""
    found = {str(Path(p).resolve()) for p in (srcdir, sys.prefix, sys.exec_prefix, Path.home())}
    found |= {str(p) for p in (srcdir, sys.prefix, sys.exec_prefix, Path.home())}
    return sorted((p for p in found if p not in ("", os.sep)), key=len, reverse=True)


def assignment_source(owner, name: str) -> str | None:
    """The source text of the right-hand side of ``name = ...`` in the body of ``owner`` (a module or a class)."""
    try:
        source = inspect.getsource(owner)
    except (OSError, TypeError):
        return None
    try:
        body = ast.parse(inspect.cleandoc(source) if inspect.isclass(owner) else source).body
    except SyntaxError:
        return None
    if inspect.isclass(owner) and body and isinstance(body[0], ast.ClassDef):
        source, body = inspect.cleandoc(source), body[0].body
    for node in body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AnnAssign) and node.value is not None else []
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            text = ast.get_source_segment(source, node.value)
            return " ".join(text.split()) if text else None
    return None


class _SourceValue:
    """Mixin of autodoc's data and attribute documenters: a value whose repr names a folder of this machine is shown
    as the source text of its assignment (or not at all where that is not found)."""

    def _names_a_machine_path(self) -> bool:
        from sphinx.util.inspect import object_description
        try:
            text = object_description(self.object)
        except ValueError:
            return False
        return any(p in text for p in machine_paths(self.env.srcdir))

    def should_suppress_value_header(self) -> bool:
        return super().should_suppress_value_header() or self._names_a_machine_path()

    def add_directive_header(self, sig: str) -> None:
        super().add_directive_header(sig)
        if (self.options.annotation or self.options.no_value or self.should_suppress_directive_header()
                or not self._names_a_machine_path()):
            return
        text = assignment_source(self.parent, self.objpath[-1])
        if text and not any(p in text for p in machine_paths(self.env.srcdir)):
            self.add_line("   :value: " + text, self.get_sourcename())


def setup(app):
    mathjax_source()  # fail at the start of the build, not after it, when MathJax is not installed
    app.connect("config-inited", clear_generated_pages, priority=100)  # before sphinx-external-toc (900)
    app.connect("autodoc-process-docstring", escape_bars)
    app.connect("autodoc-process-docstring", nobreak_summary)
    # first: a handler that returns a template name ends html-page-context (emit_firstresult) for later ones
    app.connect("html-page-context", unique_scripts, priority=1)
    app.connect("build-finished", copy_mathjax)
    app.connect("build-finished", relative_notebook_paths)
    from sphinx.ext.autodoc import AttributeDocumenter, DataDocumenter
    for base in (DataDocumenter, AttributeDocumenter):
        app.add_autodocumenter(type(base.__name__, (_SourceValue, base), {}), override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

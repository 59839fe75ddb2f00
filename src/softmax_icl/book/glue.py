"""myst-nb's glue: a notebook's image or markdown stored under a key, for a ``{glue:figure}`` or ``{glue:md}``
higher up the page (``notebooks/LAYOUT.md``). Outside a notebook kernel nothing is glued."""

from __future__ import annotations


def glue_image(key: str, png_path) -> None:
    """Glue the saved PNG at ``png_path`` (metadata included) under ``key`` for a ``{glue:figure}`` directive, shown
    as a notebook shows a figure (:func:`softmax_icl.plotting.shown_image`); nothing is shown where the cell runs."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    if get_ipython() is None:
        return
    from myst_nb import glue

    from ..plotting import shown_image
    glue(key, shown_image(png_path), display=False)


def glue_markdown(key: str, text: str) -> None:
    """Glue ``text`` as ``text/markdown`` under ``key`` (myst-nb's ``glue`` with ``display=False``)."""
    try:
        from IPython import get_ipython
        from IPython.display import Markdown
    except ImportError:  # no IPython: nothing to glue into
        return
    if get_ipython() is None:
        return
    try:
        from myst_nb import glue
    except ImportError:  # the same output myst-nb writes, so the book renders it
        from IPython.display import display

        display({"application/papermill.record/text/markdown": text}, raw=True,
                metadata={"scrapbook": {"name": key, "mime_prefix": "application/papermill.record/"}})
        return
    glue(key, Markdown(text), display=False)

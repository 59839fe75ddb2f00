"""The book's figure style, made for its content column, and saving a figure as PNG and PDF.

Every figure is drawn for the column it is read in: the book's content column is :data:`COLUMN_PX` CSS px wide
(at a 1400-px and an 800-px browser window), a notebook shows a figure at :data:`NOTEBOOK_DPI` CSS px per inch,
scaled down to the column when wider. A figure ``width_in`` inches wide, displayed ``shown_px`` CSS px wide, shows
text of ``font_pt`` points at

    displayed_px = font_pt / 72 × dpi × shown_px / (width_in × dpi) = font_pt × shown_px / (72 × width_in),

whatever the dpi it was saved at. :data:`COLUMN_WIDTH_IN` is the width of a figure that fills the column; at it, the
smallest font (:data:`SMALLEST_PT`) shows at :data:`MIN_TEXT_PX` CSS px or more at both window widths
(:func:`max_width_in`). The house rules a chapter's ``plots.py`` follows:

* a figure is at most :data:`COLUMN_WIDTH_IN` wide (:func:`subplots`) with at most :data:`MAX_PANELS_PER_ROW`
  panels a row;
* text uses the style's sizes (:func:`use_style`; nothing smaller than :data:`SMALLEST_PT`);
* one legend per figure (:func:`figure_legend`, or a single panel's), panel titles of one short line (details
  belong in the caption);
* line colours come from :data:`MODEL_COLORS`, :data:`QUALITATIVE` or :func:`sequential`, every one with a
  contrast of at least :data:`MIN_CONTRAST` against white (:func:`contrast_on_white`).

:func:`save` writes the PNG with the metadata a browser test needs to check the displayed text size
(:func:`read_png_meta`, :func:`min_font_pt`, :func:`displayed_text_px`).
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib
import matplotlib.colors as mcolors
import matplotlib.pyplot as plt
import matplotlib.ticker as mticker
import numpy as np
from cycler import cycler
from matplotlib.backend_bases import RendererBase

#: Width in CSS px an image can take in the book's content column (sphinx-book-theme 1.3), by browser-window width
#: in CSS px: a chapter figure's ``img`` (``max-width: 100%`` inside its ``figure``) measured in Chromium on the
#: built book. The column itself (``article.bd-article``'s content box) is 772 and 721 px.
COLUMN_PX = {1400: 756, 800: 705}
#: The smallest size, in CSS px, at which a figure's text may be displayed.
MIN_TEXT_PX = 10
#: CSS px per inch at which a notebook shows a figure (Matplotlib's ``figure.dpi``; the inline backend and
#: :func:`save` show it at this size, which the browser scales down to the column's width where wider).
NOTEBOOK_DPI = 110
#: Pixels per inch of the saved PNG (``savefig.dpi``): sharper than the display, so a reader can zoom.
SAVE_DPI = 150
#: Font sizes, points: axis labels, panel titles and annotations; tick labels and legends (the smallest).
LABEL_PT = 9
SMALLEST_PT = 8
#: At most this many panels side by side.
MAX_PANELS_PER_ROW = 3
#: Smallest contrast ratio (WCAG 2.1) of a line colour against the white background: WCAG's minimum for graphical
#: objects a reader needs to see (success criterion 1.4.11).
MIN_CONTRAST = 3.0


def max_width_in(font_pt: float = SMALLEST_PT, column_px: float = min(COLUMN_PX.values()),
                 text_px: float = MIN_TEXT_PX) -> float:
    """The widest figure, in inches, whose ``font_pt`` text still shows at ``text_px`` CSS px when the figure is
    scaled to fill a ``column_px``-wide column: ``font_pt × column_px / (72 × text_px)``."""
    return font_pt * column_px / (72 * text_px)


#: Width in inches of a figure that fills the column: shown unscaled in the 1400-px window's column (its width at
#: NOTEBOOK_DPI), and no wider than :func:`max_width_in` (so its smallest text is >= MIN_TEXT_PX at both windows).
COLUMN_WIDTH_IN = round(min(COLUMN_PX[1400] / NOTEBOOK_DPI, max_width_in()), 2)

#: Colours shared by all figures (each at least MIN_CONTRAST against white).
MODEL_COLORS = {"softmax": "#1f77b4", "linear": "#d62728", "oracle": "#555555", "gd": "#2ca02c",
                "kernel_gd": "#9467bd"}
#: Colours for categories without a colour of their own: Okabe and Ito's colour-blind-safe palette without its
#: three light colours (orange, sky blue, yellow: contrast below 3 on white), with darker hues in their place.
QUALITATIVE = ("#0072b2", "#d55e00", "#009e73", "#cc79a7", "#555555", "#8c564b", "#9467bd", "#b8860b")
#: The part of Matplotlib's 'plasma' map darker than MIN_CONTRAST on white (its yellow end is nearly invisible).
SEQUENTIAL_MAP, SEQUENTIAL_RANGE = "plasma", (0.0, 0.62)


#: Seaborn's ``whitegrid`` style at its ``paper`` context: the settings ``seaborn.set_theme(context="paper",
#: style="whitegrid")`` (seaborn 0.13) makes, written out so that drawing a figure does not import seaborn and pandas
#: (1.5-1.7 s of every notebook's start on the book's machine). Left out: the sizes and the colour cycle, which
#: :func:`use_style` sets itself, and seaborn's default colour map ('rocket', which only exists once seaborn is
#: imported; every image of the book names its own map). ``tests/test_plotting.py`` holds it against seaborn's.
WHITEGRID_PAPER = {
    "axes.axisbelow": True, "axes.edgecolor": ".8", "axes.facecolor": "white", "axes.grid": True,
    "axes.labelcolor": ".15", "axes.linewidth": 1.0, "axes.spines.bottom": True, "axes.spines.left": True,
    "axes.spines.right": True, "axes.spines.top": True, "figure.facecolor": "white", "font.family": "sans-serif",
    "font.sans-serif": ["Arial", "DejaVu Sans", "Liberation Sans", "Bitstream Vera Sans", "sans-serif"],
    "grid.color": ".8", "grid.linestyle": "-", "grid.linewidth": 0.8, "lines.solid_capstyle": "round",
    "patch.edgecolor": "w", "patch.force_edgecolor": True, "patch.linewidth": 0.8, "text.color": ".15",
    "xtick.bottom": False, "xtick.color": ".15", "xtick.direction": "out", "xtick.major.size": 4.8,
    "xtick.major.width": 1.0, "xtick.minor.size": 3.2, "xtick.minor.width": 0.8, "xtick.top": False,
    "ytick.color": ".15", "ytick.direction": "out", "ytick.left": False, "ytick.major.size": 4.8,
    "ytick.major.width": 1.0, "ytick.minor.size": 3.2, "ytick.minor.width": 0.8, "ytick.right": False,
}


def use_style() -> None:
    """The book's style: seaborn's 'whitegrid' (:data:`WHITEGRID_PAPER`), the sizes above, the qualitative palette as
    the colour cycle, and the constrained layout."""
    matplotlib.rcParams.update(WHITEGRID_PAPER)
    matplotlib.rcParams.update({
        "figure.dpi": NOTEBOOK_DPI, "savefig.dpi": SAVE_DPI, "savefig.bbox": "tight", "savefig.pad_inches": 0.04,
        "figure.constrained_layout.use": True, "axes.prop_cycle": cycler(color=QUALITATIVE),
        "font.size": LABEL_PT, "axes.labelsize": LABEL_PT, "axes.titlesize": LABEL_PT, "figure.titlesize": LABEL_PT,
        "figure.labelsize": LABEL_PT, "xtick.labelsize": SMALLEST_PT, "ytick.labelsize": SMALLEST_PT,
        "legend.fontsize": SMALLEST_PT, "legend.title_fontsize": SMALLEST_PT, "legend.frameon": False,
        "legend.handlelength": 1.8, "lines.linewidth": 1.4, "lines.markersize": 4,
        "axes.titlepad": 4.0, "axes.labelpad": 2.0})


def subplots(nrows: int = 1, ncols: int = 1, *, width: float = 1.0, row_height: float | None = None, **kwargs):
    """``plt.subplots`` at the column's width: ``width`` is the fraction of :data:`COLUMN_WIDTH_IN` the figure
    spans, ``row_height`` the height of a row of panels in inches (default: from the panels' width). At most
    :data:`MAX_PANELS_PER_ROW` columns. Returns ``(fig, axes)``; ``axes`` is a 2-D array unless ``squeeze``."""
    if ncols > MAX_PANELS_PER_ROW:
        raise ValueError(f"{ncols} panels a row: the column holds at most {MAX_PANELS_PER_ROW}")
    if not 0 < width <= 1:
        raise ValueError(f"width={width} is a fraction of the column's width, in (0, 1]")
    w = COLUMN_WIDTH_IN * width
    h = row_height if row_height is not None else min(0.8 * w / ncols + 0.5, 3.4)
    kwargs.setdefault("squeeze", False)
    return plt.subplots(nrows, ncols, figsize=(w, h * nrows), layout="constrained", **kwargs)


def figure_legend(fig: plt.Figure, axes=None, *, extra=(), ncols: int | None = None,
                  loc: str = "outside upper center", **kwargs):
    """The figure's one legend, above its panels: every labelled artist of ``axes`` (default: all of the
    figure's axes), each label once, in the order first drawn, then the labelled proxy artists ``extra`` (such as a
    ``matplotlib.patches.Patch`` for a shaded region). ``ncols`` defaults to as many as fit on a line."""
    handles, labels = [], []
    pairs = [pair for ax in np.ravel(fig.axes if axes is None else axes)
             for pair in zip(*ax.get_legend_handles_labels())]
    for h, lab in pairs + [(h, h.get_label()) for h in extra]:
        if lab not in labels:
            handles.append(h)
            labels.append(lab)
    if ncols is None:
        chars = max((len(lab) for lab in labels), default=1) + 4          # + the handle, in characters
        ncols = max(1, min(len(labels), int(fig.get_figwidth() * 72 / (0.55 * SMALLEST_PT * chars))))
    return fig.legend(handles, labels, loc=loc, ncols=ncols, **kwargs)


def band(ax, x, y, color, label: str | None = None, axis: int = -1, alpha: float = 0.2, **kwargs):
    """The mean of ``y`` over ``axis`` as a line, and its min-max range as a band when there is more than one."""
    y = np.asarray(y)
    line, = ax.plot(x, y.mean(axis), color=color, label=label, **kwargs)
    if y.shape[axis] > 1:
        ax.fill_between(x, y.min(axis), y.max(axis), color=color, alpha=alpha, lw=0)
    return line


def value_ticks(ax, values, axis: str = "x") -> None:
    """Ticks at exactly ``values``, labelled as plain numbers (no minor ticks): for a log axis over a few n."""
    values = list(values)
    getattr(ax, f"set_{axis}ticks")(values, [f"{v:g}" for v in values])
    getattr(ax, f"{axis}axis").set_minor_locator(mticker.NullLocator())


def log_axis(ax, axis: str = "y") -> None:
    """A log scale whose tick labels do not crowd, for the axis's range once the data are drawn: labels at powers
    of ten where it holds two or more; at 1, 2 and 5 times them where it spans a decade or more; at a few evenly
    spaced values where it spans less. Labels below powers of ten are plain numbers; minor ticks carry none."""
    getattr(ax, f"set_{axis}scale")("log")
    lo, hi = getattr(ax, f"get_{axis}lim")()
    target = getattr(ax, f"{axis}axis")
    if np.floor(np.log10(hi)) - np.ceil(np.log10(lo)) < 1:
        within_a_decade = hi / lo < 10
        target.set_major_locator(mticker.MaxNLocator(nbins=4, steps=[1, 2, 5, 10]) if within_a_decade
                                 else mticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        target.set_major_formatter(mticker.FuncFormatter(lambda v, _: f"{v:g}"))
    target.set_minor_formatter(mticker.NullFormatter())


def sequential(n: int) -> list:
    """``n`` colours in order along :data:`SEQUENTIAL_RANGE` of :data:`SEQUENTIAL_MAP` (one for each value of an
    ordered parameter, such as L), every one visible on white."""
    lo, hi = SEQUENTIAL_RANGE
    return [matplotlib.colormaps[SEQUENTIAL_MAP](v) for v in np.linspace(lo, hi, n)]


def qualitative(n: int) -> list:
    """``n`` colours for unordered categories (:data:`QUALITATIVE`, repeated when ``n`` exceeds it)."""
    return [QUALITATIVE[i % len(QUALITATIVE)] for i in range(n)]


def contrast_on_white(color) -> float:
    """WCAG 2.1 contrast ratio of ``color`` against white: 1.05 / (relative luminance + 0.05), from 1 to 21."""
    rgb = np.asarray(mcolors.to_rgb(color))
    lin = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return float(1.05 / (lin @ np.array([0.2126, 0.7152, 0.0722]) + 0.05))


def _draw_recording_text(fig: plt.Figure) -> list[float]:
    """Lay the figure out and draw it without rendering anything, recording the size in points of every text
    drawn (each line of a visible Text artist with characters in it)."""
    renderer = fig.canvas.get_renderer()
    sizes: list[float] = []

    def draw_text(gc, x, y, s, prop, angle, ismath=False, mtext=None):
        if str(s).strip():
            sizes.append(float(prop.get_size_in_points()))

    no_ops = {name: (lambda *args, **kwargs: None) for name in dir(RendererBase)
              if name.startswith("draw_") or name in ("open_group", "close_group")}
    no_ops["draw_text"] = no_ops["draw_tex"] = draw_text
    for name, fn in no_ops.items():
        setattr(renderer, name, fn)
    try:
        fig.draw(renderer)
    finally:
        for name in no_ops:
            delattr(renderer, name)
    return sizes


def min_font_pt(fig: plt.Figure) -> float:
    """The smallest font size, in points, of the text the figure draws.

    Every Text artist that is drawn counts (tick labels, axis labels, titles, legend texts and titles,
    annotations, colour-bar labels and ticks, figure titles); invisible ones, empty ones and tick labels outside
    the axes' view are not drawn and do not count. The size is the artist's font size: mathtext's sub- and
    superscripts are drawn smaller than it (70 %). Drawing runs the figure's layout engine; nothing is rendered.
    Returns ``inf`` for a figure without text.
    """
    return min(_draw_recording_text(fig), default=float("inf"))


def house_rule_breaches(fig: plt.Figure) -> list[str]:
    """What in ``fig`` breaks the house rules of this module (empty when nothing does): wider than
    :data:`COLUMN_WIDTH_IN`, more than :data:`MAX_PANELS_PER_ROW` panels in a row of a grid (colour bars are not
    panels), more than one legend, text smaller than :data:`SMALLEST_PT` (:func:`min_font_pt`, which lays the
    figure out)."""
    out = []
    if fig.get_figwidth() > COLUMN_WIDTH_IN + 0.01:
        out.append(f"{fig.get_figwidth():.2f} in wide, the column {COLUMN_WIDTH_IN} in")
    rows: dict[tuple, int] = {}
    for ax in fig.axes:
        spec = ax.get_subplotspec()
        if spec is not None and ax.get_visible():
            key = (id(spec.get_gridspec()), spec.rowspan.start)
            rows[key] = rows.get(key, 0) + 1
    if max(rows.values(), default=0) > MAX_PANELS_PER_ROW:
        out.append(f"{max(rows.values())} panels in a row")
    legends = len(fig.legends) + sum(ax.get_legend() is not None for ax in fig.axes)
    if legends > 1:
        out.append(f"{legends} legends")
    smallest = min_font_pt(fig)
    if smallest < SMALLEST_PT:
        out.append(f"text at {smallest:g} pt")
    return out


#: The PNG text chunks (tEXt) :func:`save` writes, with their units (values are decimal strings).
PNG_META_KEYS = {"width_in": "inches", "height_in": "inches", "dpi": "pixels per inch", "min_font_pt": "points"}


def read_png_meta(path) -> dict[str, float]:
    """The text-size metadata of a PNG written by :func:`save`, as floats.

    Keys (PNG tEXt chunks of the same names, decimal strings):

    * ``width_in``, ``height_in``: the saved image's size in inches (its size in pixels over ``dpi``, to within
      a pixel);
    * ``dpi``: the PNG's pixels per inch;
    * ``min_font_pt``: the smallest font size drawn in it, in points (:func:`min_font_pt`).

    A browser that shows the image ``shown_px`` CSS px wide displays its smallest text at
    ``min_font_pt / 72 × shown_px / width_in`` CSS px (:func:`displayed_text_px`); the book requires at least
    :data:`MIN_TEXT_PX`. Raises ``KeyError`` naming the missing keys for a PNG saved without them.
    """
    from PIL import Image

    with Image.open(path) as im:
        text = dict(getattr(im, "text", {}) or {})
    missing = [k for k in PNG_META_KEYS if k not in text]
    if missing:
        raise KeyError(f"{path} has no {', '.join(missing)} in its PNG text chunks (not saved by plotting.save)")
    return {k: float(text[k]) for k in PNG_META_KEYS}


def displayed_text_px(meta: dict, column_px: float, notebook_dpi: float = NOTEBOOK_DPI) -> float:
    """The CSS px size at which the smallest text of a saved figure (``meta`` from :func:`read_png_meta`) shows in
    a ``column_px``-wide column: the notebook shows it ``width_in × notebook_dpi`` wide, at most the column."""
    shown = min(column_px, meta["width_in"] * notebook_dpi)
    return meta["min_font_pt"] / 72 * shown / meta["width_in"]


def _inline() -> bool:
    """Whether figures are shown by Jupyter's inline backend (a notebook kernel)."""
    return "inline" in matplotlib.get_backend()


def save(fig: plt.Figure, directory: Path, name: str, show: bool = True) -> list[Path]:
    """Save ``fig`` as ``directory/name.png`` and ``.pdf`` (written aside, then moved into place); returns the paths.
    In a notebook (inline backend) the saved PNG is shown in place of the figure, ``width_in × NOTEBOOK_DPI`` CSS px
    wide, and the figure is closed (with ``show``).

    The PNG carries its size, dpi and smallest font as text chunks (:data:`PNG_META_KEYS`, read back by
    :func:`read_png_meta`). The layout is computed once: the constrained layout is run (recording the fonts
    drawn), then frozen, and the tight bounding box is measured once for both files. Left to themselves, the two
    ``savefig`` calls and the notebook's own rendering would each lay the figure out and measure every label
    twice (see ``benchmarks/plotting.py``).
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    smallest = min_font_pt(fig)                      # runs the layout engine once
    fig.set_layout_engine("none")                    # ... and keeps its positions for both files
    bbox = fig.get_tightbbox(fig.canvas.get_renderer()).padded(matplotlib.rcParams["savefig.pad_inches"])
    dpi = matplotlib.rcParams["savefig.dpi"]
    png_meta = {"width_in": f"{bbox.width:.4f}", "height_in": f"{bbox.height:.4f}", "dpi": f"{dpi:g}",
                "min_font_pt": f"{smallest:g}"}
    # both files are drawn aside (hidden names in the same folder) and moved into place once both exist: an
    # interrupted save leaves neither half a file nor a new PNG beside an old PDF
    aside = [p.with_name(f".{p.name}.{os.getpid()}.tmp") for p in paths]
    try:
        for p, tmp in zip(paths, aside):
            # no creation date in PDFs, so re-running a notebook does not change unchanged figures
            fig.savefig(tmp, format=p.suffix[1:], bbox_inches=bbox,
                        metadata=png_meta if p.suffix == ".png" else {"CreationDate": None})
        for p, tmp in zip(paths, aside):
            os.replace(tmp, p)
    finally:
        for tmp in aside:
            tmp.unlink(missing_ok=True)
    if show and _inline():
        from IPython.display import display
        display(shown_image(paths[0]))
        plt.close(fig)
    return paths


def shown_image(png_path):
    """The saved PNG (its metadata included) as an IPython image shown ``width_in × NOTEBOOK_DPI`` CSS px wide: how a
    notebook shows a figure, displayed in place or glued for a ``{glue:figure}``."""
    from IPython.display import Image

    return Image(data=Path(png_path).read_bytes(), format="png",
                 width=round(read_png_meta(png_path)["width_in"] * NOTEBOOK_DPI))

"""Every chapter figure, drawn at the smoke profile by tools/render_figures.py, keeps the house rules of
softmax_icl.plotting: no wider than the column, at most three panels a row, one legend, no text under 8 pt, and its
smallest text displayed at 10 CSS px or more in the book's column at both window widths; each chapter's headline
figure is one row of panels. (About a minute and a half of CPU for the five chapters, most of it their smoke
computation.) No text of a figure (title, label, legend, tick) shows notation that mathtext should typeset.
"""

import importlib.util
import re
import sys
from pathlib import Path

import matplotlib
import matplotlib.text

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from softmax_icl import plotting  # noqa: E402
from softmax_icl.book.run import Run  # noqa: E402
from softmax_icl.figures import FIGURES  # noqa: E402

TOOL = Path(__file__).resolve().parents[1] / "tools" / "render_figures.py"
#: Notation outside mathtext's $...$ that it should have typeset: a one-letter name with a subscript (x_q), a caret
#: exponent (n^(-1/(d+2))), an algorithm's code key (kernel_gd) or a Greek letter spelt out (tau).
RAW_NOTATION = re.compile(r"\b[A-Za-z]_[{(]?[A-Za-z0-9]|\^[-({\w]|\bkernel_gd\b|\b(?:tau|sigma|rho|beta|gamma|eta)\b")


def raw_notation(fig) -> list[str]:
    """The texts of ``fig`` with raw notation outside their ``$...$`` parts."""
    texts = [t.get_text() for t in fig.findobj(matplotlib.text.Text)]
    return [t for t in texts if RAW_NOTATION.search(re.sub(r"\$[^$]*\$", "", t))]
spec = importlib.util.spec_from_file_location("render_figures", TOOL)
rf = importlib.util.module_from_spec(spec)
sys.modules["render_figures"] = rf
spec.loader.exec_module(rf)


#: A headline figure is at most this tall as displayed (CSS px): one screen of the browser test's window.
SCREEN_PX = 900


@pytest.mark.parametrize("figure", list(rf.CHAPTERS))
def test_every_figure_of_the_chapter_is_made_for_the_column(figure, tmp_path):
    run = Run(FIGURES[figure], "smoke", "cpu", True, str(tmp_path))
    drawers = rf.CHAPTERS[figure](run)
    assert rf.HEADLINE[figure] in drawers
    for name, draw in drawers.items():
        fig = draw()
        assert plotting.house_rule_breaches(fig) == [], name
        assert raw_notation(fig) == [], name
        run.savefig(fig, name)
        plt.close(fig)
        # a run's figures wait beside its output until finish() moves them in with the record
        meta = plotting.read_png_meta(run.pending_figures() / f"{figure}_{name}.png")
        if name == rf.HEADLINE[figure]:         # the paper's figure as it lays it out, within one screen of height
            for column in plotting.COLUMN_PX.values():
                scale = min(plotting.NOTEBOOK_DPI, column / meta["width_in"])
                assert meta["height_in"] * scale <= SCREEN_PX, (name, column, meta["height_in"] * scale)
        for column in plotting.COLUMN_PX.values():
            assert plotting.displayed_text_px(meta, column) >= plotting.MIN_TEXT_PX, (name, column)


def test_render_figures_reports_sizes_and_the_screenshot_page(tmp_path):
    plotting.use_style()
    fig, axes = plotting.subplots(1, 2)
    for ax in axes.flat:
        ax.plot([1, 2], [3, 4], label="curve")
    plotting.figure_legend(fig)
    png, _ = plotting.save(fig, tmp_path, "fig")
    plt.close(fig)
    line = rf.report_line(png)
    assert line.startswith("fig.png: 6.8") and "smallest font 8 pt" in line and "at 705 px" in line
    page = rf.screenshot_page(png, 705)
    assert "width:705px" in page and f"width:{round(plotting.read_png_meta(png)['width_in'] * 110)}px" in page


def test_raw_notation_finds_plain_text_notation_only():
    fig, ax = plt.subplots()
    ax.plot([0, 1], label="query f(x_q)")
    ax.plot([0, 1], label=r"query $f(x_q)$")
    ax.set_title(r"clustered, $\tau$ = 0.5")
    ax.set_xlabel("n^(-1/(d+2))")
    ax.legend()
    assert sorted(raw_notation(fig)) == ["n^(-1/(d+2))", "query f(x_q)"]
    plt.close(fig)

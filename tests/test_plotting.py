"""Figure saving: both files, one layout, the same bounding box."""

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from softmax_icl import plotting  # noqa: E402
from softmax_icl.plotting import save, use_style  # noqa: E402


def test_save_writes_png_and_pdf_of_the_same_tight_box(tmp_path):
    use_style()
    fig, axes = plt.subplots(1, 2, figsize=(6, 3))
    for ax in axes:
        ax.plot([1, 10, 100], [1, 3, 9], label="curve")
        ax.set(xscale="log", yscale="log", xlabel="n", ylabel="error")
        ax.legend()
    png, pdf = save(fig, tmp_path, "fig")
    assert png.suffix == ".png" and pdf.suffix == ".pdf" and pdf.stat().st_size > 0
    data = png.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    text = pdf.read_bytes()
    box = text[text.index(b"/MediaBox"):].split(b"]")[0].split(b"[")[1].split()
    pdf_w, pdf_h = float(box[2]) - float(box[0]), float(box[3]) - float(box[1])
    dpi = matplotlib.rcParams["savefig.dpi"]
    # the same bounding box in both files (inches), cropped from the 6 x 3 in figure, not padded past it
    assert width / dpi == pytest.approx(pdf_w / 72, abs=2 / dpi) and height / dpi == pytest.approx(pdf_h / 72, abs=2 / dpi)
    assert width / dpi <= 6 + 0.2 and height / dpi <= 3 + 0.2
    assert plt.fignum_exists(fig.number)                  # outside a notebook the figure is left open
    plt.close(fig)


def _panels_with_text():
    use_style()
    fig, axes = plotting.subplots(1, 2)
    for ax in axes.flat:
        ax.plot([1, 2, 3], [1, 4, 9], label="curve")
        ax.set(xlabel="n", ylabel="error", title="a panel")
    return fig, axes


def test_min_font_pt_is_the_smallest_text_drawn():
    fig, axes = _panels_with_text()
    assert plotting.min_font_pt(fig) == plotting.SMALLEST_PT          # tick labels
    axes[0, 0].annotate("note", (2, 4), fontsize=5)
    axes[0, 1].set_title("hidden", fontsize=3).set_visible(False)     # not drawn: does not count
    axes[0, 1].text(2, 4, "", fontsize=2)                              # nothing to draw
    axes[0, 1].set_xticks([1, 2, 3, 50], ["1", "2", "3", "far"])       # a tick label outside the view
    axes[0, 1].set_xlim(0.5, 3.5)
    for label in axes[0, 1].get_xticklabels()[-1:]:
        label.set_fontsize(4)
    assert plotting.min_font_pt(fig) == 5
    cbar = fig.colorbar(axes[0, 0].imshow([[0, 1]]), ax=axes[0, 0], label="value")
    cbar.ax.tick_params(labelsize=4.5)
    assert plotting.min_font_pt(fig) == 4.5
    plt.close(fig)


def test_min_font_pt_counts_legend_and_mathtext():
    fig, axes = _panels_with_text()
    plotting.figure_legend(fig, prop={"size": 6.5})
    axes[0, 0].set_ylabel(r"$\rho_2(M, B)$", fontsize=7)
    assert plotting.min_font_pt(fig) == 6.5
    plt.close(fig)


def test_save_embeds_the_text_size_metadata(tmp_path):
    fig, _ = _panels_with_text()
    plotting.figure_legend(fig)
    png, _ = save(fig, tmp_path, "fig")
    meta = plotting.read_png_meta(png)
    assert set(meta) == set(plotting.PNG_META_KEYS)
    data = png.read_bytes()
    width, height = int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
    assert meta["dpi"] == matplotlib.rcParams["savefig.dpi"]
    assert meta["width_in"] == pytest.approx(width / meta["dpi"], abs=1.5 / meta["dpi"])
    assert meta["height_in"] == pytest.approx(height / meta["dpi"], abs=1.5 / meta["dpi"])
    assert meta["min_font_pt"] == plotting.SMALLEST_PT
    # a column-wide figure's smallest text is readable at both window widths
    assert meta["width_in"] <= plotting.COLUMN_WIDTH_IN + 0.1
    for column in plotting.COLUMN_PX.values():
        assert plotting.displayed_text_px(meta, column) >= plotting.MIN_TEXT_PX
    plt.close(fig)


def test_read_png_meta_names_what_a_foreign_png_lacks(tmp_path):
    use_style()
    fig = plt.figure(figsize=(2, 1))
    fig.savefig(tmp_path / "plain.png")
    with pytest.raises(KeyError, match="min_font_pt"):
        plotting.read_png_meta(tmp_path / "plain.png")
    plt.close(fig)


def test_displayed_text_px_follows_the_formula():
    meta = {"width_in": 10.0, "height_in": 3.0, "dpi": 150.0, "min_font_pt": 9.0}
    # 1100 CSS px at the notebook's dpi, scaled to a 768-px column: 9 pt / 72 * 768 px / 10 in
    assert plotting.displayed_text_px(meta, 768, notebook_dpi=110) == pytest.approx(9 / 72 * 76.8)
    small = dict(meta, width_in=3.0)                   # 330 px: shown unscaled, 9 pt at 110 px per inch
    assert plotting.displayed_text_px(small, 768, notebook_dpi=110) == pytest.approx(9 / 72 * 110)


def test_column_width_keeps_the_smallest_font_readable():
    assert plotting.max_width_in(8, 720, 10) == pytest.approx(8.0)
    for column in plotting.COLUMN_PX.values():
        shown = min(column, plotting.COLUMN_WIDTH_IN * plotting.NOTEBOOK_DPI)
        assert plotting.SMALLEST_PT / 72 * shown / plotting.COLUMN_WIDTH_IN >= plotting.MIN_TEXT_PX
    # a full-column figure is shown at (about) the 1400-px window's column width
    assert abs(plotting.COLUMN_WIDTH_IN * plotting.NOTEBOOK_DPI - plotting.COLUMN_PX[1400]) < 2


def test_subplots_refuses_more_than_three_panels_a_row():
    use_style()
    fig, axes = plotting.subplots(2, 3)
    assert axes.shape == (2, 3) and fig.get_figwidth() == pytest.approx(plotting.COLUMN_WIDTH_IN)
    plt.close(fig)
    with pytest.raises(ValueError, match="at most 3"):
        plotting.subplots(1, 4)


def test_figure_legend_is_one_legend_with_each_label_once():
    fig, axes = _panels_with_text()
    axes[0, 1].plot([1, 2], [2, 3], label="other")
    leg = plotting.figure_legend(fig)
    assert [t.get_text() for t in leg.get_texts()] == ["curve", "other"]
    assert all(ax.get_legend() is None for ax in axes.flat)
    plt.close(fig)


@pytest.mark.parametrize("n", [1, 2, 5, 10, 16])
def test_every_line_colour_is_visible_on_white(n):
    colours = plotting.sequential(n) + plotting.qualitative(n) + list(plotting.MODEL_COLORS.values())
    assert min(plotting.contrast_on_white(c) for c in colours) >= plotting.MIN_CONTRAST
    assert plotting.contrast_on_white("white") == pytest.approx(1.0)
    assert plotting.contrast_on_white("black") == pytest.approx(21.0)


def test_house_rule_breaches_names_each_broken_rule():
    fig, axes = _panels_with_text()
    fig.colorbar(axes[0, 0].imshow([[0, 1]]), ax=axes)               # a colour bar is not a panel
    plotting.figure_legend(fig)
    assert plotting.house_rule_breaches(fig) == []
    plt.close(fig)
    fig, axes = plt.subplots(1, 4, figsize=(12, 3))
    for ax in axes[:2]:
        ax.plot([1, 2], [1, 2], label="a")
        ax.legend()
    axes[3].set_title("small", fontsize=6)
    assert plotting.house_rule_breaches(fig) == [f"12.00 in wide, the column {plotting.COLUMN_WIDTH_IN} in",
                                                 "4 panels in a row", "2 legends", "text at 6 pt"]
    plt.close(fig)


@pytest.mark.parametrize("lo, hi, labels", [(1e-3, 1.0, ["$\\mathdefault{10^{-3}}$", "$\\mathdefault{10^{-2}}$"]),
                                            (0.02, 0.6, ["0.02", "0.05", "0.1", "0.2", "0.5"]),
                                            (0.24, 0.52, ["0.3", "0.4", "0.5"])])
def test_log_axis_labels_decades_or_a_few_plain_values(lo, hi, labels):
    use_style()
    fig, ax = plt.subplots()
    ax.plot([1, 2], [lo, hi])
    plotting.log_axis(ax)
    fig.canvas.draw()
    shown = [t.get_text() for t in ax.get_yticklabels() if lo <= t.get_position()[1] <= hi and t.get_text()]
    assert shown[:len(labels)] == labels
    assert all(t.get_text() == "" for t in ax.yaxis.get_minorticklabels())
    plt.close(fig)


def test_the_written_out_style_is_seaborns_whitegrid_paper():
    """plotting.WHITEGRID_PAPER is what seaborn.set_theme(context="paper", style="whitegrid") sets (seaborn is a test
    dependency only), less the sizes and colour cycle use_style sets itself and seaborn's own default colour map;
    and drawing a figure in the book's style imports neither seaborn nor pandas."""
    import subprocess
    import sys

    sns = pytest.importorskip("seaborn")
    from softmax_icl.plotting import WHITEGRID_PAPER

    theirs = {**sns.axes_style("whitegrid", rc={"font.family": "sans-serif"}), **sns.plotting_context("paper")}
    set_by_use_style = {"axes.labelsize", "axes.titlesize", "font.size", "legend.fontsize", "legend.title_fontsize",
                        "lines.linewidth", "lines.markersize", "xtick.labelsize", "ytick.labelsize"}
    assert set(theirs) - set(WHITEGRID_PAPER) == set_by_use_style | {"image.cmap"}
    assert set(WHITEGRID_PAPER) <= set(theirs)
    for key, value in WHITEGRID_PAPER.items():
        assert value == pytest.approx(theirs[key]) if isinstance(value, float) else value == theirs[key], key
    code = ("import sys, matplotlib; matplotlib.use('Agg'); from softmax_icl import plotting; plotting.use_style(); "
            "fig, axes = plotting.subplots(); axes[0, 0].plot([0, 1]); "
            "print(sorted(m for m in ('seaborn', 'pandas') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip().splitlines()[-1] == "[]", proc.stderr

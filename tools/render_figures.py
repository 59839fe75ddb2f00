"""Render every chapter's figures from a run at one profile, without executing the notebooks.

For each chapter the tool builds the notebook's ``Run`` (at ``--profile``, default ``default``, on the CPU, output
under ``runs/figures/<figure>/``), calls the chapter's ``sweeps`` and ``analysis`` functions as its notebook does
(trained results come from the result cache after the first time), then each plot function, and saves each figure
with ``run.savefig`` (PNG and PDF, with the PNG's text-size metadata, :func:`softmax_icl.plotting.save`). It prints,
per figure, its size, its smallest font and the size that font is displayed at in the book's column at a 1400-px
and an 800-px window (:func:`softmax_icl.plotting.displayed_text_px`).

``--browser`` also screenshots each PNG in headless Chromium, shown as the book shows it (at its notebook width,
scaled down to fit the column), in a column as wide as the book's at each window width; the screenshots go to
``<out>/screenshots/``.

Usage:
    python tools/render_figures.py                                   # every figure of every chapter
    python tools/render_figures.py window_adaptation low_rank        # these chapters
    python tools/render_figures.py norm_scaling --only scaling regime --browser
"""

from __future__ import annotations

import argparse
import html
import importlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

import matplotlib

matplotlib.use("agg")
import matplotlib.pyplot as plt  # noqa: E402

from softmax_icl import plotting  # noqa: E402
from softmax_icl.book.run import Run  # noqa: E402
from softmax_icl.figures import FIGURES  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
Drawers = dict[str, Callable[[], plt.Figure]]


def _analysed(run: Run):
    """The chapter's ``plots`` module, its trained results and its analysis, as its notebook computes them."""
    sweeps, analysis, plots = (importlib.import_module(f"softmax_icl.figures.{run.figure}.{m}")
                               for m in ("sweeps", "analysis", "plots"))
    results = sweeps.train(run)
    return plots, results, analysis.analyse(run, results)


def window_adaptation(run: Run) -> Drawers:
    plots, results, result = _analysed(run)
    return {"figure1": lambda: plots.plot_figure1(run, result, results),
            "tasks": lambda: plots.plot_tasks(run, result),
            "error": lambda: plots.plot_error(run, result),
            "training": lambda: plots.plot_training(run, results)}


def norm_scaling(run: Run) -> Drawers:
    from softmax_icl.figures.norm_scaling import analysis, dynamics, sweeps, theorem34
    plots, results, result = _analysed(run)
    growths = [dynamics.growth(results[f"dyn_{key}"], analysis.SETTING_LABEL[dist], run["dyn_early"])
               for key, dist in sweeps.DYN_SETTINGS.items()]
    t34 = theorem34.analyse(run)
    big = theorem34.trained_large_n(run.cfg, results, t34)
    return {"training": lambda: plots.plot_training(run, result),
            "dynamics": lambda: plots.plot_dynamics(run, growths),
            "scaling": lambda: plots.plot_scaling(run, result),
            "regime": lambda: plots.plot_regime(run, result),
            "theorem34": lambda: plots.plot_theorem34(run, t34, big),
            "theorem34_noise": lambda: plots.plot_theorem34_noise(run, t34, big),
            "scan": lambda: plots.plot_scan(run, result),
            "trained_vs_optimal": lambda: plots.plot_trained_vs_optimal(run, result),
            "covariance": lambda: plots.plot_covariance(run, result),
            "full": lambda: plots.plot_full(run, result)}


def generalization(run: Run) -> Drawers:
    plots, _, result = _analysed(run)
    return {"headline": lambda: plots.plot_headline(run, result),
            "main": lambda: plots.plot_figure(run, result),
            "grid": lambda: plots.plot_grid(run, result),
            "windows": lambda: plots.plot_windows(run, result),
            "theory": lambda: plots.plot_theory(run, result)}


def low_rank(run: Run) -> Drawers:
    plots, _, result = _analysed(run)
    return {"heatmaps": lambda: plots.plot_headline(run, result),
            "dynamics": lambda: plots.plot_dynamics(run, result),
            "matrices": lambda: plots.plot_matrices(run, result)}


def classification_kernel_gd(run: Run) -> Drawers:
    from softmax_icl.figures.classification_kernel_gd import analysis, plots, sweeps
    results = sweeps.train(run)
    found = sweeps.search(run)
    evaluation = analysis.evaluate(run, results, found)
    return {"alignment": lambda: plots.plot_alignment_curves(run, evaluation),
            "tasks": lambda: plots.plot_tasks(run),
            "tasks_3d": lambda: plots.plot_tasks_3d(run),
            "linear_vs_gd": lambda: plots.plot_alignment(run, evaluation, "linear"),
            "softmax_vs_kernel_gd": lambda: plots.plot_alignment(run, evaluation, "softmax"),
            "hyperparameters": lambda: plots.plot_hyperparameters(run, evaluation, found),
            "softmax_vs_linear": lambda: plots.plot_readings(run, evaluation),
            "softmax_vs_linear_shapes": lambda: plots.plot_shapes(run, evaluation),
            "maps": lambda: plots.plot_maps(run, evaluation),
            "ablation": lambda: plots.plot_ablation(run, evaluation),
            "mixture": lambda: plots.plot_mixture(run, evaluation),
            "kernel_shape": lambda: plots.plot_kernel_shape(run, evaluation)}


#: The chapters in book order: figure -> the notebook's computation, returning its figures' drawing functions.
CHAPTERS: dict[str, Callable[[Run], Drawers]] = {
    f.__name__: f for f in (window_adaptation, norm_scaling, generalization, low_rank, classification_kernel_gd)}
#: Each chapter's headline figure (the one that shows its answer, under the answer at the top of the chapter).
HEADLINE = {"window_adaptation": "figure1", "norm_scaling": "training", "generalization": "headline",
            "low_rank": "dynamics", "classification_kernel_gd": "softmax_vs_linear"}


def report_line(path: Path) -> str:
    """The saved PNG's size, smallest font and its displayed size at both windows' column widths."""
    meta = plotting.read_png_meta(path)
    shown = ", ".join(f"{plotting.displayed_text_px(meta, w):.1f} px at {w} px" for w in plotting.COLUMN_PX.values())
    return (f"{path.name}: {meta['width_in']:.2f} x {meta['height_in']:.2f} in, smallest font "
            f"{meta['min_font_pt']:g} pt -> {shown}")


def screenshot_page(png: Path, column_px: int) -> str:
    """A page showing ``png`` as the book does: at its notebook width, at most the column's width."""
    meta = plotting.read_png_meta(png)
    width = round(meta["width_in"] * plotting.NOTEBOOK_DPI)
    return (f"<!doctype html><html><body style='margin:0;background:white'>"
            f"<div style='width:{column_px}px;padding:8px 0'><img src='{html.escape(png.resolve().as_uri())}' "
            f"style='width:{width}px;max-width:100%'></div></body></html>")


def screenshot(png: Path, out: Path, chromium: str) -> list[Path]:
    """Screenshots of ``png`` in the book's column at each window width (``plotting.COLUMN_PX``)."""
    meta = plotting.read_png_meta(png)
    out.mkdir(parents=True, exist_ok=True)
    shots = []
    with tempfile.TemporaryDirectory() as tmp:
        for window, column in plotting.COLUMN_PX.items():
            page = Path(tmp) / f"{window}.html"
            page.write_text(screenshot_page(png, column))
            height = round(min(column, meta["width_in"] * plotting.NOTEBOOK_DPI) * meta["height_in"]
                           / meta["width_in"]) + 40
            shot = out / f"{png.stem}-{window}px.png"
            subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                            "--disable-background-networking", "--disable-component-update", "--disable-sync",
                            "--hide-scrollbars", f"--window-size={column},{height}",
                            f"--screenshot={shot}", page.as_uri()], check=True, capture_output=True, timeout=120)
            shots.append(shot)
    return shots


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("figures", nargs="*", metavar="FIGURE", help=f"chapters (default: all of {', '.join(CHAPTERS)})")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="only these figure names (as passed to run.savefig)")
    ap.add_argument("--profile", default="default")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "figures", help="output folder")
    ap.add_argument("--browser", action="store_true", help="screenshot each PNG in headless Chromium")
    args = ap.parse_args(argv)
    unknown = [f for f in args.figures if f not in CHAPTERS]
    if unknown:
        ap.error(f"unknown figure(s) {', '.join(unknown)}; known: {', '.join(CHAPTERS)}")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if args.browser and chromium is None:
        ap.error("--browser needs Chromium (Debian: apt-get install chromium)")
    for figure in args.figures or CHAPTERS:
        run = Run(FIGURES[figure], args.profile, "cpu", True, str(args.out / figure))
        for name, draw in CHAPTERS[figure](run).items():
            if args.only and name not in args.only:
                continue
            fig = draw()
            breaches = plotting.house_rule_breaches(fig)
            run.savefig(fig, name)
            plt.close(fig)
            png = run.output_dir / "figures" / f"{figure}_{name}.png"
            print(report_line(png) + "".join(f"\n  BREAKS THE HOUSE RULES: {b}" for b in breaches), flush=True)
            if args.browser:
                for shot in screenshot(png, args.out / "screenshots", chromium):
                    print(f"  screenshot: {shot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The chapters' tables (``figures/<figure>/summary.py``) are MyST markdown that renders: every table a well-formed
``list-table`` (each row as many cells as the header), mathematics only inside ``$...$`` (no pseudo-TeX such as
``||M||_2`` or ``Sigma^-1`` in the text), and the run's numbers in the cells.

Each chapter is computed once at the ``smoke`` profile, with the calls its notebook makes, and every summary function
of the chapter is called on it.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("mdit_py_plugins")

from markdown_it import MarkdownIt  # noqa: E402
from markdown_it.tree import SyntaxTreeNode  # noqa: E402
from mdit_py_plugins.dollarmath import dollarmath_plugin  # noqa: E402

from softmax_icl.book.run import Run  # noqa: E402
from softmax_icl.figures import FIGURES  # noqa: E402

#: Pseudo-TeX that must not stand in the text outside maths and code spans.
PSEUDO_TEX = [r"\|\|", r"\^", r"_\d", r"_\{", r"\brho_", r"\bsigma\^", r"\bSigma\b", r"->", r"<=", r">=",
              r"\b(rho|sigma|tau|eta|beta|gamma)\b"]

_MD = MarkdownIt("commonmark").use(dollarmath_plugin)


def _run(figure: str, tmp_path_factory) -> Run:
    return Run(FIGURES[figure], "smoke", "cpu", output_dir=str(tmp_path_factory.mktemp(figure)))


def _analysed(figure: str, tmp_path_factory):
    """``analysis.analyse(run, sweeps.train(run))`` of ``figure`` at the smoke profile, as its notebook calls them."""
    from importlib import import_module

    analysis = import_module(f"softmax_icl.figures.{figure}.analysis")
    sweeps = import_module(f"softmax_icl.figures.{figure}.sweeps")
    run = _run(figure, tmp_path_factory)
    return analysis.analyse(run, sweeps.train(run))


def _text_nodes(node: SyntaxTreeNode):
    """The plain-text pieces of an inline node (not maths, not code)."""
    for child in node.children:
        if child.type == "text":
            yield child.content
        elif child.type not in ("math_inline", "code_inline"):
            yield from _text_nodes(child)


def _check_inline(text: str, where: str) -> list[str]:
    """Parse one line of inline markdown; fail on pseudo-TeX outside maths; return its maths."""
    tokens = _MD.parseInline(text)
    node = SyntaxTreeNode(tokens)
    for piece in _text_nodes(node):
        for pat in PSEUDO_TEX:
            assert not re.search(pat, piece), f"pseudo-TeX {pat!r} outside $...$ in {where}: {piece!r} (of {text!r})"
    maths = [t.content for t in tokens[0].children if t.type == "math_inline"]
    for m in maths:
        # chapter.table escapes "|" in cells, which would reach MathJax as "\|": maths must not use "|"
        assert "|" not in m, f"'|' in the maths {m!r} of {where}"
    assert text.count("$") == 2 * len(maths), f"an unmatched $ in {where}: {text!r}"
    return maths


def _list_table(content: str, where: str) -> list[list[str]]:
    """The rows of a ``list-table`` directive's content (options, then a two-level bullet list)."""
    lines = content.splitlines()
    options = {}
    while lines and lines[0].startswith(":"):
        key, _, value = lines.pop(0)[1:].partition(":")
        options[key] = value.strip()
    assert options.get("header-rows") == "1", f"{where}: no header row"
    root = SyntaxTreeNode(_MD.parse("\n".join(lines)))
    lists = [n for n in root.children if n.type == "bullet_list"]
    assert len(lists) == 1 and len(root.children) == 1, f"{where}: the table is not one bullet list"
    rows = []
    for item in lists[0].children:
        inner = [n for n in item.children if n.type == "bullet_list"]
        assert len(inner) == 1, f"{where}: row {len(rows)} is not a list of cells"
        cells = []
        for cell in inner[0].children:
            text = " ".join(n.children[0].content for n in cell.children if n.type == "paragraph")
            cells.append(text)
        rows.append(cells)
    header = rows[0]
    for r in rows[1:]:
        assert len(r) == len(header), f"{where}: a row of {len(r)} cells under a header of {len(header)}: {r}"
    assert len(header) <= 7, f"{where}: {len(header)} columns do not fit the page"
    if "widths" in options:
        assert len(options["widths"].split()) == len(header), f"{where}: widths do not match the columns"
    for r in rows:
        for c in r:
            _check_inline(c, where)
    return rows


def parse(markdown: str) -> list[dict]:
    """Every table of ``markdown``: title (empty without a box), folded, rows (header first). Checks the prose
    around them too."""
    tables = []

    def walk(md: str, title: str, folded: bool) -> None:
        for node in SyntaxTreeNode(_MD.parse(md)).walk():
            if node.type == "fence":
                name, _, arg = node.info.partition(" ")
                if name == "{admonition}":
                    body = node.content.splitlines()
                    options = []
                    while body and body[0].startswith(":"):
                        options.append(body.pop(0))
                    _check_inline(arg, f"title {arg!r}")
                    walk("\n".join(body), arg, any(o.startswith(":class:") and "dropdown" in o for o in options))
                elif name == "{list-table}":
                    tables.append(dict(title=title, folded=folded, rows=_list_table(node.content, title or md[:40])))
                else:
                    raise AssertionError(f"unexpected block {node.info!r}")
            elif node.type == "inline":
                _check_inline(node.content, f"text under {title!r}")

    walk(markdown, "", False)
    return tables


def check(markdown: str, numbers: list[str], n_tables: int | None = None) -> list[dict]:
    """``markdown`` parses as tables (``n_tables`` of them) with titles; each of ``numbers`` stands in it; a table
    longer than 8 rows is folded."""
    assert isinstance(markdown, str) and markdown.strip()
    tables = parse(markdown)
    if n_tables is not None:
        assert len(tables) == n_tables
    for t in tables:
        assert t["title"], "every table has a title saying what is in it"
        assert len(t["rows"]) - 1 <= 8 or t["folded"], f"{t['title']}: {len(t['rows']) - 1} rows, not folded"
    cells = "\n".join(c for t in tables for r in t["rows"] for c in r) + "\n" + markdown
    for x in numbers:
        assert x in cells, f"{x!r} is not in the output"
    return tables


def test_the_checker_catches_what_it_should():
    from softmax_icl.book.chapter import table

    good = table(["$x$", "b"], [["1", "$\\sigma^{-1}$"]], title="T $\\rho_1$")
    check(good, ["1"])
    with pytest.raises(AssertionError, match="pseudo-TeX"):
        check(table(["a", "b"], [["||M||_2", "1"]], title="T"), [])
    with pytest.raises(AssertionError, match="pseudo-TeX"):
        check(table(["a"], [["1"]], title="Sigma^-1"), [])
    with pytest.raises(AssertionError, match="'\\|' in the maths"):
        check(table(["a"], [["$\\|M\\|$"]], title="T"), [])
    with pytest.raises(AssertionError, match="cells under a header"):
        parse(good.replace("  - $\\sigma^{-1}$\n", ""))
    with pytest.raises(AssertionError, match="not folded"):
        check(table(["a"], [[str(i)] for i in range(9)], title="T"), [])
    with pytest.raises(AssertionError, match="is not in the output"):
        check(good, ["2.5"])


# -- window_adaptation ------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def window(tmp_path_factory):
    return _analysed("window_adaptation", tmp_path_factory)


def test_window_adaptation_tables(window):
    from softmax_icl.figures.window_adaptation import summary

    a = window
    tables = check(summary.key_numbers_table(a), [f"{a.w['softmax'][0, 0].mean():.3g}",
                                                  f"{a.halfwidth['linear'][1, 2].mean():.3g}°",
                                                  f"{a.mean_error('oracle')[0, 3, -1]:.2g}",
                                                  f"{a.mean_error('fixed')[1, 2, 0]:.2g}"], n_tables=len(a.families))
    assert len(tables[0]["rows"]) == 1 + 4 * len(a.settings)
    r = a.ratio("softmax", "linear")
    tables = check(summary.ratio_table(a), [f"{r[0, 1, 0]:.2f}", f"{r[1, 3, -1]:.2f}"], n_tables=len(a.families))
    assert [row[0] for row in tables[0]["rows"][1:]] == [str(n) for n in a.n]


# -- low_rank ---------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def low_rank(tmp_path_factory):
    return _analysed("low_rank", tmp_path_factory)


def test_low_rank_tables(low_rank):
    from softmax_icl.figures.low_rank import summary
    from softmax_icl.profiles import fmt

    a = low_rank
    tables = check(summary.key_numbers_table(a), [fmt(a.softmax.rho1[-1, 0].mean()), fmt(a.linear.rho2[-1, 1].mean()),
                                                  fmt(a.oracle_cBB[2]), fmt(a.softmax.norm[0].mean())], n_tables=2)
    assert len(tables[0]["rows"]) == 1 + 2 * len(a.classes) and len(tables[1]["rows"]) == 1 + len(a.classes)
    text = summary.theorem_table(a)
    check(text, [fmt(a.theorem.rho2[0, -1].mean()), fmt(a.theorem.rho2_other_basis[-1, 0].mean()),
                 fmt(a.floor.rho2[1, -1].mean())], n_tables=2)
    assert f"{a.affine_minus_linear:.1e}".split("e")[0] + " \\times 10^{" in text
    w = a.window
    tables = check(summary.window_table(a), [fmt(w.scale[-1, w.noise[1]].mean()), fmt(w.best_scale[0]),
                                             fmt(w.rho2[-1, w.lipschitz[-1]].mean())], n_tables=1)
    assert len(tables[0]["rows"]) == 1 + len(w.omega)


# -- generalization ---------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def generalization(tmp_path_factory):
    return _analysed("generalization", tmp_path_factory)


def test_generalization_tables(generalization):
    from softmax_icl.figures.generalization import summary
    from softmax_icl.figures.generalization.analysis import index_of
    from softmax_icl.figures.generalization.claims import theory_numbers
    from softmax_icl.profiles import fmt

    a = generalization
    j = index_of(a.n, a.n_train)
    (t,) = check(summary.key_numbers_table(a), [fmt(a.M_norm[0, 1].mean()), fmt(a.softmax.mean(2)[2, 0, 1, j]),
                                                fmt(a.oracle[-1, j])], n_tables=1)
    assert len(t["rows"]) == 1 + len(a.classes) * len(a.L) + 2
    first = next(iter(a.loss_change.values()))
    check(summary.convergence_table(a), [f"{np.abs(first).max():.3f}", f"{np.median(first):.3f}"], n_tables=1)
    x = theory_numbers(a.theory[-1])
    check(summary.theory_table(a), [f"{x['slope_above'][1]:.2f}", fmt(x["crossover"][0].mean()),
                                    f"{x['bound_rate']:.2f}", f"{x['rate'].mean():.2f}"], n_tables=2)


# -- norm_scaling -----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def norm_scaling(tmp_path_factory):
    from softmax_icl.figures.norm_scaling import analysis, dynamics, sweeps, theorem34

    run = _run("norm_scaling", tmp_path_factory)
    results = sweeps.train(run)
    result = analysis.analyse(run, results)
    growths = [dynamics.growth(results[f"dyn_{key}"], analysis.SETTING_LABEL[dist], run["dyn_early"])
               for key, dist in sweeps.DYN_SETTINGS.items()]
    early = dynamics.ordering(growths, run["classes"], run["dyn_L"], "early_slope")
    late = dynamics.ordering(growths, run["classes"], run["dyn_L"], "late_slope")
    t34 = theorem34.analyse(run)
    big = theorem34.trained_large_n(run.cfg, results, t34)
    return dict(result=result, growths=growths, early=early, late=late, t34=t34, big=big)


def test_norm_scaling_tables(norm_scaling):
    from softmax_icl.figures.norm_scaling import summary
    from softmax_icl.figures.norm_scaling.trends import L_trend, n_trend, sigma_trend

    x = norm_scaling
    a, t34, big = x["result"], x["t34"], x["big"]
    cfg = a.cfg
    t = L_trend(a, "noniso", "cosine")
    f = next(f for f in a.fits.values() if f.fit is not None)
    u = a.units["whitened"]
    check(summary.key_numbers_table(a),
          [f"{t.norm[1]:.3g} ({t.norm_pop[1]:.3g})", f"{t.snr_boundary:.3g}",
           f"{sigma_trend(a, 'relu').w[-1]:.3g}", f"{n_trend(a, cfg['n_sweep_L'][-1]).w_pop[0]:.3g}",
           f"{f.fit.slope:.3f} ± {f.fit.stderr:.3f}", f"{u.dist_cov[0]:.3f}", f"{u.p_star[-1]:.2f}",
           f"{a.block.label_row_ratio[0]:.3f}"], n_tables=7)
    early, late = x["early"], x["late"]
    tab = next(iter(late.by_panel.values()))
    check(summary.dynamics_table(x["growths"], early, late),
          [f"{1000 * np.nanmean(tab, 0)[-1]:.2f}", f"{1000 * early.worst_step:.3f}"], n_tables=2)
    d, n = t34.ds[-1], t34.ns[-1]
    tables = check(summary.theorem34_table(t34), [f"{t34.exponent[(d, n, t34.rho_check)]:.3f}",
                                                  f"{t34.curves[(d, n)].w_sat:.3g}"], n_tables=len(t34.rhos) + 2)
    assert [t["folded"] for t in tables[1:-1]] == [r != t34.rho_check for r in t34.rhos]
    check(summary.noise_table(t34), [f"{t34.noise[d].exponent:.3f}", f"{t34.noise[d].mc_max_rel_dev:.3f}"],
          n_tables=1)
    check(summary.trained_large_n_table(big), [f"{big.w[0]:.3g} ({big.resid[0]:.3f})", f"{big.w_pop_other[-1]:.3g}"],
          n_tables=1)
    check(summary.theorem34_conclusion(t34), [f"{t34.exponent[(d, t34.ns[0], t34.rho_check)]:.3f} → "
                                              f"{t34.exponent[(d, n, t34.rho_check)]:.3f}"], n_tables=0)
    ok = u.w_pop >= cfg["regime_w"]
    check(summary.covariance_summary(a), [f"{np.median(u.dist_cov[ok]):.3f}"], n_tables=0)


# -- classification_kernel_gd -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def classification(tmp_path_factory):
    from softmax_icl.figures.classification_kernel_gd import analysis, sweeps

    run = _run("classification_kernel_gd", tmp_path_factory)
    results = sweeps.train(run)
    found = sweeps.search(run)
    return run, analysis.evaluate(run, results, found), found


def test_classification_tables(classification):
    from softmax_icl.figures.classification_kernel_gd import summary
    from softmax_icl.figures.classification_kernel_gd.analysis import ablation, compare, hyperparameters, ratio_maps

    run, ev, found = classification
    hp = hyperparameters(run, ev, found)
    ks = [k for k, c in enumerate(ev.main.configs) if c["model"] == "linear"]
    check(summary.alignment_table(run, ev, found), [f"{np.mean(ev.main.control['jacobian_cosine'][-1, ks]):.3f}",
                                                    f"{hp.beta_searched:.3g}", f"{hp.gamma_learned[0]:.3g}"],
          n_tables=2)
    r, s = compare(ev.readings)[-1], compare(ev.shapes)[0]
    check(summary.readings_table(run, ev), [f"{r.ratio:.3f} [{r.ratio_lo:.3f}, {r.ratio_hi:.3f}]",
                                            f"{s.ce_a:.3f} ({s.acc_a:.3f})"], n_tables=2)
    maps, ab = ratio_maps(run, ev), ablation(ev)
    tables = check(summary.maps_table(run, ev), [f"{maps[1].ratio[-1, 0]:.3f}", f"{ab[0].ce['exp_fixed']:.3f}",
                                                 f"{ab[-1].kernel_cost:+.3f} ({ab[-1].kernel_cost_se:.3f})"],
                   n_tables=len(maps) + 2)
    assert all(t["folded"] for t in tables[1:len(maps)])
    m = compare(ev.mixture, "softmax", "linear_sum")[-1]
    check(summary.mixture_table(run, ev), [f"{m.ce_b:.3f} ({m.acc_b:.3f})"], n_tables=2)
    check(summary.kernel_table(run, ev), [f"{ev.kernel.frac_sub[0]:.3f}", f"{ev.kernel.cos_aniso_uni[-1]:.3f}"],
          n_tables=1)

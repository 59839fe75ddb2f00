"""The package's shape (DESIGN "layers that only point down"): every import counted, those inside functions too; no
import cycle; the layers base < (streams, engine) < science < book < figures < the entry point, every arrow pointing
down (the science imports nothing of the book or the figures, the book nothing of the figures, base nothing of the
package); no module over the size a reader can hold. Each check is run once on a small package made to break it."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "softmax_icl"
#: The most lines a module of the package may have.
MAX_LINES = 500
#: Modules over MAX_LINES, each held at most at the length given here until it is split (path under the package).
LONG_MODULES: dict[str, int] = {}

#: The layers, bottom first: (name, module prefixes). A module belongs to the layer of its longest matching prefix;
#: an import may point to its own layer or to one below.
LAYERS = (
    ("base", ("softmax_icl", "softmax_icl.base")),
    ("engine", ("softmax_icl.streams", "softmax_icl.engine")),
    ("science", ("softmax_icl.profiles", "softmax_icl.plotting", "softmax_icl.tasks", "softmax_icl.models",
                 "softmax_icl.training", "softmax_icl.metrics", "softmax_icl.baselines", "softmax_icl.theory",
                 "softmax_icl.classification")),
    ("book", ("softmax_icl.book",)),
    ("figures", ("softmax_icl.figures",)),
    ("entry", ("softmax_icl.__main__",)),
)


def _module_name(path: Path, pkg: Path) -> str:
    parts = path.relative_to(pkg.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, pkg: Path, modules: set[str]) -> set[str]:
    """The package's modules that ``path`` imports anywhere in it (module level, inside functions and classes, under
    ``if``): each import statement names a module, or a package and the modules it imports from it."""
    name = _module_name(path, pkg)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    named: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            named.add(mod)
            named.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            for a in node.names:               # import a.b.c imports a, a.b and a.b.c
                parts = a.name.split(".")
                named.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return {m for m in named if m in modules and m != name}


def _graph(pkg: Path | None = None) -> dict[str, set[str]]:
    pkg = pkg or PKG
    files = {_module_name(p, pkg): p for p in pkg.rglob("*.py")}
    return {name: _imports(path, pkg, set(files)) for name, path in files.items()}


def _layer(module: str) -> int | None:
    best, layer = -1, None
    for i, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, layer = len(prefix), i
    return layer


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack + [nxt])
                if found:
                    return found
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [node])
            if found:
                return found
    return None


def _upward(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} ({LAYERS[_layer(a)][0]}) -> {b} ({LAYERS[_layer(b)][0]})" for a, targets in graph.items()
                  for b in targets if _layer(a) is not None and _layer(b) is not None and _layer(b) > _layer(a))


def _too_long(pkg: Path, limit: int = MAX_LINES, allowed: dict | None = None) -> list[str]:
    allowed = LONG_MODULES if allowed is None else allowed
    out = []
    for p in sorted(pkg.rglob("*.py")):
        rel = p.relative_to(pkg).as_posix()
        n = len(p.read_text().splitlines())
        if n > allowed.get(rel, limit):
            out.append(f"{rel}: {n} lines (at most {allowed.get(rel, limit)})")
    return out


def test_every_module_belongs_to_a_layer():
    unplaced = sorted(m for m in _graph() if _layer(m) is None)
    assert not unplaced, f"modules in no layer of LAYERS: {', '.join(unplaced)}"


def test_no_import_cycle():
    cycle = _cycle(_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_every_import_points_down_the_layers():
    up = _upward(_graph())
    assert not up, "imports pointing up a layer:\n  " + "\n  ".join(up)


def test_the_science_imports_nothing_of_the_book_or_the_figures():
    graph = _graph()
    science = [m for m in graph if _layer(m) is not None and _layer(m) <= 2]
    assert len(science) > 20
    bad = sorted(f"{m} -> {t}" for m in science for t in graph[m]
                 if t.startswith(("softmax_icl.book", "softmax_icl.figures")))
    assert not bad, bad


def test_the_book_imports_nothing_of_the_figures():
    graph = _graph()
    book = [m for m in graph if m.startswith("softmax_icl.book")]
    assert len(book) > 10
    bad = sorted(f"{m} -> {t}" for m in book for t in graph[m] if t.startswith("softmax_icl.figures"))
    assert not bad, bad


def test_bottom_layer_imports_nothing_from_the_package():
    graph = _graph()
    assert graph["softmax_icl.base"] == set() and graph["softmax_icl"] == set()


def test_no_module_is_longer_than_a_reader_can_hold():
    assert not _too_long(PKG), _too_long(PKG)
    for rel, n in LONG_MODULES.items():            # an allowance for a module no longer long is dropped
        assert len((PKG / rel).read_text().splitlines()) > MAX_LINES, f"{rel} is within {MAX_LINES} lines now"


def test_every_figure_package_registers_itself_by_its_FIGURE():
    """softmax_icl.figures builds the book's registry from each figure package's FIGURE: every folder of figures/ is
    in it, under its own name, in the order the registry gives."""
    import importlib

    from softmax_icl.figures import FIGURES

    folders = sorted(p.name for p in (PKG / "figures").iterdir() if (p / "__init__.py").is_file())
    assert sorted(FIGURES) == folders
    for name in folders:
        assert importlib.import_module(f"softmax_icl.figures.{name}").FIGURE is FIGURES[name]
        assert FIGURES[name].name == name


def _package(tmp_path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "softmax_icl"
    for rel, text in {"__init__.py": "", **files}.items():
        (pkg / rel).parent.mkdir(parents=True, exist_ok=True)
        (pkg / rel).write_text(text)
    return pkg


def test_the_checks_see_a_cycle_an_upward_import_and_a_long_module_inside_functions_too(tmp_path):
    """Each check can fail: a cycle closed by an import inside a function, an upward import inside a method of the
    science layer, a module one line over the limit."""
    pkg = _package(tmp_path, {
        "tasks.py": "def f():\n    from .models import x\n",
        "models.py": "from . import tasks\n",
        "training.py": "class T:\n    def g(self):\n        import softmax_icl.book.run\n",
        "book/__init__.py": "", "book/run.py": "x = 1\n" * (MAX_LINES + 1),
    })
    graph = _graph(pkg)
    assert graph["softmax_icl.tasks"] == {"softmax_icl.models"}
    assert graph["softmax_icl.training"] == {"softmax_icl", "softmax_icl.book", "softmax_icl.book.run"}
    assert _cycle(graph) in (["softmax_icl.models", "softmax_icl.tasks", "softmax_icl.models"],
                             ["softmax_icl.tasks", "softmax_icl.models", "softmax_icl.tasks"])
    (pkg / "tasks.py").write_text("def f():\n    return 1\n")
    assert _cycle(_graph(pkg)) is None
    up = _upward(graph)
    assert "softmax_icl.training (science) -> softmax_icl.book.run (book)" in up
    assert _too_long(pkg, allowed={}) == [f"book/run.py: {MAX_LINES + 1} lines (at most {MAX_LINES})"]
    assert _too_long(pkg, allowed={"book/run.py": MAX_LINES + 1}) == []


def makefile_list(name: str) -> list[str]:
    """The words of a ``NAME ?= ...`` assignment of the Makefile (continued lines joined), with ``$(OTHER)``
    references to other such assignments replaced by their words."""
    import re

    makefile = (PKG.parents[1] / "Makefile").read_text()
    m = re.search(rf"^{name} \?=((?:.*\\\n)*.*)$", makefile, re.M)
    if not m:
        return []
    out = []
    for word in m.group(1).replace("\\\n", " ").split():
        ref = re.fullmatch(r"\$\((\w+)\)", word)
        out += makefile_list(ref.group(1)) if ref else [word]
    return out


def test_every_notebook_the_backend_can_change_is_re_executed_under_torch():
    """`make test` re-executes under SOFTMAX_ICL_KERNEL=torch the notebooks the backend can change: every figure whose
    computation (its package modules and what they import) reaches the kernel switch (softmax_icl.engine.regression, which the
    classification engine's build also reads) must be in the Makefile's NOTEBOOKS_torch."""
    graph = _graph()
    torch_nbs = makefile_list("NOTEBOOKS_torch")
    roots = {"classification_kernel_gd": ("softmax_icl.classification", "softmax_icl.figures.classification_kernel_gd")}
    for fig in ("window_adaptation", "norm_scaling", "generalization", "low_rank", "classification_kernel_gd"):
        reach, todo = set(), [m for m in graph if m.startswith(roots.get(fig, (f"softmax_icl.figures.{fig}",)))]
        while todo:
            m = todo.pop()
            if m not in reach:
                reach.add(m)
                todo += [n for n in graph.get(m, ()) if not n.startswith("softmax_icl.book")]  # no compute there
        if any(m.startswith("softmax_icl.engine.regression") for m in reach):
            assert f"notebooks/{fig}.ipynb" in torch_nbs, fig


def test_make_test_re_executes_every_notebook_under_each_backend():
    """The Makefile lists the notebooks (longest first, for the scheduling of its test processes) rather than the
    folder: a notebook added to notebooks/ must be added to that list (NOTEBOOKS, which both passes take), or `make
    test` would not check it."""
    nbs = sorted(f"notebooks/{p.name}" for p in (PKG.parents[1] / "notebooks").glob("*.ipynb"))
    assert nbs
    # the book's other notebooks (the tutorial) are no figures: nbval executes them in the compiled-engine pass
    pages = sorted(f"book/{p.name}" for p in (PKG.parents[1] / "book").glob("*.ipynb"))
    assert sorted(makefile_list("NOTEBOOKS_auto")) == sorted(nbs + pages), "NOTEBOOKS_auto"
    assert sorted(makefile_list("NOTEBOOKS_torch")) == nbs, "NOTEBOOKS_torch"


def test_every_notebook_has_the_answer_first_layout():
    """notebooks/LAYOUT.md's mechanical part holds for every figure notebook (tools/apply_layout.py --check): the
    answer under the title, the claim checks removed from the page but executed, one anchored paragraph per ledger
    claim of the chapter, every check, the audit and the provenance glued at the end."""
    import subprocess
    import sys

    root = PKG.parents[1]
    out = subprocess.run([sys.executable, str(root / "tools" / "apply_layout.py"), "--check"], cwd=root,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_code_that_decides_and_shows_is_no_larger_than_the_science_and_engines():
    """Lines per layer (tools/layers.py, which says what each layer holds): the book machinery, the verdicts'
    statistics and each figure's checks, tables, answer and plots together are no larger than the science and the
    engines that compute what they report. Planted: a package whose deciding code outweighs its science fails."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("layers", PKG.parents[1] / "tools" / "layers.py")
    layers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layers)
    counts = layers.count()
    assert counts["decide and show"] <= counts["science"] + counts["engines"], counts
    assert layers.layer_of("figures/low_rank/answer.py") == "decide and show"
    assert layers.layer_of("figures/low_rank/sweeps.py") == "science"
    assert layers.layer_of("engine/regression.c") == "engines"


def test_layer_counts_see_a_planted_imbalance(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("layers", PKG.parents[1] / "tools" / "layers.py")
    layers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layers)
    (tmp_path / "book").mkdir()
    (tmp_path / "book" / "pages.py").write_text("x = 1\n" * 30)
    (tmp_path / "tasks.py").write_text("y = 2\n" * 10)
    counts = layers.count(tmp_path)
    assert counts == {"decide and show": 30, "engines": 0, "science": 10}
    assert not counts["decide and show"] <= counts["science"] + counts["engines"]

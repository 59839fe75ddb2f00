"""The package's shape (DESIGN "layers that only point down"): no import cycle, a bottom layer that imports nothing
from the package, no module over the size a reader can hold."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "src" / "softmax_icl"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Package modules imported at module level (imports inside functions are not layering edges)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    out = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.startswith("softmax_icl"):
                out.add(mod)
                out.update(f"{mod}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("softmax_icl"))
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module_name(p): p for p in PKG.rglob("*.py")}
    graph = {}
    for name, path in files.items():
        graph[name] = {m for m in _imports(path) if m in files and m != name}
    return graph


def test_no_import_cycle():
    graph = _graph()
    state: dict[str, int] = {}

    def visit(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(nxt):] + [nxt]))
            if nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])


def test_bottom_layer_imports_nothing_from_the_package():
    assert _imports(PKG / "base.py") == set()


def test_cycle_detector_sees_a_cycle(tmp_path, monkeypatch):
    """The check above can fail: two modules importing each other are reported."""
    pkg = tmp_path / "softmax_icl"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from .b import x\n")
    (pkg / "b.py").write_text("from .a import y\n")
    monkeypatch.setattr(__import__(__name__), "PKG", pkg)
    try:
        test_no_import_cycle()
    except AssertionError as exc:
        assert "softmax_icl.a" in str(exc) and "softmax_icl.b" in str(exc)
    else:
        raise AssertionError("a cycle went unnoticed")


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
    classification engine's build also reads) must be in the Makefile's NOTEBOOKS_torch and not in SKIP_torch."""
    graph = _graph()
    torch_nbs, skipped = makefile_list("NOTEBOOKS_torch"), makefile_list("SKIP_torch")
    roots = {"classification_kernel_gd": ("softmax_icl.classification", "softmax_icl.figures.classification_kernel_gd")}
    for fig in ("window_adaptation", "norm_scaling", "generalization", "low_rank", "classification_kernel_gd"):
        reach, todo = set(), [m for m in graph if m.startswith(roots.get(fig, (f"softmax_icl.figures.{fig}",)))]
        while todo:
            m = todo.pop()
            if m not in reach:
                reach.add(m)
                todo += [n for n in graph.get(m, ()) if n != "softmax_icl.book.records"]  # records: provenance only
        if any(m.startswith("softmax_icl.engine.regression") for m in reach):
            assert f"notebooks/{fig}.ipynb" in torch_nbs and fig not in skipped, fig


def test_make_test_re_executes_every_notebook_under_each_backend():
    """The Makefile lists the notebooks (longest first, for the scheduling of its test processes) rather than the
    folder: a notebook added to notebooks/ must be added to that list (NOTEBOOKS, which both passes take), or `make
    test` would not check it."""
    nbs = sorted(f"notebooks/{p.name}" for p in (PKG.parents[1] / "notebooks").glob("*.ipynb"))
    assert nbs
    for name in ("NOTEBOOKS_auto", "NOTEBOOKS_torch"):
        assert sorted(makefile_list(name)) == nbs, name


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

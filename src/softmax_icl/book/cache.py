"""A cache of trained results keyed by the resolved configuration.

Re-executing a notebook to change a plot does not retrain: results are stored under a hash of
everything that determines them (what was computed, the resolved settings, the device, the package
version, a fingerprint of the computational modules' source and which CPU kernel ran). Writes go to a temporary file in the cache directory and are moved into place with
``os.replace``, so an interrupted run never leaves a half-written entry behind.

A figure's entries are fingerprinted with its own folder ``figures/<figure>/``, the compute folders that folder
imports (``classification/`` for the classification chapter) and the shared compute modules its code reaches through
imports, not with the other figures' folders nor with shared modules it never imports: editing one chapter's
analysis retrains that chapter only, a change to ``theory/`` leaves the chapters that do not use it cached, and a
long run of one figure (the ``paper`` profile, stage by stage) stays cached while another figure's code changes.

Location: ``$SOFTMAX_ICL_CACHE_DIR``, else ``~/.cache/softmax_icl``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import pickle
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..base import atomic_write_bytes, cache_dir


#: Modules whose code determines trained and evaluated numbers (a missing one is an error, never a skip). Plotting
#: code is left out on purpose, so restyling a figure does not invalidate the cache.
COMPUTE_MODULES = ("base.py", "streams.py", "tasks.py", "models.py", "training.py", "metrics.py", "baselines.py",
                   "theory/__init__.py", "theory/theorem34.py", "theory/fits.py", "theory/matrices.py",
                   "theory/population.py", "theory/window_scan.py", "engine/common.py", "engine/regression.py",
                   "engine/classification.py", "engine/philox_triton.py", "engine/regression.c",
                   "engine/classification.c", "engine/philox.h", "engine/adam.h")
#: The C sources each engine module compiles: they come with the module into a fingerprint.
ENGINE_SOURCES = {"engine/regression.py": ("engine/common.py", "engine/regression.c", "engine/philox.h",
                                           "engine/adam.h"),
                  "engine/classification.py": ("engine/common.py", "engine/classification.c", "engine/philox.h",
                                               "engine/adam.h")}
#: Folders whose every module is compute code too (each figure's sweeps and analyses, paper 2's subpackage), except
#: the modules named here, which only draw, declare parameters, write text from computed results, or decide the
#: checks from them (a verdict is never cached: rewording or re-deciding a check keeps the trained results).
COMPUTE_TREES = ("figures", "classification")
NOT_COMPUTE = ("plots.py", "params.py", "summary.py", "answer.py", "claims.py")


def _shared_files(here: Path) -> list[Path]:
    missing = [name for name in COMPUTE_MODULES if not (here / name).is_file()]
    if missing:
        raise FileNotFoundError(f"cache fingerprint: compute module(s) {', '.join(missing)} not found in {here}; "
                                "update softmax_icl.book.cache.COMPUTE_MODULES when a module moves")
    return [here / name for name in COMPUTE_MODULES]


def _tree_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if p.name not in NOT_COMPUTE)


def _imports(path: Path, here: Path) -> tuple[set[Path], set[str]]:
    """What ``path`` imports (at any depth of the file: imports inside functions count): the compute folders
    (``figures/<name>/``, ``classification/``) and the shared compute modules (names of :data:`COMPUTE_MODULES`)."""
    package = path.parent.relative_to(here).parts
    trees, modules = set(), set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = list(package[:len(package) - (node.level - 1)]) if node.level - 1 <= len(package) else []
            stem = base + (node.module.split(".") if node.module else [])
            targets = [stem] + [stem + [alias.name] for alias in node.names]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            targets = [n.split(".")[1:] for n in names if n.split(".")[0] == here.name]
            if isinstance(node, ast.ImportFrom) and targets:
                targets += [targets[0] + [alias.name] for alias in node.names]
        else:
            continue
        for parts in targets:
            if len(parts) >= 2 and parts[0] == "figures" and (here / "figures" / parts[1]).is_dir():
                trees.add(here / "figures" / parts[1])
            elif parts and parts[0] in COMPUTE_TREES and parts[0] != "figures" and (here / parts[0]).is_dir():
                trees.add(here / parts[0])
            for name in ("/".join(parts) + ".py", "/".join(parts) + "/__init__.py"):
                if parts and name in COMPUTE_MODULES:
                    modules.add(name)
    return trees, modules


def _with_data(modules: set[str]) -> set[str]:
    """The modules and the sources each engine module among them compiles (:data:`ENGINE_SOURCES`)."""
    out = set(modules)
    for name in modules:
        out.update(ENGINE_SOURCES.get(name, ()))
    return out


def compute_files(figure: str | None = None) -> list[Path]:
    """Every source file whose code determines a cached number, in a fixed order.

    With ``figure``: ``figures/<figure>/``, every compute folder it imports, and the shared compute modules that
    code imports, each followed through its own imports (``figures/window_adaptation`` imports ``training``, which
    imports ``engine/regression.py``, whose ``regression.c`` comes with it), so a change to a shared module re-keys only the figures
    whose code reaches it. An unknown figure gets every file (a wider fingerprint is never wrong, a narrower one
    would be).
    """
    here = Path(__file__).resolve().parents[1]
    files = _shared_files(here)
    if figure is not None and (here / "figures" / figure).is_dir():
        todo, trees, modules = [here / "figures" / figure], [], set()
        scanned: set[Path] = set()
        while todo:
            item = todo.pop()
            paths = _tree_files(item) if item.is_dir() else [item]
            if item.is_dir():
                if item in trees:
                    continue
                trees.append(item)
            for path in paths:
                if path in scanned:
                    continue
                scanned.add(path)
                new_trees, new_modules = _imports(path, here)
                todo += sorted(new_trees - set(trees))
                todo += [here / m for m in sorted(new_modules - modules)]
                modules |= new_modules
        shared = _with_data(modules)
        return [p for name, p in zip(COMPUTE_MODULES, files) if name in shared] + [
            p for tree in sorted(trees) for p in _tree_files(tree)]
    for tree in COMPUTE_TREES:
        if (here / tree).is_dir():
            files += _tree_files(here / tree)
        elif (here / f"{tree}.py").is_file():
            files.append(here / f"{tree}.py")
    return files


def code_fingerprint(figure: str | None = None) -> str:
    here = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in compute_files(figure):
        h.update(path.relative_to(here).as_posix().encode() + path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(tag: str, config: dict, device: str, figure: str | None = None) -> str:
    from ..engine.regression import backend

    # the fused kernel and the PyTorch code round differently: results of one are not the other's
    kernel = backend().split(" (")[0] if device.startswith("cpu") else "torch"
    payload = json.dumps({"tag": tag, "config": config, "device": device, "version": __version__,
                          "code": code_fingerprint(figure), "kernel": kernel}, sort_keys=True, default=str)
    return f"{tag}-{hashlib.sha256(payload.encode()).hexdigest()[:20]}"


def _meta_path(path: Path) -> Path:
    return path.with_suffix(".meta.json")


def cached(tag: str, config: dict, device: str, compute: Callable[[], Any], use_cache: bool = True,
           figure: str | None = None, info: dict | None = None) -> tuple[Any, bool]:
    """Return ``(value, hit)``: the stored value for this key, or ``compute()`` stored atomically.

    ``figure`` narrows the code fingerprint to that figure's code (:func:`compute_files`). With ``use_cache=False``
    the cache is neither read nor written. Beside each entry, ``<key>.meta.json`` keeps how long its computation
    took and when, so a run that reads it (a resumed paper run) can still say what the computation cost; ``info``,
    when given, receives ``seconds`` (None for an entry that predates this) and ``computed_at``, and ``parts`` for an
    entry assembled from parts trained apart.
    """
    info = {} if info is None else info
    path = cache_dir() / f"{cache_key(tag, config, device, figure)}.pkl" if use_cache else None
    if path is not None and path.exists():
        try:
            with open(path, "rb") as fh:
                value = pickle.load(fh)
        except Exception:  # unreadable entry (e.g. from an older format): recompute and replace it
            pass
        else:
            try:
                meta = json.loads(_meta_path(path).read_text())
            except (OSError, ValueError):
                meta = {}
            info.update(seconds=meta.get("seconds"), computed_at=meta.get("computed_at"))
            if meta.get("parts"):            # assembled from parts trained apart (tools/paper_stages.py --part)
                info["parts"] = meta["parts"]
            return value, True
    t0 = time.perf_counter()
    value = compute()
    info.update(seconds=time.perf_counter() - t0, computed_at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
    if path is not None:
        atomic_write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
        atomic_write_bytes(_meta_path(path), json.dumps({"tag": tag, "seconds": round(info["seconds"], 3),
                                                         "computed_at": info["computed_at"]}).encode())
    return value, False

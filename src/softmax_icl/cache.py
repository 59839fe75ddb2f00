"""A cache of trained results keyed by the resolved configuration.

Re-executing a notebook to change a plot does not retrain: results are stored under a hash of
everything that determines them (what was computed, the resolved settings, the device, the package
version, a fingerprint of the computational modules' source and which CPU kernel ran). Writes go to a temporary file in the cache directory and are moved into place with
``os.replace``, so an interrupted run never leaves a half-written entry behind.

Location: ``$SOFTMAX_ICL_CACHE_DIR``, else ``~/.cache/softmax_icl``.
"""

from __future__ import annotations

import hashlib
import json
import pickle
from pathlib import Path
from typing import Any, Callable

from . import __version__
from .base import atomic_write_bytes, cache_dir


#: Modules whose code determines trained and evaluated numbers (a missing one is an error, never a skip). Plotting
#: code is left out on purpose, so restyling a figure does not invalidate the cache.
COMPUTE_MODULES = ("base.py", "tasks.py", "models.py", "training.py", "metrics.py", "baselines.py", "theory.py",
                   "kernels/__init__.py", "kernels/readout.c")
#: Folders whose every module is compute code too (each figure's sweeps and analyses, paper 2's subpackage), except
#: the modules named here, which only draw or print.
COMPUTE_TREES = ("figures", "classification")
NOT_COMPUTE = ("plots.py", "params.py")


def compute_files() -> list[Path]:
    """Every source file whose code determines a cached number, in a fixed order."""
    here = Path(__file__).resolve().parent
    missing = [name for name in COMPUTE_MODULES if not (here / name).is_file()]
    if missing:
        raise FileNotFoundError(f"cache fingerprint: compute module(s) {', '.join(missing)} not found in {here}; "
                                "update softmax_icl.cache.COMPUTE_MODULES when a module moves")
    files = [here / name for name in COMPUTE_MODULES]
    for tree in COMPUTE_TREES:
        if (here / tree).is_dir():
            files += sorted(p for p in (here / tree).rglob("*.py") if p.name not in NOT_COMPUTE)
        elif (here / f"{tree}.py").is_file():
            files.append(here / f"{tree}.py")
    return files


def code_fingerprint() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for path in compute_files():
        h.update(path.relative_to(here).as_posix().encode() + path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(tag: str, config: dict, device: str) -> str:
    from .kernels import backend

    # the fused kernel and the PyTorch code round differently: results of one are not the other's
    kernel = backend().split(" (")[0] if device.startswith("cpu") else "torch"
    payload = json.dumps({"tag": tag, "config": config, "device": device, "version": __version__,
                          "code": code_fingerprint(), "kernel": kernel}, sort_keys=True, default=str)
    return f"{tag}-{hashlib.sha256(payload.encode()).hexdigest()[:20]}"


def cached(tag: str, config: dict, device: str, compute: Callable[[], Any], use_cache: bool = True) -> tuple[Any, bool]:
    """Return ``(value, hit)``: the stored value for this key, or ``compute()`` stored atomically.

    With ``use_cache=False`` the cache is neither read nor written.
    """
    if not use_cache:
        return compute(), False
    path = cache_dir() / f"{cache_key(tag, config, device)}.pkl"
    if path.exists():
        try:
            with open(path, "rb") as fh:
                return pickle.load(fh), True
        except Exception:  # unreadable entry (e.g. from an older format): recompute and replace it
            pass
    value = compute()
    atomic_write_bytes(path, pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))
    return value, False

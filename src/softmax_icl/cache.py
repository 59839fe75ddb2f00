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
import os
import pickle
import tempfile
from pathlib import Path
from typing import Any, Callable

from . import __version__


def cache_dir() -> Path:
    return Path(os.environ.get("SOFTMAX_ICL_CACHE_DIR") or Path.home() / ".cache" / "softmax_icl")


#: Modules whose code determines trained and evaluated numbers; plotting code is left out on purpose,
#: so restyling a figure does not invalidate the cache. (Figure modules version their own evaluation
#: layouts in the configuration they pass.)
COMPUTE_MODULES = ("tasks.py", "models.py", "training.py", "metrics.py", "baselines.py", "theory.py",
                   "classification.py", "kernels/__init__.py", "kernels/readout.c")


def code_fingerprint() -> str:
    here = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in COMPUTE_MODULES:
        path = here / name
        if path.exists():
            h.update(name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def cache_key(tag: str, config: dict, device: str) -> str:
    from .kernels import backend

    # the fused kernel and the PyTorch code round differently: results of one are not the other's
    kernel = backend().split(" (")[0] if device.startswith("cpu") else "torch"
    payload = json.dumps({"tag": tag, "config": config, "device": device, "version": __version__,
                          "code": code_fingerprint(), "kernel": kernel}, sort_keys=True, default=str)
    return f"{tag}-{hashlib.sha256(payload.encode()).hexdigest()[:20]}"


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file in the same directory and ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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

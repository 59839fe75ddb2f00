"""Where a run's numbers come from: the code's git revision, the environment, the device, the peak memory.

Nothing here trains or writes pages: :class:`softmax_icl.book.run.Run` asks for its provenance when it writes its
record (:mod:`softmax_icl.book.records`), and the chapters print it (:mod:`softmax_icl.book.chapter`).
"""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path

import torch

from .. import __version__
from ..base import OUTPUT_DIR_ENV
from ..engine import regression as engine

#: The revision of a copy of the code that has no git metadata (a tree copied to a GPU machine or a cluster node),
#: as the person who copied it states it; read only where git cannot tell.
REVISION_ENV = "SOFTMAX_ICL_REVISION"
#: The profile the book shows: only a run of this profile, with no parameter overridden, may write the book.
BOOK_PROFILE = "default"
#: The parameters that seed a run, as its provenance lists them.
SEED_PARAMETERS = ("data_seed", "init_seed", "eval_seed", "seeds")


def git_revision() -> str:
    """Short git revision (with ``-dirty`` when the package source or pyproject.toml has uncommitted changes;
    notebooks and book pages are outputs of the build, so they do not count).

    Where the code is not in a git checkout (a copied tree), ``$SOFTMAX_ICL_REVISION`` names it, marked
    ``(stated)`` since git did not check it; without it, ``unknown``."""
    here = Path(__file__).resolve().parents[1]          # the package: src/softmax_icl
    try:
        rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=here, capture_output=True, text=True,
                             timeout=10).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "../../src",
                                "../../pyproject.toml"], cwd=here, capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        rev, dirty = "", ""
    if not rev:
        stated = os.environ.get(REVISION_ENV, "").strip()
        return f"{stated} (stated)" if stated else "unknown"
    return rev + ("-dirty" if dirty else "")


def repo_root(start: Path | None = None) -> Path | None:
    """The checkout holding ``_config.yml`` and ``notebooks/``, searched upwards from ``start`` (the cwd)."""
    here = Path(start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if (p / "_config.yml").is_file() and (p / "notebooks").is_dir():
            return p
    return None


def default_output_dir(figure: str, profile: str = BOOK_PROFILE, custom: bool = False) -> Path:
    """Where a run writes its record and figures when the notebook gives no ``output_dir``.

    ``$SOFTMAX_ICL_OUTPUT_DIR`` when set (``softmax-icl run --in-place`` and ``build`` set it to the book; ``make
    test`` to a temporary folder). Otherwise never the book: ``runs/<figure>-<profile>/`` under the checkout (or
    under the cwd outside one), ``runs/<figure>-<profile>-custom/`` when a parameter differs from the profile's
    value. So a plain ``papermill notebooks/x.ipynb out.ipynb -p profile smoke`` cannot overwrite the book's record.
    """
    env = os.environ.get(OUTPUT_DIR_ENV)
    if env:
        return Path(env)
    return (repo_root() or Path.cwd()) / "runs" / f"{figure}-{profile}{'-custom' if custom else ''}"


def peak_memory_mb(device: torch.device) -> dict:
    """Peak memory of this process so far, in MB: ``host`` (its resident set) and, on a CUDA device, ``cuda`` (the
    largest amount PyTorch allocated there)."""
    out = {}
    try:
        import resource

        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss          # KB on Linux, bytes on macOS
        out["host"] = round(rss / (2**20 if platform.system() == "Darwin" else 2**10), 1)
    except (ImportError, OSError):
        pass
    if device.type == "cuda" and torch.cuda.is_available():
        out["cuda"] = round(torch.cuda.max_memory_allocated(device) / 2**20, 1)
    return out


def provenance(figure: str, profile: str, device: torch.device, cfg: dict, *, revision: str, fingerprint: str,
               use_cache: bool) -> dict:
    """A run's provenance, as its record keeps it: what ran (figure, profile, settings' seeds), on what (device,
    threads, the trainer's backend, torch and Python), from which code (package version, git revision, the result
    cache's code fingerprint), whether the cache was read, and the peak memory so far."""
    return {
        "figure": figure, "profile": profile, "device": str(device),
        "package_version": __version__, "git_revision": revision, "code_fingerprint": fingerprint,
        "torch": torch.__version__,
        "python": platform.python_version(), "threads": torch.get_num_threads(),
        "kernel": engine.backend() if device.type == "cpu" else "torch",
        "seeds": {k: cfg[k] for k in SEED_PARAMETERS if k in cfg},
        "use_cache": use_cache,
        "peak_memory_mb": peak_memory_mb(device),
    }

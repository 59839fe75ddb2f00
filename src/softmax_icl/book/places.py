"""Where the command line finds things and puts them: the book's checkout (from any folder), a run's folder of its
own (named by what the run changes, never one that holds an earlier run unless asked), and a check that a folder can
be written before any compute."""

from __future__ import annotations

import os
from pathlib import Path

from ..profiles import Figure, ParameterError, fmt

#: Where the book's checkout is, when the command runs outside it (``--book`` says the same).
BOOK_ENV = "SOFTMAX_ICL_BOOK"


def is_checkout(path: Path) -> bool:
    return (path / "_config.yml").is_file() and (path / "notebooks").is_dir()


def project_root(start: Path | None = None, book: Path | str | None = None) -> Path:
    """The checkout that holds ``_config.yml`` and ``notebooks/``: ``book`` (``--book``), else ``$SOFTMAX_ICL_BOOK``,
    else the first one found upwards from ``start`` (the cwd), else the checkout the package was installed from
    (an editable install: ``src/softmax_icl`` inside it)."""
    for given, what in ((book, "--book"), (os.environ.get(BOOK_ENV), BOOK_ENV)):
        if given:
            path = Path(given).expanduser().resolve()
            if not is_checkout(path):
                raise ParameterError(f"{what} {given}: not the book's checkout (no _config.yml and notebooks/ "
                                     "there); allowed: the folder of the repository checkout")
            return path
    here = (start or Path.cwd()).resolve()
    for p in (here, *here.parents):
        if is_checkout(p):
            return p
    installed = Path(__file__).resolve().parents[3]
    if is_checkout(installed):
        return installed
    raise ParameterError(f"no book checkout found (no _config.yml and notebooks/ in {here} or above it, nor where "
                         f"the package is installed from); run inside the checkout, or point at it with --book PATH "
                         f"or {BOOK_ENV}=PATH")


def check_writable(folder: Path, what: str) -> None:
    """``folder`` exists (made here if need be) and a file can be written in it, or a :class:`ParameterError` naming
    ``what`` (before any compute: a run must not train for minutes and then fail to write its record)."""
    import tempfile

    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".softmax-icl-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ParameterError(f"{what} {folder}: cannot write there ({exc.strerror or exc}); allowed: a folder this "
                             "user can create and write to") from None


#: A run folder's name holds at most this many characters of the parameters it changes (a longer list is cut and
#: keeps a short hash of the whole, so two runs never share a name by accident).
SLUG_CHARS = 80


def run_name(fig: Figure, profile: str, given: dict, seed_offset: int | None = None) -> str:
    """``<figure>-<profile>`` and what the run changes: ``window_adaptation-paper-sigma=0.5-L_values=1,4,16``."""
    import hashlib
    import re

    parts = ([f"seed-offset={seed_offset}"] if seed_offset else []) + [
        f"{k}={fmt(v).strip('[]').replace(', ', ',')}" for k, v in given.items()]
    slug = re.sub(r"[^A-Za-z0-9._,=+-]", "_", "-".join(parts))
    if len(slug) > SLUG_CHARS:
        slug = slug[:SLUG_CHARS - 9] + "-" + hashlib.sha256(slug.encode()).hexdigest()[:8]
    return f"{fig.name}-{profile}" + (f"-{slug}" if slug else "")


def run_folder(root: Path, name: str, replace: bool = False) -> Path:
    """``runs/<name>/``, or, where that holds an earlier run and ``replace`` is not asked for, the first of
    ``runs/<name>-2/``, ``-3``, ... that does not: a run never replaces another silently."""
    base = root / "runs" / name
    if replace:
        return base
    folder, k = base, 1
    while folder.exists() and any(folder.iterdir()):
        k += 1
        folder = base.with_name(f"{name}-{k}")
    return folder


def holds_run(folder: Path, fig: Figure) -> bool:
    """Whether ``folder`` holds a run of ``fig`` (its record or its executed notebook)."""
    return (folder / "results" / f"{fig.name}.json").exists() or (folder / fig.notebook).exists()

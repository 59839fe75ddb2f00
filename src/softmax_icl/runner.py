"""Execute figure notebooks through papermill without ever losing a good notebook.

The notebook is executed into a temporary file next to its destination; only when every cell ran
does ``os.replace`` move it into place. A failed run leaves the previous notebook untouched and
keeps the partial execution as ``<name>.failed.ipynb`` for inspection. The cell papermill injects
with the parameters is tagged ``remove-cell`` so the book does not show it.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from pathlib import Path

import nbformat

HIDE_TAG = "remove-cell"


class NotebookFailed(RuntimeError):
    """Execution of a notebook raised; the destination notebook was left as it was."""


@contextmanager
def _env(**values: str):
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def hide_injected_parameters(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and HIDE_TAG not in tags:
            tags.append(HIDE_TAG)
    nbformat.write(nb, path)


def execute_notebook(source: Path, destination: Path, parameters: dict, cwd: Path | None = None,
                     kernel_name: str = "python3", progress_bar: bool = True, env: dict | None = None) -> Path:
    """Run ``source`` with ``parameters`` and atomically place the executed notebook at ``destination``."""
    import papermill

    source, destination = Path(source), Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    tmp = destination.with_name(f".{destination.stem}.running.ipynb")
    failed = destination.with_name(f"{destination.stem}.failed.ipynb")
    # the kernel inherits this environment: no progress bars inside stored outputs
    with _env(SOFTMAX_ICL_PROGRESS="0", **(env or {})):
        try:
            papermill.execute_notebook(str(source), str(tmp), parameters=parameters, kernel_name=kernel_name,
                                       cwd=str(cwd or source.parent), progress_bar=progress_bar)
        except BaseException as exc:
            if tmp.exists():
                os.replace(tmp, failed)
            if isinstance(exc, KeyboardInterrupt):
                raise
            raise NotebookFailed(f"{source.name} failed; {destination} was left unchanged; the partial run is "
                                 f"in {failed}\n{exc}") from exc
    hide_injected_parameters(tmp)
    os.replace(tmp, destination)
    failed.unlink(missing_ok=True)
    return destination

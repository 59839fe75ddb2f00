"""Build both compiled CPU engines into the engine cache, at once: ``python -m softmax_icl.engine.build``.

Paper 1's engine (``softmax_icl.engine.regression``) takes about a minute of one core to compile, paper 2's
(``softmax_icl.engine.classification``) a few seconds; the first notebook that needs one would otherwise compile it
then. ``make setup`` runs this in the background while pip installs the book's and the tests' packages (a single
process that leaves the second core idle), so a fresh machine's first ``make book`` or ``make test`` finds them
built; the ``cores`` executor (:mod:`softmax_icl.dispatch`) runs it before its notebooks, which would otherwise each
compile the engines at once. It needs only NumPy and PyTorch installed (``PYTHONPATH=src`` when the package itself is
not installed yet). Not compute code: it only asks each engine to build itself (no record's fingerprint reads it).

The libraries go to ``$SOFTMAX_ICL_CACHE_DIR/kernels`` (default ``~/.cache/softmax_icl/kernels``), each named by a
hash of its sources, compiler, flags and CPU, as the engines build them themselves: a source edited later, another
compiler or another machine gets a new build when first needed. Prints how each was built (or why not: without a C
compiler the notebooks run the same computation in PyTorch) and exits 0 either way; a build is never required.
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor


#: What a line of the output starts with, per engine.
ENGINES = ("engine paper 1", "engine paper 2")


def build(which: str) -> str:
    """Build (or find built) one engine; ``<name>: <how it was built, or why not> (<seconds> s)``."""
    t = time.perf_counter()
    if which == ENGINES[0]:
        from softmax_icl.engine import regression
        how = regression.backend()
    else:
        from softmax_icl.engine import classification
        how = classification.backend()
    return f"{which}: {how} ({time.perf_counter() - t:.0f} s)"


def main(argv=None) -> int:
    """Build the engines named in ``argv`` (among :data:`ENGINES`, as ``"paper 1"`` or ``"engine paper 1"``; default:
    both, at once)."""
    names = list(sys.argv[1:] if argv is None else argv)
    wanted = [n if n.startswith("engine ") else f"engine {n}" for n in names] or list(ENGINES)
    unknown = [n for n in wanted if n not in ENGINES]
    if unknown:
        print(f"unknown engine(s) {unknown}; allowed values: {', '.join(ENGINES)}", file=sys.stderr)
        return 2
    import softmax_icl.engine.regression  # noqa: F401 - import once here, not in two threads at once

    # the compilers run as subprocesses, so two threads compile at once
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        for line in pool.map(build, wanted):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

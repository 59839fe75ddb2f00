"""Regression on any machine: the records a fresh execution of the notebooks wrote, held against the book's.

nbval (``make test``) re-executes every notebook with ``SOFTMAX_ICL_OUTPUT_DIR`` pointing at a temporary folder and
compares only the verdict lines (the ``run.finish()`` cell), which carry no measured number. This test then reads
the fresh records from ``$SOFTMAX_ICL_OUTPUT_DIR/results/`` and compares them with ``book/results/<figure>.json``:
every verdict exactly, every number within the declared tolerances (:mod:`softmax_icl.book.compare`,
``softmax_icl.profiles.DEFAULT_RTOL``, per-figure ``Figure.tolerances``).

The Makefile runs it as its own pytest call after the nbval pass, with ``SOFTMAX_ICL_REQUIRE_FRESH=1``, so a missing
fresh record is a failure there; anywhere else (a plain ``pytest tests``) it skips, saying why.
"""

import json
import os
from pathlib import Path

import pytest

from softmax_icl.book.compare import compare_records, figure_tolerances, report
from softmax_icl.figures import FIGURES

ROOT = Path(__file__).resolve().parents[1]
REQUIRE = os.environ.get("SOFTMAX_ICL_REQUIRE_FRESH") == "1"


def _fresh_dir() -> Path | None:
    out = os.environ.get("SOFTMAX_ICL_OUTPUT_DIR")
    return Path(out) / "results" if out else None


@pytest.mark.parametrize("figure", list(FIGURES))
def test_fresh_record_matches_the_book(figure):
    fresh_dir = _fresh_dir()
    fresh = fresh_dir / f"{figure}.json" if fresh_dir else None
    if fresh is None or not fresh.is_file():
        reason = (f"no fresh record of {figure!r} (expected {fresh}): the notebooks were not executed with "
                  "SOFTMAX_ICL_OUTPUT_DIR set (`make test` does: nbval first, then this test)")
        if REQUIRE:
            pytest.fail(reason)
        pytest.skip(reason)
    book = json.loads((ROOT / "book" / "results" / f"{figure}.json").read_text())
    new = json.loads(fresh.read_text())
    rows = compare_records(book, new, figure_tolerances(FIGURES[figure]))
    text, ok = report({figure: rows}, verbose=False)
    assert ok, "fresh record differs from book/results (only the differences are listed):\n" + text


@pytest.mark.parametrize("figure", list(FIGURES))
def test_the_books_records_are_of_the_code_as_it_stands(figure):
    """The book's records at both scales were computed by the code of this checkout: each carries the fingerprint
    the result cache keys the figure's stages by (the source of every module its numbers depend on). An edit to
    that code, even one that changes no number, without records made anew leaves the book showing another code's
    numbers and sets the two scales apart on the results page (records of other code are not compared)."""
    from softmax_icl.book.cache import code_fingerprint

    now = code_fingerprint(figure)
    for path in (ROOT / "book" / "results" / f"{figure}.json", ROOT / "book" / "results" / "paper" / f"{figure}.json"):
        recorded = json.loads(path.read_text())["provenance"]["code_fingerprint"]
        assert recorded == now, (f"{path.relative_to(ROOT)} was computed by code with fingerprint {recorded}; the "
                                 f"code of {figure!r} now has {now}: rerun the figure at that scale "
                                 "(`softmax-icl run FIGURE --in-place`, `softmax-icl build --profile paper --publish "
                                 "--only FIGURE`), or undo the edit")


#: The default profile executed on a CUDA GPU (an H200, five notebooks at once: ``tools/gpu_session.sh REV default
#: BUDGET``), its records committed as they came back from the machine.
GPU_RECORDS = ROOT / "benchmarks" / "results" / "gpu_h200_default"


@pytest.mark.parametrize("figure", list(FIGURES))
def test_the_gpus_default_record_matches_the_books_cpu_record(figure):
    """The GPU draws the CPU's tasks (counter-based streams) and computes the same functions, so its record of the
    default profile is the book's CPU record up to float rounding: every verdict equal, every number within the
    tolerances nbval's regression pass uses. A GPU record of other code or other parameters than the book's (the
    figure changed since the GPU run) is evidence about that code only, and a book record made on a GPU is not the
    CPU's: the test then skips and says why."""
    gpu = json.loads((GPU_RECORDS / f"{figure}.json").read_text())
    book = json.loads((ROOT / "book" / "results" / f"{figure}.json").read_text())
    assert gpu["provenance"]["device"].startswith("cuda")
    if book["provenance"]["device"] != "cpu":
        pytest.skip(f"the book's record of {figure!r} was computed on {book['provenance']['device']}, not on the CPU")
    if (gpu["provenance"]["code_fingerprint"] != book["provenance"]["code_fingerprint"]
            or gpu["parameters"] != book["parameters"]):
        pytest.skip(f"the GPU record of {figure!r} is of other code or parameters than the book's (fingerprint "
                    f"{gpu['provenance']['code_fingerprint']} vs {book['provenance']['code_fingerprint']}): rerun "
                    "`bash tools/gpu_session.sh REV default BUDGET` on a GPU and copy its records here")
    rows = compare_records(book, gpu, figure_tolerances(FIGURES[figure]))
    text, ok = report({figure: rows}, verbose=False)
    assert ok, "the GPU's record differs from the book's CPU record (only the differences are listed):\n" + text


# -- the comparison itself (fast; runs in every pass) ---------------------------------------------------------------

def _record(value=1.0, passed=True, numbers=None):
    return {"notebook": "window_adaptation", "profile": "default",
            "claims": [{"id": "c", "statement": "s", "passed": passed, "value": value, "threshold": "> 0"}],
            "key_numbers": numbers if numbers is not None else {"x": [1.0, 2.0], "label": "L = 1"}}


def test_compare_accepts_rounding_and_rejects_a_flipped_verdict_or_a_moved_number():
    from softmax_icl.profiles import DEFAULT_RTOL

    ok = compare_records(_record(), _record(value=1.0 + DEFAULT_RTOL / 2))
    assert all(r.ok for r in ok)
    assert not all(r.ok for r in compare_records(_record(), _record(passed=False)))
    other = _record()
    other["claims"][0]["statement"] = "s (at init: 4.31)"
    assert [r.path for r in compare_records(_record(), other) if not r.ok] == ["claims.c.statement"]
    moved = compare_records(_record(), _record(numbers={"x": [1.0, 2.0 * (1 + 2 * DEFAULT_RTOL)], "label": "L = 1"}))
    assert [r.path for r in moved if not r.ok] == ["key_numbers.x[1]"]
    shape = compare_records(_record(), _record(numbers={"x": [1.0], "label": "L = 1"}))
    assert not all(r.ok for r in shape)
    assert not all(r.ok for r in compare_records(_record(), _record(numbers={"x": [1.0, 2.0], "label": "L = 2"})))


def test_compare_uses_seed_standard_errors_and_declared_overrides():
    ref = _record(numbers={"slope": 0.01, "slope_se": 0.005})
    assert all(r.ok for r in compare_records(ref, _record(numbers={"slope": 0.018, "slope_se": 0.005})))
    assert not all(r.ok for r in compare_records(ref, _record(numbers={"slope": 0.03, "slope_se": 0.005})))
    loose = compare_records(_record(), _record(value=1.5), {"claims.c.value": 0.6})
    assert all(r.ok for r in loose)
    skipped = compare_records(_record(), _record(value=9.0), {"claims.c": None})
    assert all(r.ok for r in skipped)


@pytest.mark.parametrize("figure", list(FIGURES))
def test_nbval_checks_only_the_verdict_lines(figure):
    """Only the cell that prints run.finish() is compared by nbval (exactly); numbers go through the record."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / FIGURES[figure].notebook, as_version=4)
    checked = [c for c in nb.cells if c.cell_type == "code" and "NBVAL_CHECK_OUTPUT" in c.source]
    assert checked, "no cell is checked by nbval: the verdict lines must be"
    for cell in checked:
        assert "run.finish()" in cell.source, ("a nbval-checked cell that does not print the verdicts (numbers differ "
                                               f"in their last digits between machines):\n{cell.source}")
        text = "".join(o.get("text", "") for o in cell.get("outputs", []))
        assert " -- value " not in text, "verdict lines with measured values: re-execute the notebook"


def test_statements_compared_up_to_measured_decimals_as_nbval_does():
    """A statement's measured decimals may round differently on another machine; anything else must match, and the
    sanitiser nbval uses (make test) masks exactly what compare masks."""
    import configparser
    import re

    from softmax_icl.book.compare import MEASURED, mask_measured

    ref = {"claims": [{"id": "c", "statement": "agreement 0.971 at n = [10, 30]", "passed": True, "value": 1.0,
                       "threshold": "> 0"}], "key_numbers": {}}
    rounded = json.loads(json.dumps(ref))
    rounded["claims"][0]["statement"] = "agreement 0.970 at n = [10, 30]"
    reworded = json.loads(json.dumps(ref))
    reworded["claims"][0]["statement"] = "agreement 0.971 at n = [10]"
    assert all(r.ok for r in compare_records(ref, rounded, {}))
    assert not all(r.ok for r in compare_records(ref, reworded, {}))
    cfg = configparser.ConfigParser()
    cfg.read(Path(__file__).resolve().parents[1] / "notebooks" / "nbval_sanitize.cfg")
    assert cfg.sections() == ["glued-images", "measured-decimals"]          # the images first, whole
    assert re.compile(cfg["measured-decimals"]["regex"]).pattern == MEASURED.pattern
    png, mask = re.compile(cfg["glued-images"]["regex"]), cfg["glued-images"]["replace"]
    one, other = "iVBORw0KGgoAAAANSUhEUgAA12e5+/=\nAB", "iVBORw0KGgoAAAANSUhEUgBB34e7/+==\nCD"
    assert png.sub(mask, one) == png.sub(mask, other) == mask               # two renderings of a glued figure
    assert png.sub(mask, "PASS  c: agreement 0.971") == "PASS  c: agreement 0.971"
    assert mask_measured("L = 0.5 -> 2, 1e-3") == "L = # -> 2, #"


@pytest.mark.parametrize("figure", list(FIGURES))
def test_no_wall_clock_time_among_the_compared_numbers(figure):
    """Times depend on the machine and its load: they belong in the record's ``timings`` (provenance); among
    ``key_numbers`` the regression check would compare them as results (CI failed that way once: 208 s -> 14.7 s)."""
    import re

    from softmax_icl.book.compare import _leaves

    path = ROOT / "book" / "results" / f"{figure}.json"
    if not path.is_file():
        pytest.skip(f"no committed record of {figure}")
    numbers = json.loads(path.read_text()).get("key_numbers", {})
    timed = re.compile(r"(seconds|elapsed|wall|_time\b|timing)", re.I)
    compared = [r.path for r in _leaves("key_numbers", numbers, numbers, None, figure_tolerances(FIGURES[figure]))
                if r.note != "not compared"]
    assert not [p for p in compared if timed.search(p)], f"wall-clock times among {figure}'s compared key_numbers"


@pytest.mark.parametrize("figure", list(FIGURES))
def test_every_standard_error_in_a_record_sits_beside_its_number(figure):
    """The regression tolerance of a number widens to 2 standard errors only when its s.e. is the sibling key
    ``<name>_se`` (or ``<name>_stderr``): an s.e. under another name leaves its number at the relative tolerance,
    which a near-zero difference of two losses cannot meet on another machine (CI failed that way: 7.3e-05 ->
    7.9e-05 with its s.e. 6e-04 stored as ``rate_se``)."""
    path = ROOT / "book" / "results" / f"{figure}.json"
    if not path.is_file():
        pytest.skip(f"no committed record of {figure}")
    orphans = []

    def walk(x, where):
        if isinstance(x, dict):
            for k, v in x.items():
                if k.endswith(("_se", "_stderr")) and k.rsplit("_", 1)[0] not in x:
                    orphans.append(f"{where}.{k}")
                walk(v, f"{where}.{k}")
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, f"{where}[{i}]")

    walk(json.loads(path.read_text()).get("key_numbers", {}), "key_numbers")
    assert not orphans, f"standard errors without their number beside them: {orphans[:5]}"

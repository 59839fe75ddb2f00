"""The project's text speaks of the project alone, and the rendered book names no folder of the machine that built it.

* **Words about the work, not the project.** Every tracked text file (``git ls-files``: the sources, tests, tools,
  docs, the book's pages and the notebooks' cells) is searched for what belongs to the history of the work (which git
  keeps) rather than to the project: dates (``YYYY-MM-DD``), commit hashes cited as such (7-12 hex digits in
  backticks or after "commit", "revision" or "at"), "issue N", "session", "round of work" / "the Nth round", "SPEC
  n", "our spec" and "(spec)" (a document the reader does not have), "papermill replaces". Not searched: the run records
  (``book/results/``, ``benchmarks/results/``: data, whose provenance names revisions on purpose), the source material
  (``sources/papers/``: the authors' words), lockfiles and binary files, and a notebook's outputs (written by the
  code, which is searched). The changelog pages (``book/changelog*.md``) are the record of the book's changes: they
  may give dates and revisions, but no words about the work either.
* **No folder of the builder's machine in a page.** A page that printed a default argument's value
  (``PosixPath('/home/.../book/claims.yml')``) showed whoever built the book their own folders, and at a long enough
  path it overflowed the column. :func:`machine_paths_in` lists every occurrence of the checkout's absolute path (and
  of the Python environment's and the home folder's) in an HTML build; the browser test's build
  (``tests/test_book_browser.py``) is held to it, and so is ``_build/html`` here when ``make book`` has made one.

Both detectors are tested on planted text first, so a test that finds nothing has been shown able to find something.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve().relative_to(ROOT).as_posix()   # the detector's own patterns match themselves

#: What the work's history says and the project's text must not; each name is what a hit reports.
PROCESS_WORDS = {
    "date": re.compile(r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b"),
    "commit hash": re.compile(r"`(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}(?:-dirty)?`"
                              r"|\b(?:commit|revision|at)\s+(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\b"),
    "issue number": re.compile(r"\bissues?\s+#?\d+", re.I),
    "session": re.compile(r"\bsessions?\b", re.I),
    "round of work": re.compile(r"\bround of work\b|\bthe\s+(?:\d+(?:st|nd|rd|th)|[a-z]+(?:st|nd|rd|th))\s+round\b",
                                re.I),
    "spec reference": re.compile(r"\bSPEC\s+\d|\bour\s+spec\b|(?:^|\s)\(spec\)", re.I),
    "papermill's doing": re.compile(r"\bpapermill replaces\b", re.I),
}
#: The changelog pages may give dates and revisions (they are the record of the book's changes).
CHANGELOG = re.compile(r"^book/changelog[^/]*\.md$")
CHANGELOG_ALLOWS = {"date", "commit hash"}
#: Not searched (see the module's docstring).
SKIPPED = re.compile(r"^(?:book/results/|benchmarks/results/|sources/papers/)|(?:^|/)[^/]*\.lock$|package-lock\.json$")
BINARY = re.compile(r"\.(?:png|jpe?g|gif|pdf|svg|ico|woff2?|ttf|whl|gz|tgz|zip|pkl|so|npz|npy)$", re.I)


def text_of(path: Path) -> str:
    """The searched text of a file: a notebook's cell sources (not its outputs, which the code writes), else all."""
    raw = path.read_text(encoding="utf-8", errors="replace")
    if path.suffix != ".ipynb":
        return raw
    cells = json.loads(raw).get("cells", [])
    return "\n".join("".join(c.get("source", "")) for c in cells)


def process_words(rel: str, text: str) -> list[str]:
    """``rel:line: [what] text`` for every hit of :data:`PROCESS_WORDS` in ``text`` (the file ``rel``)."""
    allowed = CHANGELOG_ALLOWS if CHANGELOG.match(rel) else set()
    hits = []
    for number, line in enumerate(text.splitlines(), 1):
        for what, pattern in PROCESS_WORDS.items():
            if what not in allowed and pattern.search(line):
                hits.append(f"{rel}:{number}: [{what}] {line.strip()[:160]}")
    return hits


def tracked_text_files(root: Path = ROOT) -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"no git checkout to list the tracked files of ({err})")
    return sorted(f for f in out.split("\0") if f and f != THIS and not SKIPPED.search(f) and not BINARY.search(f)
                  and (root / f).is_file())


def test_the_process_word_detector_finds_each_kind_in_a_planted_file(tmp_path):
    year = "20" + "26"                                   # split, so that this file itself holds no hit
    planted = {
        "date": f"measured on {year}-11-23 with the code of then",
        "commit hash": "the records of `" + "3e79da4" + "` were regenerated at " + "45b4b01" + ".",
        "issue number": "Device hygiene of the training path (iss" + "ue 13).",
        "session": "as the twentieth ses" + "sion measured",
        "round of work": "in the third ro" + "und, the step was fused",
        "spec reference": "both reported, SP" + "EC 1.4",
        "spec reference, bare": "Setting (sp" + "ec): d = 10",
        "papermill's doing": "the cell holds the parameters (papermill repl" + "aces them)",
    }
    assert {w.split(",")[0] for w in planted} == set(PROCESS_WORDS)
    for kind, line in planted.items():
        what = kind.split(",")[0]
        page = tmp_path / "page.md"
        page.write_text(f"A first line about the project.\n{line}\n", encoding="utf-8")
        hits = process_words("book/page.md", text_of(page))
        assert hits == [f"book/page.md:2: [{what}] {line}"], (kind, hits)
    clean = ("The engine draws every task from Philox4x32-10 keyed on (seed, step, task); run `softmax-icl list`; "
             "importlib.util.module_from_spec(spec) at 1e-7 after 8 rounds")
    assert process_words("README.md", clean) == []
    # a changelog may date its entries and name revisions, but not speak of the work's sessions
    entry = f"## {year}-11-27: a GPU run is held to the CPU's numbers (records of `" + "3e79da4" + "`)"
    assert process_words("book/changelog.md", entry) == []
    assert process_words("book/changelog.md", "as the fourth ses" + "sion found") != []
    # a notebook is searched in its cells' sources, not in its outputs
    nb = tmp_path / "x.ipynb"
    nb.write_text(json.dumps({"cells": [
        {"cell_type": "markdown", "source": ["Defaults (our sp" + "ec).\n"]},
        {"cell_type": "code", "source": ["print(1)\n"], "outputs": [{"text": [f"{year}-01-01\n"]}]}]}))
    assert [h.split("]")[0] for h in process_words("notebooks/x.ipynb", text_of(nb))] == [
        "notebooks/x.ipynb:1: [spec reference"]


def test_tracked_text_speaks_of_the_project_alone():
    files = tracked_text_files()
    assert "README.md" in files and any(f.endswith(".ipynb") for f in files), files[:20]
    hits = [h for f in files for h in process_words(f, text_of(ROOT / f))]
    assert not hits, ("words about the work process (dates, commit hashes, issue numbers, sessions, rounds, the "
                       "spec) in the project's text; say what the project does and why, and leave the history to "
                       "git:\n" + "\n".join(hits))


# -- no folder of the machine in the rendered book -------------------------------------------------------------------

def machine_folders(root: Path = ROOT) -> list[str]:
    """The absolute folders of this machine that a page must not name: the checkout, the Python environment, home."""
    found = set()
    for p in (root, Path(sys.prefix), Path(sys.exec_prefix), Path.home()):
        found |= {str(p), str(p.resolve())}
    return sorted((f for f in found if len(f) > 1), key=len, reverse=True)


def machine_paths_in(html: Path, folders: list[str]) -> list[str]:
    """``page: ...excerpt...`` for every occurrence of one of ``folders`` in the text files of an HTML build (its
    pages, search index and the sources it offers for download)."""
    hits = []
    for path in sorted(html.rglob("*")):
        if not path.is_file() or path.suffix not in (".html", ".js", ".txt", ".ipynb", ".md", ".rst", ".json"):
            continue
        if "_static" in path.relative_to(html).parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for folder in folders:
            for m in re.finditer(re.escape(folder) + r"(?=[/'\"<\s]|$)", text):
                excerpt = text[max(0, m.start() - 60):m.end() + 60].replace("\n", " ")
                hits.append(f"{path.relative_to(html)}: ...{excerpt}...")
    return hits


def test_the_machine_path_detector_finds_a_planted_path(tmp_path):
    html = tmp_path / "html"
    (html / "book" / "api").mkdir(parents=True)
    (html / "_static").mkdir()
    folder = "/srv/a-rather-long/checkout/of-the-book"
    (html / "book" / "api" / "softmax_icl.ledger.html").write_text(
        f"<dt>LEDGER_PATH = PosixPath('{folder}/book/claims.yml')</dt>")
    (html / "index.html").write_text(f"<p>nothing here but {folder}-like text and {folder}x</p>")
    (html / "_static" / "theme.js").write_text(folder + "/x")             # the theme's files are not the book's
    hits = machine_paths_in(html, [folder])
    assert len(hits) == 1 and hits[0].startswith("book/api/softmax_icl.ledger.html: ") and "claims.yml" in hits[0]
    assert machine_paths_in(html, ["/srv/elsewhere"]) == []


def assert_no_machine_paths(html: Path) -> None:
    hits = machine_paths_in(html, machine_folders())
    assert not hits, ("rendered pages name folders of the machine that built the book (a value computed at import "
                      "time? see _ext/book_build.py):\n" + "\n".join(hits[:40]))


def test_the_books_html_build_names_no_folder_of_the_machine():
    """``make book``'s build (``_build/html``) or ``SOFTMAX_ICL_BOOK_HTML``; the browser test holds its own build."""
    html = Path(os.environ.get("SOFTMAX_ICL_BOOK_HTML") or ROOT / "_build" / "html")
    if not (html / "index.html").is_file():
        pytest.skip(f"no HTML build at {html} (make book; tests/test_book_browser.py checks the build it makes)")
    assert_no_machine_paths(html)

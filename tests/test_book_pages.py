"""Generated pages (results summary, settings table) match what the code and the records say."""

from pathlib import Path

from softmax_icl.bookgen import results_markdown, settings_markdown
from softmax_icl.registry import FIGURES

ROOT = Path(__file__).resolve().parents[1]


def test_committed_results_summary_is_generated_from_the_records():
    assert (ROOT / "book" / "results_summary.md").read_text() == results_markdown(ROOT / "book" / "results"), \
        "book/results_summary.md is stale: run `softmax-icl pages`"


def test_committed_settings_page_matches_the_registry():
    assert (ROOT / "book" / "settings.md").read_text() == settings_markdown(), \
        "book/settings.md is stale: run `softmax-icl pages`"


def test_settings_page_lists_every_parameter_of_every_figure():
    text = settings_markdown()
    for fig in FIGURES.values():
        assert fig.title in text
        for name in fig.params:
            assert f"`{name}`" in text


def test_every_notebook_is_in_the_table_of_contents():
    toc = (ROOT / "_toc.yml").read_text()
    for fig in FIGURES.values():
        assert f"notebooks/{fig.name}" in toc

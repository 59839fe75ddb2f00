"""The rendered book as a reader meets it: every page opened in headless Chromium with no network, at two widths.

The book is built once from the committed notebooks (execution off, warnings are errors) into a temporary folder;
then every HTML page is loaded in Debian's Chromium through chromedriver (selenium), with all host names resolving to
nothing, once with a viewport of 1400 x 900 CSS px and once with 800 x 900 (a wide and a narrow window). The pass over the pages (the ``survey`` fixture) records what each page shows; each test below then asserts
one property of every page at both widths, and names the page, the width, the element and by how much it fails:

* ``test_math_is_typeset``: every formula typeset by MathJax (``mjx-container``), none in error, and no raw TeX left
  in the rendered prose outside code (``\\frac``, ``\\(``, or caret/brace pseudo-TeX such as ``x^{2}``, ``M_{K}``);
* ``test_images_load``, ``test_internal_links_resolve``, ``test_no_console_errors``,
  ``test_no_request_leaves_the_machine``: every image loaded, every internal link and ``#anchor`` exists, nothing
  logged as an error, nothing requested but ``file:``/``data:``/``blob:``/``about:`` URLs;
* ``test_nothing_is_wider_than_the_column``: no element of the content column (``article.bd-article``), nor its
  text, reaches past the column's right edge, and none scrolls sideways (a table in a horizontal scroller is wider
  than the column too);
* ``test_no_table_cell_breaks_a_token``: no whitespace-delimited token of a table cell (a check id, a number) is
  laid out over two lines, and none sticks out of its cell;
* ``test_landing_page_has_one_claims_table_per_paper``: the root page has one ``table.claims-ledger`` per paper,
  with one row per entry of that paper in the claims ledger (``book/claims.yml``);
* ``test_figure_text_is_legible``: every figure that carries the text-size metadata of ``softmax_icl.plotting.save``
  shows its smallest text at 10 CSS px or more, and every image of a chapter and of the landing page carries it;
* ``test_first_figure_within_two_screens``: a chapter's first figure starts within two window heights of the top;
* ``test_landing_page_answers_each_paper_in_its_first_screen``: one item per paper of the ledger, with its badge,
  lies within the page's first 900 CSS px, and the overview figure follows it from the first screen into the second;
* ``test_landing_page_speaks_in_words_within_three_screens``: the landing page is at most three screens, and its
  first screen uses none of the machinery's words (bound, margin, seeds, threshold, ...);
* ``test_badges_read_at_4_5_to_1``: every badge's text on its background at a WCAG contrast of 4.5:1 or more;
* ``test_folded_blocks_are_no_taller_than_their_title``: a folded block (closed ``<details>``, folded dropdown) is
  at most 60 CSS px tall as the page opens;
* ``test_settings_page_is_at_most_six_screens``: the settings page is at most six screens of 900 CSS px at every
  width, as it opens;
* ``test_chapters_keep_the_machinery_in_their_fold``, ``test_chapters_quote_the_authors_within_three_screens``,
  ``test_chapters_fold_at_most_two_figures``, ``test_the_papers_figures_show_without_a_click``: a chapter, as it
  opens, uses the machinery's words in at most a tenth of its sentences, quotes the authors within three screens,
  folds at most two figures and shows every figure of the papers it reproduces.

Folded content (``<details>``, sphinx-togglebutton dropdowns) is measured unfolded, as a reader who opens it sees it;
the position of the first figure and the screenshots are taken as the page opens.

It skips, saying why, where selenium, Chromium or chromedriver is missing (``.ci/run`` installs them with apt-get
when it runs as root). ``SOFTMAX_ICL_SCREENSHOTS=DIR`` saves a full-height PNG of every page at each width there;
``SOFTMAX_ICL_BOOK_HTML=DIR`` checks an existing HTML build instead of building one.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
REDIRECT = re.compile(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"#]+)', re.I)
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome", "chrome-extension", "devtools"}
# Pages of the browser itself (its new-tab page may still be loading when the first book page opens): what they
# request is not the book's doing.
BROWSER_PAGES = ("chrome:", "chrome-untrusted:", "devtools:")
# Raw TeX that MathJax should have replaced: \( \) \[ \] delimiters, a control word with an argument, or caret/brace
# pseudo-TeX (x^{2}, M_{K}) written in prose instead of as maths.
RAW_TEX = re.compile(r"\\[()\[\]]|\\(?:frac|mathrm|mathbb|mathcal|hat|sum|begin|end|sqrt|top|varepsilon)\b|[\^_]\{")

#: The page's content column: sphinx-book-theme's article, or on Sphinx's search page (which has none) its form.
COLUMN = "article.bd-article, div.bd-search-container"
#: The two viewports (CSS px); every page is checked at each width with this height.
WIDTHS = (1400, 800)
HEIGHT = 900
#: The smallest text of a figure, as displayed, in CSS px.
MIN_FIGURE_TEXT_PX = 10.0
#: A chapter's first figure must start within this many window heights of the top of the page.
FIRST_FIGURE_SCREENS = 2
#: The landing page's first screen, in CSS px from the top of the page: the overview figure and one sentence per
#: paper must lie wholly inside it at both widths.
FIRST_SCREEN_PX = 900
#: The smallest contrast ratio (WCAG 2.1) of a badge's text on its background.
MIN_BADGE_CONTRAST = 4.5
#: The tallest a folded block (a closed ``<details>``, a folded dropdown) may be, in CSS px: its title, no more.
MAX_FOLDED_PX = 60
#: Slack of the geometric checks, in CSS px (sub-pixel layout and rounding).
SLACK_PX = 1.0
#: Two rects of one token lie on one line when their tops differ by at most this (CSS px).
SAME_LINE_PX = 2.0
#: PNG tEXt keys that softmax_icl.plotting.save writes: the saved figure's size in inches, its dpi, and the size of
#: its smallest text in points.
FIGURE_TEXT_KEYS = ("width_in", "height_in", "dpi", "min_font_pt")
#: How many lines of problems an assertion message lists (all of them are printed to the captured stdout).
SHOWN = 60


def _find(*names: str) -> str | None:
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


CHROMIUM = os.environ.get("CHROMIUM") or _find("chromium", "chromium-browser", "google-chrome")
CHROMEDRIVER = os.environ.get("CHROMEDRIVER") or _find("chromedriver")

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
except ImportError:  # pragma: no cover - depends on the machine
    webdriver = None

pytestmark = [
    pytest.mark.skipif(webdriver is None, reason="selenium is not installed (pip install -e '.[test]')"),
    pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine (Debian: apt-get install chromium)"),
    pytest.mark.skipif(CHROMEDRIVER is None,
                       reason="no chromedriver on this machine (Debian: apt-get install chromium-driver)"),
]


# -- the build --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def html_dir():
    """The book built from the committed notebooks (no execution), strict, into a temporary folder
    (``SOFTMAX_ICL_BOOK_HTML=DIR`` checks an HTML build that is already there instead)."""
    if os.environ.get("SOFTMAX_ICL_BOOK_HTML"):
        yield Path(os.environ["SOFTMAX_ICL_BOOK_HTML"])
        return
    jb = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(jb) if jb.exists() else "jupyter-book", "build", str(ROOT), "--path-output", "", "-W", "--keep-going"]
    with tempfile.TemporaryDirectory(prefix="book-browser-") as tmp:
        cmd[4] = tmp
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=900)
        assert proc.returncode == 0, "strict book build failed:\n" + (proc.stdout + proc.stderr)[-6000:]
        yield Path(tmp) / "_build" / "html"


def pages(html: Path) -> list[Path]:
    """Every HTML page of the build (not the theme's and Sphinx's own folders)."""
    skip = {"_static", "_sources", "_images", "_downloads"}
    return sorted(p for p in html.rglob("*.html") if not skip & set(p.relative_to(html).parts))


@functools.lru_cache(maxsize=None)
def landing_page() -> str:
    """The book's root page (``root:`` of ``_toc.yml``), relative to the HTML folder; ``index.html`` redirects
    there."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return f"{toc['root']}.html"


def page_kind(rel: str) -> str:
    """``landing`` for the root page, ``chapter`` for a notebook's page (``notebooks/*.html``), else ``other``."""
    if rel == landing_page():
        return "landing"
    return "chapter" if rel.startswith("notebooks/") else "other"


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" or (tag == "a" and k == "name"):
                self.ids.add(v or "")


def anchors(path: Path, cache: dict) -> set[str]:
    """The ids (and ``<a name>``) of an HTML file, parsed once per file."""
    if path not in cache:
        parser = _Ids()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = parser.ids
    return cache[path]


# -- the browser ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    """Headless Chromium through chromedriver, every host name resolving to nothing, console and network logged."""
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--no-first-run", "--disable-quic",
                f"--window-size={WIDTHS[0]},{HEIGHT}", f"--user-data-dir={profile}",
                # every host name resolves to nothing: a page that tries the network fails visibly
                "--host-resolver-rules=MAP * ~NOTFOUND"]:
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def set_viewport(driver, width: int, height: int) -> None:
    """Give the page a viewport of exactly ``width`` x ``height`` CSS px (``innerWidth`` x ``innerHeight``) at one
    device pixel per CSS px, whatever the window's frame takes (Chromium's device-metrics override; it holds across
    navigations)."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


# Waits until the page has loaded, its fonts and images are in and MathJax has typeset it, then reports what the page
# shows as it opens (nothing unfolded).
_INSPECT = r"""
const done = arguments[arguments.length - 1];
const loaded = new Promise(r => {
  const poll = () => (document.readyState === 'complete' && document.body) ? r() : setTimeout(poll, 20);
  poll();
});
loaded.then(() => {
  const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise
                                                                               : Promise.resolve();
  const imgs = Array.from(document.images).map(i => i.complete ? Promise.resolve()
      : new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }));
  return Promise.all([ready, document.fonts.ready, ...imgs]);
}).then(() => {
  // code, and Sphinx's object signatures (dt.sig: a Python value's repr is code too), are not prose
  const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .highlight, .MathJax, .sig';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (el && !el.closest(skip) && n.nodeValue.trim()) texts.push(n.nodeValue);
  }
  const column = document.querySelector(arguments[0]);
  const first = column && column.querySelector('img');
  const box = first && first.getBoundingClientRect();
  const overview = column && column.querySelector('img[src*="claims_overview"]');
  const firstList = column && column.querySelector('section ul');
  done({
    viewport: [innerWidth, innerHeight],
    height: document.documentElement.scrollHeight,
    // where the content column ends (the page can be taller: the sidebar's table of contents)
    content_bottom: column ? column.getBoundingClientRect().bottom + scrollY : null,
    mathjax: !!(window.MathJax && MathJax.startup),
    math: document.querySelectorAll('.math').length,
    untypeset: Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container'))
                    .map(e => e.textContent.slice(0, 80)),
    errors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80)),
    texts: texts,
    images: Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth]),
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
    first_figure: first ? {src: first.getAttribute('src'), top: box.top + scrollY, shown: box.width > 0} : null,
    // the landing page's overview figure and the items of the content's first list, where the page has them
    overview: overview ? {top: overview.getBoundingClientRect().top + scrollY,
                          bottom: overview.getBoundingClientRect().bottom + scrollY,
                          width: overview.getBoundingClientRect().width} : null,
    first_list: firstList ? Array.from(firstList.children).map(li => ({
      text: li.textContent.replace(/\s+/g, ' ').trim().slice(0, 300),
      top: li.getBoundingClientRect().top + scrollY, bottom: li.getBoundingClientRect().bottom + scrollY,
      badges: Array.from(li.querySelectorAll('span.sd-badge')).map(b => b.textContent.trim())})) : [],
    // every badge: its text colour and the colour behind it (its own, else the first opaque ancestor's)
    badges: Array.from(document.querySelectorAll('span.sd-badge')).map(b => {
      let bg = 'rgba(0, 0, 0, 0)';
      for (let e = b; e && /rgba\(.*, 0\)$|transparent/.test(bg); e = e.parentElement) {
        bg = getComputedStyle(e).backgroundColor;
      }
      return {text: b.textContent.trim(), color: getComputedStyle(b).color, background: bg};
    }),
    // the text the content column shows in the first screen (tops above FIRST_SCREEN_PX), as the page opens
    first_screen: column ? (() => {
      const out = [];
      const range = document.createRange();
      const w = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
      for (let t = w.nextNode(); t; t = w.nextNode()) {
        const el = t.parentElement;
        if (!el || el.closest(skip) || !t.nodeValue.trim()) continue;
        range.selectNodeContents(t);
        const rects = Array.from(range.getClientRects()).filter(q => q.width > 0);
        if (rects.length && Math.min(...rects.map(q => q.top + scrollY)) < arguments[1]) out.push(t.nodeValue);
      }
      return out.join(' ').replace(/\s+/g, ' ');
    })() : '',
    // the words a reader sees in the content column as the page opens: prose outside code, signatures and typeset
    // maths, and outside folded blocks (whose text has no box while closed)
    visible_words: column ? (() => {
      let count = 0;
      const w = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
      for (let t = w.nextNode(); t; t = w.nextNode()) {
        const el = t.parentElement;
        if (!el || el.closest(skip)) continue;
        // (a closed <details> keeps laying its content out, hidden: checkVisibility sees that, client rects not)
        const shown = el.checkVisibility ? el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true})
                                         : el.getClientRects().length > 0;
        if (!shown) continue;
        count += (t.nodeValue.match(/\S+/g) || []).length;
      }
      return count;
    })() : 0,
    // folded blocks as the page opens: a closed <details>, a folded sphinx-togglebutton dropdown
    folded: column ? Array.from(column.querySelectorAll('details:not([open]), .admonition.dropdown.toggle-hidden'))
      .map(el => ({height: el.getBoundingClientRect().height,
                   title: (el.querySelector('summary, .admonition-title') || el).textContent.replace(/\s+/g, ' ')
                          .trim().slice(0, 70)})) : [],
  });
}).catch(e => done({failure: String(e)}));
"""

# Unfolds everything folded in the content column, lets the layout settle, then measures it: what reaches past the
# column or scrolls sideways, the table-cell tokens laid out over two lines or sticking out of their cell, the claims
# tables, and the displayed size of every image.
_MEASURE = r"""
const done = arguments[arguments.length - 1];
const [slack, sameLine] = [arguments[0], arguments[1]];
const column = document.querySelector(arguments[2]);
if (!column) { done({failure: `no content column (${arguments[2]}) on the page`}); return; }
column.querySelectorAll('details:not([open])').forEach(d => { d.open = true; });
column.querySelectorAll('button.toggle-button-hidden').forEach(b => b.click());
const frame = () => new Promise(r => requestAnimationFrame(() => r()));
const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise
                                                                             : Promise.resolve();
ready.then(frame).then(frame).then(() => {
  const describe = el => ({
    tag: el.tagName.toLowerCase(),
    cls: (el.getAttribute('class') || '').trim(),
    text: (el.textContent || el.getAttribute('alt') || '').replace(/\s+/g, ' ').trim().slice(0, 60),
  });

  // 1. wider than the column: an element's box or the text directly in it; outermost offenders only (a descendant
  // of one is part of it)
  const right = column.getBoundingClientRect().right;
  const range = document.createRange();
  const reach = el => {
    let r = el.getBoundingClientRect().right;
    for (const n of el.childNodes) {
      if (n.nodeType !== Node.TEXT_NODE || !n.nodeValue.trim()) continue;
      range.selectNodeContents(n);
      for (const q of range.getClientRects()) r = Math.max(r, q.right);
    }
    return r - right;
  };
  const wide = [];
  for (const el of column.querySelectorAll('*')) {
    const r = el.getBoundingClientRect();
    if (!r.width && !r.height) continue;
    const ox = getComputedStyle(el).overflowX;
    const scrolls = (ox === 'auto' || ox === 'scroll') && el.scrollWidth > el.clientWidth + slack;
    const past = reach(el);
    if (!scrolls && past <= slack) continue;
    const outer = wide.find(w => w.el.contains(el));
    if (outer) { outer.past = Math.max(outer.past, past); continue; }
    wide.push({el, past, scroll: scrolls ? el.scrollWidth - el.clientWidth : 0});
  }

  // 2. tokens of table cells: one line each, inside their cell
  const split = [], sticking = [];
  for (const cell of column.querySelectorAll('td, th')) {
    const box = cell.getBoundingClientRect();
    if (!box.width) continue;
    const cs = getComputedStyle(cell);
    const inner = box.right - parseFloat(cs.paddingRight) - parseFloat(cs.borderRightWidth);
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      const el = n.parentElement;
      if (el.closest('td, th') !== cell || el.closest('mjx-container, .MathJax')) continue;
      for (const m of n.nodeValue.matchAll(/\S+/g)) {
        range.setStart(n, m.index);
        range.setEnd(n, m.index + m[0].length);
        const rects = Array.from(range.getClientRects()).filter(q => q.width > 0);
        if (!rects.length) continue;
        const tops = rects.map(q => q.top);
        const cellText = describe(cell).text;
        if (Math.max(...tops) - Math.min(...tops) > sameLine) split.push({token: m[0], cell: cellText});
        const out = Math.max(...rects.map(q => q.right)) - inner;
        if (out > slack) sticking.push({token: m[0], cell: cellText, by: out});
      }
    }
  }

  done({
    wide: wide.map(w => Object.assign(describe(w.el), {past: w.past, scroll: w.scroll})),
    split: split,
    sticking: sticking,
    ledgers: Array.from(column.querySelectorAll('table.claims-ledger'))
                  .map(t => t.querySelectorAll(':scope > tbody > tr').length),
    images: Array.from(document.images).map(i => {
      const cs = getComputedStyle(i);
      const edges = ['paddingLeft', 'paddingRight', 'borderLeftWidth', 'borderRightWidth']
                    .reduce((sum, k) => sum + parseFloat(cs[k]), 0);
      // the width the picture itself is drawn at: the rendered box less its padding and border
      return {src: i.currentSrc || i.src, width: Math.max(0, i.getBoundingClientRect().width - edges),
              in_column: column.contains(i)};
    }),
  });
}).catch(e => done({failure: String(e)}));
"""


@dataclass
class View:
    """One page at one width: what it shows as it opens (``seen``, from ``_INSPECT``), its unfolded layout
    (``layout``, from ``_MEASURE``), its console errors and the URLs it requested."""

    page: str
    width: int
    kind: str
    seen: dict
    layout: dict
    console: list
    requests: list


@dataclass
class Survey:
    """The pass over every page at every width, and the problems met before any page could be inspected."""

    html: Path
    views: list
    broken: list


def visit(driver, html: Path, page: Path, width: int, screenshots: str | None) -> View:
    """Open ``page`` at ``width``, inspect it as it opens, save its full-height screenshot (with ``screenshots``),
    then unfold it and measure its layout."""
    rel = page.relative_to(html).as_posix()
    driver.get_log("performance")  # drop what earlier pages logged
    driver.get_log("browser")
    driver.get(page.as_uri())
    seen = driver.execute_async_script(_INSPECT, COLUMN, FIRST_SCREEN_PX)
    if screenshots and "failure" not in seen:
        Path(screenshots).mkdir(parents=True, exist_ok=True)
        set_viewport(driver, width, seen["height"])
        driver.save_screenshot(str(Path(screenshots) / f"{rel.replace('/', '__')}@{width}.png"))
        set_viewport(driver, width, HEIGHT)
    layout = {} if "failure" in seen else driver.execute_async_script(_MEASURE, SLACK_PX, SAME_LINE_PX, COLUMN)
    console = [e.get("message", "")[:200] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    requests = []
    for entry in driver.get_log("performance"):
        msg = json.loads(entry["message"])["message"]
        if msg.get("method") == "Network.requestWillBeSent":
            params = msg["params"]
            if not params.get("documentURL", "").startswith(BROWSER_PAGES):
                requests.append(params["request"]["url"])
    return View(rel, width, page_kind(rel), seen, layout, console, requests)


@pytest.fixture(scope="module")
def survey(html_dir, browser) -> Survey:
    """Every page of the book, opened once at each width (``WIDTHS`` x ``HEIGHT``)."""
    screenshots = os.environ.get("SOFTMAX_ICL_SCREENSHOTS")
    all_pages = pages(html_dir)
    assert len(all_pages) >= int(os.environ.get("SOFTMAX_ICL_MIN_PAGES", "10")), [p.name for p in all_pages]
    views, broken, shown = [], [], []
    for page in all_pages:  # a redirect page (index.html) is not shown: its target must exist, and is checked
        refresh = REDIRECT.search(page.read_text(encoding="utf-8", errors="replace")[:2000])
        if not refresh:
            shown.append(page)
        elif not (page.parent / refresh.group(1)).is_file():
            broken.append((page.relative_to(html_dir).as_posix(), None,
                           f"redirects to a missing page {refresh.group(1)}"))
    for width in WIDTHS:
        set_viewport(browser, width, HEIGHT)
        for page in shown:
            views.append(visit(browser, html_dir, page, width, screenshots))
    for v in views:
        for what in (v.seen, v.layout):
            if "failure" in what:
                broken.append((v.page, v.width, f"could not be inspected: {what['failure']}"))
        if "viewport" in v.seen and v.seen["viewport"] != [v.width, HEIGHT]:
            broken.append((v.page, v.width, f"viewport is {v.seen['viewport']}, not {[v.width, HEIGHT]}"))
    return Survey(html_dir, [v for v in views if "failure" not in v.seen and "failure" not in v.layout], broken)


# -- reporting --------------------------------------------------------------------------------------------------

def assert_none(what: str, problems) -> None:
    """Fail with every problem, one line per page and message (the widths it occurs at merged into one line);
    ``problems`` are ``(page, width or None, message)``. The message lists the first ``SHOWN`` lines; all of them
    go to the captured stdout."""
    widths: dict[tuple[str, str], list] = {}
    for page, width, message in problems:
        widths.setdefault((page, message), [])
        if width is not None:
            widths[(page, message)].append(width)
    lines = [f"{page}" + (f" at {' and '.join(f'{w} px' for w in ws)}" if ws else "") + f": {message}"
             for (page, message), ws in widths.items()]
    if lines:
        print(f"{what}: {len(lines)} problems", *lines, sep="\n")
    more = f"\n... and {len(lines) - SHOWN} more (all in the captured stdout)" if len(lines) > SHOWN else ""
    assert not lines, f"{what}: {len(lines)} problems\n" + "\n".join(lines[:SHOWN]) + more


def element(info: dict) -> str:
    """An element as a failure names it: ``tag.class 'its text'``."""
    cls = "." + ".".join(info["cls"].split()) if info["cls"] else ""
    return f"{info['tag']}{cls} {info['text']!r}"


def excerpt(text: str, match: re.Match, context: int = 40) -> str:
    """The matched part of ``text`` with ``context`` characters either side, white space collapsed."""
    start, end = max(0, match.start() - context), match.end() + context
    return ("..." if start else "") + " ".join(text[start:end].split()) + ("..." if end < len(text) else "")


# -- figure text size -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FigureText:
    """The text-size metadata of an image file: ``values`` (the ``FIGURE_TEXT_KEYS`` as floats) when it carries a
    usable set, else ``problem`` says why not; ``carried`` is whether it has any of the keys at all."""

    values: dict | None
    problem: str | None
    carried: bool


@functools.lru_cache(maxsize=None)
def figure_text(path: Path) -> FigureText:
    """Read the tEXt chunks that ``softmax_icl.plotting.save`` writes into a PNG and check they describe the file:
    ``width_in`` x ``dpi`` and ``height_in`` x ``dpi`` must be its size in pixels (within 2 px)."""
    from PIL import Image

    try:
        with Image.open(path) as img:
            text, size, fmt = dict(getattr(img, "text", {}) or {}), img.size, img.format
    except OSError as exc:
        return FigureText(None, f"is not a PNG with text-size metadata (Pillow cannot read it: {exc})", False)
    missing = [k for k in FIGURE_TEXT_KEYS if k not in text]
    carried = len(missing) < len(FIGURE_TEXT_KEYS)
    if fmt != "PNG" or missing:
        return FigureText(None, f"carries no text-size metadata ({fmt or 'an image'} without tEXt "
                                f"{', '.join(missing or FIGURE_TEXT_KEYS)}; softmax_icl.plotting.save writes them)",
                          carried)
    try:
        values = {k: float(text[k]) for k in FIGURE_TEXT_KEYS}
    except ValueError:
        return FigureText(None, "has text-size metadata that is not decimal: "
                                + ", ".join(f"{k}={text[k]!r}" for k in FIGURE_TEXT_KEYS), True)
    expected = (values["width_in"] * values["dpi"], values["height_in"] * values["dpi"])
    if min(values.values()) <= 0 or any(abs(e - s) > 2 for e, s in zip(expected, size)):
        return FigureText(None, f"has text-size metadata that does not describe it: {values['width_in']:g} x "
                                f"{values['height_in']:g} in at {values['dpi']:g} dpi is {expected[0]:.0f} x "
                                f"{expected[1]:.0f} px, the PNG is {size[0]} x {size[1]} px", True)
    return FigureText(values, None, True)


def test_figure_text_reads_the_metadata_of_plotting_save(tmp_path):
    """``figure_text`` reads the four tEXt chunks, says why when a PNG has none, and refuses a set that does not
    describe the file's size."""
    from PIL import Image, PngImagePlugin

    def png(name: str, size: tuple, **text: str) -> Path:
        info = PngImagePlugin.PngInfo()
        for key, value in text.items():
            info.add_text(key, value)
        Image.new("RGB", size, "white").save(tmp_path / name, pnginfo=info)
        return tmp_path / name

    meta = {"width_in": "6.4", "height_in": "3.2", "dpi": "150", "min_font_pt": "8"}
    good = figure_text(png("good.png", (960, 480), **meta))
    assert good == FigureText({"width_in": 6.4, "height_in": 3.2, "dpi": 150.0, "min_font_pt": 8.0}, None, True)
    bare = figure_text(png("bare.png", (960, 480)))
    assert bare.values is None and not bare.carried and "no text-size metadata" in bare.problem
    other = figure_text(png("other.png", (900, 480), **meta))
    assert other.values is None and other.carried and "960 x 480 px, the PNG is 900 x 480 px" in other.problem


# -- the checks -------------------------------------------------------------------------------------------------

def test_pages_were_inspected(survey):
    """Every page could be opened and inspected at both widths, in a viewport of the intended size, and every
    redirect page points at a page of the book."""
    assert_none("pages that could not be checked", survey.broken)


def test_math_is_typeset(survey):
    """Every formula typeset by MathJax, none in error, and no raw TeX (``\\frac``, ``\\(``, ``x^{2}``, ``M_{K}``) in
    the rendered text outside code."""
    problems = []
    formulas = pages_with_math = 0
    for v in survey.views:
        seen = v.seen
        if seen["math"]:
            pages_with_math += 1
            formulas += seen["math"]
            if not seen["mathjax"]:
                problems.append((v.page, v.width, f"has {seen['math']} formulas but MathJax did not start"))
            if seen["untypeset"]:
                problems.append((v.page, v.width, f"{len(seen['untypeset'])} formulas not typeset, "
                                                  f"e.g. {seen['untypeset'][:3]}"))
        if seen["errors"]:
            problems.append((v.page, v.width, f"MathJax errors {seen['errors'][:3]}"))
        raw = [excerpt(t, m) for t in seen["texts"] for m in [RAW_TEX.search(t)] if m]
        if raw:
            problems.append((v.page, v.width, f"{len(raw)} text nodes with raw TeX, e.g. {raw[:3]}"))
    print(f"{formulas} formulas on {pages_with_math} page views")
    assert pages_with_math > 0 and formulas > 0, "no page has math: the check of typesetting checked nothing"
    assert_none("maths", problems)


def test_images_load(survey):
    """Every image of every page loaded (``naturalWidth > 0``)."""
    assert_none("images that did not load",
                [(v.page, v.width, f"image did not load: {src}") for v in survey.views
                 for src, width in v.seen["images"] if not width])


def test_internal_links_resolve(survey):
    """Every ``file:`` link points at an existing file, and its ``#anchor`` at an element of that page."""
    problems, ids_cache = [], {}
    for v in survey.views:
        for href in v.seen["links"]:
            url = urlsplit(href)
            if url.scheme != "file":
                continue
            target = Path(unquote(url.path))
            if not target.exists():
                problems.append((v.page, None, f"link to a missing file {target}"))
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in anchors(target, ids_cache):
                problems.append((v.page, None, f"link to a missing anchor {target.name}#{url.fragment}"))
    assert_none("internal links", problems)


def test_no_console_errors(survey):
    """Nothing logged to the console at level SEVERE."""
    assert_none("console errors", [(v.page, v.width, f"console error: {m}") for v in survey.views for m in v.console])


def test_no_request_leaves_the_machine(survey):
    """Every URL a page requested is local (``file:``, ``data:``, ``blob:``, ``about:``)."""
    assert_none("requests to the network",
                [(v.page, v.width, f"requested {url[:120]}") for v in survey.views for url in v.requests
                 if urlsplit(url).scheme not in LOCAL_SCHEMES])


def test_nothing_is_wider_than_the_column(survey):
    """No element of the content column (``COLUMN``), nor the text directly in it, reaches more than ``SLACK_PX``
    past the column's right edge (bounding rects; a text node's ``Range.getClientRects()``), and none scrolls sideways (``scrollWidth > clientWidth + SLACK_PX`` with overflow-x auto or scroll).
    Each offender is named once, at its outermost element, with how far its content reaches past the edge or how far
    it scrolls."""
    problems = []
    for v in survey.views:
        for w in v.layout["wide"]:
            how = []
            if w["scroll"]:
                how.append(f"scrolls sideways by {w['scroll']:.0f} px")
            if w["past"] > SLACK_PX:
                how.append(f"reaches {w['past']:.0f} px past the column's right edge")
            problems.append((v.page, v.width, f"{element(w)} {' and '.join(how)}"))
    assert_none("elements wider than the content column", problems)


def test_no_table_cell_breaks_a_token(survey):
    """In every ``td``/``th`` of the content column, each whitespace-delimited token of a text node (MathJax
    excepted) lies on one line (the tops of its ``Range.getClientRects()`` within ``SAME_LINE_PX``) and inside its
    cell's content box (within ``SLACK_PX``)."""
    problems = []
    for v in survey.views:
        split, sticking = v.layout["split"], v.layout["sticking"]
        if split:
            examples = "; ".join(f"{s['token']!r} in {s['cell']!r}" for s in split[:4])
            problems.append((v.page, v.width, f"{len(split)} cell tokens split over two lines, e.g. {examples}"))
        if sticking:
            worst = sorted(sticking, key=lambda s: -s["by"])[:4]
            examples = "; ".join(f"{s['token']!r} by {s['by']:.0f} px in {s['cell']!r}" for s in worst)
            problems.append((v.page, v.width, f"{len(sticking)} cell tokens stick out of their cell, e.g. {examples}"))
    assert_none("table cells that break or overflow a token", problems)


def test_landing_page_has_one_claims_table_per_paper(survey):
    """The landing page has one ``table.claims-ledger`` per paper of the claims ledger (``book/claims.yml``, read
    with ``softmax_icl.book.ledger``), in the ledger's order, whose ``tbody`` has one row per entry of that paper."""
    from softmax_icl.book import ledger

    led = ledger.load(ROOT / "book" / "claims.yml")
    expected = [n for n in (sum(e.paper == key for e in led.entries) for key in led.papers) if n]
    views = [v for v in survey.views if v.kind == "landing"]
    assert views, f"the landing page {landing_page()} was not checked"
    problems = [(v.page, v.width, f"its claims-ledger tables have {v.layout['ledgers']} body rows; the ledger's papers "
                                  f"have {expected} entries") for v in views if v.layout["ledgers"] != expected]
    assert_none("the landing page's claims tables", problems)


def test_figure_text_is_legible(survey):
    """Every image whose PNG carries ``softmax_icl.plotting.save``'s text-size metadata shows its smallest text at
    ``min_font_pt / 72 * displayed_width / width_in >= MIN_FIGURE_TEXT_PX`` CSS px; every image in the content column
    of a chapter or of the landing page must carry it (images elsewhere without it are not figures of the book)."""
    problems = []
    for v in survey.views:
        for img in v.layout["images"]:
            url = urlsplit(img["src"])
            if url.scheme != "file":
                continue
            path = Path(unquote(url.path))
            name = path.relative_to(survey.html).as_posix() if path.is_relative_to(survey.html) else str(path)
            meta = figure_text(path)
            if meta.values is None:
                if meta.carried or (img["in_column"] and v.kind in ("chapter", "landing")):
                    problems.append((v.page, None, f"image {name} {meta.problem}"))
                continue
            if not img["width"]:
                continue  # not displayed at all (a broken image is test_images_load's)
            px = meta.values["min_font_pt"] / 72 * img["width"] / meta.values["width_in"]
            if px < MIN_FIGURE_TEXT_PX - 1e-6:
                needed = MIN_FIGURE_TEXT_PX * 72 * meta.values["width_in"] / meta.values["min_font_pt"]
                problems.append((v.page, v.width, f"image {name}: smallest text {px:.1f} px as displayed "
                                                  f"({meta.values['min_font_pt']:g} pt on a "
                                                  f"{meta.values['width_in']:g} in figure shown {img['width']:.0f} px "
                                                  f"wide; {MIN_FIGURE_TEXT_PX:g} px needs {needed:.0f} px)"))
    assert_none("figure text smaller than 10 px", problems)


def test_first_figure_within_two_screens(survey):
    """On every chapter page the first image of the content column starts less than ``FIRST_FIGURE_SCREENS`` window
    heights below the top of the page, as the page opens."""
    limit = FIRST_FIGURE_SCREENS * HEIGHT
    views = [v for v in survey.views if v.kind == "chapter"]
    assert views, "no chapter page (notebooks/*.html) was checked"
    problems = []
    for v in views:
        first = v.seen["first_figure"]
        if first is None:
            problems.append((v.page, None, "has no figure"))
        elif not first["shown"]:
            problems.append((v.page, v.width, f"its first figure {first['src']} is not displayed as the page opens"))
        elif first["top"] >= limit:
            problems.append((v.page, v.width, f"its first figure starts {first['top']:.0f} px below the top, "
                                              f"{first['top'] - limit + 1:.0f} px too low (limit {limit} px)"))
    assert_none("first figures below the second screen", problems)


def test_no_page_names_a_folder_of_the_machine(html_dir):
    """No page, search index or downloadable source names the checkout's path (or the Python environment's, or the
    home folder): ``tests/test_docs.py``, which tests the detector."""
    from test_docs import assert_no_machine_paths
    assert_no_machine_paths(html_dir)


# -- the landing page's first screen, badges, folded blocks ------------------------------------------------------

def _rgb(css: str) -> str | None:
    """``rgb(r, g, b)`` / ``rgba(r, g, b, a)`` as ``#rrggbb`` (None: fully transparent)."""
    nums = re.findall(r"[\d.]+", css)
    if len(nums) < 3 or (len(nums) == 4 and float(nums[3]) == 0):
        return None
    return "#" + "".join(f"{round(float(x)):02x}" for x in nums[:3])


def test_landing_page_answers_each_paper_in_its_first_screen(survey):
    """On the landing page, at both widths, as it opens: one item of its first list per paper of the claims ledger,
    starting with the paper's short name and carrying a badge, wholly within the first ``FIRST_SCREEN_PX`` CSS px of
    the page; the overview figure follows the words, starting within the first screen and ending within the
    second."""
    from softmax_icl.book import ledger

    papers = [p["short"] for p in ledger.load(ROOT / "book" / "claims.yml").papers.values()]
    views = [v for v in survey.views if v.kind == "landing"]
    assert views, f"the landing page {landing_page()} was not checked"
    problems = []
    for v in views:
        fig = v.seen["overview"]
        if fig is None or not fig["width"]:
            problems.append((v.page, v.width, "shows no overview figure (claims_overview.png)"))
        elif fig["top"] > FIRST_SCREEN_PX or fig["bottom"] > 2 * FIRST_SCREEN_PX + SLACK_PX:
            problems.append((v.page, v.width, f"its overview figure spans {fig['top']:.0f}-{fig['bottom']:.0f} px, "
                                              f"not from the first screen into the second at most"))
        else:
            print(f"{v.width} px: overview figure {fig['top']:.0f}-{fig['bottom']:.0f} px")
        for paper in papers:
            items = [li for li in v.seen["first_list"] if li["text"].startswith(paper)]
            if len(items) != 1:
                problems.append((v.page, v.width, f"has {len(items)} sentences on {paper} in its first list, not one"))
                continue
            li = items[0]
            if not li["badges"]:
                problems.append((v.page, v.width, f"its sentence on {paper} carries no verdict badge"))
            if li["bottom"] > FIRST_SCREEN_PX + SLACK_PX:
                problems.append((v.page, v.width, f"its sentence on {paper} ends at {li['bottom']:.0f} px, past the "
                                                  f"first screen ({FIRST_SCREEN_PX} px)"))
            else:
                print(f"{v.width} px: {paper} {li['top']:.0f}-{li['bottom']:.0f} px")
    assert_none("the landing page's first screen", problems)


#: The landing page is at most this many screens at every width, as it opens.
LANDING_SCREENS = 3
#: The words of the machinery that decides verdicts, which the landing page's first screen must not use: it says what
#: the papers claim and what the book finds in plain words (the machinery: the appendix and the chapters' folds).
MACHINERY = re.compile(r"\b(?:upper bound|lower bound|margins?|rivals?|cells?|settled|clears|misses|audit\w*|"
                       r"deciding|thresholds?|seeds?|one-sided|required)\b", re.IGNORECASE)


def test_landing_page_speaks_in_words_within_three_screens(survey):
    """The landing page, at both widths, as it opens: at most ``LANDING_SCREENS`` screens long, and its first screen
    (``FIRST_SCREEN_PX``) free of the machinery's words (``MACHINERY``)."""
    views = [v for v in survey.views if v.kind == "landing"]
    assert views, f"the landing page {landing_page()} was not checked"
    problems = []
    for v in views:
        bottom = v.seen["content_bottom"]
        print(f"{v.width} px: landing page {bottom / HEIGHT:.1f} screens, {v.seen['visible_words']} visible words")
        if bottom > LANDING_SCREENS * HEIGHT:
            problems.append((v.page, v.width, f"ends {bottom:.0f} px down, {bottom / HEIGHT:.1f} screens "
                                              f"(at most {LANDING_SCREENS})"))
        words = sorted({m.group(0).lower() for m in MACHINERY.finditer(v.seen["first_screen"])})
        if words:
            problems.append((v.page, v.width, f"its first screen uses the machinery's words {words}"))
    assert_none("the landing page in words", problems)


def test_machinery_pattern():
    """``MACHINERY`` finds the machinery's words and leaves the science's alone."""
    for raw in ("its 95% upper bound", "clears by 5%", "a margin of", "the rival", "not settled", "10 seeds",
                "the audit", "every cell", "required < 1.05"):
        assert MACHINERY.search(raw), raw
    for fine in ("the window narrows", "Theorem 3.5: mismatched-L bounds", "linear attention cannot adapt",
                 "one step of kernel gradient descent", "the best hand-tuned window"):
        assert not MACHINERY.search(fine), fine


def test_badges_read_at_4_5_to_1(survey):
    """Every badge of every page, at both widths: its text colour against its background (its own, else the nearest
    opaque ancestor's, else white) at a WCAG 2.1 contrast of at least ``MIN_BADGE_CONTRAST``."""
    from softmax_icl.book.palette import contrast

    seen, problems = {}, []
    for v in survey.views:
        for b in v.seen["badges"]:
            fg, bg = _rgb(b["color"]), _rgb(b["background"]) or "#ffffff"
            if fg is None:
                problems.append((v.page, v.width, f"badge {b['text']!r} has transparent text"))
                continue
            ratio = contrast(fg, bg)
            seen.setdefault(b["text"], set()).add((fg, bg, round(ratio, 2)))
            if ratio < MIN_BADGE_CONTRAST:
                problems.append((v.page, v.width, f"badge {b['text']!r}: text {fg} on {bg} at {ratio:.2f}:1"))
    for text, looks in sorted(seen.items()):
        print(f"badge {text!r}: " + "; ".join(f"{fg} on {bg} {r}:1" for fg, bg, r in sorted(looks)))
    assert seen, "no page shows a badge: the check of their contrast checked nothing"
    assert_none("badges below 4.5:1", problems)


def test_folded_blocks_are_no_taller_than_their_title(survey):
    """As every page opens, at both widths, each folded block of the content column (a closed ``<details>``, a folded
    dropdown) is at most ``MAX_FOLDED_PX`` CSS px tall: its title, without an empty box under it."""
    problems = [(v.page, v.width, f"folded block {f['title']!r} is {f['height']:.0f} px tall")
                for v in survey.views for f in v.seen["folded"] if f["height"] > MAX_FOLDED_PX + SLACK_PX]
    assert_none(f"folded blocks taller than {MAX_FOLDED_PX} px", problems)

# -- the chapters as a reader finishes them ---------------------------------------------------------------------
# Each chapter opens with its question, a short answer and its headline figure, is short enough to read to the end,
# folds its per-check detail into blocks that take little room while closed, and shows no raw notation in its text.

#: A chapter's first figure must start within this many CSS px of the top of the page, at every width.
FIRST_FIGURE_PX = 900
#: A chapter is at most this many screens (``HEIGHT`` CSS px each) long at the widest width, as it opens.
CHAPTER_SCREENS = 12
#: Notation that MathJax or matplotlib's mathtext should have typeset, written as plain text: a one-letter name with
#: a subscript (``x_q``, ``M_K``), a caret exponent (``n^(-1/(d+2))``, ``w^2``), a code key of an algorithm
#: (``kernel_gd``) or a Greek letter spelt out (``tau``).
RAW_NOTATION = re.compile(r"\b[A-Za-z]_[{(]?[A-Za-z0-9]|\^[-({\w]|\bkernel_gd\b|\b(?:tau|sigma|rho|beta|gamma|eta)\b")

# The height of every folded block of the content column as the page opens (closed), and the text the chapter shows
# outside code and outside its folded block of checks (whose check statements are the records' own words).
_CHAPTER_PAGE = r"""
const column = document.querySelector(arguments[0]);
if (!column) return {folds: [], texts: []};
const folds = Array.from(column.querySelectorAll('details:not([open]), .admonition.toggle-hidden, .toggle-hidden'))
  .map(el => {
    const box = el.getBoundingClientRect();
    const title = el.querySelector('summary, .admonition-title') || el;
    return {height: box.height, text: (title.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60)};
  }).filter(f => f.height > 0);
const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .highlight, .MathJax, .checks-appendix';
const walker = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
const texts = [];
for (let n = walker.nextNode(); n; n = walker.nextNode()) {
  const el = n.parentElement;
  if (el && !el.closest(skip) && n.nodeValue.trim()) texts.push(n.nodeValue);
}
return {folds: folds, texts: texts};
"""


def chapter_views(survey) -> list:
    views = [v for v in survey.views if v.kind == "chapter"]
    assert views, "no chapter page (notebooks/*.html) was checked"
    return views


def test_chapter_first_figure_within_the_first_screen(survey):
    """On every chapter page, at both widths, the first image of the content column (the headline figure) starts
    within ``FIRST_FIGURE_PX`` of the top of the page as it opens: the question and the short answer above it fit
    in the first screen."""
    problems = []
    for v in chapter_views(survey):
        first = v.seen["first_figure"]
        if first is None:
            problems.append((v.page, None, "has no figure"))
        elif first["top"] >= FIRST_FIGURE_PX:
            problems.append((v.page, v.width, f"its first figure {first['src']} starts {first['top']:.0f} px below "
                                              f"the top (limit {FIRST_FIGURE_PX} px)"))
    assert_none("chapters whose headline figure starts below the first screen", problems)


def test_chapter_is_at_most_twelve_screens(survey):
    """Every chapter page, as it opens at the widest width (folded blocks closed), is at most ``CHAPTER_SCREENS``
    screens of ``HEIGHT`` CSS px tall."""
    limit = CHAPTER_SCREENS * HEIGHT
    problems = [(v.page, v.width, f"is {v.seen['height']} px tall, {v.seen['height'] / HEIGHT:.1f} screens "
                                  f"(at most {CHAPTER_SCREENS})")
                for v in chapter_views(survey) if v.width == max(WIDTHS) and v.seen["height"] > limit]
    assert_none("chapters longer than a reader finishes", problems)


#: The settings page is at most this many screens (``HEIGHT`` CSS px each) at every width, as it opens: what the
#: papers fix and each figure's deviations in view, our choices folded under their group.
SETTINGS_SCREENS = 6


def test_settings_page_is_at_most_six_screens(survey):
    """``book/settings.html``, as it opens (folded blocks closed), is at most ``SETTINGS_SCREENS`` screens tall at
    every width."""
    views = [v for v in survey.views if v.page == "book/settings.html"]
    assert views, "the settings page (book/settings.html) was not checked"
    problems = [(v.page, v.width, f"is {v.seen['height']} px tall, {v.seen['height'] / HEIGHT:.1f} screens (at most "
                                  f"{SETTINGS_SCREENS})") for v in views if v.seen["height"] > SETTINGS_SCREENS * HEIGHT]
    assert_none("a settings page longer than a reader scans", problems)


#: The appendix "How verdicts are decided" (``book/design.html``) is at most this many screens at every width, as it
#: opens: the rules, with each check's design folded per chapter.
DESIGN_SCREENS = 3
#: The changelog in the book (``book/changelog.html``) is at most this many screens at the widest width: what changed
#: in the verdicts, a line per change; the full record stays in the repository.
CHANGELOG_SCREENS = 1
#: The chapters hold at least this share of the visible words of the book's pages (the API reference apart).
CHAPTER_WORD_SHARE = 0.5


def test_appendix_and_changelog_are_in_proportion(survey):
    """The design appendix's content is at most ``DESIGN_SCREENS`` screens at every width and the changelog's at most
    ``CHANGELOG_SCREENS`` at the widest, as they open (folded blocks closed; the content column, not the sidebar)."""
    problems = []
    for page, limit, widths in (("book/design.html", DESIGN_SCREENS, WIDTHS),
                                ("book/changelog.html", CHANGELOG_SCREENS, (max(WIDTHS),))):
        views = [v for v in survey.views if v.page == page and v.width in widths]
        if not views:
            problems.append((page, None, "was not checked"))
        problems += [(v.page, v.width, f"ends {v.seen['content_bottom']:.0f} px down, "
                                       f"{v.seen['content_bottom'] / HEIGHT:.1f} screens (at most {limit})")
                     for v in views if v.seen["content_bottom"] > limit * HEIGHT]
    assert_none("appendix pages out of proportion", problems)


def test_chapters_hold_half_of_the_books_visible_words(survey):
    """At the widest width, the chapters' visible words (prose outside folded blocks and code) are at least
    ``CHAPTER_WORD_SHARE`` of every page's, the generated API reference and indexes apart: the book is its
    chapters."""
    views = [v for v in survey.views if v.width == max(WIDTHS) and not v.page.startswith("book/api")
             and v.page not in ("genindex.html", "search.html", "py-modindex.html")]
    words = {v.page: v.seen.get("visible_words", 0) for v in views}
    chapters = sum(n for p, n in words.items() if page_kind(p) == "chapter")
    total = sum(words.values())
    top = sorted(words.items(), key=lambda kv: -kv[1])[:6]
    assert total and chapters >= CHAPTER_WORD_SHARE * total, (
        f"the chapters hold {chapters} of {total} visible words ({chapters / max(total, 1):.0%}, at least "
        f"{CHAPTER_WORD_SHARE:.0%}); the wordiest pages: {top}")


def test_chapter_text_has_no_raw_notation(chapter_pages):
    """No text a chapter page shows outside code and outside its folded block of checks (prose, captions, tables,
    the answer, the prompts of folded figures) carries notation that should have been typeset (``RAW_NOTATION``:
    ``x_q``, ``n^(-1/(d+2))``, ``kernel_gd``, ``tau``)."""
    problems = []
    for page, width, seen in chapter_pages:
        raw = [excerpt(t, m) for t in seen["texts"] for m in [RAW_NOTATION.search(t)] if m]
        if raw:
            problems.append((page, width, f"{len(raw)} text nodes with raw notation, e.g. {raw[:3]}"))
    assert_none("raw notation in chapter text", problems)


def test_raw_notation_pattern():
    """``RAW_NOTATION`` finds what the chapters must not show and leaves ordinary prose and file names alone."""
    for raw in ("query f(x_q)", "theorem's rate n^(-1/(d+2))", "vs kernel_gd", "clustered, tau = 0.5", "M_K"):
        assert RAW_NOTATION.search(raw), raw
    for fine in ("book/results/low_rank.json", "softmax-ge-linear", "the kernel GD step", "a taught unit", "τ = 1"):
        assert not RAW_NOTATION.search(fine), fine


@pytest.fixture(scope="module")
def chapter_pages(html_dir, browser) -> list:
    """``(page, width, {folds, texts})`` for every chapter page at each width, as it opens: its folded blocks
    (``{height, text}``, closed) and the text it shows outside code and its folded block of checks."""
    return on_chapters(html_dir, browser, _CHAPTER_PAGE)


def on_chapters(html_dir, browser, script: str) -> list:
    """``(page, width, what script returns)`` for every chapter page at each width, as it opens."""
    out = []
    chapters = [p for p in pages(html_dir) if page_kind(p.relative_to(html_dir).as_posix()) == "chapter"]
    for width in WIDTHS:
        set_viewport(browser, width, HEIGHT)
        for page in chapters:
            browser.get(page.as_uri())
            browser.execute_async_script(_INSPECT, COLUMN, FIRST_SCREEN_PX)
            out.append((page.relative_to(html_dir).as_posix(), width, browser.execute_script(script, COLUMN)))
    return out


def test_each_headline_figure_switches_between_the_two_scales(html_dir):
    """Every chapter's headline figure sits in a tab set with the default scale's figure and the paper scale's image
    (``book/figures/paper/<figure>_headline.png``, copied by ``softmax-icl build --profile paper --publish``): static
    HTML, so the switch works offline. Each tab says what its scale is (training steps, seeds) and holds what is read
    beside its figure: the chapter's answer box at the default scale, the verdicts at the paper scale."""
    problems = []
    for page in sorted((html_dir / "notebooks").glob("*.html")):
        text = page.read_text(encoding="utf-8")
        if "sd-tab-set" not in text or "Paper scale" not in text or "Default scale" not in text:
            problems.append(f"{page.name}: no default / paper scale tabs")
        elif not re.search(rf'<img[^>]+src="[^"]*{re.escape(page.stem)}_headline\.png"', text):
            problems.append(f"{page.name}: the paper scale's headline image is missing")
        else:
            # each tab says what its scale is and carries what is read beside its figure: the default tab the
            # chapter's answer, the paper tab the verdicts at that scale
            tabs = re.split(r'<div class="sd-tab-content', text.split("sd-tab-set", 1)[1])[1:3]
            for tab, scale, what in zip(tabs, ("Default scale", "Paper scale"), ("answer-box", "sd-badge")):
                words = re.sub(r"<[^>]+>", " ", tab)
                if f"{scale}:" not in words or not re.search(r"training steps.*\bseeds\b", words, re.S):
                    problems.append(f"{page.name}: the {scale} tab does not say what its scale is")
                stale = scale == "Paper scale" and "computed by earlier code" in words   # no verdict is counted
                if what not in tab and not stale:
                    problems.append(f"{page.name}: the {scale} tab lacks its {what}")
    assert not problems, "\n".join(problems)


# -- the chapters as a researcher reads them: the science first, the machinery folded -----------------------------
# A chapter states the papers' claims in their authors' words early, keeps the words of the machinery that decides
# verdicts (``MACHINERY``: bounds, margins, rivals, cells, seeds, ...) to its folded block, and shows its figures
# without a click.

#: At most this share of the sentences a chapter shows as it opens (outside folded blocks, code and the other scale's
#: tab) use the machinery's words.
MACHINERY_SHARE = 0.10
#: The authors' first sentence (a chapter's first quote) starts within this many screens of the top, at every width.
FIRST_QUOTE_SCREENS = 3
#: At most this many of a chapter's figures sit in folded blocks (a figure in the other scale's tab is not folded).
MAX_FOLDED_FIGURES = 2

# The sentences' blocks a chapter shows as it opens (leaf paragraphs, list items, captions, table cells, headings and
# folded blocks' titles that are laid out and visible), where its quotes start, and its images inside folded blocks.
_CHAPTER_READING = r"""
const column = document.querySelector(arguments[0]);
if (!column) return {blocks: [], quotes: [], folded: []};
const skip = 'pre, code, kbd, samp, script, style, textarea, mjx-container, .highlight, .MathJax';
const shown = el => el.checkVisibility ? el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true})
                                       : el.getClientRects().length > 0;
const blocks = [];
column.querySelectorAll('p, li, figcaption, td, th, h1, h2, h3, h4, summary, .sd-summary-title, .admonition-title')
  .forEach(el => {
    // (a code cell's toggle, "Show code cell source", is the notebook's, not a sentence of the chapter)
    if (el.closest(skip) || el.closest('details.above-input > summary') || el.querySelector('p, li, td') ||
        !shown(el)) return;
    blocks.push(el.innerText);
  });
const quotes = Array.from(column.querySelectorAll('blockquote')).filter(shown)
  .map(b => b.getBoundingClientRect().top + scrollY);
const folded = Array.from(column.querySelectorAll('img')).filter(i => {
  const fold = i.closest('details, .toggle-hidden, .dropdown');
  return fold && !i.closest('.sd-tab-content:not(:first-of-type)') && !shown(i);
}).map(i => i.getAttribute('src'));
return {blocks: blocks, quotes: quotes, folded: folded};
"""


def sentences(blocks: list[str]) -> list[str]:
    """The sentences of ``blocks`` (text of three words or more between sentence ends)."""
    out = []
    for block in blocks:
        out += [s for s in re.split(r"(?<=[.;:!?])\s+", " ".join(block.split())) if len(s.split()) >= 3]
    return out


@pytest.fixture(scope="module")
def chapter_reading(html_dir, browser) -> list:
    """``(page, width, {blocks, quotes, folded})`` for every chapter page at each width, as it opens."""
    return on_chapters(html_dir, browser, _CHAPTER_READING)


def test_sentences_pattern():
    """``sentences`` splits at sentence ends and drops fragments of fewer than three words."""
    assert sentences(["The window narrows. It widens with σ; at n = 4 too", "Fig. 1"]) == \
        ["The window narrows.", "It widens with σ;", "at n = 4 too"]


def test_chapters_keep_the_machinery_in_their_fold(chapter_reading):
    """At both widths, at most ``MACHINERY_SHARE`` of the sentences a chapter shows as it opens use the machinery's
    words (``MACHINERY``); the rest is the papers' science and the book's findings in words."""
    problems = []
    for page, width, seen in chapter_reading:
        said = sentences(seen["blocks"])
        mach = [s for s in said if MACHINERY.search(s)]
        share = len(mach) / max(len(said), 1)
        print(f"{width} px: {page} {len(mach)} of {len(said)} sentences use the machinery's words ({share:.0%})")
        if not said:
            problems.append((page, width, "shows no sentence"))
        elif share > MACHINERY_SHARE:
            problems.append((page, width, f"{len(mach)} of {len(said)} sentences ({share:.0%}, at most "
                                          f"{MACHINERY_SHARE:.0%}) use the machinery's words, e.g. {mach[:3]}"))
    assert_none("chapters that speak the machinery's words", problems)


def test_chapters_quote_the_authors_within_three_screens(chapter_reading):
    """At both widths, a chapter's first quote (the authors' first sentence) starts within ``FIRST_QUOTE_SCREENS``
    screens of the top as the page opens."""
    problems = []
    for page, width, seen in chapter_reading:
        if not seen["quotes"]:
            problems.append((page, width, "quotes no sentence of the authors"))
            continue
        first = min(seen["quotes"])
        print(f"{width} px: {page} first quote at {first / HEIGHT:.1f} screens")
        if first > FIRST_QUOTE_SCREENS * HEIGHT:
            problems.append((page, width, f"its first quote starts {first / HEIGHT:.1f} screens down (at most "
                                          f"{FIRST_QUOTE_SCREENS})"))
    assert_none("chapters that quote the authors late", problems)


def test_chapters_fold_at_most_two_figures(chapter_reading):
    """A chapter shows its figures without a click: at most ``MAX_FOLDED_FIGURES`` sit in folded blocks."""
    problems = [(page, width, f"folds {len(seen['folded'])} figures (at most {MAX_FOLDED_FIGURES}): "
                              f"{[Path(s).name for s in seen['folded']]}")
                for page, width, seen in chapter_reading if len(seen["folded"]) > MAX_FOLDED_FIGURES]
    assert_none("chapters that fold their figures", problems)


#: The papers' figures each chapter reproduces, by the name of the figure that draws them (``fig-<chapter>-<name>``):
#: each must be visible as the page opens, without a click.
PAPER_FIGURES = {
    "window_adaptation": ("headline",),                        # Collins et al., Fig. 1 (three rows)
    "norm_scaling": ("headline", "dynamics"),                  # Fig. 3, and its growth from a small init
    "generalization": ("main",),                               # Fig. 5(a)
    "low_rank": ("headline",),                                 # Figs 4 and 10
    "classification_kernel_gd": ("tasks", "linear_vs_gd", "softmax_vs_kernel_gd"),   # Dragutinović et al., 1, 4, 5
}

_VISIBLE_IDS = r"""
return arguments[0].map(id => {
  const el = document.getElementById(id);
  if (!el) return [id, null];
  const shown = el.checkVisibility ? el.checkVisibility({contentVisibilityAuto: true, visibilityProperty: true})
                                   : el.getClientRects().length > 0;
  return [id, shown && el.getBoundingClientRect().height > 50];
});
"""


def test_the_papers_figures_show_without_a_click(html_dir, browser):
    """At both widths, every figure of the papers a chapter reproduces (``PAPER_FIGURES``) is on its page and
    visible as the page opens (not in a folded block)."""
    problems = []
    for width in WIDTHS:
        set_viewport(browser, width, HEIGHT)
        for chapter, names in PAPER_FIGURES.items():
            page = html_dir / "notebooks" / f"{chapter}.html"
            browser.get(page.as_uri())
            browser.execute_async_script(_INSPECT, COLUMN, FIRST_SCREEN_PX)
            for fid, shown in browser.execute_script(_VISIBLE_IDS, [f"fig-{chapter}-{n}".replace("_", "-")
                                                                     for n in names]):
                if shown is None:
                    problems.append((f"notebooks/{chapter}.html", width, f"has no figure {fid}"))
                elif not shown:
                    problems.append((f"notebooks/{chapter}.html", width, f"folds the paper's figure {fid}"))
    assert_none("the papers' figures behind a click", problems)

"""The rendered book as a reader meets it: every page opened in headless Chromium with no network.

The book is built from the committed notebooks (execution off, warnings are errors) into a temporary folder, then
every HTML page is loaded in Debian's Chromium through chromedriver (selenium) with all host names resolving to
nothing. For each page the test asserts:

* math: no raw TeX left in the rendered text, every formula typeset by MathJax (``mjx-container``), none in error;
* every image loaded (``naturalWidth > 0``);
* every internal link points at an existing file, and its ``#anchor`` at an element of that page;
* no console errors;
* no request leaves the machine: every URL the page requested is ``file:``, ``data:``, ``blob:`` or ``about:``.

It skips, saying why, where selenium, Chromium or chromedriver is missing (``.ci/run`` installs them with apt-get
when it runs as root). ``SOFTMAX_ICL_SCREENSHOTS=DIR`` saves a PNG of every page there; ``SOFTMAX_ICL_BOOK_HTML=DIR``
checks an existing HTML build instead of building one.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
REDIRECT = re.compile(r'http-equiv="refresh"\s+content="\d+;\s*url=([^"#]+)', re.I)
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome", "chrome-extension", "devtools"}
# Raw TeX that MathJax should have replaced: \( \) \[ \] delimiters, or a control word with an argument.
RAW_TEX = re.compile(r"\\[()\[\]]|\\(?:frac|mathrm|mathbb|mathcal|hat|sum|begin|end|sqrt|top|varepsilon)\b")


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
    skip = {"_static", "_sources", "_images", "_downloads"}
    return sorted(p for p in html.rglob("*.html") if not skip & set(p.relative_to(html).parts))


class _Ids(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" or (tag == "a" and k == "name"):
                self.ids.add(v or "")


def anchors(path: Path, cache: dict) -> set[str]:
    if path not in cache:
        parser = _Ids()
        parser.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = parser.ids
    return cache[path]


# -- the browser ------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def browser():
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-default-apps", "--disable-extensions", "--no-first-run", "--disable-quic",
                "--window-size=1280,2000", f"--user-data-dir={profile}",
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


_INSPECT = r"""
const done = arguments[arguments.length - 1];
const ready = (window.MathJax && MathJax.startup && MathJax.startup.promise) ? MathJax.startup.promise
                                                                             : Promise.resolve();
const imgs = Array.from(document.images).map(i => i.complete ? Promise.resolve()
    : new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }));
Promise.all([ready, ...imgs]).then(() => {
  const skip = 'pre, code, script, style, textarea, mjx-container, .highlight, .MathJax';
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const texts = [];
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (el && !el.closest(skip) && n.nodeValue.trim()) texts.push(n.nodeValue);
  }
  done({
    mathjax: !!(window.MathJax && MathJax.startup),
    math: document.querySelectorAll('.math').length,
    typeset: document.querySelectorAll('mjx-container').length,
    untypeset: Array.from(document.querySelectorAll('.math')).filter(e => !e.querySelector('mjx-container'))
                    .map(e => e.textContent.slice(0, 80)),
    errors: Array.from(document.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80)),
    texts: texts,
    images: Array.from(document.images).map(i => [i.getAttribute('src'), i.naturalWidth]),
    links: Array.from(document.querySelectorAll('a[href]')).map(a => a.href),
  });
}).catch(e => done({failure: String(e)}));
"""


def test_every_page_reads_offline(html_dir, browser):
    screenshots = os.environ.get("SOFTMAX_ICL_SCREENSHOTS")
    all_pages = pages(html_dir)
    assert len(all_pages) >= int(os.environ.get("SOFTMAX_ICL_MIN_PAGES", "10")), [p.name for p in all_pages]
    problems: list[str] = []
    ids_cache: dict = {}
    formulas = pages_with_math = 0
    for page in all_pages:
        rel = page.relative_to(html_dir).as_posix()
        refresh = REDIRECT.search(page.read_text(encoding="utf-8", errors="replace")[:2000])
        if refresh:  # a redirect page (index.html): its target exists; the target is checked as a page
            if not (page.parent / refresh.group(1)).is_file():
                problems.append(f"{rel}: redirects to a missing page {refresh.group(1)}")
            continue
        browser.get_log("performance")  # drop what earlier pages logged
        browser.get(page.as_uri())
        info = browser.execute_async_script(_INSPECT)
        if "failure" in info:
            problems.append(f"{rel}: {info['failure']}")
            continue
        if screenshots:
            Path(screenshots).mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(Path(screenshots) / (rel.replace("/", "__") + ".png")))

        # math
        if info["math"]:
            pages_with_math += 1
            formulas += info["math"]
            if not info["mathjax"]:
                problems.append(f"{rel}: has {info['math']} formulas but MathJax did not start")
            if info["untypeset"]:
                problems.append(f"{rel}: {len(info['untypeset'])} formulas not typeset, e.g. {info['untypeset'][:3]}")
        if info["errors"]:
            problems.append(f"{rel}: MathJax errors {info['errors'][:3]}")
        raw = [t.strip()[:100] for t in info["texts"] if RAW_TEX.search(t)]
        if raw:
            problems.append(f"{rel}: raw TeX in the rendered text, e.g. {raw[:3]}")

        # images
        broken = [src for src, width in info["images"] if not width]
        if broken:
            problems.append(f"{rel}: images that did not load: {broken[:5]}")

        # internal links and anchors
        for href in info["links"]:
            url = urlsplit(href)
            if url.scheme != "file":
                continue
            target = Path(unquote(url.path))
            if not target.exists():
                problems.append(f"{rel}: link to a missing file {target}")
            elif url.fragment and target.suffix == ".html" and unquote(url.fragment) not in anchors(target, ids_cache):
                problems.append(f"{rel}: link to a missing anchor {target.name}#{url.fragment}")

        # console errors
        for entry in browser.get_log("browser"):
            if entry.get("level") == "SEVERE":
                problems.append(f"{rel}: console error: {entry.get('message', '')[:200]}")

        # requests
        for entry in browser.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Network.requestWillBeSent":
                requested = msg["params"]["request"]["url"]
                if urlsplit(requested).scheme not in LOCAL_SCHEMES:
                    problems.append(f"{rel}: requested {requested[:120]}")

    print(f"checked {len(all_pages)} pages; {formulas} formulas on {pages_with_math} pages, all typeset")
    assert pages_with_math > 0 and formulas > 0, "no page has math: the check of typesetting checked nothing"
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(dict.fromkeys(problems))

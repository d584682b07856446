"""The documentation site, built and opened in a real browser.

Builds the site with ``mkdocs build --strict`` into a temporary folder (a warning, e.g. a broken link, an unknown
anchor or a generator error, fails with mkdocs' message), serves it on 127.0.0.1 and opens every page in headless
Chromium: Debian's ``chromium`` (installed with apt when missing, as tests/test_slurm.py installs SLURM; the browser
checks skipped only where apt cannot provide it, the strict build never: `make test` builds the site only here),
driven by Playwright from PyPI (its own browser download is not used). For each page:
it renders (a title, a heading and the main content), logs no console error and no page error, every ``<img>``
loads, and every internal link reaches a page with status 200 and, where it has a ``#fragment``, that anchor.
"""

from __future__ import annotations

import functools
import html.parser
import os
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.apt_install import apt_install

REPO_ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/lib/chromium/chromium")
#: pages the site must have, as paths under its root
REQUIRED_PAGES = ("", "quickstart/", "reference/config/", "reference/cli/", "reference/api/")

pytestmark = pytest.mark.slow


class BrowserUnavailable(RuntimeError):
    """Chromium cannot be installed here (a reason to skip, not a failure)."""


def find_chromium() -> str | None:
    return next((p for p in CHROMIUM_PATHS if Path(p).exists()), None) or shutil.which("chromium")


def ensure_chromium() -> str:
    """Debian's chromium, installed with apt-get when missing (root only)."""
    found = find_chromium()
    if found:
        return found
    if os.geteuid() != 0:
        raise BrowserUnavailable("chromium is not installed and this is not root")
    if shutil.which("apt-get") is None:
        raise BrowserUnavailable("chromium is not installed and there is no apt-get to install it")
    failure = apt_install(["chromium"])
    if failure:
        raise BrowserUnavailable(failure)
    found = find_chromium()
    if not found:
        raise BrowserUnavailable("apt installed chromium but no chromium executable was found")
    return found


def build_site(site_dir: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "MPLBACKEND": "Agg"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                            cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        problems = [line for line in (result.stderr + result.stdout).splitlines()
                    if line.startswith(("WARNING", "ERROR")) or "Error" in line or "Aborted" in line]
        pytest.fail("mkdocs build --strict failed:\n" + "\n".join(problems or (result.stderr + result.stdout)
                                                                  .splitlines()[-40:]), pytrace=False)


class QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        pass


class Anchors(html.parser.HTMLParser):
    """Every ``id`` (and ``<a name>``) of an HTML page."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value and (name == "id" or (tag == "a" and name == "name")):
                self.ids.add(value)


@dataclass
class PageReport:
    url: str
    title: str = ""
    h1: str = ""
    content_chars: int = 0
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    broken_images: list[str] = field(default_factory=list)
    images: int = 0
    links: list[str] = field(default_factory=list)


@dataclass
class SiteVisit:
    base: str
    pages: list[str]
    reports: dict[str, PageReport]
    broken_links: list[str]


def page_urls(site_dir: Path, base: str) -> list[str]:
    """Every HTML page of the built site but the 404 page, as a URL (directory URLs end with /)."""
    urls = []
    for path in sorted(site_dir.rglob("*.html")):
        rel = path.relative_to(site_dir).as_posix()
        if rel == "404.html":
            continue
        urls.append(base + (rel[: -len("index.html")] if rel.endswith("index.html") else rel))
    return urls


WAIT_FOR_IMAGES = """async () => {
  const images = Array.from(document.images);
  images.forEach(img => { img.loading = 'eager'; });
  await Promise.all(images.map(img => img.complete ? null :
      new Promise(done => { img.addEventListener('load', done); img.addEventListener('error', done); })));
  return images.map(img => ({src: img.currentSrc || img.src, ok: img.complete && img.naturalWidth > 0}));
}"""


def visit(browser_path: str, site_dir: Path) -> SiteVisit:
    from playwright.sync_api import sync_playwright

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(site_dir)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/"
    reports: dict[str, PageReport] = {}
    try:
        urls = page_urls(site_dir, base)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=browser_path, headless=True,
                                        args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            try:
                context = browser.new_context(viewport={"width": 1280, "height": 900})
                for url in urls:
                    reports[url] = open_page(context, url)
            finally:
                browser.close()
        broken = check_links(reports, base)
    finally:
        server.shutdown()
        server.server_close()
    return SiteVisit(base, urls, reports, broken)


def open_page(context, url: str) -> PageReport:
    report = PageReport(url)
    page = context.new_page()
    page.on("console", lambda msg: report.console_errors.append(msg.text) if msg.type == "error" else None)
    page.on("pageerror", lambda error: report.page_errors.append(str(error)))
    try:
        response = page.goto(url, wait_until="load", timeout=60_000)
        if response is None or response.status != 200:
            report.page_errors.append(f"HTTP {response.status if response else 'no response'}")
        page.wait_for_load_state("networkidle", timeout=30_000)
        report.title = page.title()
        report.h1 = page.eval_on_selector("article h1", "e => e.textContent.trim()") \
            if page.query_selector("article h1") else ""
        report.content_chars = len(page.inner_text("article")) if page.query_selector("article") else 0
        images = page.evaluate(WAIT_FOR_IMAGES)
        report.images = len(images)
        report.broken_images = [img["src"] for img in images if not img["ok"]]
        report.links = page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
    finally:
        page.close()
    return report


def check_links(reports: dict[str, PageReport], base: str) -> list[str]:
    """Every same-host link: status 200, and its fragment an id of the target page."""
    fetched: dict[str, tuple[int, set[str]]] = {}

    def fetch(url: str) -> tuple[int, set[str]]:
        if url not in fetched:
            try:
                with urllib.request.urlopen(url, timeout=30) as response:
                    body = response.read()
                    status = response.status
                    kind = response.headers.get("Content-Type", "")
            except urllib.error.HTTPError as error:
                fetched[url] = (error.code, set())
                return fetched[url]
            ids: set[str] = set()
            if "html" in kind:
                parser = Anchors()
                parser.feed(body.decode("utf-8", "replace"))
                ids = parser.ids
            fetched[url] = (status, ids)
        return fetched[url]

    broken = []
    host = urllib.parse.urlsplit(base).netloc
    for page_url, report in reports.items():
        for link in sorted(set(report.links)):
            parts = urllib.parse.urlsplit(link)
            if parts.scheme not in ("http", "https") or parts.netloc != host:
                continue
            target = urllib.parse.urlunsplit((parts.scheme, parts.netloc, parts.path, parts.query, ""))
            status, ids = fetch(target)
            if status != 200:
                broken.append(f"{page_url}: {link} -> HTTP {status}")
            elif parts.fragment and urllib.parse.unquote(parts.fragment) not in ids:
                broken.append(f"{page_url}: {link} -> no anchor #{urllib.parse.unquote(parts.fragment)}")
    return broken


@pytest.fixture(scope="module")
def built_site(tmp_path_factory) -> Path:
    """The site, built strictly: with or without a browser here (`make test` builds it only here)."""
    site_dir = tmp_path_factory.mktemp("site")
    build_site(site_dir)
    return site_dir


@pytest.fixture(scope="module")
def site(built_site: Path) -> SiteVisit:
    try:
        browser_path = ensure_chromium()
    except BrowserUnavailable as reason:
        pytest.skip(f"no Chromium here: {reason}")
    return visit(browser_path, built_site)


def test_the_site_builds_strictly_with_every_page(built_site: Path):
    pages = sorted(p.relative_to(built_site).as_posix() for p in built_site.rglob("index.html"))
    for must in (f"{page}index.html" for page in REQUIRED_PAGES):
        assert must in pages, f"{must} missing from the built site: {pages}"


def _short(url: str, base: str) -> str:
    return "/" + url[len(base):]


def test_every_page_renders(site: SiteVisit):
    assert len(site.pages) >= 10, f"only {len(site.pages)} pages built"
    for must in REQUIRED_PAGES:
        assert site.base + must in site.reports, f"page /{must} missing from the built site"
    bad = [f"{_short(r.url, site.base)}: title {r.title!r}, h1 {r.h1!r}, {r.content_chars} characters"
           for r in site.reports.values() if not r.title.strip() or not r.h1 or r.content_chars < 40]
    assert not bad, "pages that did not render:\n" + "\n".join(bad)


def test_no_console_or_page_errors(site: SiteVisit):
    bad = [f"{_short(r.url, site.base)}: {kind}: {message}" for r in site.reports.values()
           for kind, messages in (("console", r.console_errors), ("page error", r.page_errors))
           for message in messages]
    assert not bad, "errors in the browser:\n" + "\n".join(bad)


def test_every_image_loads(site: SiteVisit):
    assert sum(r.images for r in site.reports.values()) > 0, "no page shows an image"
    bad = [f"{_short(r.url, site.base)}: {src}" for r in site.reports.values() for src in r.broken_images]
    assert not bad, "images that did not load:\n" + "\n".join(bad)


def test_every_internal_link_resolves(site: SiteVisit):
    assert not site.broken_links, "broken internal links:\n" + "\n".join(site.broken_links)

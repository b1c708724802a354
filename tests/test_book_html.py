"""The built book must be readable offline: math typeset by a local MathJax, every figure loaded.

The test builds a one-chapter book with the project's own ``_config.yml`` (chapter executed), serves it
on 127.0.0.1 and opens it in headless Chromium with every other host unresolvable, so anything the page
would fetch from a CDN fails exactly as it would on a machine with no network.

Chromium cannot report on a page by itself, so a small wrapper page (same origin) loads the chapter in an
iframe, waits for MathJax and the images, and writes a JSON verdict into its own DOM; ``--dump-dom``
prints that DOM and the test reads the verdict from it.

Needs the book extra and Debian's ``chromium`` package (or set CHROMIUM=/path/to/chrome). Without them the test is skipped,
except under CI (environment variable CI set), where a missing browser is a failure.
"""

from __future__ import annotations

import functools
import html
import http.server
import json
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from tests.conftest import REPO, build_book, need_book_extra
CHAPTER = "book/03_2_attention"  # has LaTeX (inline and display) and matplotlib figures

# Runs inside the wrapper page. Every wait has a deadline, so a broken page still yields a verdict.
WRAPPER = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>offline check</title></head>
<body>
<pre id="verdict">pending</pre>
<iframe id="page" src="%(page)s" style="width:1200px;height:900px"></iframe>
<script>
const sleep = ms => new Promise(r => setTimeout(r, ms));
async function until(cond, ms) {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await sleep(50);
  return cond();
}
function withDeadline(promise, ms) {
  return Promise.race([promise.then(() => true), sleep(ms).then(() => false)]);
}
// Text a reader sees outside typeset math and code (TeX left there means MathJax did not run).
function proseText(doc) {
  const skip = 'mjx-container, pre, code, script, style, .highlight';
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT);
  let text = '';
  for (let n = walker.nextNode(); n; n = walker.nextNode())
    if (!n.parentElement.closest(skip)) text += n.nodeValue + ' ';
  return text;
}
async function check() {
  const frame = document.getElementById('page');
  const v = {errors: []};
  // The iframe starts on about:blank (already 'complete'): wait for the chapter itself.
  const page = new URL(frame.getAttribute('src'), location.href).href;
  await until(() => { const d = frame.contentDocument;
    return d && d.location.href === page && d.readyState === 'complete'; }, 15000);
  const w = frame.contentWindow, d = frame.contentDocument;
  v.url = String(w.location.href);
  v.mathjax_loaded = await until(() => !!(w.MathJax && w.MathJax.startup && w.MathJax.startup.promise), 10000);
  if (v.mathjax_loaded) {
    v.mathjax_version = w.MathJax.version;
    v.typeset_done = await withDeadline(w.MathJax.startup.promise, 15000);
  }
  await withDeadline(d.fonts.ready, 5000);
  const imgs = Array.from(d.images);
  await withDeadline(Promise.all(imgs.map(i => i.complete ? null :
      new Promise(r => { i.addEventListener('load', r); i.addEventListener('error', r); }))), 10000);
  v.math_elements = d.querySelectorAll('.math').length;
  v.untypeset_math = Array.from(d.querySelectorAll('.math'))
      .filter(e => !e.querySelector('mjx-container')).map(e => e.textContent.slice(0, 80));
  v.mjx_containers = d.querySelectorAll('mjx-container').length;
  v.mjx_errors = Array.from(d.querySelectorAll('mjx-merror')).map(e => e.textContent.slice(0, 80));
  const prose = proseText(d);
  v.raw_tex = ['$$', '\\\\(', '\\\\[', '\\\\begin{', '\\\\frac', '\\\\mathrm', '\\\\text{']
      .filter(s => prose.includes(s));
  v.images = imgs.map(i => ({src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0}));
  v.failed_fonts = Array.from(d.fonts).filter(f => f.status === 'error').map(f => f.family);
  v.external_requests = w.performance.getEntriesByType('resource').map(e => e.name)
      .filter(n => !n.startsWith(location.origin));
  return v;
}
check().catch(e => ({errors: [String(e && e.stack || e)]}))
  .then(v => { document.getElementById('verdict').textContent = JSON.stringify(v); });
</script>
</body></html>
"""


@pytest.fixture(scope="module")
def built_book(tmp_path_factory) -> Path:
    """Build a one-chapter book with the project's configuration; return its _build/html folder."""
    need_book_extra()
    import yaml

    root = tmp_path_factory.mktemp("book")
    config = yaml.safe_load((REPO / "_config.yml").read_text())
    config.setdefault("execute", {})["execute_notebooks"] = "force"  # a fresh folder: always execute
    # The chapter links to chapters this one-page book leaves out; `make book` checks those links.
    config.setdefault("sphinx", {}).setdefault("config", {})["suppress_warnings"] = ["myst.xref_missing"]
    # the translator's files (web/) belong to another chapter
    config["sphinx"]["config"].pop("html_extra_path", None)
    (root / "_config.yml").write_text(yaml.safe_dump(config, sort_keys=False))
    # the chapter and the references page its citations link to
    (root / "_toc.yml").write_text(yaml.safe_dump({"format": "jb-book", "root": CHAPTER,
                                                   "chapters": [{"file": "book/references"}]}))
    (root / "book").mkdir()
    shutil.copy(REPO / f"{CHAPTER}.ipynb", root / "book")
    for name in ("references.bib", "references.md"):     # its citations
        shutil.copy(REPO / "book" / name, root / "book")
    shutil.copytree(REPO / "_ext", root / "_ext")  # the citation style
    (root / "results").symlink_to(REPO / "results")  # what _ext/findings.py reads

    build_book(root)
    return root / "_build" / "html"


def test_the_whole_book_builds_from_its_stored_outputs_without_warnings(whole_book):
    pages = {p.stem for p in (whole_book / "book").glob("*.html")}
    chapters = {p.stem for p in (REPO / "book").glob("*.ipynb")} | {
        p.stem for p in (REPO / "book").glob("*.md")}
    assert pages == chapters, f"pages missing or extra: {pages ^ chapters}"


@pytest.fixture(scope="module")
def server(built_book):
    """Serve the built book on 127.0.0.1 at a free port, from a background thread."""

    class QuietHandler(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(QuietHandler, directory=str(built_book))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_pages_load_no_assets_from_the_network(built_book):
    """No <script> or stylesheet of the chapter comes from another host (MathJax in particular)."""
    page = (built_book / f"{CHAPTER}.html").read_text()
    remote = re.findall(r"""<(?:script|link)\b[^>]*\b(?:src|href)=["'](?:https?:)?//[^"']*""", page)
    assert remote == [], f"page loads assets from the network: {remote}"
    scripts = re.findall(r"""<script\b[^>]*\bsrc=["']([^"']*)""", page)
    mathjax = [s for s in scripts if "mathjax" in s.lower()]
    assert mathjax, f"no MathJax script on the page: {scripts}"
    for src in mathjax:
        assert (built_book / CHAPTER).parent.joinpath(src.split("?")[0]).resolve().is_file(), src


def test_math_typeset_and_images_load_offline(chromium, built_book, server, tmp_path):
    (built_book / "_offline_check.html").write_text(WRAPPER % {"page": f"{CHAPTER}.html"})
    command = [
        chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
        "--disable-background-networking", "--disable-component-update", "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        # Offline: every host but the local server fails to resolve, as a CDN would with no network.
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
        "--window-size=1280,1600", "--virtual-time-budget=30000",
        "--dump-dom", f"{server}/_offline_check.html",
    ]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="verdict">(.*?)</pre>', result.stdout, re.S)
    assert found and found.group(1) != "pending", (
        f"no verdict from the browser (exit {result.returncode}):\n"
        f"{result.stdout[-2000:]}\n{result.stderr[-2000:]}")
    v = json.loads(html.unescape(found.group(1)))
    print(json.dumps(v, indent=1))  # shown by pytest when an assertion below fails

    assert v["errors"] == [], v
    assert v["url"].endswith(f"{CHAPTER}.html"), v
    assert v["mathjax_loaded"] and v["typeset_done"], f"MathJax did not load or finish: {v}"
    assert v["math_elements"] > 0, f"the chapter shows no math at all: {v}"
    assert v["untypeset_math"] == [], f"math left as raw TeX: {v['untypeset_math']}"
    assert v["mjx_containers"] >= v["math_elements"], v
    assert v["mjx_errors"] == [], f"MathJax could not parse: {v['mjx_errors']}"
    assert v["raw_tex"] == [], f"raw TeX visible in the text: {v['raw_tex']}"
    assert v["failed_fonts"] == [], f"math fonts failed to load: {v['failed_fonts']}"
    assert v["external_requests"] == [], f"the page asked the network for: {v['external_requests']}"
    assert len(v["images"]) >= 1, "the chapter has no images; its figures are missing"
    broken = [i["src"] for i in v["images"] if not i["ok"]]
    assert broken == [], f"images that did not load: {broken}"

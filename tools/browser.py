"""Headless Chromium for the tests and scripts that look at the built book: find the browser, load a
page, read an element of its DOM."""
import html
import os
import re
import shutil
import subprocess


def find_chromium() -> str | None:
    """The Chromium to use: $CHROMIUM, else the first of chromium, chromium-browser, google-chrome on the
    PATH; None when there is none."""
    candidates = [os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"]
    for name in filter(None, candidates):
        path = shutil.which(name)
        if path:
            return path
    return None


def open_page(chromium, url, tmp_path, seconds=400, real_time=False) -> str:
    """The page's DOM once its scripts are done. Chromium's virtual time waits for every task the page
    schedules, but the page's clocks then read virtual time. With real_time the clocks are real, but the
    DOM is printed once the page has loaded: for scripts/translator_page.py, which checks that the report
    is there."""
    wait = f"--timeout={seconds * 1000}" if real_time else f"--virtual-time-budget={seconds * 1000}"
    command = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               "--host-resolver-rules=MAP * ~NOTFOUND", wait, "--dump-dom", url]
    return subprocess.run(command, capture_output=True, text=True, timeout=seconds + 60).stdout


def element(dom, tag, id_) -> str | None:
    """The text inside the first <tag id="id_"> of a DOM dump, unescaped; None if there is none."""
    found = re.search(rf'<{tag} id="{id_}"[^>]*>(.*?)</{tag}>', dom, re.S)
    return None if found is None else html.unescape(found.group(1))

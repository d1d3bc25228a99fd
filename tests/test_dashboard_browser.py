"""The dashboard in a real browser: the pages served over loopback by a tiny server, opened by
headless Chromium, which writes a screenshot (checked for the charts' own colours) and the DOM
as it parsed it (checked for the text and for no markup from the hostile strings)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from guard.dashboard import pull_page, repo_page
from tests.dashboard_pages import HOSTILE_SUBJECT, HOSTILE_TITLE, pull_runs, repo_history

PAGE_W, PAGE_H = 1200, 1800
DOT = (0x4C, 0x72, 0xB0)  # history dots, and base's in the strip plot
LEVEL = (0x2A, 0x9D, 0x8F)  # segment medians
CONFIRMED = (0xC0, 0x39, 0x2B)
HEAD = (0xDD, 0x84, 0x52)  # head's dots in the strip plot


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _browser(*args: str) -> subprocess.CompletedProcess[str]:
    with tempfile.TemporaryDirectory() as profile:
        sandbox = ["--no-sandbox"] if os.geteuid() == 0 else []  # Chromium's sandbox refuses root
        return subprocess.run(
            [chromium(), "--headless", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}",
             *sandbox, *args], capture_output=True, text=True, timeout=120)


def screenshot(url: str, path: Path, size: tuple[int, int] = (PAGE_W, PAGE_H)) -> None:
    _browser(f"--window-size={size[0]},{size[1]}", f"--screenshot={path}", url)
    assert path.is_file(), f"Chromium wrote no screenshot of {url}"


def dump_dom(url: str) -> str:
    proc = _browser("--dump-dom", url)
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


class _Pages(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802  # the name http.server calls
        parts = urlsplit(self.path)
        only = parse_qs(parts.query).get("regressions") == ["1"]
        if parts.path == "/repos/acme/engine":
            body = repo_page(repo_history(), regressions_only=only)
        elif parts.path == "/repos/acme/engine/pulls/42":
            body = pull_page(pull_runs(), regressions_only=only)
        else:
            self.send_error(404)
            return
        data = body.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    if chromium() is None:
        pytest.skip("headless Chromium not found: apt-get install chromium")
    if _browser("--dump-dom", "data:text/html,<p>ok</p>").returncode != 0:
        pytest.skip("Chromium is installed but does not start headless here")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    thread.join()


def _pixels_near(path: Path, colour: tuple[int, int, int], tolerance: int = 12) -> int:
    from PIL import Image

    with Image.open(path) as image:
        rgb = image.convert("RGB")
        assert rgb.size == (PAGE_W, PAGE_H)
        return sum(count for count, pixel in rgb.getcolors(maxcolors=PAGE_W * PAGE_H)
                   if all(abs(a - b) <= tolerance for a, b in zip(pixel, colour)))


@pytest.mark.slow
def test_repository_page_in_chromium(server, tmp_path):
    url = f"{server}/repos/acme/engine"
    shot = tmp_path / "repo.png"
    screenshot(url, shot)
    assert shot.stat().st_size > 20_000  # a page of charts, not a blank one (a white page is ~5 kB)
    # 3 charts x 40 dots of radius 3.5 px: well over a thousand dot pixels; a level line per
    # segment; the confirmed step's dashed line and label
    assert _pixels_near(shot, DOT) > 1000
    assert _pixels_near(shot, LEVEL) > 500
    assert _pixels_near(shot, CONFIRMED) > 100
    dom = dump_dom(url)
    assert dom.count('class="series"') == 3 and dom.count('class="history"') == 3
    assert len(re.findall(r"<circle[^>]*class=\"point\"", dom)) == 120
    assert "<img" not in dom and "alert(1)" in dom  # the title is text in the parsed page
    filtered = dump_dom(url + "?regressions=1")
    assert filtered.count('class="series"') == 1 and "#43" not in filtered


@pytest.mark.slow
def test_pull_request_page_in_chromium(server, tmp_path):
    url = f"{server}/repos/acme/engine/pulls/42"
    shot = tmp_path / "pull.png"
    screenshot(url, shot)
    assert _pixels_near(shot, HEAD) > 200 and _pixels_near(shot, DOT) > 200  # both arms' dots drawn
    dom = dump_dom(url)
    links = pull_runs().runs[0].trace_links
    assert dom.count('class="run"') == 2 and re.findall(r'<a class="trace" href="([^"]+)"', dom) == [
        link.url for link in links]
    assert "<script>" not in dom and "&lt;script&gt;" in dom and HOSTILE_SUBJECT.split(">")[1][:10] in dom
    assert "<img" not in dom and HOSTILE_TITLE.split(">")[1].strip() in dom
    filtered = dump_dom(url + "?regressions=1")
    assert re.findall(r'data-run="(\w+)"', filtered) == ["7"]

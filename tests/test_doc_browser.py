"""The generated HTML site, rendered in headless Chromium (no extra Python deps).

Serves the site with ``http.server`` on 127.0.0.1, dumps the DOM after scripts ran
(``--dump-dom``), checks tables, a known offset and the in-page error recorder, clicks
nothing but follows a version anchor (the switcher's hash handling), and saves
``artifacts/doc-screenshot.png``. Skips only when Chromium is absent outside CI.
"""

from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from bytewright.generator import pipeline
from bytewright.review import docs

from .conftest import spread

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
ARTIFACT = ROOT / "artifacts" / "doc-screenshot.png"


def _browser() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    if os.environ.get("CI"):
        pytest.fail("CI is set but /usr/bin/chromium is missing: run ci/install-browser.sh")
    pytest.skip("/usr/bin/chromium not installed (run ci/install-browser.sh)")


@pytest.fixture(scope="module")
def server(tmp_path_factory, shipped_schemas):
    browser = _browser()
    site = tmp_path_factory.mktemp("site")
    docs.write(site, shipped_schemas)
    handler = functools.partial(_Quiet, directory=str(site))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield browser, f"http://127.0.0.1:{httpd.server_address[1]}", tmp_path_factory
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep pytest output clean
        pass


def _chromium(browser: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess:
    profile = tmp / "profile"
    profile.mkdir(exist_ok=True)
    cmd = [str(browser), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
           "--no-first-run", "--disable-background-networking", "--disable-component-update",
           "--disable-sync", "--disable-dev-shm-usage", f"--user-data-dir={profile}",
           "--enable-logging=stderr", "--v=0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)


def _console_errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines()
            if "Uncaught" in line or ("CONSOLE" in line and ("ERROR" in line or "error" in line))]


def test_page_renders(server):
    browser, base, factory = server
    tmp = factory.mktemp("chromium")
    proc = _chromium(browser, tmp, "--dump-dom", f"{base}/htt.html")
    assert proc.returncode == 0, proc.stderr[-2000:]
    dom = proc.stdout
    assert 'data-ready="1"' in dom, "page script did not run"
    assert dom.count('<table class="fields">') >= 10
    assert '<table id="version-registry">' in dom
    assert 'data-enum="wal_op"' in dom
    row = re.search(r'<tr data-field="file_header\.node_count">(.*?)</tr>', dom, re.S)
    assert row and '<td class="num offset">24</td>' in row.group(1)
    assert re.search(r'<pre id="bw-errors"[^>]*></pre>', dom), "page recorded JS errors"
    assert not _console_errors(proc.stderr), _console_errors(proc.stderr)
    # the switcher shows the latest version by default and hides older ones
    assert re.search(r'id="snapshot_section-v1"[^>]*hidden', dom)
    assert not re.search(r'id="snapshot_section-v2-4"[^>]*hidden', dom)


def test_version_link_switches_layout(server):
    browser, base, factory = server
    tmp = factory.mktemp("chromium")
    proc = _chromium(browser, tmp, "--dump-dom", f"{base}/htt.html#snapshot_section-v1")
    dom = proc.stdout
    assert not re.search(r'id="snapshot_section-v1"[^>]*hidden', dom)
    assert re.search(r'id="snapshot_section-v2-4"[^>]*hidden', dom)
    assert re.search(r'<pre id="bw-errors"[^>]*></pre>', dom)


def test_index_and_screenshot(server):
    browser, base, factory = server
    tmp = factory.mktemp("chromium")
    proc = _chromium(browser, tmp, "--dump-dom", f"{base}/index.html")
    assert '<a href="htt.html">htt</a>' in proc.stdout
    ARTIFACT.parent.mkdir(parents=True, exist_ok=True)
    shot = tmp / "shot.png"
    proc = _chromium(browser, tmp, f"--screenshot={shot}", "--window-size=1280,2000",
                     "--hide-scrollbars", "--run-all-compositor-stages-before-draw",
                     "--virtual-time-budget=5000", f"{base}/htt.html")
    # a blank page is ~12 KB; rendered tables and text are far larger
    assert shot.exists() and shot.stat().st_size > 50_000, proc.stderr[-2000:]
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copyfile(shot, ARTIFACT)


@pytest.fixture(scope="module")
def model(server):
    """The model the served site was rendered from (its layouts.json)."""
    import urllib.request

    with urllib.request.urlopen(f"{server[1]}/layouts.json") as resp:
        return json.loads(resp.read().decode("utf-8"))


# Each family's page is a browser start: the first family by default, all under -m long.
FAMILIES = sorted(p.stem for p in pipeline.schema_files())


def test_every_shipped_family_has_a_page_to_render(model):
    assert [f["name"] for f in model["families"]] == FAMILIES


@pytest.mark.parametrize("family", spread(FAMILIES, 1))
def test_diagrams_render_one_per_record_version(server, model, family):
    """Every record version has an SVG byte diagram; the visible ones draw in Chromium."""
    browser, base, factory = server
    tmp = factory.mktemp("chromium")
    assert [f["name"] for f in model["families"]].count(family) == 1
    for fam in [f for f in model["families"] if f["name"] == family]:
        proc = _chromium(browser, tmp, "--dump-dom", f"{base}/{fam['name']}.html")
        dom = proc.stdout
        assert 'data-ready="1"' in dom
        ids = [lay["id"] for rec in fam["records"] for lay in rec["layouts"]]
        for ident in ids:
            assert f'data-layout="{ident}"' in dom, ident
        assert dom.count('class="bw-diagram"') >= len(ids)
        shown = int(re.search(r'data-diagrams-shown="(\d+)"', dom).group(1))
        drawn = int(re.search(r'data-diagrams-drawn="(\d+)"', dom).group(1))
        assert shown > 0 and drawn == shown, (fam["name"], shown, drawn)
        assert re.search(r'<pre id="bw-errors"[^>]*></pre>', dom)

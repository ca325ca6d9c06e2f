"""The server extension's routes, on a real Jupyter server started as a user would."""

from __future__ import annotations

import subprocess
import sys

import bokeh

BOKEH_JS = "gtc/static/bokeh/js/bokeh.min.js"


def test_server_extension_is_enabled_and_loads():
    result = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                            capture_output=True, text=True, timeout=120, check=False)
    listing = result.stdout + result.stderr  # jupyter prints the list on stderr
    lines = listing.splitlines()
    enabled = next((line for line in lines if "jupyter_gtc" in line and "enabled" in line), None)
    assert enabled is not None, listing
    validated = next((line for line in lines if "jupyter_gtc" in line and "OK" in line), None)
    assert validated is not None, listing


def test_bokehjs_needs_a_login(jupyter_server):
    status, headers, _ = jupyter_server.request("GET", BOKEH_JS, token=False)
    assert status in (302, 403), status
    if status == 302:
        assert "/login" in headers["Location"], headers["Location"]


def test_bokehjs_is_served_with_a_token_and_cached_long(jupyter_server):
    status, headers, body = jupyter_server.request("GET", f"{BOKEH_JS}?v={bokeh.__version__}")
    assert status == 200
    assert "javascript" in headers["Content-Type"], headers["Content-Type"]
    assert "max-age=31536000" in headers["Cache-Control"] and "private" in headers["Cache-Control"]
    assert bokeh.__version__.encode() in body[:2_000_000]
    assert len(body) > 500_000  # the real minified BokehJS, not an error page


def test_bokehjs_widgets_bundle_is_served(jupyter_server):
    status, headers, _ = jupyter_server.request("GET", "gtc/static/bokeh/js/bokeh-widgets.min.js")
    assert status == 200 and "javascript" in headers["Content-Type"]


def test_no_files_outside_bokehjs(jupyter_server):
    for path in ("gtc/static/bokeh/../../../__init__.py", "gtc/static/bokeh/%2e%2e/%2e%2e/__init__.py",
                 "gtc/static/bokeh/js/no-such-file.js"):
        status, _, _ = jupyter_server.request("GET", path)
        assert status in (403, 404), (path, status)

"""Fixtures for tests that drive a real JupyterLab in a real headless Chromium.

Chromium is Debian's (``apt-get install chromium``, which ``make setup`` does); Playwright
only drives it (``pip install playwright`` downloads no browser, and ``playwright install``
needs a network this project does not assume)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.jupyter import JupyterProcess

CHROMIUM = Path("/usr/bin/chromium")
# Headless, no sandbox (it runs as root, often in a container), and nothing that reaches
# the network on its own.
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


@pytest.fixture(scope="session")
def chromium():
    """A headless Chromium driven by Playwright; skipped where Chromium is missing, except in CI."""
    if not CHROMIUM.exists():
        problem = f"{CHROMIUM} is missing"
        if os.environ.get("CI"):
            pytest.fail(f"{problem}; CI must run the browser tests (make setup installs Debian's chromium)")
        pytest.skip(f"{problem}; `make setup` as root (or `apt-get install -y chromium`) installs it")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_FLAGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def jupyter_lab_server(tmp_path_factory):
    with JupyterProcess(tmp_path_factory.mktemp("jupyter-lab"), app="lab") as lab:
        yield lab


@pytest.fixture
def jupyter_lab(jupyter_lab_server, request):
    """A real JupyterLab (ours: server extension and labextension), on a free port, shared
    by a module; the kernels a test started are shut down after it. On failure the server's
    log of the test, and its threads' stacks, are printed with its output."""
    start = len(jupyter_lab_server.log())
    yield jupyter_lab_server
    jupyter_lab_server.shutdown_kernels()
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        jupyter_lab_server.dump_threads()
        print("jupyter server log:\n" + "\n".join(jupyter_lab_server.log()[start:].splitlines()[-200:]))


@pytest.fixture
def page(chromium, request):
    """A fresh browser page; on failure its console log is printed with the test's output."""
    context = chromium.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    if os.environ.get("GTC_BROWSER_SLOWDOWN"):  # e.g. 8: the browser of a loaded machine, to find races
        context.new_cdp_session(page).send("Emulation.setCPUThrottlingRate",
                                           {"rate": float(os.environ["GTC_BROWSER_SLOWDOWN"])})
    console: list[str] = []
    page.on("console", lambda msg: console.append(f"[{msg.type}] {msg.text}"))
    page.on("pageerror", lambda error: console.append(f"[pageerror] {error}"))
    page.console_log = console
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print("browser console:\n" + "\n".join(console[-200:]))
    context.close()


@pytest.fixture
def screenshots() -> Path:
    """``artifacts/screenshots/`` of the repository (ignored by git)."""
    folder = ARTIFACTS / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)

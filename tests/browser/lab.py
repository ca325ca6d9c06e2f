"""Driving JupyterLab's own UI from tests: the sidebar, notebooks, menus, the theme, the file dialog."""

from __future__ import annotations

import re

import nbformat
from playwright.sync_api import expect

SIDEBAR_TAB = '.jp-SideBar .lm-TabBar-tab[data-id="jupyter-gtc-sidebar"]'


def open_and_run_all(lab, page, name: str, cells: list[str]) -> str:
    """Write a notebook, open it in JupyterLab, run all its cells; returns its URL."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source) for source in cells])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (lab.root_dir / name).write_text(nbformat.writes(nb))
    url = f"{lab.url}lab/tree/{name}"
    page.goto(f"{url}?reset&token={lab.token}")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    lab.wait_for_idle_kernel(name)  # running cells before the kernel exists opens a dialog
    menu(page, "Run", "Run All Cells")
    return url


def open_lab_with_sidebar(lab, page) -> None:
    """A fresh JupyterLab page (its workspace reset) with the Training Clusters sidebar open."""
    page.goto(f"{lab.url}lab?reset&token={lab.token}")
    open_sidebar(page)


def open_sidebar(page) -> None:
    page.locator(SIDEBAR_TAB).click(timeout=60_000)
    expect(page.locator("#jupyter-gtc-sidebar")).to_be_visible()


def job_row(page, job_id: str):
    return page.locator(f'#jupyter-gtc-sidebar .jp-gtc-Job[data-job="{job_id}"]')


def menu(page, *path: str) -> None:
    """Click through the main menu: ``menu(page, "Settings", "Theme", "JupyterLab Dark")``."""
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=path[0]).first.click()
    for label in path[1:]:
        item = page.locator(".lm-Menu .lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")).last
        item.click() if label == path[-1] else item.hover()


def set_theme(page, theme: str) -> None:
    """Switch to ``"JupyterLab Dark"`` or ``"JupyterLab Light"`` and wait until it applies."""
    menu(page, "Settings", "Theme", theme)
    light = "true" if "Light" in theme else "false"
    page.wait_for_selector(f'body[data-jp-theme-name="{theme}"][data-jp-theme-light="{light}"]', state="attached", timeout=30_000)
    page.wait_for_selector("#jupyterlab-splash", state="detached", timeout=30_000)  # the theme's splash


def choose_file(page, name: str) -> None:
    """In JupyterLab's open-file dialog (``FileDialog.getOpenFiles``), select ``name`` in the
    folder it shows and accept."""
    dialog = page.locator(".jp-Dialog")
    text = page.locator(".jp-DirListing-itemText", has_text=re.compile(f"^{re.escape(name)}$"))
    dialog.locator(".jp-DirListing-item", has=text).click(timeout=30_000)
    dialog.locator(".jp-mod-accept").click()

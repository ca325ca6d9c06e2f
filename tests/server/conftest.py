"""A real ``jupyter server`` with the extensions the environment enables, ours among them."""

from __future__ import annotations

import pytest

from tests.browser.jupyter import JupyterProcess


@pytest.fixture(scope="module")
def jupyter_server(tmp_path_factory):
    with JupyterProcess(tmp_path_factory.mktemp("jupyter-server"), app="server") as server:
        yield server

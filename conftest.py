"""Session-wide test setup for tests/ and the notebooks that nbval executes.

Every test session gets a GTC_HOME of its own, so tests never touch a user's clusters;
at the end every cluster the session made is deleted (daemons stopped by PID, files
removed), even when a test or a notebook failed halfway.
"""

from __future__ import annotations

import os
import shutil
import tempfile


def pytest_configure(config):
    config._gtc_home = tempfile.mkdtemp(prefix="gtc-test-")
    os.environ["GTC_HOME"] = config._gtc_home


def pytest_unconfigure(config):
    home = getattr(config, "_gtc_home", None)
    if not home:
        return
    os.environ["GTC_HOME"] = home
    from jupyter_gtc import api

    for cluster in api.list_clusters(with_status=False):
        api.delete_cluster(cluster.name)
    shutil.rmtree(home, ignore_errors=True)


def pytest_collection_modifyitems(session, config, items):
    """The recipe notebooks hand their models on (pretraining -> continued pretraining ->
    SFT -> RL): run them in the catalogue's order, not the alphabet's, keeping each
    notebook's cells in order."""
    from jupyter_gtc.recipes.catalogue import RECIPES

    order = list(dict.fromkeys(r.notebook for r in RECIPES.values()))

    def rank(item) -> int:
        path = item.path
        if path.parent.name == "recipes" and path.name in order:
            return order.index(path.name)
        return -1  # everything else first, as collected

    items.sort(key=rank)

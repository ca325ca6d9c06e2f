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
    notebook's cells in order.

    ``make test`` runs two workers (pytest-xdist, ``--dist loadgroup``): most tests wait on
    Slurm, not on the CPU. A file's tests share module fixtures (a cluster) and run in order,
    so each file is one group, given whole to one worker; the recipe notebooks are one group,
    their chain on one worker's GTC_HOME (and so are the files of ``AS_THE_TEST_USER``)."""
    import pytest

    from jupyter_gtc.recipes.catalogue import RECIPES

    order = list(dict.fromkeys(r.notebook for r in RECIPES.values()))

    def in_chain(item) -> bool:
        return item.path.parent.name == "recipes" and item.path.name in order

    def rank(item) -> int:
        return order.index(item.path.name) if in_chain(item) else -1  # everything else first, as collected

    items.sort(key=rank)
    for item in items:
        if in_chain(item):
            group = "recipe-notebooks"
        elif item.path.name in AS_THE_TEST_USER:
            group = "as-the-test-user"
        else:
            group = str(item.path.relative_to(config.rootpath))
        item.add_marker(pytest.mark.xdist_group(group))


# Files whose tests run as tests/non_root.py's one test user and then check that it has no
# process left: two at once would see each other's.
AS_THE_TEST_USER = {"test_non_root.py", "test_non_root_lab.py"}

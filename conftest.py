"""Session-wide test setup for tests/ and the notebooks that nbval executes.

Every test session gets a GTC_HOME of its own, so tests never touch a user's clusters;
at the end every cluster the session made is deleted (daemons stopped by PID, files
removed), even when a test or a notebook failed halfway.
"""

from __future__ import annotations

import os
import resource
import shutil
import tempfile


def pytest_configure(config):
    # Jobs run where they were submitted from, the repository for most tests, and take the
    # submitter's limits (Slurm's PropagateResourceLimits): a step that crashes on purpose
    # must not leave a core file in the checkout.
    resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
    config._gtc_home = tempfile.mkdtemp(prefix="gtc-test-")
    os.environ["GTC_HOME"] = config._gtc_home
    os.environ["IPYTHONDIR"] = _ipython_dir_where_usage_errors_fail(config._gtc_home)


# IPython prints a magic's UsageError to stderr, which neither nbval nor nbclient reads as a
# failure: a %%sbatch cell that was refused passed, and only a later cell's `job = _` showed
# it (as a confusing AttributeError). In the kernels tests start, it is an error as any other.
USAGE_ERRORS_FAIL = """\
from IPython import get_ipython
from IPython.core.error import UsageError


def _usage_error_fails_the_cell(shell, etype, value, tb, tb_offset=None):
    shell._showtraceback(etype, value, [f"UsageError: {value}"])


get_ipython().set_custom_exc((UsageError,), _usage_error_fails_the_cell)
"""


def _ipython_dir_where_usage_errors_fail(home: str) -> str:
    folder = os.path.join(home, "ipython")
    startup = os.path.join(folder, "profile_default", "startup")
    os.makedirs(startup, exist_ok=True)
    with open(os.path.join(startup, "00-usage-errors-fail.py"), "w") as f:
        f.write(USAGE_ERRORS_FAIL)
    return folder


def pytest_unconfigure(config):
    home = getattr(config, "_gtc_home", None)
    if not home:
        return
    os.environ["GTC_HOME"] = home
    from jupyter_gtc import api

    for cluster in api.list_clusters(with_status=False):
        api.delete_cluster(cluster.name)
    shutil.rmtree(home, ignore_errors=True)


def _recipe_chain() -> list[str]:
    """The recipe notebooks, in the order they hand their models on."""
    from jupyter_gtc.recipes.catalogue import RECIPES

    return list(dict.fromkeys(f"notebooks/recipes/{r.notebook}" for r in RECIPES.values()))


def pytest_collection_modifyitems(session, config, items):
    """The recipe notebooks hand their models on (pretraining -> continued pretraining ->
    SFT -> RL): run them in the catalogue's order, not the alphabet's, keeping each
    notebook's cells in order; and first, for the two workers below."""
    chain = _recipe_chain()

    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return chain.index(path) if path in chain else len(chain)  # everything else as collected

    items.sort(key=rank)


# Training under injected faults on a 3-node cluster: beside the recipe notebooks' training it
# starved them on 2 cores (a 2-node llama-pretrain took over 300 s, its usual 80 in a CI-like
# run), so it runs on the same worker, after them.
WITH_THE_RECIPES = {"tests/health/test_faults_under_training.py"}

# Files whose tests run as tests/non_root.py's one test user and then check that it has no
# process left: two at once would see each other's.
AS_THE_TEST_USER = {"tests/backends/test_non_root.py", "tests/browser/test_non_root_lab.py",
                    "tests/test_first_notebook.py"}


def pytest_xdist_make_scheduler(config, log):
    """``make test`` runs two workers (pytest-xdist): most tests wait on Slurm, not on the CPU.
    A file's tests share module fixtures (a cluster) and run in order, so each file is given
    whole to one worker; so are the recipe notebooks' chain (on one worker's GTC_HOME; first,
    being the longest: a worker that took it last would run it alone at the end) and the files
    of ``AS_THE_TEST_USER``. (xdist's own ``--dist loadgroup`` renames test ids, which pytest 9
    no longer lets it do.)"""
    from xdist.scheduler import LoadScopeScheduling

    chain = set(_recipe_chain())

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::")[0]
            if path in chain or path in WITH_THE_RECIPES:
                return "recipe-notebooks"
            return "as-the-test-user" if path in AS_THE_TEST_USER else path

    return ByGroup(config, log)

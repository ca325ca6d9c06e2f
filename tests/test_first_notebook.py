"""tests/notebooks/first_job.ipynb as a normal user runs it: in a folder of the user's own, with
a local cluster of the user's, under nbval as pytest runs notebooks here (the notebook writes its
training script with %%writefile and runs it by its relative name in a two-node %%sbatch)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.non_root import normal_user, normal_user_account, processes_left  # noqa: F401  (fixtures)

NOTEBOOK = Path(__file__).parent / "notebooks" / "first_job.ipynb"


@pytest.mark.timeout(600)
def test_a_normal_users_first_notebook_runs_its_writefile_script_in_a_two_node_job(slurm_available, normal_user):
    home = normal_user.new_home()
    project = home / "project"
    project.mkdir()
    shutil.copy(NOTEBOOK, project / NOTEBOOK.name)
    for path in (project, project / NOTEBOOK.name):
        os.chown(path, normal_user.uid, normal_user.pw.pw_gid)
    try:
        # pytest from the user's folder: its rootdir, not this checkout's (whose conftest.py
        # would give the run a GTC_HOME of root's).
        result = normal_user.run([normal_user.python_exe, "-m", "pytest", "-p", "no:cacheprovider", "--nbval-lax",
                                  "--nbval-current-env", "-q", NOTEBOOK.name],
                                 env=normal_user.env(home), cwd=project, timeout=500)
        assert result.returncode == 0, (result.stdout + result.stderr)[-5000:]
        assert "7 passed" in result.stdout, result.stdout[-3000:]
        assert not processes_left(normal_user.uid), "the user's cluster left processes behind"
    finally:
        normal_user.cleanup()

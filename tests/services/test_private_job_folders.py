"""A job's folders are its user's alone from their creation (0700), whatever the umask: its
script, output, checkpoints and model are nobody else's to read."""

from __future__ import annotations

import os
import stat

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


def test_a_job_folder_is_0700_under_umask_022_and_the_job_still_writes_in_it(slurm_available):
    old = os.umask(0o022)
    try:
        api.create_cluster(small_gpu_spec("privjobs", nodes=1))
        try:
            job = api.submit_job("privjobs", "#!/bin/bash\necho saved > \"$AIP_MODEL_DIR/model.txt\"\n")
            job.wait(timeout=120)
            assert (job.state, job.exit_code) == ("COMPLETED", 0)
            folders = [job.job_dir, *(job.job_dir / sub for sub in ("model", "checkpoints", "logs"))]
            assert {str(f): stat.S_IMODE(os.stat(f).st_mode) for f in folders} == {str(f): 0o700 for f in folders}
            assert (job.job_dir / "model" / "model.txt").read_text() == "saved\n"
        finally:
            api.delete_cluster("privjobs")
    finally:
        os.umask(old)

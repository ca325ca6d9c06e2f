"""The poller's ``squeue -O`` on a real local cluster (22.05 here): jobs named as users name
them in a terminal, read back exactly, and the same as ``squeue --json`` reads them."""

from __future__ import annotations

import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import get_backend
from jupyter_gtc.slurm.parse import parse_squeue_json
from jupyter_gtc.state import default_home, open_store
from tests.conftest import slurm, small_gpu_spec

pytestmark = pytest.mark.slurm
NAMES = ["spaced name", "a|b|c", "100%j %x %%", "ünïcode ✓ 训练", "y" * 200, "unit\x1fsep", "two\nlines",
         "back\\slash"]


@pytest.fixture(scope="module")
def cluster(slurm_available):
    created = api.create_cluster(small_gpu_spec("squeuefmt", nodes=1))
    yield created.name
    api.delete_cluster(created.name)


def test_hostile_names_read_back_exactly_and_as_json_reads_them(cluster, tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\ntrue\n")
    ids = {}
    for name in NAMES:  # held: they stay in the queue, as a terminal's jobs would wait
        out = slurm(cluster, "sbatch", "--parsable", "--hold", f"--chdir={tmp_path}", f"--job-name={name}",
                    "--comment=a|comment", "--output=out-%x-%j.log", str(script)).stdout
        ids[out.strip()] = name
    record = open_store().get_cluster(cluster)
    commands = get_backend("local", default_home()).commands(record.runtime)
    jobs = {j.job_id: j for j in commands.queue() if j.job_id in ids}
    assert {i: j.name for i, j in jobs.items()} == ids
    assert all(j.state == "PENDING" and j.reason == "JobHeldUser" and j.comment == "a|comment" for j in jobs.values())
    assert {j.log_path for j in jobs.values()} == {str(tmp_path / f"out-{name}-{i}.log") for i, name in ids.items()}
    as_json = {j.job_id: j for j in parse_squeue_json(commands.run(["squeue", "--json", "--states=all"]).stdout)}
    assert jobs == {i: as_json[i] for i in jobs}
    slurm(cluster, "scancel", *ids)

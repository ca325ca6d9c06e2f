"""Impossible counts (``--nodes 0``, ``--ntasks 0``, ``--nodes 3-1``, ``--gpus-per-node -1``)
are refused before sbatch runs. sbatch hands them to slurmctld, which refuses them only after it
gave the job an id and wrote it to the completion file as FAILED: the refused job then showed in
listings as FAILED 129, "not ours"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.slurm.sbatch import count_problem, read_sbatch_options
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


@pytest.mark.parametrize(("words", "option", "value", "valid"), [
    (["--nodes", "0"], "--nodes", "0", "a whole number, 1 or more"),
    (["-N", "-1"], "--nodes", "-1", "a whole number, 1 or more"),
    (["--nodes=3-1"], "--nodes", "3-1", "a range MIN-MAX with 1 <= MIN <= MAX, as 1-3"),
    (["--nodes=0-2"], "--nodes", "0-2", "a range MIN-MAX with 1 <= MIN <= MAX, as 1-2"),
    (["-n", "0"], "--ntasks", "0", "a whole number, 1 or more"),
    (["--ntasks-per-node=0"], "--ntasks-per-node", "0", "a whole number, 1 or more"),
    (["-c", "0"], "--cpus-per-task", "0", "a whole number, 1 or more"),
    (["--gpus-per-node", "-1"], "--gpus-per-node", "-1", "a whole number of GPUs, 0 or more"),
    (["--gpus=h100:-2"], "--gpus", "h100:-2", "a whole number of GPUs, 0 or more"),
    (["--nodes=0", "--nodes=2", "-n", "0"], "--ntasks", "0", "a whole number, 1 or more"),  # the last --nodes wins
])
def test_impossible_counts(words, option, value, valid):
    found = count_problem(read_sbatch_options(words))
    assert found is not None and found[:2] == (option, value) and found[2].startswith(valid)


@pytest.mark.parametrize("words", [["--nodes", "2"], ["-N", "2-4"], ["--nodes=1,3"], ["--gpus-per-node=h100:2"],
                                   ["--gpus-per-node=0"], ["-n", "16", "-c", "4"], []])
def test_possible_counts_and_forms_left_to_slurm(words):
    assert count_problem(read_sbatch_options(words)) is None


@pytest.fixture(scope="module")
def counts_cluster(slurm_available):
    cluster = api.create_cluster(small_gpu_spec("counts", nodes=2))
    yield cluster.name
    api.delete_cluster(cluster.name)


def test_nodes_0_is_refused_before_sbatch_and_leaves_no_job(counts_cluster):
    folders = set((Path(os.environ["GTC_HOME"]) / "jobs" / counts_cluster).glob("*"))
    for options, script in [(["--nodes", "0"], "true"), (["--nodes=3-1"], "true"),
                            ([], "#!/bin/bash\n#SBATCH --ntasks=0\ntrue\n"), (["--gpus-per-node", "-1"], "true"),
                            # more nodes than the cluster has: Slurm left it PENDING (PartitionConfig) for ever
                            (["--nodes", "3"], "true"), (["-N", "3-4"], "true")]:
        with pytest.raises(SpecError) as info:
            api.submit_job(counts_cluster, script, ["-J", "impossible", *options])
        assert info.value.field.startswith("--") and str(info.value).startswith(
            f"{info.value.field}: {info.value.value!r} is not valid; ")
    assert "at most 2: partition " in str(info.value) and f"of {counts_cluster} has 2 node(s)" in str(info.value)
    assert set((Path(os.environ["GTC_HOME"]) / "jobs" / counts_cluster).glob("*")) == folders
    # A job that runs after them is the cluster's first: slurmctld never saw the refused ones
    # (before, each took an id and stayed in listings as FAILED, not ours).
    job = api.submit_job(counts_cluster, "#!/bin/bash\ntrue\n", ["-J", "possible"]).wait(timeout=60)
    assert job.id == "1"
    assert [(j.id, j.name, j.state) for j in api.list_jobs(counts_cluster, foreign=True)] == \
        [("1", "possible", "COMPLETED")]

"""A script's arguments through the Slurm Job API (``jobs: api``) of a training cluster on the
local Vertex endpoint: v0.0.42's ``argv``, which Debian's slurmrestd 22.05 mishandles, so the
endpoint keeps the script and submits a fixed wrapper that passes them through the job's
environment (slurm/rest_v42.py's table). What tuning trials, recipes and serving replicas need:
their flags in ``"$@"`` exactly as given. The endpoint, its cluster's login node (a real sshd)
and the helpers are test_training_cluster_jobs.py's; one training cluster for the module."""

from __future__ import annotations

import json
import shlex
import stat
import sys
from pathlib import Path

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec
from tests.vertex_clusters.test_training_cluster_jobs import _login, endpoint  # noqa: F401 (a fixture)

pytestmark = pytest.mark.slurm

CLUSTER = "vxargs"
# Each a shell's trap: spaces, both quotes, $ and a command substitution, a newline, a leading -,
# an empty one, and a long flag as the tuning driver writes them.
ARGS = ["two words", "it's \"quoted\"", "$HOME `id` $(id)", "line one\nline two", "-n", "", "--lr=0.01"]
SHOW = "import json, os, sys\n" \
       "print('ARGS=' + json.dumps(sys.argv[1:]))\n" \
       "print('NODES=' + os.environ['SLURM_JOB_NUM_NODES'])\n" \
       "print('OURS=' + json.dumps(sorted(k for k in os.environ if k.startswith('GTC_ARGV'))))\n"


@pytest.fixture(scope="module")
def vxargs(endpoint, tmp_path_factory):  # noqa: F811 (the imported fixture)
    """A 2-node training cluster whose jobs go through its Slurm Job API; yields the endpoint's
    folder of it (where the endpoint keeps what it keeps)."""
    _, other = endpoint
    spec = small_gpu_spec(CLUSTER, nodes=2, machine="n2-standard-8")
    del spec["local"]  # Vertex has no such block
    spec["login"] = _login(other, CLUSTER, tmp_path_factory.mktemp("jobs"), jobs="api")
    api.create_cluster(spec, backend="vertex")
    try:
        assert api.get_cluster(CLUSTER).status.details["jobs"] == "api"
        yield other / "clusters" / CLUSTER
    finally:
        api.delete_cluster(CLUSTER)


def printed(job, key: str):
    lines = [line for line in job.logs().splitlines() if line.startswith(key + "=")]
    assert len(lines) == 1, job.logs()
    return json.loads(lines[0].partition("=")[2])


def test_arguments_reach_a_bash_and_a_python_script_exactly_through_the_slurm_job_api(vxargs):
    bash = f"#!/bin/bash\n#SBATCH --nodes=2\nexec {shlex.quote(sys.executable)} -c {shlex.quote(SHOW)} \"$@\"\n"
    job = api.submit_job(CLUSTER, bash, script_args=ARGS, python_env=None)
    # A Python script: its own shebang runs it, its #SBATCH lines read as sbatch would.
    python = f"#!{sys.executable}\n#SBATCH --nodes=2\n{SHOW}"
    py_job = api.submit_job(CLUSTER, python, script_args=ARGS, python_env=None)
    for j in (job, py_job):
        assert j.wait(timeout=120).state == "COMPLETED", j.logs()
        assert printed(j, "ARGS") == ARGS
        assert printed(j, "NODES") == 2
        assert printed(j, "OURS") == []  # the wrapper's variables are gone before the script starts
    # The scripts it ran are the endpoint's own, private from their creation, in the cluster's folder.
    kept = vxargs / "job-scripts"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o700
    files = sorted(kept.glob("*.script"))
    assert len(files) == 2 and {stat.S_IMODE(f.stat().st_mode) for f in files} == {0o700}
    notes = sorted(kept.glob("*.job-*"))  # each names its job: the script goes once the job ended
    assert len(notes) == 2 and {stat.S_IMODE(f.stat().st_mode) for f in notes} == {0o600}
    texts = sorted(f.read_text() for f in files)  # the bash one with the job contract's lines added
    assert python in texts
    assert sorted(t.splitlines()[-1] for t in texts) == sorted([bash.splitlines()[-1], SHOW.splitlines()[-1]])


def test_a_tuning_study_of_4_trials_runs_through_the_slurm_job_api(vxargs):
    from jupyter_gtc.spec.study.models import format_flag
    from tests.tuning.conftest import short_spec

    study = api.create_study(CLUSTER, short_spec("{x: {double: [0, 1]}}", trials=4, parallel=2), name="apiflags")
    study.wait(timeout=300)
    assert (study.state, study.reason) == ("SUCCEEDED", None)
    trials = study.snapshot().trials
    assert [t.state for t in trials] == ["COMPLETE"] * 4 and all(t.value is not None for t in trials)
    for t in trials:  # each trial got its own hyperparameter as its flag
        flags = json.loads((Path(t.job_dir) / "args.json").read_text())["flags"]
        assert flags == [format_flag("x", t.params["x"])], (flags, t.params)


def test_a_recipe_runs_on_the_training_cluster_through_the_slurm_job_api(vxargs):
    """The recipe's flags are its script's arguments (recipes/catalogue.py: "$@")."""
    from tests.recipes.conftest import losses

    job = api.run_recipe("llama-pretrain", CLUSTER, args=["--steps", "2", "--log-every", "1"])
    assert job.wait(300).state == "COMPLETED", job.logs()
    assert sorted(losses(job.logs())) == [1, 2]
    assert api.recipe_output("llama-pretrain", CLUSTER) == job.model_dir

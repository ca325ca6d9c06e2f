"""One real local cluster for all tuning tests (3 small nodes, so two trials run side by side
with room to spare), and trial scripts that run tests/tuning/objective.py: the standard
library only, so a trial takes a fraction of a second."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import small_gpu_spec

CLUSTER = "tuning"
OBJECTIVE = Path(__file__).with_name("objective.py")


@pytest.fixture(scope="package")
def cluster(slurm_available):
    from jupyter_gtc import api

    api.create_cluster(small_gpu_spec(CLUSTER, nodes=3, machine="n2-standard-8"))
    yield CLUSTER
    for study in api.list_studies(CLUSTER):  # no driver thread outlives the cluster
        if not study.finished and study.driven:
            study.stop()
    api.delete_cluster(CLUSTER)


def trial_script(*flags: str, env: dict[str, str] | None = None) -> str:
    """An sbatch script that runs the objective with the trial's hyperparameters ("$@")."""
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    extra = " ".join(shlex.quote(f) for f in flags)
    return (f"#!/bin/bash\n#SBATCH --nodes=1 --cpus-per-task=1\n{exports}"
            f"{shlex.quote(sys.executable)} {shlex.quote(str(OBJECTIVE))} {extra} \"$@\"\n")




def short_spec(parameters: str, *, trials: int, parallel: int = 2, extra: str = "", script: str | None = None) -> dict:
    """A tuning spec in the short form, minimizing the objective's val_loss."""
    import yaml

    data = yaml.safe_load(f"metric: val_loss:minimize\nmax_trials: {trials}\nparallel: {parallel}\n"
                          f"parameters: {parameters}\n{extra}")
    data["job"] = script or trial_script()
    return data

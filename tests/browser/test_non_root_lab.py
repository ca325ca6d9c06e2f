"""What issue 12 promises a new user: as a normal user, start JupyterLab with the README's
command (`.venv/bin/jupyter lab`, the venv NOT on PATH, as a desktop launcher or a service
starts it), and from a notebook create a local cluster and run a 2-node `srun torchrun` job
whose script never touches PATH: the job finds torchrun because it runs with the kernel's
Python environment first on its PATH."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.browser.jupyter import JupyterProcess
from tests.browser.lab import open_and_run_all
from tests.conftest import sleep_until
from tests.non_root import normal_user, normal_user_account, processes_left  # noqa: F401 (fixtures)

pytestmark = pytest.mark.slurm

# Two ranks, one per node, meet over gloo and add their ranks: "sum 3" proves they met.
DDP_HELLO = """import os
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
total = torch.tensor([dist.get_rank() + 1.0])
dist.all_reduce(total)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} on {os.environ['SLURMD_NODENAME']} sum {total.item():g}",
      flush=True)
dist.destroy_process_group()
"""

SPEC = {"displayName": "nrlab",
        "nodePools": [{"id": "cpu", "machineSpec": {"machineType": "n2-standard-8"},
                       "scalingSpec": {"minNodeCount": 2, "maxNodeCount": 2}}],
        "orchestratorSpec": {"slurmSpec": {"partitions": [{"id": "cpu", "nodePoolIds": ["cpu"]}]}},
        "local": {"resourceScale": 0.25}}


@pytest.mark.timeout(600)
def test_a_normal_user_runs_a_two_node_torchrun_job_from_a_notebook(slurm_available, normal_user, page, tmp_path):
    home = normal_user.new_home()
    lab_dir = home / "lab"
    (lab_dir / "root").mkdir(parents=True)
    (lab_dir / "root" / "ddp_hello.py").write_text(DDP_HELLO)
    result = lab_dir / "root" / "result.json"
    # The user's own environment, as a login gives it: no .venv/bin on PATH, no VIRTUAL_ENV.
    env = {"HOME": normal_user.pw.pw_dir, "USER": normal_user.name, "LOGNAME": normal_user.name,
           "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin", "GTC_HOME": str(home)}
    assert str(Path(sys.prefix) / "bin") not in env["PATH"]
    cells = [
        "%load_ext jupyter_gtc",
        f"from jupyter_gtc import api\ncluster = api.create_cluster({SPEC!r})\n[n.name for n in cluster.nodes]",
        "%%sbatch --cluster nrlab --job-name ddp --nodes 2 --ntasks-per-node 1\n#!/bin/bash\n"
        'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)\n'
        "port=$(python -c 'import socket; s = socket.socket(); s.bind((\"\", 0)); print(s.getsockname()[1])')\n"
        'srun torchrun --nnodes=2 --nproc-per-node=1 --rdzv-backend=c10d '
        '--rdzv-endpoint="$head:$port" --rdzv-id="$SLURM_JOB_ID" '
        f"{lab_dir / 'root' / 'ddp_hello.py'}",
        "import json, os\njob = api.get_job('ddp', 'nrlab').wait(timeout=300)\n"
        "record = {'state': job.state, 'exit_code': job.exit_code, 'log': job.logs(), 'user': os.environ['USER']}\n"
        "api.delete_cluster('nrlab')\n"
        f"open({str(result)!r}, 'w').write(json.dumps(record))",
    ]
    try:
        with JupyterProcess(lab_dir, app="lab", as_user=normal_user, user_env=env, start_timeout=120) as lab:
            open_and_run_all(lab, page, "torchrun.ipynb", cells)
            errors = page.locator('.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stderr"]')
            assert sleep_until(lambda: result.exists() or errors.count(), 400), lab.log()[-3000:]
            assert not errors.count(), "\n".join(errors.all_inner_texts())
        record = json.loads(result.read_text())
        assert (record["state"], record["exit_code"]) == ("COMPLETED", 0), record["log"]
        assert "No such file or directory" not in record["log"], record["log"]
        ranks = sorted(line for line in record["log"].splitlines() if line.startswith("rank "))
        assert sorted(r.split(" on ")[0] for r in ranks) == ["rank 0/2", "rank 1/2"], record["log"]
        assert sorted(r.split(" on ")[1] for r in ranks) == ["cpu-0 sum 3", "cpu-1 sum 3"], record["log"]
        assert not processes_left(normal_user.uid), "the user's cluster left processes behind"
    finally:
        normal_user.cleanup()

"""What the recipe tests share: the pretraining program run by hand, and one such run that
more than one module compares against, made once per session (start-up, not its 20 steps,
is most of what it costs)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

STEP_LINE = re.compile(r"^step (\d+)/\d+ loss ([0-9.]+)", re.M)
# The reference run's flags; a job given them (and --log-every 1) must print the same losses.
RUN20_FLAGS = ("--steps", "20", "--checkpoint-every", "10")


def pretrain(out: Path, *flags: str, launcher: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """``python -m jupyter_gtc.recipes.pretrain`` by hand: no Slurm, one process, one thread."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIP_")}
    env.update(OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    argv = [*(launcher or (sys.executable,)), "-m", "jupyter_gtc.recipes.pretrain", "--output-dir", str(out),
            "--log-every", "1", *flags]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240)


def losses(output: str) -> dict[int, float]:
    return {int(step): float(loss) for step, loss in STEP_LINE.findall(output)}


@pytest.fixture(scope="session")
def run20(tmp_path_factory) -> tuple[Path, dict[int, float]]:
    """20 steps from random initialisation, a checkpoint every 10: its folder and its losses."""
    out = tmp_path_factory.mktemp("pretrain")
    done = pretrain(out, *RUN20_FLAGS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "world 1 on cpu" in done.stdout
    return out, losses(done.stdout)

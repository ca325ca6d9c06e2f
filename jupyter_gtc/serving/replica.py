"""A replica's first step inside its Slurm job: ``python -m jupyter_gtc.serving.replica SPEC``.

``SPEC`` is a 0600 JSON file the deploying service wrote: the server's command (ours,
``lm_server``, or a user's own Vertex serving container command) and the contract's variables.
sbatch hands a job the whole environment of the process that submitted it (a Jupyter
server's, with its tokens and keys), so the server is started with a clean one instead: only
what a program needs to run (PATH, HOME, locale, the Python environment, Slurm's and CUDA's
variables) and the contract's. Then this process becomes the server (exec: the same PID, so
``scancel`` signals the server itself).
"""

from __future__ import annotations

import json
import os
import sys

from .. import _process

KEPT = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TMPDIR", "VIRTUAL_ENV", "CONDA_PREFIX",
        "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS", "HF_HOME", "HF_HUB_OFFLINE", "PYTHONPATH")
KEPT_PREFIXES = ("SLURM_", "SLURMD_")


def clean_env(environ: dict[str, str], contract: dict[str, str]) -> dict[str, str]:
    kept = {k: v for k, v in environ.items() if k in KEPT or k.startswith(KEPT_PREFIXES)}
    return {**kept, **contract}


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        raise SystemExit("usage: python -m jupyter_gtc.serving.replica SPEC_FILE")
    with open(argv[0]) as f:
        spec = json.load(f)
    command = spec.get("command") or [sys.executable, "-m", "jupyter_gtc.serving.lm_server"]
    _process.replace_with(command, clean_env(dict(os.environ), spec["env"]))


if __name__ == "__main__":
    main(sys.argv[1:])

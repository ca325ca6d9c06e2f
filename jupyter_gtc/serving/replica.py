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
import socket
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
    env = dict(spec["env"])
    if spec.get("address_file"):
        env["AIP_HTTP_PORT"] = str(_report_address(spec["address_file"]))
    _process.replace_with(command, clean_env(dict(os.environ), env))


def _report_address(path: str) -> int:
    """On another machine's node (an attached cluster): a port free on this node, written with
    the node's name to ``path`` (whole: written aside, then renamed) for the deploying process
    to find. Another program may take the port before the server binds it: the health checks
    then fail, and deploy() says why from the job's log."""
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    partial = f"{path}.partial"
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"node": node, "port": port}, f)
    os.replace(partial, path)
    return port


if __name__ == "__main__":
    main(sys.argv[1:])

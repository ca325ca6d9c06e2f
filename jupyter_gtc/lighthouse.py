"""The lighthouse of a job that restarts inside itself (``jupyter_gtc.injob``): the store where
each restart's processes meet, and the job's verdict once its training ends.

    #SBATCH --nodes=2 --ntasks-per-node=2 --no-kill --requeue
    python3 -m jupyter_gtc.lighthouse srun --no-kill --kill-on-bad-exit=0 --distribution=cyclic python3 train.py

It runs the command given (srun) in the batch script, on the batch host, so the store lives as
long as the job does (a process of the training, had it held the store, would take it along
when it died: NVRx's rank 0 has this limit; torchft runs its lighthouse apart too), with
``GTC_LIGHTHOUSE`` (this host:a free port) added to its environment. When it ends:

- the training said it finished: status 0, whatever srun's (a process killed by a fault left
  its status there, though the job trained on without it);
- the training could not carry on (its spares used up: every process exited 75): the job is
  requeued (``scontrol requeue``: ``--no-kill`` kept Slurm from doing it when the node failed)
  and resumes from its disk checkpoint;
- else srun's status.

The store, as torchrun's rendezvous store and torch.distributed's own connections, has no login:
it trusts the cluster's network, where the job's processes talk to each other anyway.
"""

from __future__ import annotations

import os
import socket
import sys
from datetime import timedelta

from ._process import run, run_forwarding

EXIT_REQUEUE = 75  # as injob.EXIT_REQUEUE (not imported: it would import nothing else of use here)


def main(argv: list[str] | None = None) -> int:
    command = sys.argv[1:] if argv is None else argv
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("usage: python -m jupyter_gtc.lighthouse COMMAND... (the job's srun line; got no command)",
              file=sys.stderr)
        return 2
    from torch.distributed import TCPStore

    store = TCPStore("0.0.0.0", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=60))
    host = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    env = {**os.environ, "GTC_LIGHTHOUSE": f"{host}:{store.port}"}
    # Slurm signals the whole step (srun too) on a cancel: this process only waits for srun.
    status = run_forwarding(command, env, on_signal=lambda signum: None)
    if store.check(["done"]):
        if status:
            print(f"lighthouse: the training finished; srun's status {status} is that of processes a fault "
                  f"ended", flush=True)
        return 0
    if (store.check(["failed"]) or status == EXIT_REQUEUE) and os.environ.get("SLURM_JOB_ID"):
        why = store.get("failed").decode(errors="replace") if store.check(["failed"]) else f"status {status}"
        print(f"lighthouse: the training could not carry on in its processes ({why}); requeueing job "
              f"{os.environ['SLURM_JOB_ID']}", flush=True)
        done = run(["scontrol", "requeue", os.environ["SLURM_JOB_ID"]], check=False)
        if done.returncode:
            print(f"lighthouse: scontrol requeue failed: {done.stderr.strip()}", flush=True)
        return EXIT_REQUEUE
    return status


if __name__ == "__main__":
    sys.exit(main())

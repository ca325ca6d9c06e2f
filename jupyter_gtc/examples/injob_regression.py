"""tiny_regression, data-parallel over a multi-node job that restarts inside itself: when a node
dies, the processes left (and a warm spare) train on from the newest in-memory snapshot,
without a requeue or a new process (``jupyter_gtc.injob``).

    #SBATCH --nodes=2 --ntasks-per-node=2 --no-kill --requeue
    python3 -m jupyter_gtc.lighthouse srun --no-kill --kill-on-bad-exit=0 --distribution=cyclic \
        python3 -m jupyter_gtc.examples.injob_regression --spares 2

(``--distribution=cyclic`` puts the active ranks on different nodes and a spare beside each;
once the spares are used up, the lighthouse requeues the job to resume from its disk checkpoint.)

Each process prints one ``started`` line (its imports and model build: paid once per process),
and one ``generation`` line each time it becomes an active rank. ``--hold_at_step N
--hold_until FILE`` waits after step N until FILE exists (for tests that fault it there).
"""

from __future__ import annotations

import time

_UP = time.time()

import argparse  # noqa: E402
import os  # noqa: E402
import socket  # noqa: E402

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

from jupyter_gtc.resume import Checkpoints, in_job  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--spares", type=int, default=None, help="processes that wait (default $GTC_SPARES, else 0)")
    parser.add_argument("--snapshot_every", type=int, default=5, help="steps between in-memory snapshots")
    parser.add_argument("--checkpoint_every", type=int, default=50, help="steps between disk checkpoints")
    parser.add_argument("--step_delay", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--join_timeout", type=float, default=30.0,
                        help="seconds a restart waits for enough processes before the job is requeued")
    parser.add_argument("--hold_at_step", type=int, default=0, help="after this step, wait for --hold_until")
    parser.add_argument("--hold_until", default="", help="a file whose existence ends the hold")
    args = parser.parse_args()
    imported = time.time()

    torch.manual_seed(0)
    x = torch.linspace(-3, 3, 512).unsqueeze(1)
    y = torch.sin(x) + 0.1 * torch.randn_like(x)
    model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
    process = int(os.environ.get("SLURM_PROCID", "0"))
    node = os.environ.get("SLURMD_NODENAME", socket.gethostname())
    print(f"started: process {process} pid {os.getpid()} on {node}: imports {imported - _UP:.1f} s, "
          f"model {time.time() - imported:.1f} s", flush=True)
    checkpoints = Checkpoints()
    writer = None

    def train(world) -> float:
        nonlocal writer
        print(f"generation {world.generation}: rank {world.rank} of {world.size} is process {process} "
              f"pid {os.getpid()} on {node}, from step {world.start}", flush=True)
        if world.is_main:  # a new writer drops what a rolled-back attempt wrote past the snapshot
            if writer is not None:
                writer.close()
            writer = checkpoints.summary_writer(purge_step=world.start)
        loss = torch.tensor(0.0)
        for step in range(world.start, args.steps + 1):
            batch = torch.randint(0, len(x), (64,), generator=torch.Generator().manual_seed(step * 1009 + world.rank))
            loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            for p in model.parameters():  # data parallel: the mean gradient of every rank
                dist.all_reduce(p.grad)
                p.grad /= world.size
            optimizer.step()
            mean = loss.detach().clone()
            dist.all_reduce(mean)
            mean /= world.size
            if world.is_main:
                writer.add_scalar("train/loss", mean.item(), step)
                print(f"step {step}/{args.steps} loss {mean.item():.6f}", flush=True)
            if step % args.snapshot_every == 0:
                world.snapshot(step)
            if step % args.checkpoint_every == 0:
                checkpoints.save(step, model=model, optimizer=optimizer)
            if step == args.hold_at_step and args.hold_until:
                if writer is not None:
                    writer.flush()
                while not os.path.exists(args.hold_until):
                    time.sleep(0.1)
            time.sleep(args.step_delay)
        if world.is_main:
            writer.close()
            print(f"final loss {mean.item():.6f}", flush=True)
        return mean.item()

    in_job(train, spares=args.spares, checkpoints=checkpoints, timeout_s=args.join_timeout, model=model,
           optimizer=optimizer)


if __name__ == "__main__":
    main()

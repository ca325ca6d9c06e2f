"""tiny_regression, resumable: a ``--requeue`` job that a node fault restarts carries on from
its newest checkpoint (``jupyter_gtc.resume``) rather than step 1, and its final loss is the
uninterrupted run's.

    #SBATCH --requeue
    srun python -m jupyter_gtc.examples.resumable_regression --steps 400 --checkpoint_every 50

A mini-batch run with dropout, so that resuming exactly needs the optimizer's, the schedule's
and the random generators' states, not only the weights. ``--hold_at_step N --hold_until FILE``
waits after step N until FILE exists (for tests that stop it there).
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from jupyter_gtc.resume import Checkpoints


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--checkpoint_every", type=int, default=50)
    parser.add_argument("--step_delay", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--hold_at_step", type=int, default=0, help="after this step, wait for --hold_until")
    parser.add_argument("--hold_until", default="", help="a file whose existence ends the hold")
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.linspace(-3, 3, 512).unsqueeze(1)
    y = torch.sin(x) + 0.1 * torch.randn_like(x)
    model = torch.nn.Sequential(torch.nn.Linear(1, 32), torch.nn.Tanh(), torch.nn.Dropout(0.1), torch.nn.Linear(32, 1))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)

    checkpoints = Checkpoints()
    loss = None
    start = checkpoints.restore(model=model, optimizer=optimizer, schedule=schedule)
    with checkpoints.summary_writer() as writer:
        writer.add_scalar("progress/total_steps", args.steps, 0)
        for step in range(start + 1, args.steps + 1):
            batch = torch.randint(0, len(x), (64,))  # drawn from the generator the checkpoint restores
            loss = torch.nn.functional.mse_loss(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            writer.add_scalar("train/loss", loss.item(), step)
            print(f"step {step}/{args.steps} loss {loss.item():.6f}", flush=True)
            if step % args.checkpoint_every == 0:
                checkpoints.save(step, model=model, optimizer=optimizer, schedule=schedule)
            if step == args.hold_at_step and args.hold_until:
                writer.flush()
                while not os.path.exists(args.hold_until):
                    time.sleep(0.2)
            time.sleep(args.step_delay)
    if loss is not None:
        print(f"final loss {loss.item():.6f}", flush=True)


if __name__ == "__main__":
    main()

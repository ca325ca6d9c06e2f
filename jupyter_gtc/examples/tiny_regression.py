"""A tiny training job that follows the job contract: fits a small MLP to a noisy sine on
the CPU (or a GPU where there is one), writes its scalars for TensorBoard under
AIP_TENSORBOARD_LOG_DIR and its model under AIP_MODEL_DIR.

    python -m jupyter_gtc.examples.tiny_regression --steps 200 --learning_rate 0.01 --step_delay 0.02

``--step_delay`` slows it down so a live plot has something to watch.

As a tuning trial (``%%gtc_tune``, or a Vertex HyperparameterTuningJob), ``--report_hypertune``
also reports ``val_loss`` on held-out points every ``--eval_every`` steps and at the end,
through cloudml-hypertune (``CLOUD_ML_HP_METRIC_FILE``), so the tuner can stop it early:

    srun python -m jupyter_gtc.examples.tiny_regression --steps 60 --report_hypertune "$@"   # "$@": --learning_rate=...
"""

from __future__ import annotations

import argparse
import os
import time

import torch
from torch.utils.tensorboard import SummaryWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--learning_rate", type=float, default=0.01)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--step_delay", type=float, default=0.0, help="seconds to sleep per step")
    parser.add_argument("--report_hypertune", action="store_true",
                        help="report val_loss for hyperparameter tuning (cloudml-hypertune's file convention)")
    parser.add_argument("--eval_every", type=int, default=10, help="steps between val_loss reports")
    args = parser.parse_args()
    report = hypertune_reporter() if args.report_hypertune else None

    torch.manual_seed(0)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    x = torch.linspace(-3, 3, 512, device=device).unsqueeze(1)
    y = torch.sin(x) + 0.1 * torch.randn_like(x)
    x_val = torch.linspace(-2.97, 2.97, 128, device=device).unsqueeze(1)  # between the training points
    y_val = torch.sin(x_val)
    model = torch.nn.Sequential(torch.nn.Linear(1, args.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(args.hidden, 1)).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)

    log_dir = os.environ.get("AIP_TENSORBOARD_LOG_DIR", "logs")
    with SummaryWriter(log_dir=log_dir, flush_secs=1) as writer:
        writer.add_scalar("progress/total_steps", args.steps, 0)
        for step in range(1, args.steps + 1):
            loss = torch.nn.functional.mse_loss(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            schedule.step()
            writer.add_scalar("train/loss", loss.item(), step)
            writer.add_scalar("train/lr", schedule.get_last_lr()[0], step)
            if step % 10 == 0 or step == args.steps:
                print(f"step {step}/{args.steps} loss {loss.item():.4f}", flush=True)
            if report is not None and (step % args.eval_every == 0 or step == args.steps):
                with torch.no_grad():
                    val_loss = torch.nn.functional.mse_loss(model(x_val), y_val).item()
                writer.add_scalar("val_loss", val_loss, step)
                report(val_loss, step)
            time.sleep(args.step_delay)

    model_dir = os.environ.get("AIP_MODEL_DIR", "model")
    os.makedirs(model_dir, exist_ok=True)
    torch.save(model.state_dict(), os.path.join(model_dir, "model.pt"))
    print(f"final loss {loss.item():.4f}; model saved to {model_dir}")


def hypertune_reporter():
    """``report(value, step)``: cloudml-hypertune where it is installed (as on Vertex AI), else
    the same JSON lines written here, whole on each report as the library does."""
    try:
        import hypertune
    except ImportError:
        import json

        path = os.environ.get("CLOUD_ML_HP_METRIC_FILE", "/tmp/hypertune/output.metrics")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        lines: list[str] = []

        def report(value: float, step: int) -> None:
            lines.append(json.dumps({"val_loss": str(value), "global_step": str(step), "timestamp": time.time(),
                                     "trial": os.environ.get("CLOUD_ML_TRIAL_ID", "0"), "checkpoint_path": ""}) + "\n")
            with open(path, "w") as f:
                f.writelines(lines[-100:])

        return report
    tuner = hypertune.HyperTune()
    return lambda value, step: tuner.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="val_loss", metric_value=value, global_step=step)


if __name__ == "__main__":
    main()

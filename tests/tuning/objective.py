"""A cheap trial for the tuning tests: an analytic function of its --flags with a little noise,
reported through the hypertune file convention (JSON lines, written whole on each report,
as cloudml-hypertune does). Standard library only, so a trial starts in milliseconds.

    python objective.py --x=0.3 --y=2 [--steps=3] [--delay=0.05]

Environment knobs for the tests: OBJECTIVE_BAD_AFTER=N makes trials with an id above N report
a high loss slowly (for early stopping); OBJECTIVE_EXIT=3 makes every trial fail;
OBJECTIVE_MEET=N makes a trial wait (up to 60 s) until N trials of its study have started, so
parallel trials overlap however slowly Slurm starts them; OBJECTIVE_GATE=PATH makes a trial
wait (up to 120 s) until PATH exists, so a test can look at trials while they surely run.
Each trial also writes the flags it got and its start/end times to args.json in its folder.
"""

import glob
import json
import os
import random
import sys
import time


def main() -> None:
    flags = dict(arg[2:].split("=", 1) for arg in sys.argv[1:] if arg.startswith("--") and "=" in arg)
    trial = int(os.environ.get("CLOUD_ML_TRIAL_ID", "0"))
    steps = int(flags.pop("steps", 3))
    delay = float(flags.pop("delay", 0.0))
    started = time.time()
    record = {"flags": sys.argv[1:], "trial": trial, "start": started,
              "metric_file": os.environ.get("CLOUD_ML_HP_METRIC_FILE"),
              "aip_model_dir": os.environ.get("AIP_MODEL_DIR")}
    if os.environ.get("OBJECTIVE_EXIT"):
        sys.exit(int(os.environ["OBJECTIVE_EXIT"]))
    if os.environ.get("OBJECTIVE_MEET"):
        here = os.path.normpath(os.environ["GTC_JOB_DIR"])  # <study dir>/<trial id>
        open(os.path.join(here, "started"), "w").close()
        deadline = time.time() + 60
        while (len(glob.glob(os.path.join(os.path.dirname(here), "*", "started"))) < int(os.environ["OBJECTIVE_MEET"])
               and time.time() < deadline):
            time.sleep(0.05)
    gate_deadline = time.time() + 120
    while os.environ.get("OBJECTIVE_GATE") and not os.path.exists(os.environ["OBJECTIVE_GATE"]) \
            and time.time() < gate_deadline:
        time.sleep(0.05)
    numbers = [float(v) for v in flags.values() if _is_number(v)]
    loss = sum((v - 0.3) ** 2 for v in numbers) + 0.01 * random.random()
    bad = trial > int(os.environ.get("OBJECTIVE_BAD_AFTER", "1000000"))
    if bad:
        loss, steps, delay = 100.0, 60, 0.5
    lines = []
    for step in range(1, steps + 1):
        value = loss * (1 + 1.0 / step)
        lines.append(json.dumps({"val_loss": str(value), "global_step": str(step), "timestamp": time.time(),
                                 "trial": str(trial), "checkpoint_path": ""}) + "\n")
        with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
            f.writelines(lines)
        time.sleep(delay)
    record["end"] = time.time()
    with open(os.path.join(os.environ["GTC_JOB_DIR"], "args.json"), "w") as f:
        json.dump(record, f)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    main()

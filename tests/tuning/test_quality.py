"""What the default (bayesian) sampler finds: Hartmann6 (6-D, cheap to evaluate) with 4 trials in
flight, asked and told as the driver does, through the engine's own sampler. No cluster: Slurm
changes how long a trial takes, not what the sampler sees (bench/tuning_quality.py measures
5 seeds against random search)."""

from __future__ import annotations

import math

import optuna

from jupyter_gtc.services.tuning import engine
from jupyter_gtc.spec.study import parse_tuning_spec

HARTMANN6_MIN = -3.32237
TARGET = HARTMANN6_MIN * 0.95  # within 5% of the minimum
ALPHA = [1.0, 1.2, 3.0, 3.2]
A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14], [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
P = [[1312, 1696, 5569, 124, 8283, 5886], [2329, 4135, 8307, 3736, 1004, 9991],
     [2348, 1451, 3522, 2883, 3047, 6650], [4047, 8828, 8732, 5743, 1091, 381]]


def hartmann6(x: list[float]) -> float:
    return -sum(ALPHA[i] * math.exp(-sum(A[i][j] * (x[j] - P[i][j] * 1e-4) ** 2 for j in range(6)))
                for i in range(4))


def trials_to_target(seed: int, budget: int = 80, parallel: int = 4) -> int | None:
    spec = parse_tuning_spec({"metric": "value:minimize", "max_trials": budget, "parallel": parallel, "seed": seed,
                              "parameters": {f"x{i}": {"double": [0.0, 1.0]} for i in range(1, 7)},
                              "job": 'srun python objective.py "$@"'})
    study = engine.create_or_load(spec, "hartmann6", optuna.storages.InMemoryStorage())
    running, asked = [], 0
    while running or asked < budget:
        while len(running) < parallel and asked < budget:  # the driver keeps `parallel` trials running
            trial = study.ask()
            running.append((trial, engine.suggest(trial, spec)))
            asked += 1
        trial, params = running.pop(0)  # trials of equal length end in the order they started
        value = hartmann6([params[f"x{i}"] for i in range(1, 7)])
        study.tell(trial, value)
        if value <= TARGET:
            return trial.number + 1
    return None


def test_the_default_sampler_gets_within_5_percent_of_hartmann6s_minimum_on_a_seed_the_gp_alone_missed():
    # Seed 2: the GP alone held x2 at 0 (the optimum has 0.15) from its first model-based trial
    # and ended 80 trials at -3.077, 7% off.
    reached = trials_to_target(seed=2)
    assert reached is not None and reached <= 80, reached

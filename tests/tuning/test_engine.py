"""How a spec maps onto Optuna (samplers, pruners, the search space), with Optuna's in-memory
storage: no cluster. The driver's own behaviour is tested on the real cluster."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pytest

from jupyter_gtc.services.tuning import engine
from jupyter_gtc.spec.study import parse_tuning_spec

JOB = "job: 'srun t.py \"$@\"'\n"


def spec_of(text: str, **overrides):
    return parse_tuning_spec("metric: loss:minimize\nmax_trials: 40\n" + JOB + text, **overrides)


def in_memory(spec):
    return optuna.create_study(direction=spec.metric.direction, sampler=engine.make_sampler(spec)[0],
                               pruner=engine.make_pruner(spec))


def test_conditional_children_are_suggested_only_under_their_parent_value():
    spec = spec_of("parameters:\n  opt: {categorical: [adamw, sgd], children: {sgd: {momentum: {double: [0, 0.99]}}}}\n"
                   "  lr: {double: [1e-4, 1e-1], scale: log}\nseed: 1\n")
    study = in_memory(spec)
    seen = set()
    for _ in range(30):
        trial = study.ask()
        params = engine.suggest(trial, spec)
        seen.add(params["opt"])
        assert ("momentum" in params) == (params["opt"] == "sgd")
        assert 1e-4 <= params["lr"] <= 1e-1
        assert engine.decode(trial.params, spec) == params
        study.tell(trial, params["lr"])
    assert seen == {"adamw", "sgd"}


def test_reverse_log_values_stay_in_range_and_crowd_the_top():
    spec = spec_of("parameters: {beta: {double: [0.01, 0.999], scale: reverse_log}, n: {integer: [1, 100], "
                   "scale: reverse_log}}\nalgorithm: random\nseed: 3\n")
    study = in_memory(spec)
    betas, ns = [], []
    for _ in range(400):
        trial = study.ask()
        params = engine.suggest(trial, spec)
        assert 0.01 <= params["beta"] <= 0.999 and 1 <= params["n"] <= 100 and isinstance(params["n"], int)
        assert engine.decode(trial.params, spec) == params
        betas.append(params["beta"])
        ns.append(params["n"])
        study.tell(trial, 0.0)
    assert sum(b > 0.9 for b in betas) > 0.4 * len(betas)  # uniform would give 10%
    assert sum(n > 90 for n in ns) > 0.4 * len(ns)


def test_grid_enumerates_every_point_once():
    spec = spec_of("parameters: {n: {integer: [1, 3]}, o: {categorical: [a, b]}, d: {discrete: [0.5, 2]}}\n"
                   "algorithm: grid\n")
    assert engine.grid_size(spec) == 12
    study = in_memory(spec)
    points = []
    for _ in range(12):
        trial = study.ask()
        points.append(tuple(engine.suggest(trial, spec).values()))
        study.tell(trial, 1.0)
    assert sorted(points) == sorted((n, o, d) for n in (1, 2, 3) for o in "ab" for d in (0.5, 2.0))


def test_the_sampler_choice_is_recorded_with_its_reason():
    plain = spec_of("parameters: {lr: {double: [1e-4, 1e-1], scale: log}, n: {integer: [1, 8]}}\n")
    sampler, name, why = engine.make_sampler(plain)
    assert (type(sampler).__name__, name) == ("GPWithTPE", "gp") and "Gaussian process" in why
    assert "every 4th trial multivariate TPE" in why and "the first 10 at random" in why
    tree = spec_of("parameters: {o: {categorical: [a, b], children: {a: {x: {double: [0, 1]}}}}}\n")
    sampler, name, why = engine.make_sampler(tree)
    assert (type(sampler).__name__, name) == ("TPESampler", "tpe") and "conditional" in why
    assert engine.make_sampler(spec_of("parameters: {x: {double: [0, 1]}}\nalgorithm: random\n"))[1] == "random"


def test_bayesian_beats_random_on_a_quadratic():
    """A sanity check that the GP sampler is wired to the objective's direction and space."""
    spec = spec_of("parameters: {x: {double: [-5, 5]}, y: {double: [-5, 5]}}\nseed: 0\n", max_trials=24)
    results = {}
    for algorithm in ("bayesian", "random"):
        s = spec.model_copy(update={"study_spec": spec.study_spec.model_copy(
            update={"algorithm": {"bayesian": "ALGORITHM_UNSPECIFIED", "random": "RANDOM_SEARCH"}[algorithm]})})
        study = in_memory(s)
        for _ in range(24):
            trial = study.ask()
            p = engine.suggest(trial, s)
            study.tell(trial, (p["x"] - 1) ** 2 + (p["y"] + 2) ** 2)
        results[algorithm] = study.best_value
    assert results["bayesian"] < results["random"], results


@pytest.mark.parametrize("selection, expected", [("last", 3.0), ("best", 1.0)])
def test_final_value_by_measurement_selection(selection, expected):
    points = [(1, 5.0), (2, 1.0), (3, 3.0)]
    assert engine.final_value(points, selection, "minimize") == expected
    assert engine.final_value([(1, math.nan)], selection, "minimize") is None


def test_decay_curve_stops_a_trial_whose_curve_cannot_reach_the_best():
    spec = spec_of("parameters: {x: {double: [0, 1]}}\nearly_stopping: decay_curve\nalgorithm: random\n")
    study = in_memory(spec)
    good = study.ask()
    engine.suggest(good, spec)
    for step in range(1, 21):
        good.report(1.0 + 1.0 / step, step)
    study.tell(good, 1.05)
    promising, hopeless = study.ask(), study.ask()
    for trial in (promising, hopeless):
        engine.suggest(trial, spec)
    for step in range(1, 5):
        promising.report(0.5 + 2.0 / step, step)   # heads for 0.6 at step 20: better than 1.05
        hopeless.report(3.0 + 2.0 / step, step)    # heads for 3.1
    assert not promising.should_prune()
    assert hopeless.should_prune()


def _open_and_load(path: str, barrier) -> str:
    spec = spec_of("parameters: {x: {double: [0, 1]}}\n")
    barrier.wait()  # all at once, on a file none of them has set up
    study = engine.create_or_load(spec, "together", engine.open_storage(Path(path)))
    return study.study_name


def test_processes_opening_a_new_study_storage_at_once_all_get_the_study(tmp_path):
    # A driver creating a study and a Jupyter server showing it open the storage together.
    import multiprocessing

    processes = 6
    ctx = multiprocessing.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(processes)
        with ctx.Pool(processes) as pool:
            names = pool.starmap(_open_and_load, [(str(tmp_path / "study.db"), barrier)] * processes)
    assert names == ["together"] * processes

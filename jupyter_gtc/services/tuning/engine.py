"""Optuna as the engine: a ``TuningSpec`` becomes an Optuna study (storage, sampler, pruner)
and each trial's parameters are suggested from the spec's tree.

Nothing here knows Slurm. The driver asks, runs a job, reports and tells; this module says
how a Vertex concept maps onto Optuna's:

- algorithm: grid -> ``GridSampler``, random -> ``RandomSampler``, bayesian (Vertex's default)
  -> ``GPSampler`` with every 4th trial from multivariate TPE (``samplers.py`` says why) where
  the GP handles the space (no conditional parameters, and torch and scipy importable), else
  ``TPESampler`` (multivariate, grouped for conditional spaces, constant liar
  for parallel trials). The choice and why are recorded on the study.
- scale types: log -> ``log=True``; reverse log (values near the top spread out) -> Optuna
  samples ``min + max - x`` on a log scale and the trial gets ``x``, so Optuna's own record of
  such a parameter holds the mirrored value (``decode`` undoes it).
- discrete -> categorical over its values; conditional children are suggested only when
  their parent takes one of their parent values (Optuna's define-by-run).
- automated stopping: median -> ``MedianPruner``; decay curve -> ``DecayCurvePruner`` below.

Optuna is imported inside functions: ``import jupyter_gtc.api`` stays light.
"""

from __future__ import annotations

import fcntl
import importlib.util
import math
import sqlite3
import warnings
from pathlib import Path
from typing import Any

from ...spec.study import ParameterSpec, TuningSpec, grid_size, grid_values  # noqa: F401  (grid_size: the driver's)
from ...state.store import create_private_file

# Pruning starts once this many trials have completed (Optuna's MedianPruner default is 5;
# Vertex does not say; 3 lets short studies stop bad trials too).
PRUNER_STARTUP_TRIALS = 3
# A model-based sampler suggests at random until this many trials have finished.
MAX_STARTUP_TRIALS = 10


def quiet_optuna() -> None:
    """Optuna logs every tell at INFO; a study's panel says it better than a notebook full of
    stderr. Call ``optuna.logging.set_verbosity`` afterwards to have them back."""
    import optuna

    if optuna.logging.get_verbosity() == optuna.logging.INFO:
        optuna.logging.set_verbosity(optuna.logging.WARNING)


def open_storage(path: Path):
    """Optuna's RDBStorage on a SQLite file: it survives restarts, and several processes can
    read it while one drives the study (WAL lets readers in while the driver writes)."""
    import optuna

    path.parent.mkdir(parents=True, exist_ok=True)
    # RDBStorage creates its tables on first use, and two processes doing that at once (a
    # driver, and a server showing the new study) collide on "table ... already exists".
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        create_private_file(path)  # 0600 from the start, and its -wal and -shm with it
        db = sqlite3.connect(path, timeout=30)
        try:
            db.execute("PRAGMA journal_mode=WAL")  # persistent in the file, for every later connection
        finally:
            db.close()
        return optuna.storages.RDBStorage(f"sqlite:///{path}", engine_kwargs={"connect_args": {"timeout": 60}})


def create_or_load(spec: TuningSpec, name: str, storage, sampler=None):
    """The Optuna study ``name`` in ``storage``, created on first use; ``sampler`` and pruner
    come from the spec (a study's sampler is not stored: each process that drives it makes one)."""
    import optuna

    quiet_optuna()
    sampler = sampler or make_sampler(spec)[0]
    return optuna.create_study(storage=storage, study_name=name, direction=spec.metric.direction,
                               sampler=sampler, pruner=make_pruner(spec), load_if_exists=True)


def make_sampler(spec: TuningSpec):
    """(sampler, its name, why this one) for the spec's algorithm."""
    import optuna

    seed = spec.local.seed
    if spec.algorithm == "grid":
        class Grid(optuna.samplers.GridSampler):
            def after_trial(self, study, trial, state, values):
                # GridSampler stops the study once its grid is done, which Optuna allows only
                # inside optimize(); with ask/tell the driver stops at grid_size() itself.
                pass

        return Grid(grid_space(spec), seed=seed), "grid", "algorithm: grid"
    if spec.algorithm == "random":
        return optuna.samplers.RandomSampler(seed=seed), "random", "algorithm: random"
    startup = min(MAX_STARTUP_TRIALS, max(3, spec.max_trial_count // 4))
    conditional = any(p.conditional_parameter_specs for p in spec.parameters())
    missing = [m for m in ("torch", "scipy") if importlib.util.find_spec(m) is None]
    if not conditional and not missing:
        from .samplers import TPE_EVERY, gp_with_tpe  # imports Optuna: only when a study needs a sampler

        return gp_with_tpe(seed, startup), "gp", (
            f"bayesian: Gaussian process (Optuna's GPSampler), every {TPE_EVERY}th trial multivariate TPE "
            f"(it varies what the GP holds still); the first {startup} at random")
    why = "the space has conditional parameters" if conditional else f"{' and '.join(missing)} not installed"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=startup, multivariate=True,
                                             group=conditional, constant_liar=True)
    return sampler, "tpe", f"bayesian: TPE, since {why}"


def make_pruner(spec: TuningSpec):
    import optuna

    if spec.early_stopping == "median":
        return optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS, n_warmup_steps=0)
    if spec.early_stopping == "decay_curve":
        return DecayCurvePruner()
    return optuna.pruners.NopPruner()


def grid_space(spec: TuningSpec) -> dict[str, list[Any]]:
    """Optuna's values for every point of the grid (the spec allows grid only without children)."""
    return {p.parameter_id: [_encode(p, v) for v in grid_values(p)] for p in spec.parameters()}


def suggest(trial, spec: TuningSpec) -> dict[str, Any]:
    """The trial's hyperparameters: each top-level parameter, then the children its value
    switches on, depth first. Returns what the trial gets (reverse-log values unmirrored)."""
    return _walk(spec, lambda p: _suggest_one(trial, p))


def decode(params: dict[str, Any], spec: TuningSpec) -> dict[str, Any]:
    """What a trial got, from Optuna's record of its parameters (in the spec's order)."""
    return _walk(spec, lambda p: params.get(p.parameter_id, _MISSING))


_MISSING = object()


def _walk(spec: TuningSpec, raw_value) -> dict[str, Any]:
    """Visit the parameters depth first, following only the children each value switches
    on; ``raw_value(p)`` gives a parameter's value as Optuna holds it (or ``_MISSING``)."""
    values: dict[str, Any] = {}

    def visit(p: ParameterSpec) -> None:
        raw = raw_value(p)
        if raw is _MISSING:
            return
        value = _decode(p, raw)
        values[p.parameter_id] = value
        for child in p.active_children(value):
            visit(child)

    for p in spec.study_spec.parameters:
        visit(p)
    return values


def _suggest_one(trial, p: ParameterSpec) -> Any:
    vs, log = p.value_spec, p.scale in ("log", "reverse_log")
    if p.kind == "double":
        return trial.suggest_float(p.parameter_id, vs.min_value, vs.max_value, log=log)
    if p.kind == "integer":
        return trial.suggest_int(p.parameter_id, vs.min_value, vs.max_value, log=log)
    return trial.suggest_categorical(p.parameter_id, list(vs.values))


def _decode(p: ParameterSpec, value: Any) -> Any:
    """Optuna's value -> the trial's: reverse-log parameters are sampled mirrored."""
    if p.scale == "reverse_log" and p.kind in ("double", "integer"):
        mirrored = p.value_spec.min_value + p.value_spec.max_value - value
        return int(mirrored) if p.kind == "integer" else min(max(mirrored, p.value_spec.min_value),
                                                               p.value_spec.max_value)
    return value


_encode = _decode  # mirroring is its own inverse


def final_value(points: list[tuple[int, float]], selection: str, direction: str) -> float | None:
    """A trial's result from its reports (step, value): the last one, or the best one."""
    finite = [(s, v) for s, v in points if math.isfinite(v)]
    if not finite:
        return None
    if selection == "best":
        return (min if direction == "minimize" else max)(v for _, v in finite)
    return max(finite, key=lambda sv: sv[0])[1]


class DecayCurvePruner:
    """Vertex's decay-curve rule, in the small: once ``min_points`` values are in and a trial
    has completed, fit the running trial's curve as ``a + b / step`` (learning curves flatten
    like that), extrapolate it to the step where completed trials ended, and stop the trial if
    even that is worse than the best completed result. Optuna calls a pruner's
    ``prune(study, trial)`` only, so this needs no optuna import to be defined."""

    def __init__(self, min_points: int = 3, n_startup_trials: int = 1):
        self.min_points = min_points
        self.n_startup_trials = n_startup_trials

    def prune(self, study, trial) -> bool:
        import optuna

        points = sorted((s, v) for s, v in trial.intermediate_values.items() if math.isfinite(v) and s > 0)
        if len(points) < self.min_points:
            return False
        completed = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
        if len(completed) < self.n_startup_trials:
            return False
        minimize = study.direction == optuna.study.StudyDirection.MINIMIZE
        best = min(t.value for t in completed) if minimize else max(t.value for t in completed)
        horizon = max((max(t.intermediate_values, default=0) for t in completed), default=0)
        last_step = points[-1][0]
        if horizon <= last_step:
            return False
        predicted = _fit_inverse_step(points, horizon)
        if predicted is None:
            return False
        return predicted > best if minimize else predicted < best


def _fit_inverse_step(points: list[tuple[int, float]], step: int) -> float | None:
    """Least squares of value = a + b / step, evaluated at ``step``."""
    xs = [1.0 / s for s, _ in points]
    ys = [v for _, v in points]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        return None
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    return a + b / step

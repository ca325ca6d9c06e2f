"""The short form that ``%%gtc_tune`` takes, as Vertex's resource::

    metric: val_loss:minimize
    parameters:
      learning_rate: {double: [1e-5, 1e-2], scale: log}
      optimizer:     {categorical: [adamw, sgd], children: {sgd: {momentum: {double: [0.0, 0.99]}}}}
    algorithm: bayesian            # or grid, random
    early_stopping: median         # or decay_curve, none
    job: |
      #SBATCH --nodes 1
      srun python train.py "$@"

Besides the body, ``from_short_form`` returns where each parameter was written (Vertex path
-> short path), so that the errors found later name what the user wrote."""

from __future__ import annotations

from typing import Any

from ...exceptions import SpecError
from ..errors import UnknownField
from .models import ALGORITHMS, EARLY_STOPPING, KINDS, SCALES

SHORT_KEYS = ("name", "display_name", "metric", "parameters", "algorithm", "early_stopping",
              "measurement_selection", "max_trials", "trials", "parallel", "max_failed_trials", "job", "seed")
# Where a Vertex field of the study (the keys) was written in the short form (the values).
SHORT_FIELDS = {
    "display_name": "name", "study_spec.metrics": "metric", "study_spec.algorithm": "algorithm",
    "study_spec.parameters": "parameters", "study_spec.measurement_selection_type": "measurement_selection",
    "max_trial_count": "max_trials", "parallel_trial_count": "parallel", "max_failed_trial_count": "max_failed_trials",
    "local.script": "job", "local.seed": "seed", "local": "job",
}


def from_short_form(data: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict, dict[str, str], list[SpecError]]:
    """The short form as Vertex's resource; also where each parameter was written (Vertex path
    -> short path), so that errors name what the user wrote."""
    data = {**data, **overrides}
    errors: list[SpecError] = []
    for key in list(data):
        if key not in SHORT_KEYS:
            error = UnknownField(str(key), data[key], list(SHORT_KEYS), str(key),
                                 " (or give a HyperparameterTuningJob with study_spec)")
            errors.append(error)
            if error.suggestion and error.suggestion not in data:
                # Read on as if it were spelt right: the misspelling is its one problem, not
                # also a "required" field, and what is under it is still checked.
                data[error.suggestion] = data[key]
    study: dict[str, Any] = {}
    metric = data.get("metric")
    if metric is None:
        errors.append(SpecError("metric", None, "this field is required, e.g. `val_loss:minimize`"))
    else:
        parsed = parse_metric(metric)
        if isinstance(parsed, SpecError):
            errors.append(parsed)
        else:
            study["metrics"] = [parsed]
    # Stand-ins for what is missing or wrong (already reported), so the rest is checked too.
    study.setdefault("metrics", [{"metric_id": "metric", "goal": "MINIMIZE"}])
    paths: dict[str, str] = {}
    parameters = data.get("parameters")
    if not isinstance(parameters, dict) or not parameters:
        errors.append(SpecError("parameters", parameters, "a mapping of parameter ids to specs, e.g. "
                                "`learning_rate: {double: [1e-5, 1e-2], scale: log}`"))
    else:
        study["parameters"] = [_short_parameter(str(pid), spec, f"study_spec.parameters[{i}]",
                                                f"parameters.{pid}", paths, errors)
                               for i, (pid, spec) in enumerate(parameters.items())]
    algorithm = str(data.get("algorithm", "bayesian")).lower()
    if algorithm not in ALGORITHMS:
        errors.append(SpecError("algorithm", data["algorithm"], f"one of {', '.join(ALGORITHMS)}"))
    study["algorithm"] = ALGORITHMS.get(algorithm, "ALGORITHM_UNSPECIFIED")
    stopping = str(data.get("early_stopping", "none")).lower()
    if stopping not in EARLY_STOPPING:
        errors.append(SpecError("early_stopping", data["early_stopping"], f"one of {', '.join(EARLY_STOPPING)}"))
    elif stopping != "none":
        study["median_automated_stopping_spec" if stopping == "median" else "decay_curve_stopping_spec"] = {}
    selection = str(data.get("measurement_selection", "last")).lower()
    if selection not in ("last", "best"):
        errors.append(SpecError("measurement_selection", data["measurement_selection"], "last or best"))
    study["measurement_selection_type"] = "BEST_MEASUREMENT" if selection == "best" else "LAST_MEASUREMENT"
    body: dict[str, Any] = {"study_spec": study, "local": {}}
    if data.get("name", data.get("display_name")) is not None:
        body["display_name"] = str(data.get("name", data.get("display_name")))
    for short, vertex in (("max_trials", "max_trial_count"), ("trials", "max_trial_count"),
                          ("parallel", "parallel_trial_count"), ("max_failed_trials", "max_failed_trial_count")):
        if data.get(short) is not None:
            body[vertex] = data[short]
    if "max_trial_count" not in body:
        errors.append(SpecError("max_trials", None, "this field is required: how many trials to run "
                                "(--trials in the magic)"))
    body.setdefault("max_trial_count", 1)
    if data.get("job") is not None:
        body["local"]["script"] = data["job"]
    if data.get("seed") is not None:
        body["local"]["seed"] = data["seed"]
    return body, paths, errors


def parse_metric(text: Any) -> dict[str, str] | SpecError:
    """``val_loss:minimize`` (or ``{val_loss: minimize}``) as a Vertex MetricSpec. The goal
    follows the last ``:``, so a tag may hold one (``eval:top-1/acc:maximize``)."""
    if isinstance(text, dict) and len(text) == 1:
        text = ":".join(map(str, next(iter(text.items()))))
    name, _, goal = str(text).rpartition(":")
    goal = goal.strip().upper()
    if not name.strip() or goal not in ("MINIMIZE", "MAXIMIZE"):
        return SpecError("metric", text, "write NAME:minimize or NAME:maximize, e.g. val_loss:minimize")
    return {"metric_id": name.strip(), "goal": goal}


def _short_parameter(pid: str, spec: Any, vertex: str, short: str, paths: dict[str, str],
                     errors: list[SpecError]) -> dict[str, Any]:
    paths[vertex] = short
    out: dict[str, Any] = {"parameter_id": pid}
    if not isinstance(spec, dict):
        errors.append(SpecError(short, spec, "a mapping such as {double: [1e-5, 1e-2], scale: log}"))
        return out
    for key in list(spec):
        if key not in (*KINDS, "scale", "children"):
            errors.append(UnknownField(f"{short}.{key}", spec[key], [*KINDS, "scale", "children"], str(key)))
            if errors[-1].suggestion and errors[-1].suggestion not in spec:
                spec = {**spec, errors[-1].suggestion: spec[key]}  # read on as if spelt right
    kinds = [k for k in KINDS if k in spec]
    if len(kinds) != 1:
        errors.append(SpecError(short, spec, "give exactly one of double: [min, max], integer: [min, max], "
                                "categorical: [values], discrete: [numbers]"))
        return out
    kind, values = kinds[0], spec[kinds[0]]
    if kind in ("double", "integer"):
        if not isinstance(values, list) or len(values) != 2:
            errors.append(SpecError(f"{short}.{kind}", values, f"a list [min, max], e.g. {kind}: [1, 8]"))
        else:
            out[f"{kind}_value_spec"] = {"min_value": values[0], "max_value": values[1]}
    else:
        if not isinstance(values, list):
            errors.append(SpecError(f"{short}.{kind}", values, "a list of values"))
        else:
            out[f"{kind}_value_spec"] = {"values": [_category(v) for v in values] if kind == "categorical" else values}
    if "scale" in spec:
        scale = str(spec["scale"]).lower()
        if scale not in SCALES:
            errors.append(SpecError(f"{short}.scale", spec["scale"], f"one of {', '.join(SCALES)}"))
        else:
            out["scale_type"] = SCALES[scale]
    children = spec.get("children")
    if children is not None:
        if not isinstance(children, dict):
            errors.append(SpecError(f"{short}.children", children,
                                    "a mapping of parent values to parameters, "
                                    "e.g. {sgd: {momentum: {double: [0, 1]}}}"))
            return out
        condition = {"categorical": "parent_categorical_values", "integer": "parent_int_values",
                     "discrete": "parent_discrete_values"}.get(kind, "parent_discrete_values")
        conditionals = []
        for parent_value, kids in children.items():
            where = f"{short}.children.{parent_value}"
            if not isinstance(kids, dict) or not kids:
                errors.append(SpecError(where, kids, "a mapping of parameter ids to specs"))
                continue
            for kid_id, kid in kids.items():
                j = len(conditionals)
                base = f"{vertex}.conditional_parameter_specs[{j}]"
                paths[base] = where
                conditionals.append({condition: {"values": [_category(parent_value) if kind == "categorical"
                                                             else parent_value]},
                                     "parameter_spec": _short_parameter(str(kid_id), kid, f"{base}.parameter_spec",
                                                                        f"{where}.{kid_id}", paths, errors)})
        out["conditional_parameter_specs"] = conditionals
    return out


def _category(value: Any) -> str:
    """YAML reads `[true, 1]` as a bool and an int; a category is the text the user wrote."""
    return str(value).lower() if isinstance(value, bool) else str(value)

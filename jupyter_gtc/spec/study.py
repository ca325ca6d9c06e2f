"""The tuning spec: a Vertex AI ``HyperparameterTuningJob`` (``study_spec``, ``max_trial_count``,
``parallel_trial_count``, ``max_failed_trial_count``, ``trial_job_spec``), in camelCase or
snake_case, or the short YAML form that ``%%gtc_tune`` takes::

    metric: val_loss:minimize
    parameters:
      learning_rate: {double: [1e-5, 1e-2], scale: log}
      optimizer:     {categorical: [adamw, sgd], children: {sgd: {momentum: {double: [0.0, 0.99]}}}}
    algorithm: bayesian            # or grid, random
    early_stopping: median         # or decay_curve, none
    job: |
      #SBATCH --nodes 1
      srun python train.py "$@"

Both become one ``TuningSpec``, shaped as Vertex's resource, so ``to_vertex()`` is a dump.
As with clusters, a ``local`` block holds what only this backend needs: the sbatch script
every trial runs (hyperparameters reach it as ``"$@"``) and the sampler's seed.

``parse_tuning_spec`` validates everything at once and raises ``SpecErrors`` naming each bad
field in the form the user wrote (``parameters.learning_rate.double`` in the short form,
``study_spec.parameters[0].double_value_spec.max_value`` in Vertex's).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel

from ..exceptions import SpecError, SpecErrors
from .cluster import _format_path, _snake, parse_spec_text
from .job import sbatch_directives
from .trial_job import script_from_worker_pools, worker_pools_from_script

Goal = Literal["MAXIMIZE", "MINIMIZE", "GOAL_TYPE_UNSPECIFIED"]
Scale = Literal["SCALE_TYPE_UNSPECIFIED", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"]
Algorithm = Literal["ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"]
Selection = Literal["MEASUREMENT_SELECTION_TYPE_UNSPECIFIED", "LAST_MEASUREMENT", "BEST_MEASUREMENT"]
Noise = Literal["OBSERVATION_NOISE_UNSPECIFIED", "LOW", "HIGH"]

ALGORITHMS = {"bayesian": "ALGORITHM_UNSPECIFIED", "grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
EARLY_STOPPING = ("median", "decay_curve", "none")
KINDS = ("double", "integer", "categorical", "discrete")
MAX_GRID_POINTS = 100_000
# What a resource read back from Vertex carries besides its spec; dropped on input.
_OUTPUT_ONLY = {"name", "trials", "state", "create_time", "start_time", "end_time", "update_time", "error",
                "satisfies_pzs", "satisfies_pzi"}
_ID_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")
_PASSES_ARGS = re.compile(r'"\$@"|\$\*|\$\{@|\$@')


class _Model(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class MetricSpec(_Model):
    metric_id: str
    goal: Goal = "GOAL_TYPE_UNSPECIFIED"

    @property
    def direction(self) -> str:
        """Optuna's word: Vertex treats an unspecified goal as MAXIMIZE."""
        return "minimize" if self.goal == "MINIMIZE" else "maximize"


class DoubleValueSpec(_Model):
    min_value: float
    max_value: float
    default_value: float | None = None


class IntegerValueSpec(_Model):
    min_value: int
    max_value: int
    default_value: int | None = None


class CategoricalValueSpec(_Model):
    values: list[str]
    default_value: str | None = None


class DiscreteValueSpec(_Model):
    values: list[float]
    default_value: float | None = None


class DiscreteValueCondition(_Model):
    values: list[float] = Field(min_length=1)


class IntValueCondition(_Model):
    values: list[int] = Field(min_length=1)


class CategoricalValueCondition(_Model):
    values: list[str] = Field(min_length=1)


class ConditionalParameterSpec(_Model):
    parameter_spec: ParameterSpec
    parent_discrete_values: DiscreteValueCondition | None = None
    parent_int_values: IntValueCondition | None = None
    parent_categorical_values: CategoricalValueCondition | None = None

    @property
    def condition_field(self) -> str | None:
        given = [f for f in ("parent_discrete_values", "parent_int_values", "parent_categorical_values")
                 if getattr(self, f) is not None]
        return given[0] if len(given) == 1 else None

    @property
    def parent_values(self) -> list[Any]:
        field = self.condition_field
        return list(getattr(self, field).values) if field else []


class ParameterSpec(_Model):
    parameter_id: str
    double_value_spec: DoubleValueSpec | None = None
    integer_value_spec: IntegerValueSpec | None = None
    categorical_value_spec: CategoricalValueSpec | None = None
    discrete_value_spec: DiscreteValueSpec | None = None
    scale_type: Scale | None = None
    conditional_parameter_specs: list[ConditionalParameterSpec] = []

    @property
    def kind(self) -> str | None:
        """double, integer, categorical or discrete; None unless exactly one value spec is set."""
        given = [k for k in KINDS if getattr(self, f"{k}_value_spec") is not None]
        return given[0] if len(given) == 1 else None

    @property
    def value_spec(self) -> Any:
        return getattr(self, f"{self.kind}_value_spec")

    @property
    def scale(self) -> str:
        """linear, log or reverse_log."""
        return {v: k for k, v in SCALES.items()}.get(self.scale_type or "", "linear")

    def active_children(self, value: Any) -> list[ParameterSpec]:
        """The conditional parameters that a trial with this parameter at ``value`` also gets."""
        return [c.parameter_spec for c in self.conditional_parameter_specs if _matches(value, c.parent_values)]


class StoppingSpec(_Model):
    use_elapsed_duration: bool = False


class StudySpec(_Model):
    metrics: list[MetricSpec] = Field(min_length=1)
    parameters: list[ParameterSpec] = Field(min_length=1)
    algorithm: Algorithm = "ALGORITHM_UNSPECIFIED"
    observation_noise: Noise | None = None
    measurement_selection_type: Selection | None = None
    median_automated_stopping_spec: StoppingSpec | None = None
    decay_curve_stopping_spec: StoppingSpec | None = None


class LocalTrialOptions(_Model):
    """What only this backend needs; Vertex has no such block and ``to_vertex()`` leaves it out."""

    script: str
    """The sbatch script each trial runs. Hyperparameters reach it as ``"$@"``
    (``--learning_rate=0.01``), so it passes them on: ``srun python train.py "$@"``."""
    seed: int | None = None
    """The sampler's seed: the same seed and results give the same suggestions."""


class TuningSpec(_Model):
    """A Vertex AI ``HyperparameterTuningJob`` plus the ``local`` block."""

    display_name: str | None = None
    study_spec: StudySpec
    max_trial_count: int = Field(ge=1, le=10_000)
    parallel_trial_count: int = Field(default=1, ge=1, le=1_000)
    max_failed_trial_count: int = Field(default=0, ge=0)
    trial_job_spec: dict[str, Any] | None = None
    labels: dict[str, str] = {}
    local: LocalTrialOptions

    @property
    def metric(self) -> MetricSpec:
        return self.study_spec.metrics[0]

    @property
    def algorithm(self) -> str:
        """bayesian, grid or random."""
        return {v: k for k, v in ALGORITHMS.items()}[self.study_spec.algorithm]

    @property
    def early_stopping(self) -> str:
        """median, decay_curve or none."""
        if self.study_spec.median_automated_stopping_spec is not None:
            return "median"
        return "decay_curve" if self.study_spec.decay_curve_stopping_spec is not None else "none"

    @property
    def measurement_selection(self) -> str:
        """last or best: which of a trial's reports is its final value."""
        return "best" if self.study_spec.measurement_selection_type == "BEST_MEASUREMENT" else "last"

    @property
    def failure_budget(self) -> int:
        """How many failed trials stop the study. Vertex's 0 means "the service decides"; here
        that is 5, or every trial of a smaller study."""
        return self.max_failed_trial_count or min(5, self.max_trial_count)

    @property
    def script(self) -> str:
        return self.local.script

    def parameters(self) -> Iterator[ParameterSpec]:
        """Every parameter, conditional ones included, parents before their children."""
        for _, spec in walk(self.study_spec.parameters):
            yield spec

    def to_json(self) -> dict[str, Any]:
        """snake_case JSON, as stored in the state store."""
        return self.model_dump(mode="json", exclude_none=True)

    def to_vertex(self, machine_spec: dict[str, Any] | None = None, image_uri: str | None = None) -> dict[str, Any]:
        """The camelCase body of a Vertex ``HyperparameterTuningJob``.

        ``trial_job_spec`` is the one given, unchanged; for a study written as an sbatch script
        it is made from the script (see ``worker_pools_from_script``): ``machine_spec`` is the
        cluster pool's, and ``image_uri`` the container that holds the training code (Vertex
        requires one; without it the field is left out, to be filled in)."""
        body = self.model_dump(mode="json", exclude_none=True, by_alias=True,
                               exclude={"local", "trial_job_spec", "labels"})
        if self.labels:
            body["labels"] = dict(self.labels)
        body["trialJobSpec"] = self.trial_job_spec or worker_pools_from_script(self.script, machine_spec, image_uri)
        return body


ConditionalParameterSpec.model_rebuild()


def walk(parameters: list[ParameterSpec], path: str = "study_spec.parameters") -> Iterator[tuple[str, ParameterSpec]]:
    """(field path, spec) for every parameter, depth first."""
    for i, spec in enumerate(parameters):
        here = f"{path}[{i}]"
        yield here, spec
        for j, child in enumerate(spec.conditional_parameter_specs):
            yield from walk([child.parameter_spec], f"{here}.conditional_parameter_specs[{j}].parameter_spec")


def format_flag(parameter_id: str, value: Any) -> str:
    """How a trial gets a hyperparameter, as on Vertex: ``--learning_rate=0.01``. A whole
    float is written as an integer (``--batch=32``), so ``type=int`` flags parse it too."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 2 ** 53:
        value = int(value)
    return f"--{parameter_id}={value}"


# -- parsing ------------------------------------------------------------------------------


def parse_tuning_spec(data: Any, **overrides: Any) -> TuningSpec:
    """Validate ``data`` (a dict, or JSON/YAML text) into a ``TuningSpec``. It is Vertex's form
    if it has ``study_spec``/``studySpec``, else the short form. ``overrides`` are short-form
    keys that win over the spec's (a magic's ``--trials 40``): name, metric, max_trials,
    parallel, max_failed_trials, algorithm, seed; None means "not given"."""
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data, source="study spec")
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecErrors([SpecError("(spec)", data, "a study spec is an object: the short form (parameters, "
                                    "metric, job) or a HyperparameterTuningJob (study_spec, ...)")], "study spec")
    overrides = {k: v for k, v in overrides.items() if v is not None}
    if "study_spec" in data or "studySpec" in data:
        body, paths, errors = _from_vertex(data, overrides), None, []
    else:
        body, paths, errors = _from_short(data, overrides)
    try:
        spec = TuningSpec.model_validate(body)
    except ValidationError as e:
        errors += [_translate(_pydantic_error(err), paths) for err in e.errors()]
    else:
        errors += [_translate(err, paths) for err in _check_semantics(spec)]
    if errors:
        # The short form's own checks come first; a field is reported once.
        first = {}
        for err in errors:
            first.setdefault(err.field, err)
        raise SpecErrors(list(first.values()), "study spec")
    return spec


def load_tuning_spec(path: str, **overrides: Any) -> TuningSpec:
    """Read a spec (either form) from a .json, .yaml or .yml file; ``overrides`` as for
    ``parse_tuning_spec``."""
    from pathlib import Path

    try:
        text = Path(path).read_text()
    except OSError as e:
        raise SpecError("file", str(path), f"it could not be read ({e.strerror})") from None
    return parse_tuning_spec(text, **overrides)


def _from_vertex(data: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    body = {k: v for k, v in data.items() if _snake(k) not in _OUTPUT_ONLY}
    local = dict(body.pop("local", None) or {})
    job_spec = body.get("trial_job_spec", body.get("trialJobSpec"))
    if "script" not in local and isinstance(job_spec, dict):
        try:
            local["script"] = script_from_worker_pools(job_spec)
        except SpecError:
            pass  # reported by the semantic checks, with the field
    body["local"] = local
    short_names = {"name": "display_name", "max_trials": "max_trial_count", "parallel": "parallel_trial_count",
                   "max_failed_trials": "max_failed_trial_count"}
    for key, value in overrides.items():
        if key in short_names:
            body = {k: v for k, v in body.items() if _snake(k) != short_names[key]}
            body[short_names[key]] = value
        elif key == "seed":
            local["seed"] = value
        elif key in ("metric", "algorithm"):
            raise SpecErrors([SpecError(key, value, f"set the {key} inside study_spec when the spec is a "
                                        "HyperparameterTuningJob")], "study spec")
    return body


_SHORT_KEYS = ("name", "display_name", "metric", "parameters", "algorithm", "early_stopping",
               "measurement_selection", "max_trials", "trials", "parallel", "max_failed_trials", "job", "seed")
# Where a Vertex field of the study (the keys) was written in the short form (the values).
_SHORT_FIELDS = {
    "display_name": "name", "study_spec.metrics": "metric", "study_spec.algorithm": "algorithm",
    "study_spec.parameters": "parameters", "study_spec.measurement_selection_type": "measurement_selection",
    "max_trial_count": "max_trials", "parallel_trial_count": "parallel", "max_failed_trial_count": "max_failed_trials",
    "local.script": "job", "local.seed": "seed", "local": "job",
}


def _from_short(data: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict, dict[str, str], list[SpecError]]:
    """The short form as Vertex's resource; also where each parameter was written (Vertex path
    -> short path), so that errors name what the user wrote."""
    data = {**data, **overrides}
    errors: list[SpecError] = []
    for key in data:
        if key not in _SHORT_KEYS:
            errors.append(SpecError(key, data[key], f"unknown field; valid fields here: {', '.join(_SHORT_KEYS)} "
                                    "(or give a HyperparameterTuningJob with study_spec)"))
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
        body["max_trial_count"] = 1
    if data.get("job") is not None:
        body["local"]["script"] = data["job"]
    if data.get("seed") is not None:
        body["local"]["seed"] = data["seed"]
    return body, paths, errors


def parse_metric(text: Any) -> dict[str, str] | SpecError:
    """``val_loss:minimize`` (or ``{val_loss: minimize}``) as a Vertex MetricSpec."""
    if isinstance(text, dict) and len(text) == 1:
        text = ":".join(map(str, next(iter(text.items()))))
    name, _, goal = str(text).partition(":")
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
    kinds = [k for k in KINDS if k in spec]
    for key in spec:
        if key not in (*KINDS, "scale", "children"):
            errors.append(SpecError(f"{short}.{key}", spec[key], "unknown field; valid fields: "
                                    "double, integer, categorical, discrete, scale, children"))
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


# -- semantic checks ----------------------------------------------------------------------


def _check_semantics(spec: TuningSpec) -> list[SpecError]:
    errors: list[SpecError] = []
    study = spec.study_spec
    if len(study.metrics) != 1:
        errors.append(SpecError("study_spec.metrics", [m.metric_id for m in study.metrics],
                                "exactly one metric: multi-objective studies are not supported here yet"))
    for i, metric in enumerate(study.metrics):
        if not _ID_RE.match(metric.metric_id):
            errors.append(SpecError(f"study_spec.metrics[{i}].metric_id", metric.metric_id,
                                    "a tag without spaces, e.g. val_loss (the hypertune tag or TensorBoard tag)"))
    if study.median_automated_stopping_spec is not None and study.decay_curve_stopping_spec is not None:
        errors.append(SpecError("study_spec.decay_curve_stopping_spec", {}, "choose one automated stopping rule: "
                                "median_automated_stopping_spec or decay_curve_stopping_spec"))
    errors += _check_parameters(study.parameters, "study_spec.parameters", {})
    if spec.algorithm == "grid":
        errors += _check_grid(spec)
    errors += _check_job(spec)
    return errors


def _check_parameters(parameters: list[ParameterSpec], path: str, seen: dict[str, tuple[str, str | None]],
                      parent: str | None = None) -> list[SpecError]:
    """Each parameter and its children (``path`` names the list, or the one parameter when it
    is a child). Ids are flags, so unique among a trial's parameters: only children of one
    parent may share an id, under disjoint parent values."""
    errors: list[SpecError] = []
    for i, p in enumerate(parameters):
        where = path if parent is not None else f"{path}[{i}]"
        if not _ID_RE.match(p.parameter_id):
            errors.append(SpecError(f"{where}.parameter_id", p.parameter_id, "letters, digits, _ . - without spaces, "
                                    "starting with a letter or _ (it becomes a --flag)"))
        first = seen.setdefault(p.parameter_id, (where, parent))
        if first[0] != where and (parent is None or first[1] != parent):
            errors.append(SpecError(f"{where}.parameter_id", p.parameter_id, "another parameter has this id; ids "
                                    "are unique across the spec, children included"))
        if p.kind is None:
            errors.append(SpecError(where, p.parameter_id, "exactly one of double_value_spec, integer_value_spec, "
                                    "categorical_value_spec or discrete_value_spec"))
            continue
        errors += _check_values(p, where)
        taken: dict[str, set] = {}
        for j, cond in enumerate(p.conditional_parameter_specs):
            cwhere = f"{where}.conditional_parameter_specs[{j}]"
            errors += _check_condition(p, cond, cwhere)
            child_id = cond.parameter_spec.parameter_id
            overlap = taken.setdefault(child_id, set()) & set(cond.parent_values)
            if overlap:
                errors.append(SpecError(cwhere, sorted(overlap, key=str), f"{child_id} is already a child for these "
                                        f"values of {p.parameter_id}; children of one id need disjoint parent values"))
            taken[child_id] |= set(cond.parent_values)
            errors += _check_parameters([cond.parameter_spec], f"{cwhere}.parameter_spec", seen, where)
    return errors


def _check_values(p: ParameterSpec, where: str) -> list[SpecError]:
    errors: list[SpecError] = []
    kind, vs = p.kind, p.value_spec
    field = f"{where}.{kind}_value_spec"
    if kind in ("double", "integer"):
        if not (math.isfinite(vs.min_value) and math.isfinite(vs.max_value)):
            errors.append(SpecError(f"{field}.min_value", [vs.min_value, vs.max_value], "finite numbers"))
        elif vs.min_value >= vs.max_value:
            errors.append(SpecError(f"{field}.max_value", vs.max_value,
                                    f"max_value must be greater than min_value ({vs.min_value}) for {p.parameter_id}"))
        if p.scale in ("log", "reverse_log") and vs.min_value <= 0:
            errors.append(SpecError(f"{where}.scale_type", p.scale_type, f"a {p.scale.replace('_', '-')} scale needs "
                                    f"min_value > 0 ({p.parameter_id} starts at {vs.min_value}); use "
                                    "UNIT_LINEAR_SCALE or a positive range"))
    elif kind == "categorical":
        if not vs.values:
            errors.append(SpecError(f"{field}.values", [], f"at least one category for {p.parameter_id}"))
        elif len(set(vs.values)) != len(vs.values):
            errors.append(SpecError(f"{field}.values", vs.values, "each category once"))
        if p.scale_type not in (None, "SCALE_TYPE_UNSPECIFIED"):
            errors.append(SpecError(f"{where}.scale_type", p.scale_type, "leave scale_type unset for a categorical "
                                    "parameter"))
    else:  # discrete
        values = vs.values
        if not values:
            errors.append(SpecError(f"{field}.values", [], f"at least one value for {p.parameter_id}"))
        elif any(not math.isfinite(v) for v in values) or any(b - a < 1e-10 for a, b in zip(values, values[1:])):
            errors.append(SpecError(f"{field}.values", values, "finite numbers in increasing order, each at least "
                                    "1e-10 above the one before"))
        elif p.scale in ("log", "reverse_log") and values[0] <= 0:
            errors.append(SpecError(f"{where}.scale_type", p.scale_type, "a log scale needs values > 0"))
    return errors


def _check_condition(parent: ParameterSpec, cond: ConditionalParameterSpec, where: str) -> list[SpecError]:
    expected = {"categorical": "parent_categorical_values", "integer": "parent_int_values",
                "discrete": "parent_discrete_values"}.get(parent.kind or "")
    if expected is None:
        return [SpecError(where, cond.parameter_spec.parameter_id, f"{parent.parameter_id} is a double: only "
                          "categorical, integer and discrete parameters can have conditional children")]
    if cond.condition_field != expected:
        return [SpecError(f"{where}.{expected}", None, f"a child of {parent.kind} {parent.parameter_id} needs "
                          f"exactly one condition, {expected}")]
    errors = []
    vs = parent.value_spec
    for value in cond.parent_values:
        if parent.kind == "integer":
            known, valid = vs.min_value <= value <= vs.max_value, f"{vs.min_value} to {vs.max_value}"
        else:
            known, valid = _matches(value, vs.values), ", ".join(map(str, vs.values))
        if not known:
            errors.append(SpecError(f"{where}.{expected}.values", value,
                                    f"it is not a value of {parent.parameter_id}; its values: {valid}"))
    return errors


def _check_grid(spec: TuningSpec) -> list[SpecError]:
    errors, points = [], 1
    for where, p in walk(spec.study_spec.parameters):
        if p.kind == "double":
            errors.append(SpecError(f"{where}.double_value_spec", p.parameter_id, "grid search needs integer, "
                                    "categorical or discrete parameters; use algorithm bayesian or random, or "
                                    "a discrete parameter"))
        if p.conditional_parameter_specs:
            errors.append(SpecError(f"{where}.conditional_parameter_specs", p.parameter_id, "grid search here "
                                    "takes no conditional parameters; use bayesian or random"))
        if p.kind is not None:
            points *= len(grid_values(p))
    if not errors and points > MAX_GRID_POINTS:
        errors.append(SpecError("study_spec.parameters", points, f"a grid of at most {MAX_GRID_POINTS} points"))
    return errors


def grid_values(p: ParameterSpec) -> list[Any]:
    """Every value of an integer, categorical or discrete parameter."""
    if p.kind == "integer":
        return list(range(p.value_spec.min_value, p.value_spec.max_value + 1))
    return list(p.value_spec.values) if p.kind in ("categorical", "discrete") else []


def _check_job(spec: TuningSpec) -> list[SpecError]:
    if spec.trial_job_spec is not None:
        try:
            script_from_worker_pools(spec.trial_job_spec)
        except SpecError as e:
            return [e]
    script = spec.local.script
    if not script.strip():
        return [SpecError("local.script", script, "the sbatch script each trial runs")]
    try:
        sbatch_directives(script)
    except SpecError as e:
        return [SpecError("local.script", e.value, e.expected)]
    if not _PASSES_ARGS.search(script):
        return [SpecError("local.script", script.strip().splitlines()[-1], 'hyperparameters reach the script as its '
                          'arguments: pass them on with "$@", e.g. srun python train.py "$@"')]
    return []


def _matches(value: Any, values: list[Any]) -> bool:
    if isinstance(value, str):
        return value in values
    return any(not isinstance(v, str) and abs(float(v) - float(value)) <= 1e-10 for v in values)


# -- errors in the form the user wrote ------------------------------------------------------


def _pydantic_error(err: dict[str, Any]) -> SpecError:
    path = _format_path([_snake(p) if isinstance(p, str) else p for p in err["loc"]])
    if err["type"] == "extra_forbidden":
        return SpecError(path, err["input"], "unknown field")
    if err["type"] == "missing":
        return SpecError(path, None, "this field is required")
    return SpecError(path, err.get("input"), err["msg"][0].lower() + err["msg"][1:])


_VERTEX_TO_SHORT = (("double_value_spec", "double"), ("integer_value_spec", "integer"),
                    ("categorical_value_spec", "categorical"), ("discrete_value_spec", "discrete"),
                    ("scale_type", "scale"))


def _translate(error: SpecError, paths: dict[str, str] | None) -> SpecError:
    """A Vertex field path as the short form's, when the spec was written that way (``paths``:
    where each parameter was written; None for a spec in Vertex's form)."""
    if paths is None:
        return error
    field = error.field
    for vertex in sorted(paths, key=len, reverse=True):
        if field == vertex or field.startswith(vertex + "."):
            rest = field[len(vertex):]
            for long, short in _VERTEX_TO_SHORT:
                if rest.startswith(f".{long}"):
                    rest = f".{short}"
            if rest.startswith((".parent_", ".conditional_parameter_specs", ".parameter_id")):
                rest = ""
            return SpecError(paths[vertex] + rest, error.value, error.expected)
    for vertex, short in sorted(_SHORT_FIELDS.items(), key=lambda kv: len(kv[0]), reverse=True):
        if field == vertex or field.startswith((vertex + ".", vertex + "[")):
            return SpecError(short, error.value, error.expected)
    return error

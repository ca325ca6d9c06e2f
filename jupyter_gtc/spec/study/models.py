"""The tuning spec's models, shaped as Vertex AI's ``HyperparameterTuningJob`` and its
``StudySpec``, plus the ``local`` block; and the helpers the other modules share: ``walk``
(each parameter with its field path), ``format_flag`` (a hyperparameter as a trial's flag)
and ``matches`` (a value among a parameter's values)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from ..trial_job import worker_pools_from_script

Goal = Literal["MAXIMIZE", "MINIMIZE", "GOAL_TYPE_UNSPECIFIED"]
Scale = Literal["SCALE_TYPE_UNSPECIFIED", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"]
Algorithm = Literal["ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"]
Selection = Literal["MEASUREMENT_SELECTION_TYPE_UNSPECIFIED", "LAST_MEASUREMENT", "BEST_MEASUREMENT"]
Noise = Literal["OBSERVATION_NOISE_UNSPECIFIED", "LOW", "HIGH"]

ALGORITHMS = {"bayesian": "ALGORITHM_UNSPECIFIED", "grid": "GRID_SEARCH", "random": "RANDOM_SEARCH"}
SCALES = {"linear": "UNIT_LINEAR_SCALE", "log": "UNIT_LOG_SCALE", "reverse_log": "UNIT_REVERSE_LOG_SCALE"}
EARLY_STOPPING = ("median", "decay_curve", "none")
KINDS = ("double", "integer", "categorical", "discrete")


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
        return [c.parameter_spec for c in self.conditional_parameter_specs if matches(value, c.parent_values)]


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
    submit_dir: str | None = Field(default=None, pattern=r"^/")
    """The folder the trials are submitted from, on the cluster: each runs there, as a job does
    (``api.submit_job``), so ``python train.py`` finds the script beside the notebook. Set when
    the study is created, to where it is created (the creating process's working directory)
    unless given, and kept with the study for a driver in another process; none (a study from
    before it was kept, or a folder the cluster lacks): each trial runs in its job folder."""


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


def matches(value: Any, values: list[Any]) -> bool:
    """Whether ``value`` is one of ``values``: a category exactly, a number to within 1e-10."""
    if isinstance(value, str):
        return value in values
    return any(not isinstance(v, str) and abs(float(v) - float(value)) <= 1e-10 for v in values)

"""The tuning spec: a Vertex AI ``HyperparameterTuningJob`` (``study_spec``, ``max_trial_count``,
``parallel_trial_count``, ``max_failed_trial_count``, ``trial_job_spec``), in camelCase or
snake_case, or the short YAML form that ``%%gtc_tune`` takes (see ``short_form``).

Both become one ``TuningSpec``, shaped as Vertex's resource, so ``to_vertex()`` is a dump.
As with clusters, a ``local`` block holds what only this backend needs: the sbatch script
every trial runs (hyperparameters reach it as ``"$@"``) and the sampler's seed.

``parse_tuning_spec`` validates everything at once and raises ``SpecErrors`` naming each bad
field in the form the user wrote (``parameters.learning_rate.double`` in the short form,
``study_spec.parameters[0].double_value_spec.max_value`` in Vertex's).

The modules, one job each: ``models`` (the pydantic models), ``short_form`` (the short form
as Vertex's resource), ``checks`` (the rules beyond types), ``grid`` (grid search's size and
values), ``parse`` (both forms in, errors out in the user's words).
"""

from ..trial_job import script_from_worker_pools, worker_pools_from_script
from .grid import MAX_GRID_POINTS, grid_count, grid_size, grid_values
from .models import (
    ALGORITHMS,
    EARLY_STOPPING,
    KINDS,
    SCALES,
    CategoricalValueCondition,
    CategoricalValueSpec,
    ConditionalParameterSpec,
    DiscreteValueCondition,
    DiscreteValueSpec,
    DoubleValueSpec,
    IntegerValueSpec,
    IntValueCondition,
    LocalTrialOptions,
    MetricSpec,
    ParameterSpec,
    StoppingSpec,
    StudySpec,
    TuningSpec,
    format_flag,
    walk,
)
from .parse import load_tuning_spec, parse_tuning_spec
from .short_form import parse_metric

__all__ = [
    "ALGORITHMS", "EARLY_STOPPING", "KINDS", "MAX_GRID_POINTS", "SCALES",
    "CategoricalValueCondition", "CategoricalValueSpec", "ConditionalParameterSpec", "DiscreteValueCondition",
    "DiscreteValueSpec", "DoubleValueSpec", "IntValueCondition", "IntegerValueSpec", "LocalTrialOptions",
    "MetricSpec", "ParameterSpec", "StoppingSpec", "StudySpec", "TuningSpec",
    "format_flag", "grid_count", "grid_size", "grid_values", "load_tuning_spec", "parse_metric",
    "parse_tuning_spec", "script_from_worker_pools", "walk", "worker_pools_from_script",
]

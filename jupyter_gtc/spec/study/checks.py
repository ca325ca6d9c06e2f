"""The rules a tuning spec must follow beyond its types: one well-named metric, parameters
whose ranges, scales and conditions make sense, ids that can be flags, a grid that can be
walked, and a trial script that passes the hyperparameters on. Each rule reports a
``SpecError`` at a Vertex field path; ``parse`` turns it into the short form's when needed."""

from __future__ import annotations

import math
import re

from ...exceptions import SpecError
from ..job import sbatch_directives
from ..trial_job import script_from_worker_pools
from .grid import check_grid
from .models import ConditionalParameterSpec, ParameterSpec, TuningSpec, matches

# Parameter ids (each becomes a --flag). Used with fullmatch: `^...$` with match lets "lr\n" through.
_ID_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,127}")
_TAG_MAX = 256
_PASSES_ARGS = re.compile(r'"\$@"|\$\*|\$\{@|\$@')


def check_semantics(spec: TuningSpec) -> list[SpecError]:
    errors: list[SpecError] = []
    study = spec.study_spec
    if len(study.metrics) != 1:
        errors.append(SpecError("study_spec.metrics", [m.metric_id for m in study.metrics],
                                "exactly one metric: multi-objective studies are not supported here yet"))
    for i, metric in enumerate(study.metrics):
        if not is_metric_tag(metric.metric_id):
            errors.append(SpecError(f"study_spec.metrics[{i}].metric_id", metric.metric_id,
                                    f"a tag as TensorBoard or hypertune writes it: up to {_TAG_MAX} printable "
                                    "characters, not starting or ending with a space, e.g. val_loss or train/loss"))
    if study.median_automated_stopping_spec is not None and study.decay_curve_stopping_spec is not None:
        errors.append(SpecError("study_spec.decay_curve_stopping_spec", {}, "choose one automated stopping rule: "
                                "median_automated_stopping_spec or decay_curve_stopping_spec"))
    errors += _check_parameters(study.parameters, "study_spec.parameters", {})
    if spec.algorithm == "grid":
        errors += check_grid(spec)
    errors += _check_job(spec)
    return errors


def is_metric_tag(tag: str) -> bool:
    """Whether ``tag`` can name a scalar as the trial writes it: TensorBoard keeps a tag as
    given (``train/loss``, ``eval.top-1``, ``val:acc``; torch's SummaryWriter does not clean
    it), and so does cloudml-hypertune. No line breaks or other control characters (a
    stray newline from YAML), no space at either end (it would never match)."""
    return 0 < len(tag) <= _TAG_MAX and tag.isprintable() and tag == tag.strip()


def _check_parameters(parameters: list[ParameterSpec], path: str, seen: dict[str, tuple[str, str | None]],
                      parent: str | None = None) -> list[SpecError]:
    """Each parameter and its children (``path`` names the list, or the one parameter when it
    is a child). Ids are flags, so unique among a trial's parameters: only children of one
    parent may share an id, under disjoint parent values."""
    errors: list[SpecError] = []
    for i, p in enumerate(parameters):
        where = path if parent is not None else f"{path}[{i}]"
        if not _ID_RE.fullmatch(p.parameter_id):
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
            known, valid = matches(value, vs.values), ", ".join(map(str, vs.values))
        if not known:
            errors.append(SpecError(f"{where}.{expected}.values", value,
                                    f"it is not a value of {parent.parameter_id}; its values: {valid}"))
    return errors



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

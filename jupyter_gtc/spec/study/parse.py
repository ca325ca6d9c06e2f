"""``parse_tuning_spec``: either form of a tuning spec, validated all at once, with each bad
field named in the form the user wrote (``parameters.learning_rate.double`` in the short
form, ``study_spec.parameters[0].double_value_spec.max_value`` in Vertex's)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from ...exceptions import SpecError, SpecErrors
from ..cluster import parse_spec_text
from ..errors import _snake, spec_errors
from ..trial_job import script_from_worker_pools
from .checks import check_semantics
from .models import TuningSpec
from .short_form import SHORT_FIELDS, from_short_form

# What a resource read back from Vertex carries besides its spec; dropped on input.
_OUTPUT_ONLY = {"name", "trials", "state", "create_time", "start_time", "end_time", "update_time", "error",
                "satisfies_pzs", "satisfies_pzi"}


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
        (body, errors), paths = _from_vertex(data, overrides), None
    else:
        body, paths, errors = from_short_form(data, overrides)
    try:
        spec = TuningSpec.model_validate(body)
    except ValidationError as e:
        errors += [_translate(err, paths) for err in spec_errors(e.errors(), TuningSpec)]
    else:
        errors += [_translate(err, paths) for err in check_semantics(spec)]
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


def _from_vertex(data: dict[str, Any], overrides: dict[str, Any]) -> tuple[dict[str, Any], list[SpecError]]:
    """The body to validate, and what is wrong with its ``trial_job_spec``: reported with its
    own field, not as a missing ``local.script``."""
    body = {k: v for k, v in data.items() if _snake(k) not in _OUTPUT_ONLY}
    local = dict(body.pop("local", None) or {})
    errors: list[SpecError] = []
    job_spec = body.get("trial_job_spec", body.get("trialJobSpec"))
    if "script" not in local and isinstance(job_spec, dict):
        try:
            local["script"] = script_from_worker_pools(job_spec)
        except SpecError as e:
            errors.append(e)
            local["script"] = 'srun true "$@"'  # a stand-in, so that the rest is checked too
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
    return body, errors


# -- errors in the form the user wrote ------------------------------------------------------


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
    for vertex, short in sorted(SHORT_FIELDS.items(), key=lambda kv: len(kv[0]), reverse=True):
        if field == vertex or field.startswith((vertex + ".", vertex + "[")):
            return SpecError(short, error.value, error.expected)
    return error

"""Grid search: which parameters a grid can take, how many points it has, and its values.

The size is counted, never listed: ``integer: [0, 1e10]`` is ten billion points, and listing
them before refusing would take the memory the refusal is there to protect."""

from __future__ import annotations

import math
from typing import Any

from ...exceptions import SpecError
from .models import ParameterSpec, TuningSpec, walk

MAX_GRID_POINTS = 100_000


def grid_count(p: ParameterSpec) -> int:
    """How many values an integer, categorical or discrete parameter has (0 for a double)."""
    if p.kind == "integer":
        return max(0, p.value_spec.max_value - p.value_spec.min_value + 1)
    return len(p.value_spec.values) if p.kind in ("categorical", "discrete") else 0


def grid_size(spec: TuningSpec) -> int:
    """The number of points of the spec's grid: the product of its parameters' counts."""
    return math.prod(grid_count(p) for p in spec.parameters())


def grid_values(p: ParameterSpec) -> list[Any]:
    """Every value of an integer, categorical or discrete parameter. Only for a grid that
    ``check_grid`` accepted (at most ``MAX_GRID_POINTS``)."""
    if p.kind == "integer":
        return list(range(p.value_spec.min_value, p.value_spec.max_value + 1))
    return list(p.value_spec.values) if p.kind in ("categorical", "discrete") else []


def check_grid(spec: TuningSpec) -> list[SpecError]:
    errors, counts = [], []
    for where, p in walk(spec.study_spec.parameters):
        if p.kind == "double":
            errors.append(SpecError(f"{where}.double_value_spec", p.parameter_id, "grid search needs integer, "
                                    "categorical or discrete parameters; use algorithm bayesian or random, or "
                                    "a discrete parameter"))
        if p.conditional_parameter_specs:
            errors.append(SpecError(f"{where}.conditional_parameter_specs", p.parameter_id, "grid search here "
                                    "takes no conditional parameters; use bayesian or random"))
        if p.kind is not None:
            counts.append((where, p, grid_count(p)))
    if errors:
        return errors
    points = math.prod(count for _, _, count in counts)
    if points <= MAX_GRID_POINTS:
        return []
    advice = ("narrow the ranges, list the values to try as a discrete parameter, "
              "or use algorithm random or bayesian")
    where, p, count = max(counts, key=lambda c: c[2])
    if count > MAX_GRID_POINTS:  # one parameter is too many on its own: name it
        vs = p.value_spec
        value = [vs.min_value, vs.max_value] if p.kind == "integer" else list(vs.values)
        return [SpecError(f"{where}.{p.kind}_value_spec", value, f"a grid has at most {MAX_GRID_POINTS:,} points "
                          f"and {p.parameter_id} alone has {count:,} values; {advice}")]
    sizes = " x ".join(f"{p.parameter_id} {count:,}" for _, p, count in counts)
    return [SpecError("study_spec.parameters", f"{points:,} grid points", f"a grid has at most "
                      f"{MAX_GRID_POINTS:,} points and this one has {sizes}; {advice}")]

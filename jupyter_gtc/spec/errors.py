"""Pydantic's validation errors as ``SpecError``s with snake_case field paths: one problem per mistake.

A misspelt key is two errors to pydantic: the key it does not know, and the field the user
meant, now missing. ``node_pool`` for ``node_pools`` printed both, the first with the whole
list of pools as its value. Here the unknown key is reported once, with the field it is
closest to (``difflib``), and the "required" error of that field is dropped: the user wrote
it, under another name.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel
from pydantic.alias_generators import to_camel

from ..exceptions import SpecError


class UnknownField(SpecError):
    """A key that no field of the model at that place is called; ``suggestion`` is the field
    it is closest to, in the style the user wrote (camelCase or snake_case), or None."""

    def __init__(self, field: str, value: object, valid: list[str], key: str, aside: str = ""):
        close = difflib.get_close_matches(_snake(key), valid, n=1)
        self.suggestion = (to_camel(close[0]) if _is_camel(key) else close[0]) if close else None
        hint = f"did you mean {self.suggestion}? " if self.suggestion else ""
        listed = (f"valid fields here: {', '.join(valid)}" if valid else "no fields are valid here") + aside
        super().__init__(field, value, f"unknown field; {hint}{listed}")
        # The value of an unknown key is whatever the user put under it (a whole list of
        # pools): the key's name and the fix say all there is to say.
        self.args = (f"{field}: unknown field; {hint}{listed}",)


def spec_errors(errors: list[dict[str, Any]], root: type[BaseModel]) -> list[SpecError]:
    """Each of pydantic's ``errors`` (``ValidationError.errors()``) of a spec whose model is
    ``root`` as a SpecError, but a required field whose misspelling was given is reported as
    the misspelling only."""
    out: list[SpecError] = []
    meant: set[tuple[Any, ...]] = set()  # (parent loc..., field) of fields written under a close name
    for err in errors:
        loc = [_snake(p) if isinstance(p, str) else p for p in err["loc"]]
        if err["type"] == "extra_forbidden":
            error = UnknownField(format_path(loc), err["input"], fields_at(loc[:-1], root), str(err["loc"][-1]))
            if error.suggestion:
                meant.add((*loc[:-1], _snake(error.suggestion)))
            out.append(error)
    for err in errors:
        loc = [_snake(p) if isinstance(p, str) else p for p in err["loc"]]
        if err["type"] == "extra_forbidden" or (err["type"] == "missing" and tuple(loc) in meant):
            continue
        if err["type"] == "missing":
            out.append(SpecError(format_path(loc), None, "this field is required"))
        else:
            out.append(SpecError(format_path(loc), err.get("input"), err["msg"][0].lower() + err["msg"][1:]))
    return _in_given_order(out, errors)


def _in_given_order(out: list[SpecError], errors: list[dict[str, Any]]) -> list[SpecError]:
    """The errors in pydantic's order (the spec's field order), unknown keys included."""
    order = {format_path([_snake(p) if isinstance(p, str) else p for p in e["loc"]]): i for i, e in enumerate(errors)}
    return sorted(out, key=lambda e: order.get(e.field, len(order)))


def format_path(loc: list[Any]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(spec)"


def fields_at(loc: list[Any], root: type[BaseModel]) -> list[str]:
    """The snake_case field names of the model found by walking ``loc`` from ``root``."""
    model: Any = root
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return []
        model = _model_in(field.annotation)
        if model is None:
            return []
    return list(model.model_fields)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _is_camel(key: str) -> bool:
    return "_" not in key and key != key.lower()

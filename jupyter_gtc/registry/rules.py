"""What the registry accepts, checked before anything is stored: each refusal is a
``SpecError`` naming the field, the value and what would be valid.

The alias and label rules are Vertex AI's (Model Registry, measured with
google-cloud-aiplatform 2.7.0), so a model registered here can be exported there unchanged.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ..exceptions import SpecError

DEFAULT_ALIAS = "default"
# Vertex's alias pattern: 2 to 128 characters, a lowercase letter first, no trailing dash.
ALIAS_PATTERN = re.compile(r"[a-z][a-zA-Z0-9-]{0,126}[a-z0-9]")
# A model's name is a folder under $GTC_HOME/models/ and the part before '@' of a reference.
NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
MAX_LABELS = 64
MAX_LABEL_CHARS = 63
MAX_DESCRIPTION_CHARS = 8192

# Every kind of row in a model's history (model_events.event). "not_registered": a registration
# that waited for its job (a recipe's), which ended without a model. "deploy" and "undeploy" are
# for serving (a later increment): the table and the readers take them already.
EVENT_KINDS = ("register", "alias", "unalias", "delete_version", "delete_model", "not_registered", "deploy",
               "undeploy")


@dataclass(frozen=True)
class ModelRef:
    """``name``, ``name@3`` or ``name@prod``: a version number, an alias, or neither (the
    version that holds ``default``)."""

    name: str
    version: int | None = None
    alias: str | None = None

    def __str__(self) -> str:
        return self.name + (f"@{self.version}" if self.version is not None else f"@{self.alias}" if self.alias else "")


def parse_ref(ref: str, field: str = "model") -> ModelRef:
    if not isinstance(ref, str) or not ref:
        raise SpecError(field, ref, "give a model as NAME, NAME@VERSION (NAME@3) or NAME@ALIAS (NAME@prod)")
    name, at, selector = ref.partition("@")
    if not NAME_PATTERN.fullmatch(name):
        raise SpecError(field, ref, "a model is NAME, NAME@VERSION or NAME@ALIAS, its NAME 1 to 128 letters, "
                                    "digits, '.', '_' or '-', starting with a letter or digit")
    if not at:
        return ModelRef(name)
    if selector.isdigit() and int(selector) >= 1:
        return ModelRef(name, version=int(selector))
    if ALIAS_PATTERN.fullmatch(selector):
        return ModelRef(name, alias=selector)
    raise SpecError(field, ref, "after '@' comes a version number from 1 (NAME@3) or an alias (NAME@prod)")


def check_model_name(name: object, field: str = "model") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.fullmatch(name):
        raise SpecError(field, name, "a model name is 1 to 128 letters, digits, '.', '_' or '-', starting with "
                                     "a letter or digit (it names a folder under $GTC_HOME/models/)")
    return name


def check_alias(alias: object, field: str = "alias") -> str:
    """An alias as Vertex accepts it; a number is refused with its own reason (it would read as
    a version: ``name@3``)."""
    if isinstance(alias, str) and alias.isdigit():
        raise SpecError(field, alias, f"an alias cannot be a number ({alias!r} would name version {alias}); "
                                      "use a word such as 'prod' or 'v3'")
    if not isinstance(alias, str) or not ALIAS_PATTERN.fullmatch(alias):
        raise SpecError(field, alias, "an alias is 2 to 128 characters: a lowercase letter first, then letters, "
                                      "digits or '-', ending in a lowercase letter or digit (e.g. 'prod', "
                                      "'candidate-2')")
    return alias


def check_description(description: object, field: str = "description") -> str:
    if description is None:
        return ""
    if not isinstance(description, str) or len(description) > MAX_DESCRIPTION_CHARS:
        raise SpecError(field, description if not isinstance(description, str) else description[:40] + "...",
                        f"a description is text of at most {MAX_DESCRIPTION_CHARS} characters")
    return description


def check_labels(labels: object, field: str = "labels") -> dict[str, str]:
    """Vertex's label rules: at most 64; keys and values at most 63 characters of lowercase
    letters, digits, '_' and '-' (international letters too); a key starts with a letter."""
    if labels is None:
        return {}
    if not isinstance(labels, dict):
        raise SpecError(field, labels, "labels are a mapping of key to value, e.g. {'team': 'nlp'}")
    if len(labels) > MAX_LABELS:
        raise SpecError(field, f"{len(labels)} labels", f"at most {MAX_LABELS} labels")
    for key, value in labels.items():
        if not isinstance(key, str) or not key or not _label_chars(key) or not (key[0].isalpha()):
            raise SpecError(f"{field}.{key}", key, f"a label key is 1 to {MAX_LABEL_CHARS} lowercase letters, "
                                                   "digits, '_' or '-', starting with a lowercase letter")
        if not isinstance(value, str) or not _label_chars(value, allow_empty=True):
            raise SpecError(f"{field}.{key}", value, f"a label value is at most {MAX_LABEL_CHARS} lowercase "
                                                     "letters, digits, '_' or '-' (empty is fine)")
    return dict(labels)


def _label_chars(text: str, allow_empty: bool = False) -> bool:
    if len(text) > MAX_LABEL_CHARS or (not text and not allow_empty):
        return False
    # A letter with case must be lowercase; letters without case (CJK) are allowed, as Vertex does.
    return all((c.isalpha() and not c.isupper()) or c.isdigit() or c in "_-" for c in text)


def closest(name: str, known: list[str]) -> str:
    """What to say after "no model named X": the closest known names first, or how to make one."""
    if not known:
        return "no models are registered yet; register a job's model with gtc.models.register(job, model=NAME)"
    near = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
    shown = near + [k for k in known if k not in near][: max(0, 8 - len(near))]
    lead = f"did you mean {' or '.join(repr(n) for n in near)}? " if near else ""
    return f"{lead}registered models: {', '.join(shown)}" + (" ..." if len(known) > len(shown) else "")

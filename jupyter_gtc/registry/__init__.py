"""The model registry's rules, as pure functions: names, references (``name@prod``,
``name@3``), aliases and labels checked as Vertex AI's Model Registry checks them. The
registry's tables are ``state/models.py``; the service that registers a job's model is
``services/models.py``."""

from .rules import (DEFAULT_ALIAS, EVENT_KINDS, ModelRef, check_alias, check_description, check_labels,
                    check_model_name, closest, parse_ref)

__all__ = ["DEFAULT_ALIAS", "EVENT_KINDS", "ModelRef", "check_alias", "check_description", "check_labels",
           "check_model_name", "closest", "parse_ref"]

"""What Vertex AI asks of a training cluster (``ModelDevelopmentCluster``) beyond our cluster
spec: with a ``slurm_spec`` its id (the ``modelDevelopmentClusterId`` of the create, our
``display_name``) is ``^[a-z][a-z0-9]{0,9}$``, no hyphens, though our own clusters take them."""

from __future__ import annotations

import re

from ..exceptions import SpecError

CLUSTER_ID_RE = re.compile(r"[a-z][a-z0-9]{0,9}")  # fullmatch: `$` alone lets "abc\n" through
CLUSTER_ID_RULE = ("a Vertex AI training cluster's id (with a slurm_spec) matches ^[a-z][a-z0-9]{0,9}$: "
                   "a lowercase letter, then up to 9 lowercase letters or digits, no hyphens")


def check_cluster_id(value: object, field: str = "display_name") -> str:
    """``value`` if it is a valid training cluster id, else a ``SpecError`` naming the rule and,
    where one exists, the id it was probably meant to be."""
    if isinstance(value, str) and CLUSTER_ID_RE.fullmatch(value):
        return value
    guess = _guess(value) if isinstance(value, str) else None
    hint = f"; did you mean {guess!r}?" if guess else ""
    raise SpecError(field, value, CLUSTER_ID_RULE + hint)


def _guess(value: str) -> str | None:
    """The id with what the rule forbids taken out (hyphens, underscores, capitals lowered),
    cut to 10 characters, if that is a valid id."""
    guess = re.sub(r"[^a-z0-9]", "", value.lower())[:10]
    return guess if CLUSTER_ID_RE.fullmatch(guess) else None

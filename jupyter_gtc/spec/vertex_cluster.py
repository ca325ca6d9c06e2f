"""What Vertex AI asks of a training cluster (``ModelDevelopmentCluster``) beyond our cluster
spec: with a ``slurm_spec`` its id (the ``modelDevelopmentClusterId`` of the create, our
``display_name``) is ``^[a-z][a-z0-9]{0,9}$``, no hyphens, though our own clusters take them."""

from __future__ import annotations

import re
from typing import Any

from ..exceptions import SpecError
from .cluster import ClusterSpec, parse_cluster_spec, parse_spec_text

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


def is_training_cluster(data: Any) -> bool:
    """Whether ``data`` (a dict, or JSON/YAML text) describes a training cluster to create (it has
    node pools), not a Vertex target to attach."""
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data)
    return isinstance(data, (dict, ClusterSpec)) and (
        isinstance(data, ClusterSpec) or "node_pools" in data or "nodePools" in data)


def parse_training_cluster(data: Any, display_name: str | None = None) -> ClusterSpec:
    """``data`` as our cluster spec, then what Vertex asks beyond it: the id rule of a cluster
    with a ``slurm_spec`` (every cluster spec of ours has one)."""
    spec = data if isinstance(data, ClusterSpec) and display_name is None else parse_cluster_spec(
        data.to_json() if isinstance(data, ClusterSpec) else data, display_name)
    check_cluster_id(spec.display_name)
    return spec

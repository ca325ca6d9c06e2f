"""What Vertex AI asks of a training cluster (``ModelDevelopmentCluster``) beyond our cluster
spec: with a ``slurm_spec`` its id (the ``modelDevelopmentClusterId`` of the create, our
``display_name``) is ``^[a-z][a-z0-9]{0,9}$``, no hyphens, though our own clusters take them.
Beyond Vertex's fields, an optional ``login`` section of ours says how to reach its login node
(``LoginSpec``: the attach spec's fields, plus ``jobs: api | ssh``); it is never sent to Vertex."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from ..exceptions import SpecError, SpecErrors
from .attach import AttachSpec
from .cluster import ClusterSpec, parse_cluster_spec, parse_spec_text
from .errors import spec_errors

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


def parse_training_cluster(data: Any, display_name: str | None = None) -> TrainingClusterSpec:
    """``data`` as our cluster spec, then what Vertex asks beyond it: the id rule of a cluster
    with a ``slurm_spec`` (every cluster spec of ours has one); its ``login`` section, ours,
    validated as an attach spec is (``LoginSpec``)."""
    if isinstance(data, TrainingClusterSpec) and display_name is None:
        check_cluster_id(data.display_name)
        return data
    data, login = _split_login(data)
    spec = parse_cluster_spec(data.model_dump(mode="json", exclude_none=True, exclude={"login"})
                              if isinstance(data, ClusterSpec) else data, display_name)
    check_cluster_id(spec.display_name)
    return _with_login(spec, login)


# -- the login node: how jupyter_gtc reaches the cluster's jobs ---------------------------------

JOBS_WAYS = ("api", "ssh")


class LoginSpec(AttachSpec):
    """The ``login:`` section of a training cluster's spec, ours alone (never sent to Vertex):
    how to reach its login node, as an attach spec says it (``ssh``, ``python``, ``setup``,
    ``jobs_root``, ``poll_interval``, ``slurm_conf``; the same model, so the same rules), plus
    ``jobs``: the scheduler's calls through the Slurm Job API (``api``) or over SSH (``ssh``).
    Its ``ssh.host`` is, by default, the login pool's instance name, which ``gcloud compute
    config-ssh`` (or an IAP ``ProxyCommand`` entry) makes an alias of."""

    display_name: str = Field(default="login", exclude=True)  # the cluster's, not its own
    jobs: Literal["api", "ssh"] | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_name(cls, data: Any) -> Any:
        if isinstance(data, dict) and ({"display_name", "displayName"} & data.keys()):
            raise ValueError("the login section takes the cluster's name; leave display_name out of it")
        return data


class TrainingClusterSpec(ClusterSpec):
    """A cluster spec with the optional ``login`` section of a training cluster."""

    login: LoginSpec | None = None

    def to_vertex(self) -> dict[str, Any]:
        body = super().to_vertex()
        body.pop("login", None)  # ours: how we reach it, nothing Vertex has a field for
        return body

    def with_pool_size(self, pool_id: str, nodes: int) -> "TrainingClusterSpec":
        resized = ClusterSpec.model_validate(self.model_dump(exclude={"login"})).with_pool_size(pool_id, nodes)
        return _with_login(resized, self.login)


def _with_login(spec: ClusterSpec, login: LoginSpec | None) -> TrainingClusterSpec:
    return TrainingClusterSpec.model_validate({**spec.model_dump(exclude_none=True), "login": login})


def _split_login(data: Any) -> tuple[Any, LoginSpec | None]:
    """``data`` without its ``login`` section, and that section validated (errors named
    ``login.FIELD``)."""
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data)
    if isinstance(data, ClusterSpec):
        return data, getattr(data, "login", None)
    if not isinstance(data, dict) or "login" not in data:
        return data, None
    raw = data["login"]
    rest = {k: v for k, v in data.items() if k != "login"}
    if raw is None:
        return rest, None
    try:
        return rest, LoginSpec.model_validate(raw)
    except ValidationError as e:
        errors = spec_errors(e.errors(), LoginSpec)
        raise SpecErrors([SpecError(f"login.{err.field}" if err.field and err.field != "(spec)" else "login",
                                    err.value, err.expected) for err in errors]) from None

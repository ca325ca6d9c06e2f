"""The attach spec: how to reach a Slurm cluster that already exists (the ``slurm`` backend).

Nothing in it creates anything: it says where the cluster's login node is (an ``ssh`` block,
or none for the cluster this machine is a client of), where job folders go on the cluster,
and which Python the jobs run with there. Its partitions and nodes are the cluster's own,
read from Slurm when it is attached.

    display_name: hpc
    ssh: {host: login.example.org, user: me}   # or {host: my-alias} from ~/.ssh/config
    python: /shared/envs/train/bin/python      # first on the jobs' PATH
    setup: ["module load cuda/12.4"]           # run at the top of every job
    jobs_root: /scratch/me/jupyter_gtc/jobs    # default ~/jupyter_gtc/jobs
    poll_interval: 5                           # at most one squeue per this many seconds
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..exceptions import SpecError, SpecErrors
from .cluster import checked_display_name, parse_spec_text
from .errors import spec_errors

# A host or user that starts with "-" would reach ssh as an option (-oProxyCommand=...).
HOST_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:%\[\]-]*")
USER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
DEFAULT_JOBS_ROOT = "~/jupyter_gtc/jobs"
DEFAULT_POLL_INTERVAL = 5.0  # seconds; sites throttle scheduler calls to one per 3-5 s or rarer


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SSHTarget(_Model):
    host: str
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    config_file: str | None = None  # an ssh config to use instead of ~/.ssh/config

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not HOST_RE.fullmatch(value):
            raise ValueError("a host name, address or ~/.ssh/config alias (letters, digits, . _ : - %, "
                             "not starting with -)")
        return value

    @field_validator("user")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not USER_RE.fullmatch(value):
            raise ValueError("a user name (letters, digits, . _ -, not starting with - or .)")
        return value


class AttachSpec(_Model):
    display_name: str
    ssh: SSHTarget | None = None
    slurm_conf: str | None = None   # SLURM_CONF for the cluster's commands, where its default is not it
    python: str | None = None       # the cluster's Python for jobs (its bin/ goes first on PATH)
    setup: tuple[str, ...] = ()     # shell lines at the top of every job: module load, conda activate
    jobs_root: str = DEFAULT_JOBS_ROOT
    poll_interval: float = Field(default=DEFAULT_POLL_INTERVAL, ge=0.5, le=600)

    @field_validator("display_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return checked_display_name(value)

    @field_validator("python", "slurm_conf")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError("an absolute path on the cluster")
        return value

    @field_validator("jobs_root")
    @classmethod
    def _root(cls, value: str) -> str:
        if not (value.startswith("/") or value == "~" or value.startswith("~/")):
            raise ValueError("an absolute path on the cluster, or one under ~/ (the cluster user's home)")
        return value.rstrip("/") or "/"

    @field_validator("setup")
    @classmethod
    def _lines(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if any("\n" in line for line in value):
            raise ValueError("one shell line per item")
        return value

    @property
    def name(self) -> str:
        return self.display_name

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def parse_attach_spec(data: Any, display_name: str | None = None) -> AttachSpec:
    """Validate ``data`` (a dict, or JSON/YAML text; empty for the cluster this machine is a
    client of) into an ``AttachSpec``; ``display_name``, when given, replaces the spec's own."""
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecErrors([SpecError("(spec)", data, "an attach spec is an object: ssh, slurm_conf, python, setup, "
                                                    "jobs_root, poll_interval (all optional)")], "attach spec")
    if display_name is not None:
        data = {**{k: v for k, v in data.items() if k not in ("display_name", "displayName")},
                "display_name": display_name}
    try:
        return AttachSpec.model_validate(data)
    except ValidationError as e:
        raise SpecErrors(spec_errors(e.errors(), AttachSpec), "attach spec") from None

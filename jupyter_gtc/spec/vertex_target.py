"""The Vertex target: where the ``vertex`` backend sends jobs (Vertex AI's CustomJobs), in
place of a Slurm cluster. Nothing in it creates anything: it names a project, a region, a
staging bucket (where job folders, scripts and logs go) and, for tests and the local Vertex
endpoint, the API to talk to.

    display_name: vertex
    project: my-project                 # else gtc config vertex.project, $GOOGLE_CLOUD_PROJECT, gcloud's
    region: us-central1                 # else gtc config vertex.region, $CLOUD_ML_REGION, gcloud's
    staging_bucket: gs://my-bucket/gtc  # else gtc config vertex.staging_bucket
    api_endpoint: local                 # the local Vertex endpoint (``gtc vertex serve``); default: Google's
    image: us-docker.pkg.dev/...        # the jobs' container image; default: Vertex's prebuilt PyTorch one
    machine_type: n1-standard-8         # a job's machine without --partition (--machine-type)

Fields left out are filled when the target is attached (``backends/vertex.py``), from the
places a Google Cloud user has them already; the record keeps what was resolved, never a
credential or the local endpoint's token (read from its owner-only file at each connection).
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ..exceptions import SpecError, SpecErrors
from ..state import config
from .cluster import checked_display_name, parse_spec_text
from .errors import spec_errors

DEFAULT_NAME = "vertex"
DEFAULT_POLL_INTERVAL = 5.0  # seconds between two lists of the target's jobs; Vertex's read quota is per minute
LOCAL_RE = re.compile(r"local(?::([0-9]{1,5}))?")


class VertexTarget(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    display_name: str = DEFAULT_NAME
    project: str | None = None
    region: str | None = None
    staging_bucket: str | None = None
    api_endpoint: str | None = None
    image: str | None = None
    machine_type: str | None = None
    poll_interval: float = Field(default=DEFAULT_POLL_INTERVAL, ge=0.5, le=600)

    @field_validator("display_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return checked_display_name(value)

    @field_validator("project")
    @classmethod
    def _project(cls, value: str | None) -> str | None:
        if value is not None and not config.PROJECT_RE.fullmatch(value):
            raise ValueError(config.VALID_PROJECT)
        return value

    @field_validator("region")
    @classmethod
    def _region(cls, value: str | None) -> str | None:
        if value is not None and not config.REGION_RE.fullmatch(value):
            raise ValueError(config.VALID_REGION)
        return value

    @field_validator("staging_bucket")
    @classmethod
    def _bucket(cls, value: str | None) -> str | None:
        if value is not None and not config.BUCKET_RE.fullmatch(value):
            raise ValueError(config.VALID_BUCKET)
        return value.rstrip("/") if value else value

    @field_validator("api_endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        if value is not None and not config.API_ENDPOINT_RE.fullmatch(value):
            raise ValueError(config.VALID_API_ENDPOINT)
        return value

    @field_validator("machine_type")
    @classmethod
    def _machine(cls, value: str | None) -> str | None:
        if value is not None and not config.MACHINE_TYPE_RE.fullmatch(value):
            raise ValueError(config.VALID_MACHINE_TYPE)
        return value

    @property
    def name(self) -> str:
        return self.display_name

    def to_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True)


def split_bucket(uri: str) -> tuple[str, str]:
    """``gs://b/some/folder`` -> ("b", "some/folder")."""
    bucket, _, folder = uri.removeprefix("gs://").partition("/")
    return bucket, folder.strip("/")


def local_port(api_endpoint: str | None) -> int | None | bool:
    """For ``local:PORT``, PORT; for ``local``, None (the only local endpoint); else False."""
    match = LOCAL_RE.fullmatch(api_endpoint or "")
    if match is None:
        return False
    return int(match[1]) if match[1] else None


def parse_vertex_target(data: Any, display_name: str | None = None) -> VertexTarget:
    """Validate ``data`` (a dict, or JSON/YAML text; empty for every default) into a
    ``VertexTarget``; ``display_name``, when given, replaces the spec's own."""
    if isinstance(data, VertexTarget):
        return data if display_name is None else data.model_copy(update={"display_name": display_name})
    if isinstance(data, (str, bytes)):
        data = parse_spec_text(data.decode() if isinstance(data, bytes) else data)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecErrors([SpecError("(spec)", data, "a Vertex target is an object: project, region, "
                                                    "staging_bucket, api_endpoint, image, machine_type, "
                                                    "poll_interval (all optional)")], "Vertex target")
    data = {("display_name" if k == "displayName" else k): v for k, v in data.items()}
    if display_name is not None:
        data = {**data, "display_name": display_name}
    try:
        return VertexTarget.model_validate(data)
    except ValidationError as e:
        raise SpecErrors(spec_errors(e.errors(), VertexTarget), "Vertex target") from None

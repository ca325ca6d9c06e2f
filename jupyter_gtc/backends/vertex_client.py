"""How the ``vertex`` backend reaches Vertex AI and Cloud Storage: a target's settings resolved
from the usual places, and the official clients made from them.

Resolution, first found wins: the target's own field, ``gtc config`` (``vertex.*``), the
environment (``GOOGLE_CLOUD_PROJECT``, ``CLOUD_ML_REGION``, gcloud's ``CLOUDSDK_*``), then
gcloud's active configuration (its files are read; gcloud itself is not run). A missing
piece is ``SettingMissing``, saying each way to set it.

Credentials are never ours to keep: Google's application default credentials (``gcloud auth
application-default login``, a service account on a VM) for Vertex AI itself; for the local
Vertex endpoint (``api_endpoint: local``) none: it knows its own user's calls by their
connection (``vertex/guard.py``), so no secret is in a URL, the state store, a settings
file, a log or an error. Its port is read from its owner-only record at each connection.
"""

from __future__ import annotations

import configparser
import functools
import os
import threading
from pathlib import Path
from typing import Any

from ..exceptions import GtcError, SettingMissing
from ..spec.vertex_target import VertexTarget, local_port
from ..state import config
from ..vertex.local_endpoint import LocalEndpoint, running

# What a local endpoint's target takes where nothing is set: what %gtc_vertex_local names.
LOCAL_DEFAULTS = {"project": "local-project", "region": "us-central1", "staging_bucket": "gs://local-bucket"}
HOW = {
    "project": "`gtc config set vertex.project PROJECT`, or set GOOGLE_CLOUD_PROJECT, or `gcloud config set "
               "project PROJECT`, or give project in the Vertex target",
    "region": "`gtc config set vertex.region REGION` (us-central1, europe-west4, ...), or set CLOUD_ML_REGION, or "
              "`gcloud config set ai/region REGION`, or give region in the Vertex target",
    "staging_bucket": "`gtc config set vertex.staging_bucket gs://BUCKET` (a bucket of the project, in its region: "
                      "`gcloud storage buckets create gs://BUCKET --location=REGION`), or give staging_bucket in "
                      "the Vertex target",
}


def resolve(target: VertexTarget, home: Path) -> dict[str, Any]:
    """The target with every piece filled in (what the backend keeps in its ``runtime``)."""
    settings = config.load(home)
    gcloud = _gcloud_properties()
    endpoint = target.api_endpoint or settings.get("vertex.api_endpoint")
    local = local_port(endpoint) is not False

    def first(field: str, *more: str | None) -> str | None:
        found = next((v for v in (getattr(target, field), settings.get(f"vertex.{field}"), *more) if v), None)
        if found is None and local and field in LOCAL_DEFAULTS:
            return LOCAL_DEFAULTS[field]
        if found is None and field in HOW:
            raise SettingMissing(f"vertex.{field}", HOW[field])
        return found

    resolved = {
        "name": target.name,
        "project": first("project", os.environ.get("GOOGLE_CLOUD_PROJECT"), os.environ.get("CLOUDSDK_CORE_PROJECT"),
                         gcloud.get(("core", "project"))),
        "region": first("region", os.environ.get("CLOUD_ML_REGION"), os.environ.get("CLOUDSDK_AI_REGION"),
                        gcloud.get(("ai", "region")), os.environ.get("CLOUDSDK_COMPUTE_REGION"),
                        gcloud.get(("compute", "region"))),
        "staging_bucket": first("staging_bucket").rstrip("/"),
        "api_endpoint": endpoint,
        # The job defaults stay the target's own: the settings' are read at each job (job_default).
        "image": target.image,
        "machine_type": target.machine_type,
        "poll_interval": target.poll_interval,
    }
    for key, pattern, valid in (("project", config.PROJECT_RE, config.VALID_PROJECT),
                                ("region", config.REGION_RE, config.VALID_REGION),
                                ("staging_bucket", config.BUCKET_RE, config.VALID_BUCKET)):
        if not pattern.fullmatch(resolved[key]):
            from ..exceptions import SpecError

            raise SpecError(f"vertex.{key}", resolved[key], f"{valid} (found where it was set: the target, "
                                                            f"gtc config, the environment or gcloud's configuration)")
    return {k: v for k, v in resolved.items() if v is not None}


def job_default(runtime: dict[str, Any], home: Path, field: str) -> str | None:
    """A job's ``machine_type`` or ``image`` when it names none: the target's, else the setting
    of now (``gtc config set vertex.machine_type ...`` applies to the next job)."""
    return runtime.get(field) or config.load(home).get(f"vertex.{field}")


def _gcloud_properties() -> dict[tuple[str, str], str]:
    """gcloud's active configuration, as (section, name) -> value; {} without gcloud."""
    root = Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
    try:
        active = os.environ.get("CLOUDSDK_ACTIVE_CONFIG_NAME") or (root / "active_config").read_text().strip()
    except OSError:
        active = "default"
    parser = configparser.ConfigParser()
    try:
        parser.read(root / "configurations" / f"config_{active or 'default'}")
    except configparser.Error:
        return {}
    return {(s, k): v.strip() for s in parser.sections() for k, v in parser.items(s) if v.strip()}


def local_endpoint(runtime: dict[str, Any], home: Path) -> LocalEndpoint | None:
    """The running local endpoint a ``local`` target names (None for Google's own API)."""
    port = local_port(runtime.get("api_endpoint"))
    if port is False:
        return None
    found = running(home, port if port else None)
    if not found:
        where = f" on port {port}" if port else ""
        raise GtcError(f"no local Vertex endpoint runs{where} (the target's api_endpoint is "
                       f"{runtime.get('api_endpoint')!r}): start one with `gtc vertex serve --cluster CLUSTER` or "
                       f"%gtc_vertex_local in a notebook")
    if len(found) > 1:  # never a guess: each serves its own cluster
        raise GtcError(f"{len(found)} local Vertex endpoints run ("
                       + ", ".join(f"port {e.port} for cluster {e.cluster}" for e in found)
                       + "); name one in the target's api_endpoint: local:PORT")
    return found[0]


def parent(runtime: dict[str, Any]) -> str:
    return f"projects/{runtime['project']}/locations/{runtime['region']}"


_FIND = object()
_job_clients: dict[str, Any] = {}
_lock = threading.Lock()


def job_client(runtime: dict[str, Any], home: Path, endpoint: Any = _FIND):
    """A ``JobServiceClient`` (REST) for the target: the local endpoint (``endpoint``, found
    when not given), or the region's Vertex AI API with the application default credentials."""
    from google.cloud import aiplatform_v1

    if endpoint is _FIND:
        endpoint = local_endpoint(runtime, home)
    if endpoint is not None:
        from google.auth.credentials import AnonymousCredentials

        # http:// keeps plain HTTP on loopback; no credentials: the endpoint knows this user's calls.
        return aiplatform_v1.JobServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                              client_options={"api_endpoint": endpoint.api_endpoint})
    api = runtime.get("api_endpoint") or f"{runtime['region']}-aiplatform.googleapis.com"
    with _lock:  # one per API per process: each poll would otherwise open a new session
        if api not in _job_clients:
            _job_clients[api] = aiplatform_v1.JobServiceClient(credentials=_credentials(), transport="rest",
                                                               client_options={"api_endpoint": api})
        return _job_clients[api]


def model_client(runtime: dict[str, Any], home: Path):
    """A ``ModelServiceClient`` (REST) for the target's Model Registry, as ``job_client``."""
    from google.cloud import aiplatform_v1

    endpoint = local_endpoint(runtime, home)
    if endpoint is not None:
        from google.auth.credentials import AnonymousCredentials

        return aiplatform_v1.ModelServiceClient(credentials=AnonymousCredentials(), transport="rest",
                                                client_options={"api_endpoint": endpoint.api_endpoint})
    api = runtime.get("api_endpoint") or f"{runtime['region']}-aiplatform.googleapis.com"
    return aiplatform_v1.ModelServiceClient(credentials=_credentials(), transport="rest",
                                            client_options={"api_endpoint": api})


def storage_client(runtime: dict[str, Any], home: Path):
    """A ``google.cloud.storage.Client`` for the target's buckets: the local endpoint's
    storage emulator, or Cloud Storage with the application default credentials."""
    from google.cloud import storage

    endpoint = local_endpoint(runtime, home)
    if endpoint is not None:
        from google.auth.credentials import AnonymousCredentials

        return storage.Client(project=runtime["project"], credentials=AnonymousCredentials(),
                              client_options={"api_endpoint": endpoint.storage_host})
    return storage.Client(project=runtime["project"], credentials=_credentials())


@functools.lru_cache(maxsize=1)
def _credentials():
    """The application default credentials, found once per process (they refresh themselves)."""
    import google.auth
    from google.auth.exceptions import DefaultCredentialsError

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except DefaultCredentialsError:
        raise GtcError("no Google Cloud credentials here: run `gcloud auth application-default login` (or set "
                       "GOOGLE_APPLICATION_CREDENTIALS to a service account's key file)") from None
    return credentials

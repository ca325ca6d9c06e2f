"""A registered version exported to Vertex AI's Model Registry: its files uploaded to the
target's staging bucket, then ``ModelService.UploadModel`` (what the SDK's ``Model.upload``
calls) through the ``vertex`` backend's client (``backends/vertex_client.py``), as a new
version of the Vertex model of the same display name where there is one (``parent_model``).

The target is a Vertex target (a cluster of backend ``vertex``): Google's API, or a local
Vertex endpoint (whose registry is ours: there the export is a new version of the model
itself, its files in the local bucket). The Google Cloud libraries are imported here, when an
export runs, never at import.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..backends import vertex_client
from ..exceptions import SpecError
from ..registry.rules import DEFAULT_ALIAS

if TYPE_CHECKING:
    from .models import Model

UPLOAD_TIMEOUT = 600.0  # seconds the upload's operation may take (Vertex's copies the files)


@dataclass(frozen=True)
class Exported:
    """Where a version went: the Vertex model's resource name, its version there, its files."""

    resource_name: str
    version_id: str
    artifact_uri: str

    def __str__(self) -> str:
        return f"{self.resource_name}@{self.version_id}"


def export_to_vertex(model: "Model", target: str | None = None, display_name: str | None = None,
                     serving_container_image_uri: str | None = None, is_default_version: bool = True) -> Exported:
    """Upload ``model`` (one version) to ``target``'s Model Registry; see ``Model.export_to_vertex``."""
    from google.cloud.aiplatform_v1 import types as vx

    clusters = model._service.jobs.clusters
    runtime = _target(clusters.store, target)
    record = model.record
    source = record.artifact_uri
    if not source.startswith("gs://") and not Path(source).is_dir():
        raise SpecError("artifact_uri", source, f"{model.name}@{model.version}'s files are not a folder here (a "
                                                f"cluster host's): register it again with copy=True, then export "
                                                f"that version")
    name = display_name or model.name
    if '"' in name or "\\" in name:  # it is quoted in the list's filter
        raise SpecError("display_name", name, "a display name without '\"' or '\\'")
    container = serving_container_image_uri or _container_image(record.lineage)
    parent = vertex_client.parent(runtime)
    client = vertex_client.model_client(runtime, clusters.home)
    found = list(client.list_models(request={"parent": parent, "filter": f'display_name="{name}"'}))
    artifact_uri = source if source.startswith("gs://") else _upload_folder(
        vertex_client.storage_client(runtime, clusters.home), runtime["staging_bucket"], Path(source), name,
        model.version)
    aliases = [a for a in record.aliases if a != DEFAULT_ALIAS] + ([DEFAULT_ALIAS] if is_default_version else [])
    resource = vx.Model(display_name=name, description=record.description, artifact_uri=artifact_uri,
                        labels=record.labels, version_aliases=aliases,
                        version_description=f"jupyter_gtc {model.name}@{model.version}")
    if container:
        resource.container_spec = vx.ModelContainerSpec(image_uri=container)
    request: dict[str, Any] = {"parent": parent, "model": resource}
    if found:
        request["parent_model"] = found[0].name.partition("@")[0]
    answer = client.upload_model(request=request).result(timeout=UPLOAD_TIMEOUT)
    return Exported(answer.model, answer.model_version_id, artifact_uri)


def _target(store: Any, target: str | None) -> dict[str, Any]:
    """The runtime (project, region, bucket, api_endpoint) of Vertex target ``target``, or of
    the only one attached."""
    targets = [c for c in store.list_clusters() if c.backend == "vertex"]
    if target is None:
        if len(targets) != 1:
            raise SpecError("target", None, "the Vertex target to export to: "
                                            + (", ".join(c.name for c in targets) if targets else
                                               "none is attached (gtc.clusters.attach_vertex(...), or "
                                               "%gtc_vertex_local for the local endpoint)"))
        return targets[0].runtime
    chosen = [c for c in targets if c.name == target]
    if not chosen:
        raise SpecError("target", target, "a Vertex target (a cluster of backend vertex): "
                                          + (", ".join(c.name for c in targets) or "none is attached"))
    return chosen[0].runtime


def _container_image(lineage: dict[str, Any]) -> str | None:
    origin = (lineage or {}).get("origin") or {}
    return ((origin.get("container_spec") or {}).get("imageUri")) if isinstance(origin, dict) else None


def _upload_folder(storage: Any, bucket_uri: str, folder: Path, name: str, version: int) -> str:
    """``folder``'s files under ``<bucket>/jupyter_gtc/models/<name>/<version>-<time>/``; the
    folder's gs:// URI. A link is uploaded as the file it names only inside ``folder``."""
    bucket_name, _, prefix = bucket_uri.removeprefix("gs://").partition("/")
    base = "/".join(p for p in (prefix, "jupyter_gtc", "models", name, f"{version}-{time.strftime('%Y%m%d%H%M%S')}")
                    if p)
    bucket = storage.bucket(bucket_name)
    root = folder.resolve()
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or root not in path.resolve().parents:
            continue  # a link out of the model's folder is not the model's
        bucket.blob(f"{base}/{path.relative_to(folder).as_posix()}").upload_from_filename(str(path))
    return f"gs://{bucket_name}/{base}"

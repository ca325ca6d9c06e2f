"""Where a program writes what Vertex AI's ``AIP_*`` variables name. Vertex gives them as
``gs://`` URIs when a job has a ``base_output_directory`` (the SDK always sets one); a program
writes them through Cloud Storage FUSE, which mounts every bucket at ``/gcs/``. The local
Vertex endpoint's buckets are folders, ``GTC_GCS_MOUNT`` says where."""

from __future__ import annotations

import os
from pathlib import Path

from ..hosts.gcs import split_uri

FUSE_ROOT = "/gcs"  # where Vertex AI mounts Cloud Storage in every job


def output_path(value: str) -> Path:
    """A folder given as a path as it is; ``gs://bucket/object`` where FUSE mounts it."""
    if value.startswith("gs://"):
        bucket, name = split_uri(value)  # gs:///etc/x or gs://b/../x: refused, naming the URI
        return Path(os.environ.get("GTC_GCS_MOUNT") or FUSE_ROOT) / bucket / name
    return Path(value)

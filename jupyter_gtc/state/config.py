"""``gtc config``: a user's settings, one JSON file in ``$GTC_HOME`` (``config.json``).

Only the keys below exist; each says what it is for, and a value is checked when it is set,
so a typo is refused then, not when a job is sent. No secret belongs here: credentials come
from Google's own places (application default credentials, ``gcloud auth``), and the local
Vertex endpoint's token from its owner-only file.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..exceptions import SpecError
from .store import make_home

# The shapes Google Cloud gives these (one copy: spec/vertex_target.py validates with them too).
PROJECT_RE = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
REGION_RE = re.compile(r"[a-z]+-[a-z]+[0-9]+")
BUCKET_RE = re.compile(r"gs://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(/[^\r\n]*)?")
# 'local' / 'local:PORT' is the local Vertex endpoint; otherwise a host, never a path (a token
# in a path must not be written into a settings file).
API_ENDPOINT_RE = re.compile(r"local(:[0-9]{1,5})?|(https?://)?[A-Za-z0-9.-]+(:[0-9]{1,5})?")
MACHINE_TYPE_RE = re.compile(r"[a-z][a-z0-9]*-[a-z0-9-]+")

VALID_PROJECT = "a Google Cloud project id: 6 to 30 lowercase letters, digits and hyphens, starting with a letter"
VALID_REGION = "a Google Cloud region such as us-central1 or europe-west4"
VALID_BUCKET = "gs://BUCKET or gs://BUCKET/FOLDER, where the jobs' folders go"
VALID_API_ENDPOINT = ("'local' or 'local:PORT' for the local Vertex endpoint (gtc vertex serve), or a host such as "
                      "europe-west4-aiplatform.googleapis.com (no path)")
VALID_MACHINE_TYPE = "a machine type such as n2-standard-8 or a3-highgpu-8g"


@dataclass(frozen=True)
class Key:
    name: str
    help: str
    pattern: re.Pattern
    valid: str

    def check(self, value: str) -> None:
        if not isinstance(value, str) or not self.pattern.fullmatch(value):
            raise SpecError(self.name, value, self.valid)


KEYS: dict[str, Key] = {k.name: k for k in (
    Key("vertex.project", "the Google Cloud project of Vertex AI jobs", PROJECT_RE, VALID_PROJECT),
    Key("vertex.region", "the region of Vertex AI jobs", REGION_RE, VALID_REGION),
    Key("vertex.staging_bucket", "where Vertex AI jobs' folders, scripts and logs go", BUCKET_RE, VALID_BUCKET),
    Key("vertex.api_endpoint", "the Vertex AI API to talk to (default: the region's own)", API_ENDPOINT_RE,
        VALID_API_ENDPOINT),
    Key("vertex.image", "the container image Vertex AI jobs run in when a job names none",
        re.compile(r"[^\s]+"), "an image URI, without spaces"),
    Key("vertex.machine_type", "a Vertex AI job's machine type when it names none", MACHINE_TYPE_RE,
        VALID_MACHINE_TYPE),
    Key("vertex.ssh_config", "the ssh config whose Host entries reach training clusters' login nodes by instance "
        "name, as `gcloud compute config-ssh` writes them (default: ssh's own, ~/.ssh/config)",
        re.compile(r"/[^\n\0]*"), "an absolute path of an ssh config file"),
)}


def config_file(home: Path) -> Path:
    return Path(home) / "config.json"


def load(home: Path) -> dict[str, str]:
    """Every setting that is set (keys this version does not know are kept in the file, unused)."""
    path = config_file(home)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except ValueError as e:
        raise SpecError("config", str(path), f"a JSON object of settings; fix or remove the file ({e})") from None
    if not isinstance(data, dict):
        raise SpecError("config", str(path), "a JSON object of settings; fix or remove the file")
    return {k: v for k, v in data.items() if k in KEYS and isinstance(v, str)}


def get(home: Path, key: str) -> str | None:
    _key(key)
    return load(home).get(key)


def set_value(home: Path, key: str, value: str) -> None:
    _key(key).check(value)
    _save(home, {**_raw(home), key: value})


def unset(home: Path, key: str) -> None:
    _key(key)
    _save(home, {k: v for k, v in _raw(home).items() if k != key})


def _key(key: str) -> Key:
    if key not in KEYS:
        import difflib

        close = difflib.get_close_matches(key, list(KEYS), n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise SpecError("key", key, f"one of {', '.join(KEYS)}{hint}")
    return KEYS[key]


def _raw(home: Path) -> dict[str, object]:
    load(home)  # refuses a broken file before it is overwritten
    try:
        return json.loads(config_file(home).read_text())
    except FileNotFoundError:
        return {}


def _save(home: Path, values: dict[str, object]) -> None:
    """Whole or not at all: a reader sees the old file or the new one."""
    path = config_file(home)
    make_home(path.parent)
    partial = path.with_name(f".{path.name}.{os.getpid()}.partial")
    partial.write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)


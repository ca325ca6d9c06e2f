"""``gtc config``: the vertex backend's settings, set, read, listed and forgotten through the
command as a user runs it (a separate process) and through ``api``; a bad key or value is
refused naming it, and nothing is written."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecError
from tests.test_cli import gtc


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("GTC_HOME", str(tmp_path))
    return tmp_path


def test_set_get_list_unset_round_trip(home):
    assert gtc("config", "set", "vertex.project", "my-proj-1").returncode == 0
    assert gtc("config", "set", "vertex.staging_bucket", "gs://my-bucket/gtc").returncode == 0
    assert gtc("config", "get", "vertex.project").stdout == "my-proj-1\n"
    listed = gtc("config", "list").stdout
    assert "vertex.project" in listed and "my-proj-1" in listed and "gs://my-bucket/gtc" in listed
    assert api.get_config("vertex.staging_bucket") == "gs://my-bucket/gtc"  # the same file, read by the api
    assert {r["key"]: r["value"] for r in api.list_config()}["vertex.region"] is None
    assert gtc("config", "unset", "vertex.project").returncode == 0
    assert gtc("config", "get", "vertex.project").stdout == "\n"
    assert json.loads((home / "config.json").read_text()) == {"vertex.staging_bucket": "gs://my-bucket/gtc"}


def test_a_misspelled_key_is_refused_with_the_keys_there_are(home):
    result = gtc("config", "set", "vertex.projet", "my-proj-1")
    assert result.returncode == 1
    assert "'vertex.projet' is not valid" in result.stderr and "did you mean vertex.project?" in result.stderr
    assert "vertex.staging_bucket" in result.stderr and "Traceback" not in result.stderr
    assert not (home / "config.json").exists()


@pytest.mark.parametrize("key, value, valid", [
    ("vertex.region", "US", "a Google Cloud region such as us-central1"),
    ("vertex.project", "P", "a Google Cloud project id"),
    ("vertex.staging_bucket", "my-bucket", "gs://BUCKET"),
    ("vertex.api_endpoint", "http://127.0.0.1:8480/SECRET", "no path"),
])
def test_a_bad_value_is_refused_naming_key_value_and_what_is_valid(home, key, value, valid):
    with pytest.raises(SpecError) as info:
        api.set_config(key, value)
    assert (info.value.field, info.value.value) == (key, value) and valid in str(info.value)
    assert api.get_config(key) is None


def test_a_broken_file_is_named_not_overwritten(home):
    (home / "config.json").write_text("[1, 2")
    result = gtc("config", "set", "vertex.region", "us-central1")
    assert result.returncode == 1 and "config.json" in result.stderr and "fix or remove the file" in result.stderr
    assert (home / "config.json").read_text() == "[1, 2"

"""What a prediction request may hold (serving/contract.py) and the replica's clean environment
(serving/replica.py): pure functions, no cluster."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc.serving.contract import (MAX_INSTANCES, BadRequest, Instance, container_env, parse_lm_instances,
                                          routes)
from jupyter_gtc.serving.replica import clean_env


def body(instances) -> bytes:
    return json.dumps({"instances": instances}).encode()


def test_instances_are_read_with_defaults_and_the_sdks_floats():
    assert parse_lm_instances(body([{"prompt": "a"}, {"prompt": "b", "max_tokens": 32.0}])) == \
        [Instance("a", 16), Instance("b", 32)]


@pytest.mark.parametrize("raw, field", [
    (b"{", "body"), (b'{"instances": 3}', "instances"), (body([]), "instances"),
    (body([{"prompt": "a"}] * (MAX_INSTANCES + 1)), "instances"), (body(["text"]), "instances[0]"),
    (body([{"prompt": ""}]), "instances[0].prompt"), (body([{"prompt": "a", "max_tokens": 0}]), "instances[0].max_tokens"),
    (body([{"prompt": "a", "max_tokens": 2.5}]), "instances[0].max_tokens"),
    (body([{"prompt": "a", "max_tokens": True}]), "instances[0].max_tokens"),
    (body([{"prompt": "a"}, {"prompt": "b", "temperature": 1}]), "instances[1].temperature"),
])
def test_a_bad_request_names_its_field(raw, field):
    with pytest.raises(BadRequest) as e:
        parse_lm_instances(raw)
    assert e.value.field == field


def test_the_container_contract_and_a_clean_environment():
    env = container_env(port=8080, storage_uri="/m", endpoint_id="12", deployed_model_id="34", model_name="tiny",
                        bind="127.0.0.1", token_file="/f")
    assert (env["AIP_HEALTH_ROUTE"], env["AIP_PREDICT_ROUTE"]) == routes("12", "34")
    assert env["AIP_MODE"] == "PREDICTION" and env["AIP_HTTP_PORT"] == "8080" and env["AIP_STORAGE_URI"] == "/m"
    given = {"PATH": "/bin", "SLURM_JOB_ID": "7", "JUPYTER_TOKEN": "secret", "AWS_SECRET_ACCESS_KEY": "k"}
    assert clean_env(given, env) == {"PATH": "/bin", "SLURM_JOB_ID": "7", **env}

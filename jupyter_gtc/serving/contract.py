"""Vertex AI's serving container contract, and what a prediction request may hold: pure
functions, shared by the replica's server (``lm_server.py``), the endpoint's front
(``front.py``) and the service that deploys them (``services/endpoints.py``).

A replica's server learns everything from its environment, as a Vertex custom container does:
``AIP_HTTP_PORT``, ``AIP_HEALTH_ROUTE``, ``AIP_PREDICT_ROUTE``, ``AIP_STORAGE_URI`` (the
artifacts), ``AIP_DEPLOYED_MODEL_ID``, ``AIP_ENDPOINT_ID``, ``AIP_MODEL_NAME``,
``AIP_MODE=PREDICTION``; so a user's server written for Vertex runs here unchanged. Ours adds
``GTC_SERVING_HOST`` (the address to bind) and ``GTC_SERVING_TOKEN_FILE`` (a 0600 file holding
the token the front shows in an ``Authorization: Bearer`` header: never in argv or a URL).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_REQUEST_BYTES = 1_500_000  # Vertex's limit on a shared endpoint's request (1.5 MB)
MAX_INSTANCES = 64  # per request: a batch is the server's to form, not one caller's to fill
MAX_TOKENS_LIMIT = 1024
DEFAULT_MAX_TOKENS = 16
TOKEN_HEADER = "Authorization"


class BadRequest(ValueError):
    """A prediction request that is not valid: ``field`` and the reason (a 400 answer)."""

    def __init__(self, field: str, message: str):
        self.field = field
        super().__init__(f"{field}: {message}")


@dataclass(frozen=True)
class Instance:
    prompt: str
    max_tokens: int


def routes(endpoint_id: str, deployed_model_id: str) -> tuple[str, str]:
    """(health, predict) routes as Vertex gives them to a custom container."""
    return (f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_model_id}",
            f"/v1/endpoints/{endpoint_id}/deployedModels/{deployed_model_id}:predict")


def container_env(*, port: int, storage_uri: str, endpoint_id: str, deployed_model_id: str, model_name: str,
                  bind: str, token_file: str) -> dict[str, str]:
    health, predict = routes(endpoint_id, deployed_model_id)
    return {"AIP_HTTP_PORT": str(port), "AIP_HEALTH_ROUTE": health, "AIP_PREDICT_ROUTE": predict,
            "AIP_STORAGE_URI": storage_uri, "AIP_DEPLOYED_MODEL_ID": deployed_model_id,
            "AIP_ENDPOINT_ID": endpoint_id, "AIP_MODEL_NAME": model_name, "AIP_MODE": "PREDICTION",
            "GTC_SERVING_HOST": bind, "GTC_SERVING_TOKEN_FILE": token_file}


def parse_body(body: bytes) -> list[Any]:
    """The ``instances`` of a predict request's JSON body (any JSON values: the front does not
    judge what a user's server takes)."""
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest("body", f"is not JSON ({e}); send {{\"instances\": [...]}}") from None
    if not isinstance(data, dict) or not isinstance(data.get("instances"), list):
        raise BadRequest("instances", "give a list: {\"instances\": [{\"prompt\": \"...\", \"max_tokens\": 16}]}")
    if not data["instances"]:
        raise BadRequest("instances", "is empty; give at least one instance")
    if len(data["instances"]) > MAX_INSTANCES:
        raise BadRequest("instances", f"{len(data['instances'])} instances; at most {MAX_INSTANCES} per request")
    return data["instances"]


def parse_lm_instances(body: bytes) -> list[Instance]:
    """What our causal-LM server takes: ``{"instances": [{"prompt": TEXT, "max_tokens": N}]}``;
    ``max_tokens`` 1 to 1024, 16 when left out. Integers may arrive as floats (protobuf's
    ``Value`` turns ``32`` into ``32.0`` on the SDK's way), so a whole float is taken."""
    found = []
    for i, item in enumerate(parse_body(body)):
        if not isinstance(item, dict):
            raise BadRequest(f"instances[{i}]", f"is {type(item).__name__}; give an object "
                                                "{\"prompt\": \"...\", \"max_tokens\": 16}")
        prompt = item.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            raise BadRequest(f"instances[{i}].prompt", f"{prompt!r} is not valid; give non-empty text")
        unknown = sorted(set(item) - {"prompt", "max_tokens"})
        if unknown:
            raise BadRequest(f"instances[{i}].{unknown[0]}", "is not a field; an instance has prompt and max_tokens")
        tokens = item.get("max_tokens", DEFAULT_MAX_TOKENS)
        if isinstance(tokens, float) and tokens.is_integer():
            tokens = int(tokens)
        if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS_LIMIT:
            raise BadRequest(f"instances[{i}].max_tokens", f"{tokens!r} is not valid; give a whole number from 1 "
                                                           f"to {MAX_TOKENS_LIMIT}")
        found.append(Instance(prompt, tokens))
    return found


def error_body(code: int, message: str) -> bytes:
    status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
              413: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(code, "INTERNAL")
    return json.dumps({"error": {"code": code, "message": message, "status": status}}).encode()

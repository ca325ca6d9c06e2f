"""A deploy runs a program on the cluster's nodes (our LM server on the model's files, or the
body's ``command``), as a requeue runs a job's script again: the Authorizer's "execute" is asked
as well as "write". An alias move runs nothing and still needs only "write"."""

from __future__ import annotations

import json

from jupyter_gtc import api
from tests.server.api_client import answer


def test_a_deploy_needs_execute_and_an_alias_move_does_not(authz_server, policy, tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_text("w")
    api.register_model(artifact_uri=str(folder), model="authz-model")
    api.register_model(artifact_uri=str(folder), model="authz-model")
    try:
        policy("execute")
        body = json.dumps({"cluster": "nowhere", "command": ["/bin/true"]}).encode()
        status, _, reply = answer(authz_server, "POST", "gtc/api/models/authz-model%401/deploy", body=body)
        assert status == 403 and "not authorized to execute" in reply["message"], reply
        assert api.get_model("authz-model@1").deployment is None
        status, _, reply = answer(authz_server, "POST", "gtc/api/models/authz-model%401/aliases",
                                  body=b'{"aliases": ["prod"]}')
        assert status == 200 and reply["versions"][0]["aliases"] == ["default", "prod"], reply

        policy()  # "execute" allowed: the deploy reaches the api, which names what is wrong
        status, _, reply = answer(authz_server, "POST", "gtc/api/models/authz-model%401/deploy", body=body)
        assert status == 404 and "nowhere" in reply["message"], reply
    finally:
        api.delete_model("authz-model")

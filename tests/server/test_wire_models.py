"""The Models section's TypeScript (labextension/src/api.ts) mirrors the registry's JSON field by
field, as tests/server/test_wire_types.py checks a job's: a field added or dropped on one side
only fails here. (The endpoint's, IEndpoint, is checked in tests/browser/test_models_section.py,
against a real deployment.)"""

from __future__ import annotations

from jupyter_gtc import api
from jupyter_gtc.server.handlers_models import models_json
from jupyter_gtc.serving.traffic import summarize
from tests.server.test_wire_types import interface_fields


def test_the_registrys_json_is_what_the_models_section_reads(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_text("w")
    model = api.register_model(artifact_uri=str(folder), model="wire-model", alias="prod")
    whole = model.to_json()
    assert set(whole) == interface_fields("IModel")
    assert set(whole["versions"][0]) == interface_fields("IModelVersion")
    assert set(whole["versions"][0]["lineage"]) <= interface_fields("ILineage")
    listed = next(m for m in models_json() if m["name"] == "wire-model")
    assert set(listed) == interface_fields("IModelSummary")
    assert set(listed["versions"][0]) == interface_fields("IModelVersionSummary")
    assert set(summarize([], 0.0)) == interface_fields("ITraffic")
    api.delete_model("wire-model")

"""``--backend vertex`` with a cluster spec: Vertex's id rule for a training cluster with a
slurm_spec (``^[a-z][a-z0-9]{0,9}$``, no hyphens) is checked before anything, naming the rule
and the id meant; the same spec is valid for a local cluster, whose names take hyphens."""

from __future__ import annotations

from pathlib import Path

import pytest

import jupyter_gtc
from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.spec.cluster import load_cluster_spec

EXAMPLE = Path(jupyter_gtc.__file__).parent / "examples" / "clusters" / "local-a3.yaml"


def test_a_hyphenated_cluster_id_is_refused_by_the_vertex_backend_only():
    text = EXAMPLE.read_text().replace("display_name: demo", "display_name: my-demo")
    with pytest.raises(SpecError) as refused:
        api.create_cluster(text, backend="vertex")
    assert refused.value.field == "display_name" and refused.value.value == "my-demo"
    assert "^[a-z][a-z0-9]{0,9}$" in str(refused.value) and "did you mean 'mydemo'" in str(refused.value)
    assert "my-demo" not in [c.name for c in api.list_clusters(with_status=False)]  # nothing recorded
    assert api.parse_spec(text, backend="local").name == "my-demo"  # a local cluster's name may have one
    with pytest.raises(SpecError) as refused:
        api.parse_spec(load_cluster_spec(EXAMPLE).to_vertex(), backend="vertex", display_name="vx-1")
    assert "did you mean 'vx1'" in str(refused.value)

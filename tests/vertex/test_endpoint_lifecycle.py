"""A local Vertex endpoint lives as long as its cluster: deleting the cluster stops it, and a
target that names no port (``api_endpoint: local``) is refused while several run, naming them,
rather than sent to whichever was found first (a deleted cluster's, in one CI run)."""

from __future__ import annotations

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import GtcError
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.slurm


def test_local_names_one_endpoint_and_a_deleted_clusters_endpoint_stops_with_it(slurm_available):
    endpoints = {}
    for name in ("vxa", "vxb"):
        api.create_cluster(small_gpu_spec(name, nodes=1, machine="n2-standard-4"))
        endpoints[name] = api.start_vertex_endpoint(name)
    try:
        with pytest.raises(GtcError) as refused:
            api.attach_vertex({"display_name": "vxlocal", "api_endpoint": "local"})
        for name, endpoint in endpoints.items():
            assert f"port {endpoint.port} for cluster {name}" in str(refused.value)
        assert "local:PORT" in str(refused.value)
        assert "vxlocal" not in [c.name for c in api.list_clusters(with_status=False)]

        api.delete_cluster("vxb")
        gone = endpoints["vxb"].process["pid"]
        assert not psutil.pid_exists(gone) or psutil.Process(gone).status() == psutil.STATUS_ZOMBIE
        assert api.find_vertex_endpoint(cluster="vxb") is None
        target = api.attach_vertex({"display_name": "vxlocal", "api_endpoint": "local"})  # the one left
        assert target.state == "RUNNING"
        api.detach_cluster("vxlocal")
    finally:
        for name in ("vxa", "vxb"):
            if name in [c.name for c in api.list_clusters(with_status=False)]:
                api.delete_cluster(name)
    assert api.find_vertex_endpoint() is None

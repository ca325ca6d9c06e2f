"""``gtc doctor`` (services/doctor.py) on what a user would want to know: here, an attached
cluster that keeps no accounting, and what that costs."""

from __future__ import annotations

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")


def test_doctor_names_an_attached_cluster_without_accounting_and_what_that_costs(tmp_path):
    plain = small_gpu_spec("plainslurm", nodes=1)
    plain["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": False}
    made = [api.create_cluster(plain).name]
    attached = []
    try:
        made.append(api.create_cluster(small_gpu_spec("acctslurm", nodes=1, accounting=None)).name)  # the default: on
        for name, local in (("noacct", "plainslurm"), ("withacct", "acctslurm")):
            api.attach_cluster({"display_name": name, "slurm_conf": api.cluster_env(local)["SLURM_CONF"],
                                "jobs_root": str(tmp_path / name)})
            attached.append(name)
        rows = {check: (ok, detail) for check, ok, detail in api.doctor()}
        ok, detail = rows["cluster noacct (attached): accounting"]
        assert not ok and "UNKNOWN" in detail and "slurmdbd" in detail
        assert not [check for check in rows if "withacct" in check]  # one that keeps accounting is fine
        assert not [check for check in rows if "slurm " in check]  # local clusters: their spec says
    finally:
        for name in attached:
            api.detach_cluster(name)
        for name in made:
            api.delete_cluster(name)
    assert not [check for check, _, _ in api.doctor() if check.startswith("cluster ")]

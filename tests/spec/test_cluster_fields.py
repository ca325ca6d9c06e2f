"""The spec fields a backend applies to its nodes (scheduling, storage mount paths): parsed,
checked and turned into slurm.conf settings without any daemon."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import small_gpu_spec

SCHEDULING = "orchestrator_spec.slurm_spec.scheduling"


def with_scheduling(scheduling: dict) -> dict:
    spec = small_gpu_spec("sched")
    spec["orchestratorSpec"]["slurmSpec"]["scheduling"] = scheduling
    return spec


def with_storage(filestores=(), lustres=(), home=None) -> dict:
    spec = small_gpu_spec("storage")
    spec["nodePools"][0]["filestores"] = list(filestores)
    spec["nodePools"][0]["lustres"] = list(lustres)
    if home:
        spec["orchestratorSpec"]["slurmSpec"]["homeDirectoryStorage"] = home
    return spec


def problems(data) -> list[tuple[str, str]]:
    with pytest.raises(SpecErrors) as info:
        parse_cluster_spec(data)
    return [(e.field, e.expected) for e in info.value.errors]


def test_every_vertex_scheduling_field_maps_to_its_slurm_conf_parameter():
    spec = parse_cluster_spec(with_scheduling({
        "priorityType": "priority/multifactor", "priorityWeightAge": 1000, "priorityWeightAssoc": 1,
        "priorityWeightFairshare": 10000, "priorityWeightJobSize": 500, "priorityWeightPartition": 2000,
        "priorityWeightQos": 5000, "priorityWeightTres": "CPU=1000,Mem=2000,GRES/gpu=3000",
        "preemptType": "preempt/partition_prio", "preemptMode": "suspend,gang", "preemptExemptTime": "1:00:00",
    }))
    assert spec.slurm.scheduling.slurm_conf() == {
        "PriorityType": "priority/multifactor", "PriorityWeightAge": "1000", "PriorityWeightAssoc": "1",
        "PriorityWeightFairshare": "10000", "PriorityWeightJobSize": "500", "PriorityWeightPartition": "2000",
        "PriorityWeightQOS": "5000", "PriorityWeightTRES": "CPU=1000,Mem=2000,GRES/gpu=3000",
        "PreemptType": "preempt/partition_prio", "PreemptMode": "SUSPEND,GANG", "PreemptExemptTime": "1:00:00",
    }


def test_scheduling_round_trips_to_vertex_in_camel_case():
    spec = parse_cluster_spec(with_scheduling({"priority_type": "priority/basic", "preempt_mode": "REQUEUE"}))
    assert spec.to_vertex()["orchestratorSpec"]["slurmSpec"]["scheduling"] == {
        "priorityType": "priority/basic", "preemptMode": "REQUEUE"}
    assert parse_cluster_spec(spec.to_vertex()).slurm.scheduling == spec.slurm.scheduling


def test_an_unknown_scheduling_field_lists_the_known_ones():
    [(field, expected)] = problems(with_scheduling({"scheduler_type": "sched/builtin"}))
    assert field == f"{SCHEDULING}.scheduler_type"
    assert "priority_type" in expected and "preempt_mode" in expected


@pytest.mark.parametrize("scheduling, field", [
    ({"priority_type": "priority/fancy"}, "priority_type"),
    ({"preempt_type": "preempt/none PreemptMode=GANG"}, "preempt_type"),
    ({"preempt_mode": "REQUEUE\nSlurmUser=nobody"}, "preempt_mode"),
    ({"preempt_mode": "SOMETIMES"}, "preempt_mode"),
    ({"priority_weight_age": -1}, "priority_weight_age"),
    ({"priority_weight_tres": "CPU=1 # comment"}, "priority_weight_tres"),
    ({"preempt_exempt_time": "an hour"}, "preempt_exempt_time"),
])
def test_a_value_slurm_conf_could_not_hold_is_refused_naming_the_field(scheduling, field):
    [(where, _)] = problems(with_scheduling(scheduling))
    assert where == f"{SCHEDULING}.{field}"


@pytest.mark.parametrize("path", ["data", "/mnt/../etc", "/mnt/data/", "/", "/mnt//data"])
def test_a_mount_path_must_be_an_absolute_normal_folder(path):
    [(field, expected)] = problems(with_storage(filestores=[{"filestore": "projects/p/locations/z/instances/fs",
                                                             "mountPath": path}]))
    assert field == "node_pools[0].filestores[0].mount_path" and "absolute path" in expected


def test_two_storages_of_a_pool_at_one_mount_path_are_refused():
    found = problems(with_storage(filestores=[{"filestore": "fs-a", "mountPath": "/home"}],
                                  lustres=[{"lustre": "lu-a", "mountPath": "/home"}], home="fs-home"))
    assert [f for f, _ in found] == ["node_pools[0].filestores[0].mount_path", "node_pools[0].lustres[0].mount_path"]
    assert "home_directory_storage is mounted there already" in found[0][1]


def test_an_empty_instance_name_is_refused():
    [(field, _)] = problems(with_storage(filestores=[{"filestore": ""}]))
    assert field == "node_pools[0].filestores[0].filestore"

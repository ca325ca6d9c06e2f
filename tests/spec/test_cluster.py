"""The cluster spec: Vertex's schema in either case, and an error for each kind of mistake
that names the field, the value and what would be valid."""

from __future__ import annotations

import copy
import json

import pytest
import yaml

from jupyter_gtc.exceptions import SpecError, SpecErrors
from jupyter_gtc.spec import MACHINE_TYPES, load_cluster_spec, parse_cluster_spec
from tests.conftest import small_gpu_spec


def errors_of(data) -> list[SpecError]:
    with pytest.raises(SpecErrors) as info:
        parse_cluster_spec(data)
    return info.value.errors


def only_error(data) -> SpecError:
    errors = errors_of(data)
    assert len(errors) == 1, errors
    return errors[0]


def test_camel_and_snake_case_give_the_same_spec():
    camel = small_gpu_spec("demo", accounting=None)  # the key left out, as in snake
    snake = {
        "display_name": "demo",
        "node_pools": [
            {"id": "gpu", "machine_spec": {"machine_type": "a3-highgpu-8g"},
             "scaling_spec": {"min_node_count": 3, "max_node_count": 3}},
            {"id": "login", "machine_spec": {"machine_type": "n2-standard-4"},
             "scaling_spec": {"min_node_count": 1, "max_node_count": 1}},
        ],
        "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "train", "node_pool_ids": ["gpu"]}],
                                             "login_node_pool_id": "login"}},
        "local": {"resource_scale": 0.125},
    }
    assert parse_cluster_spec(camel) == parse_cluster_spec(snake)


def test_vertex_json_round_trips():
    spec = parse_cluster_spec(small_gpu_spec("demo", accounting=None))
    vertex = spec.to_vertex()
    assert "nodePools" in vertex and "local" not in vertex
    # Accounting is a local cluster's choice: Vertex has no such field, whichever way it is set.
    assert "accounting" not in vertex["orchestratorSpec"]["slurmSpec"]
    off = parse_cluster_spec(small_gpu_spec("off"))
    assert not off.slurm.accounting.enabled and "accounting" not in off.to_vertex()["orchestratorSpec"]["slurmSpec"]
    assert vertex["nodePools"][0]["machineSpec"]["machineType"] == "a3-highgpu-8g"
    assert parse_cluster_spec({**vertex, "local": {"resourceScale": 0.125}}) == spec


def test_example_spec_file_parses(tmp_path):
    spec = load_cluster_spec("examples/clusters/local-a3.yaml")
    assert [p.id for p in spec.compute_pools()] == ["a3"]
    assert spec.pool("a3").node_names() == ["a3-0", "a3-1"]
    assert spec.pool("a3").machine.gpu_count == 8
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(spec.to_vertex()))
    assert load_cluster_spec(path).to_vertex() == spec.to_vertex()


def test_unknown_field_lists_the_valid_ones():
    data = small_gpu_spec("demo")
    data["nodePools"][0]["machineSpec"]["gpuCount"] = 8
    err = only_error(data)
    assert err.field == "node_pools[0].machine_spec.gpu_count"
    assert "unknown field" in err.expected and "accelerator_count" in err.expected


def test_unknown_machine_type_suggests_known_ones():
    data = small_gpu_spec("demo", machine="a3-highgpu-9g")
    err = only_error(data)
    assert err.field == "node_pools[0].machine_spec.machine_type"
    assert err.value == "a3-highgpu-9g"
    assert "a3-highgpu-8g" in err.expected


@pytest.mark.parametrize("field, value, expected", [
    ("acceleratorType", "NVIDIA_L4", "NVIDIA_H100_80GB"),
    ("acceleratorCount", 4, "exactly 8"),
])
def test_accelerator_must_match_the_machine_type(field, value, expected):
    data = small_gpu_spec("demo")
    data["nodePools"][0]["machineSpec"][field] = value
    err = only_error(data)
    assert err.field.endswith(field.replace("Type", "_type").replace("Count", "_count"))
    assert err.value == value and expected in err.expected


def test_cpu_machine_type_takes_no_accelerator():
    data = small_gpu_spec("demo", machine="n2-standard-8")
    data["nodePools"][0]["machineSpec"]["acceleratorType"] = "NVIDIA_H100_80GB"
    assert "has no accelerators" in only_error(data).expected


def test_min_and_max_node_count_must_agree():
    data = small_gpu_spec("demo")
    data["nodePools"][0]["scalingSpec"]["maxNodeCount"] = 5
    err = only_error(data)
    assert err.field == "node_pools[0].scaling_spec.max_node_count"
    assert err.value == 5 and "both to 3" in err.expected


def test_partition_must_name_an_existing_pool():
    data = small_gpu_spec("demo")
    data["orchestratorSpec"]["slurmSpec"]["partitions"][0]["nodePoolIds"] = ["gpus"]
    err = only_error(data)
    assert err.field == "orchestrator_spec.slurm_spec.partitions[0].node_pool_ids[0]"
    assert err.value == "gpus" and "gpu, login" in err.expected


def test_login_pool_must_exist():
    data = small_gpu_spec("demo")
    data["orchestratorSpec"]["slurmSpec"]["loginNodePoolId"] = "head"
    err = only_error(data)
    assert err.field == "orchestrator_spec.slurm_spec.login_node_pool_id" and err.value == "head"


def test_login_pool_runs_no_jobs():
    data = small_gpu_spec("demo")
    data["orchestratorSpec"]["slurmSpec"]["partitions"][0]["nodePoolIds"] = ["gpu", "login"]
    assert "login pool runs no jobs" in only_error(data).expected


@pytest.mark.parametrize("name", ["Demo", "toolongname1", "1demo", "a'; echo x", "de mo", "", "demo\n", "\ndemo"])
def test_bad_display_names_are_refused(name):
    err = only_error(small_gpu_spec(name))
    assert err.field == "display_name" and err.value == name
    assert "lowercase" in err.expected


@pytest.mark.parametrize("pool_id", ["GPU", "gpu$(reboot)", "a b", "-x", "gpu\n"])
def test_shell_hostile_pool_ids_are_refused(pool_id):
    data = small_gpu_spec("demo")
    data["nodePools"][0]["id"] = pool_id
    data["orchestratorSpec"]["slurmSpec"]["partitions"][0]["nodePoolIds"] = [pool_id]
    assert any(e.field == "node_pools[0].id" and e.value == pool_id for e in errors_of(data))


def test_a_trailing_newline_is_refused_in_every_name():
    """A name ending in a newline (YAML's "gpu\\n", or a |-block) must not become a Slurm node,
    partition or cluster name: `^...$` with re.match would let it through."""
    data = small_gpu_spec("demo")
    data["nodePools"][0]["id"] = "gpu\n"
    data["orchestratorSpec"]["slurmSpec"]["partitions"][0] = {"id": "train\n", "nodePoolIds": ["gpu\n"]}
    with pytest.raises(SpecErrors) as info:
        parse_cluster_spec(data)
    assert {e.field: e.value for e in info.value.errors} == {
        "node_pools[0].id": "gpu\n", "orchestrator_spec.slurm_spec.partitions[0].id": "train\n"}
    assert "- node_pools[0].id: 'gpu\\n' is not valid; use lowercase letters" in str(info.value)
    rest = {k: v for k, v in small_gpu_spec("x").items() if k != "displayName"}
    err = only_error('display_name: "abc\\n"\n' + yaml.safe_dump(rest))  # as a user writes it in a cell
    assert str(err) == ("display_name: 'abc\\n' is not valid; use 1 to 10 lowercase letters, digits or hyphens, "
                        "starting with a letter")


def test_every_problem_is_reported_at_once():
    data = small_gpu_spec("Bad!")
    data["nodePools"][0]["machineSpec"]["acceleratorCount"] = 2
    data["orchestratorSpec"]["slurmSpec"]["loginNodePoolId"] = "nope"
    fields = {e.field for e in errors_of(data)}
    assert fields == {"display_name", "node_pools[0].machine_spec.accelerator_count",
                      "orchestrator_spec.slurm_spec.login_node_pool_id"}


def test_missing_required_field():
    data = small_gpu_spec("demo")
    del data["nodePools"][0]["scalingSpec"]
    err = only_error(data)
    assert err.field == "node_pools[0].scaling_spec" and "required" in err.expected


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(SpecError) as info:
        parse_cluster_spec("display_name: demo\nnode_pools: [\n")
    assert "line" in str(info.value)


def test_error_message_reads_well():
    data = small_gpu_spec("demo", machine="a3-highgpu-9g")
    with pytest.raises(SpecErrors) as info:
        parse_cluster_spec(data)
    assert str(info.value).splitlines()[1].strip() == (
        "- node_pools[0].machine_spec.machine_type: 'a3-highgpu-9g' is not valid; "
        "known machine types include: a3-highgpu-1g, a3-highgpu-2g, a3-highgpu-4g, a3-highgpu-8g")


def test_with_pool_size_scales_one_pool_and_keeps_the_rest():
    spec = parse_cluster_spec(small_gpu_spec("demo"))
    bigger = spec.with_pool_size("gpu", 5)
    assert bigger.pool("gpu").node_count == 5 and bigger.pool("login").node_count == 1
    assert spec.pool("gpu").node_count == 3  # specs are immutable


def test_catalogue_has_the_machine_types_users_ask_for():
    for name in ["a2-highgpu-1g", "a2-highgpu-8g", "a2-ultragpu-8g", "a3-highgpu-8g", "a3-megagpu-8g",
                 "a3-ultragpu-8g", "a4-highgpu-8g", "g2-standard-4", "n2-standard-8", "c2-standard-60"]:
        assert name in MACHINE_TYPES
    assert MACHINE_TYPES["a3-ultragpu-8g"].gpu_model == "h200"
    assert MACHINE_TYPES["a4-highgpu-8g"].gpu_count == 8
    assert MACHINE_TYPES["n2-standard-8"].memory_gb == 32 and MACHINE_TYPES["n2-standard-8"].gpu_count == 0


def test_validation_does_not_change_the_input():
    data = small_gpu_spec("demo")
    before = copy.deepcopy(data)
    parse_cluster_spec(data)
    assert data == before


def test_duplicate_pool_and_partition_ids():
    data = small_gpu_spec("demo")
    data["nodePools"][1]["id"] = "gpu"
    data["orchestratorSpec"]["slurmSpec"]["loginNodePoolId"] = None
    data["orchestratorSpec"]["slurmSpec"]["partitions"].append({"id": "train", "nodePoolIds": ["gpu"]})
    errors = {(e.field, e.expected) for e in errors_of(data)}
    assert errors == {("node_pools[1].id", "pool ids must be unique"),
                      ("orchestrator_spec.slurm_spec.partitions[1].id", "partition ids must be unique")}


def test_spec_differences_name_pools_by_id():
    from jupyter_gtc.spec.cluster import spec_differences

    old = parse_cluster_spec(small_gpu_spec("demo")).to_json()
    new_data = small_gpu_spec("demo")
    new_data["nodePools"][0]["machineSpec"]["machineType"] = "a3-megagpu-8g"
    new_data["nodePools"].reverse()  # order alone is no difference
    assert spec_differences(old, parse_cluster_spec(new_data).to_json()) == ["node_pools[gpu].machine_spec.machine_type"]


def test_display_name_can_be_given_apart_from_the_spec():
    spec = parse_cluster_spec("display_name: old\n" + "\n".join(
        f"{k}: {v}" for k, v in [("node_pools", '[{"id": "a", "machine_spec": {"machine_type": "n2-standard-4"}, '
                                               '"scaling_spec": {"min_node_count": 1, "max_node_count": 1}}]'),
                                 ("orchestrator_spec", '{"slurm_spec": {"partitions": [{"id": "a", "node_pool_ids": ["a"]}]}}')]),
        display_name="new")
    assert spec.name == "new"


def test_yaml_aliases_are_refused_before_they_expand():
    """A 678-byte spec of nested aliases expanded to 286 MB (a "billion laughs"); anchors
    alone are harmless, an alias is refused naming itself, a huge text is refused unread."""
    from jupyter_gtc.exceptions import SpecError
    from jupyter_gtc.spec.cluster import MAX_SPEC_BYTES, parse_spec_text

    laughs = "a: &a [" + ",".join(["lol"] * 9) + "]\n" + "".join(
        f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 9) + "]\n" for i in range(8))
    assert len(laughs) < 700
    with pytest.raises(SpecError, match=r"YAML aliases \(\*a\) are not accepted"):
        parse_spec_text(laughs)
    assert parse_spec_text("display_name: &n demo\nnode_pools: []") == {"display_name": "demo", "node_pools": []}
    with pytest.raises(SpecError, match="at most"):
        parse_spec_text("#" * (MAX_SPEC_BYTES + 1))

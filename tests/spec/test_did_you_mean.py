"""A misspelt key in a spec is one problem, named with the field it is closest to, at any depth
and in every spec that is validated by a model: a cluster, an attach spec, a Vertex target, a
study in either form."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.spec import parse_cluster_spec
from jupyter_gtc.spec.attach import parse_attach_spec
from jupyter_gtc.spec.study.parse import parse_tuning_spec
from jupyter_gtc.spec.vertex_target import parse_vertex_target
from tests.conftest import small_gpu_spec
from tests.tuning.test_spec import ISSUE_CELL


def problems(parse, data) -> list[str]:
    with pytest.raises(SpecErrors) as info:
        parse(data)
    return [str(e) for e in info.value.errors]


def test_node_pool_for_node_pools_is_one_problem_with_the_fix():
    data = small_gpu_spec("demo")
    data["node_pool"] = data.pop("nodePools")
    [problem] = problems(parse_cluster_spec, data)
    assert problem.startswith("node_pool: unknown field; did you mean node_pools?"), problem
    assert "a3-highgpu-8g" not in problem  # not the whole list of pools back at the user


def test_a_camel_case_spec_gets_the_camel_case_name():
    data = small_gpu_spec("demo")
    data["nodePool"] = data.pop("nodePools")
    [problem] = problems(parse_cluster_spec, data)
    assert "did you mean nodePools?" in problem


@pytest.mark.parametrize("where, right, wrong, meant", [
    (("nodePools", 0, "machineSpec"), "machineType", "machineTyp", "machineType"),
    (("nodePools", 0, "scalingSpec"), "minNodeCount", "min_node_cuont", "min_node_count"),
    (("orchestratorSpec", "slurmSpec", "partitions", 0), "nodePoolIds", "nodePoolId", "nodePoolIds"),
    (("orchestratorSpec",), "slurmSpec", "slurm_spc", "slurm_spec"),
])
def test_every_depth(where, right, wrong, meant):
    data = small_gpu_spec("demo")
    parent = data
    for part in where:
        parent = parent[part]
    parent[wrong] = parent.pop(right)
    [problem] = problems(parse_cluster_spec, data)
    assert f"did you mean {meant}?" in problem, problem


def test_a_key_like_no_field_lists_the_valid_ones_without_a_guess():
    data = small_gpu_spec("demo")
    data["nodePools"][0]["machineSpec"]["zzz"] = 1
    [problem] = problems(parse_cluster_spec, data)
    assert "did you mean" not in problem and "valid fields here: machine_type, accelerator_type" in problem


def test_attach_spec_and_vertex_target():
    [problem] = problems(parse_attach_spec, {"display_name": "login", "ssh": {"hostname": "login"}})
    assert "ssh.hostname: unknown field; did you mean host?" in problem
    [problem] = problems(parse_vertex_target, {"projects": "p"})
    assert "did you mean project?" in problem


def test_study_spec_in_the_short_form():
    spec = ISSUE_CELL.replace("double:", "dobule:", 1) + "metrics: val_loss:minimize\nmax_trials: 4\n"
    found = problems(parse_tuning_spec, spec)
    assert [p.split(";")[:2] for p in found] == [
        ["metrics: unknown field", " did you mean metric? valid fields here: name, display_name, metric, parameters, "
         "algorithm, early_stopping, measurement_selection, max_trials, trials, parallel, max_failed_trials, job, "
         "seed (or give a HyperparameterTuningJob with study_spec)"],
        ["parameters.learning_rate.dobule: unknown field",
         " did you mean double? valid fields here: double, integer, categorical, discrete, scale, children"],
    ], found


def test_study_spec_in_vertex_form():
    body = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=4).to_vertex()
    body["studySpec"]["metricz"] = body["studySpec"].pop("metrics")
    [problem] = problems(parse_tuning_spec, body)
    assert problem.startswith("study_spec.metricz: unknown field; did you mean metrics?"), problem

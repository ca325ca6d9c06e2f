"""The tuning spec alone: both forms, every validation rule naming its field, and the round
trip to Vertex's HyperparameterTuningJob. Pure functions: no cluster."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc.exceptions import SpecError, SpecErrors
from jupyter_gtc.spec.study import (format_flag, parse_tuning_spec, script_from_worker_pools,
                                    worker_pools_from_script)

JOB = 'srun python train.py "$@"\n'
ISSUE_CELL = """
parameters:
  learning_rate: {double: [1e-5, 1e-2], scale: log}
  layers:        {integer: [2, 8]}
  optimizer:     {categorical: [adamw, sgd], children: {sgd: {momentum: {double: [0.0, 0.99]}}}}
algorithm: bayesian            # default; also grid, random
early_stopping: median         # or decay_curve, none
max_failed_trials: 5
job: |
  #SBATCH --nodes 2 --gpus-per-node 1
  srun python train.py "$@"    # hyperparameters arrive as --learning_rate=... flags
"""


def problems(text_or_data, **overrides) -> dict[str, str]:
    with pytest.raises(SpecErrors) as e:
        parse_tuning_spec(text_or_data, **overrides)
    return {err.field: err.expected for err in e.value.errors}


def test_the_issue_cell_with_the_magic_options():
    spec = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=40, parallel=4)
    assert (spec.metric.metric_id, spec.metric.direction) == ("val_loss", "minimize")
    assert (spec.max_trial_count, spec.parallel_trial_count, spec.failure_budget) == (40, 4, 5)
    assert (spec.algorithm, spec.early_stopping, spec.measurement_selection) == ("bayesian", "median", "last")
    lr, layers, optimizer = spec.study_spec.parameters
    assert (lr.kind, lr.scale, lr.value_spec.min_value) == ("double", "log", 1e-5)
    assert (layers.kind, layers.value_spec.max_value) == ("integer", 8)
    assert [p.parameter_id for p in optimizer.active_children("sgd")] == ["momentum"]
    assert optimizer.active_children("adamw") == []
    assert [p.parameter_id for p in spec.parameters()] == ["learning_rate", "layers", "optimizer", "momentum"]


def test_options_win_over_the_cell():
    spec = parse_tuning_spec(ISSUE_CELL + "metric: acc:maximize\nmax_trials: 3\n", max_trials=7, metric="loss:minimize")
    assert (spec.max_trial_count, spec.metric.metric_id, spec.metric.direction) == (7, "loss", "minimize")


@pytest.mark.parametrize("parameter, field, words", [
    ("{double: [0.1, 0.01]}", "parameters.p.double", "greater than min_value"),
    ("{integer: [4, 4]}", "parameters.p.integer", "greater than min_value"),
    ("{double: [0, 1], scale: log}", "parameters.p.scale", "min_value > 0"),
    ("{integer: [-2, 5], scale: reverse_log}", "parameters.p.scale", "min_value > 0"),
    ("{categorical: []}", "parameters.p.categorical", "at least one category"),
    ("{categorical: [a, a]}", "parameters.p.categorical", "each category once"),
    ("{discrete: [4, 2]}", "parameters.p.discrete", "increasing order"),
    ("{categorical: [a, b], children: {c: {q: {double: [0, 1]}}}}", "parameters.p.children.c",
     "not a value of p; its values: a, b"),
    ("{integer: [1, 4], children: {9: {q: {double: [0, 1]}}}}", "parameters.p.children.9", "1 to 4"),
    ("{double: [0, 1], children: {0.5: {q: {double: [0, 1]}}}}", "parameters.p.children.0.5", "only categorical"),
    ("{categorical: [a], children: {a: {q: {double: [1, 0]}}}}", "parameters.p.children.a.q.double", "greater"),
    ("{categorical: [a], scale: log}", "parameters.p.scale", "leave scale_type unset"),
    ("{double: [0, 1], integer: [0, 1]}", "parameters.p", "exactly one of"),
    ("{double: [0, 1], step: 2}", "parameters.p.step", "unknown field"),
    ("{double: [0]}", "parameters.p.double", "[min, max]"),
])
def test_each_parameter_problem_names_its_field(parameter, field, words):
    found = problems(f"metric: m:minimize\nmax_trials: 2\nparameters:\n  p: {parameter}\njob: '{JOB}'")
    assert field in found, found
    assert words in found[field]


def test_every_problem_is_reported_at_once():
    found = problems("metric: loss\nparameters: {a: {double: [1, 0]}, b: {categorical: []}}\njob: srun train.py\n"
                     "algorithm: smart\nearly_stopping: soon\n")
    assert set(found) == {"metric", "max_trials", "parameters.a.double", "parameters.b.categorical", "job",
                          "algorithm", "early_stopping"}
    assert "NAME:minimize" in found["metric"] and '"$@"' in found["job"]
    assert "bayesian, grid, random" in found["algorithm"]


def test_ids_are_unique_except_children_under_disjoint_parent_values():
    shared = ("parameters:\n  opt: {categorical: [sgd, adam, rms], children: {sgd: {lr: {double: [0.1, 1]}},"
              " adam: {lr: {double: [1e-4, 1e-2], scale: log}}}}\n")
    spec = parse_tuning_spec(f"metric: m:minimize\nmax_trials: 2\n{shared}job: '{JOB}'")
    opt = spec.study_spec.parameters[0]
    assert opt.active_children("adam")[0].scale == "log" and opt.active_children("rms") == []
    clash = ("parameters:\n  lr: {double: [0, 1]}\n"
             "  opt: {categorical: [sgd], children: {sgd: {lr: {double: [0, 1]}}}}\n")
    found = problems(f"metric: m:minimize\nmax_trials: 2\n{clash}job: '{JOB}'")
    assert "unique" in found["parameters.opt.children.sgd.lr"]


def test_grid_takes_only_discrete_spaces():
    base = f"metric: m:minimize\nmax_trials: 20\nalgorithm: grid\njob: '{JOB}'\n"
    found = problems(base + "parameters: {lr: {double: [0, 1]}, n: {integer: [1, 3]}}")
    assert "grid search needs integer, categorical or discrete" in found["parameters.lr.double"]
    found = problems(base + "parameters: {o: {categorical: [a, b], children: {a: {n: {integer: [1, 2]}}}}}")
    assert "no conditional parameters" in found["parameters.o"]
    spec = parse_tuning_spec(base + "parameters: {n: {integer: [1, 3]}, o: {categorical: [a, b]}, "
                                    "d: {discrete: [0.5, 2]}}")
    assert spec.algorithm == "grid"


def test_vertex_form_errors_use_vertex_paths():
    body = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=4).to_vertex()
    body["studySpec"]["parameters"][1]["integerValueSpec"] = {"minValue": 9, "maxValue": 2}
    body["studySpec"]["metrics"].append({"metricId": "acc", "goal": "MAXIMIZE"})
    found = problems(body)
    assert "greater than min_value" in found["study_spec.parameters[1].integer_value_spec.max_value"]
    assert "exactly one metric" in found["study_spec.metrics"]
    body["studySpec"]["convexAutomatedStoppingSpec"] = {}
    assert problems(body)["study_spec.convex_automated_stopping_spec"].startswith("unknown field; ")


def test_round_trip_through_vertex_json():
    spec = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=40, parallel=4, name="lr-sweep")
    body = spec.to_vertex({"machineType": "a3-highgpu-8g", "acceleratorType": "NVIDIA_H100_80GB",
                           "acceleratorCount": 8}, image_uri="us-docker.pkg.dev/p/r/train:1")
    assert body["displayName"] == "lr-sweep" and body["maxTrialCount"] == 40 and body["parallelTrialCount"] == 4
    assert body["maxFailedTrialCount"] == 5
    study = body["studySpec"]
    assert study["metrics"] == [{"metricId": "val_loss", "goal": "MINIMIZE"}]
    assert study["medianAutomatedStoppingSpec"] == {"useElapsedDuration": False}
    momentum = study["parameters"][2]["conditionalParameterSpecs"][0]
    assert momentum["parentCategoricalValues"] == {"values": ["sgd"]}
    pools = body["trialJobSpec"]["workerPoolSpecs"]
    assert [p["replicaCount"] for p in pools] == [1, 1]  # --nodes 2: the chief and one worker
    assert pools[0]["containerSpec"] == {"imageUri": "us-docker.pkg.dev/p/r/train:1", "command": ["python", "train.py"]}
    again = parse_tuning_spec(json.loads(json.dumps(body)))
    assert again.study_spec == spec.study_spec
    assert again.to_vertex() == body  # the given trial_job_spec goes back out unchanged
    assert "local" not in body


def test_a_vertex_resource_read_back_from_the_service_is_accepted():
    resource = {
        "name": "projects/p/locations/us-central1/hyperparameterTuningJobs/123", "state": "JOB_STATE_SUCCEEDED",
        "createTime": "2025-01-01T00:00:00Z", "trials": [{"id": "1"}],
        "displayName": "from-vertex", "maxTrialCount": 3, "parallelTrialCount": 2,
        "studySpec": {"metrics": [{"metricId": "accuracy", "goal": "MAXIMIZE"}],
                      "parameters": [{"parameterId": "batch", "discreteValueSpec": {"values": [16, 32, 64]},
                                      "scaleType": "UNIT_LOG_SCALE"},
                                     {"parameterId": "depth", "integerValueSpec": {"minValue": "2", "maxValue": "6"}}],
                      "algorithm": "RANDOM_SEARCH", "measurementSelectionType": "BEST_MEASUREMENT"},
        "trialJobSpec": {"workerPoolSpecs": [{
            "machineSpec": {"machineType": "a3-highgpu-8g", "acceleratorCount": 8}, "replicaCount": 1,
            "containerSpec": {"imageUri": "gcr.io/p/t", "command": ["python", "-m", "trainer"], "args": ["--epochs=3"],
                              "env": [{"name": "MODE", "value": "tune it"}]}}]},
    }
    spec = parse_tuning_spec(resource)
    assert (spec.algorithm, spec.measurement_selection, spec.metric.direction) == ("random", "best", "maximize")
    assert spec.study_spec.parameters[1].value_spec.min_value == 2  # int64 arrives as a JSON string
    assert spec.script == ("#!/bin/bash\n#SBATCH --nodes=1\n#SBATCH --gpus-per-node=8\nexport MODE='tune it'\n"
                           'srun python -m trainer --epochs=3 "$@"\n')
    body = spec.to_vertex()
    assert body["trialJobSpec"] == resource["trialJobSpec"] and "state" not in body


def test_worker_pools_and_scripts():
    script = script_from_worker_pools({"worker_pool_specs": [
        {"replica_count": 1, "python_package_spec": {"python_module": "trainer.task", "args": ["--x=1"]}},
        {"replica_count": 3, "python_package_spec": {"python_module": "trainer.task"}}]})
    assert "#SBATCH --nodes=4" in script and script.endswith('srun python3 -m trainer.task --x=1 "$@"\n')
    pools = worker_pools_from_script("#!/bin/bash\n#SBATCH -N 3\nexport A=1\nsrun python t.py \"$@\"\n")
    assert pools["workerPoolSpecs"][0]["containerSpec"]["command"][:2] == ["bash", "-c"]
    assert [p["replicaCount"] for p in pools["workerPoolSpecs"]] == [1, 2]
    pools = worker_pools_from_script('#SBATCH --nodes=1\nsrun --ntasks-per-node=1 torchrun t.py --a "$@"  # run\n')
    assert pools["workerPoolSpecs"] == [{"machineSpec": {}, "replicaCount": 1,
                                         "containerSpec": {"command": ["torchrun", "t.py", "--a"]}}]


def test_flags_are_written_as_vertex_writes_them():
    assert format_flag("learning_rate", 0.001) == "--learning_rate=0.001"
    assert format_flag("batch", 32.0) == "--batch=32"
    assert format_flag("layers", 4) == "--layers=4"
    assert format_flag("opt", "a'; echo foo") == "--opt=a'; echo foo"  # one argv entry, never a shell string


# -- bad input that must not slip through ------------------------------------------------------


def test_ids_with_a_trailing_newline_are_refused():
    """`^...$` with re.match lets "lr\\n" through; it would become the flag `--lr\\n=0.1`."""
    found = problems(f'metric: "val_loss:minimize"\nmax_trials: 2\nparameters: {{"lr\\n": {{double: [0, 1]}}}}\n'
                     f"job: '{JOB}'")
    assert found == {"parameters.lr\n": "letters, digits, _ . - without spaces, starting with a letter or _ "
                                         "(it becomes a --flag)"}
    body = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=4).to_vertex()
    body["studySpec"]["metrics"][0]["metricId"] = "val_loss\n"
    body["studySpec"]["parameters"][1]["parameterId"] = "layers\n"
    found = problems(body)
    assert set(found) == {"study_spec.metrics[0].metric_id", "study_spec.parameters[1].parameter_id"}
    with pytest.raises(SpecErrors, match=r"study_spec.metrics\[0\].metric_id: 'val_loss\\n' is not valid; a tag"):
        parse_tuning_spec(body)


def test_a_study_name_with_a_trailing_newline_is_refused():
    from jupyter_gtc import api
    from jupyter_gtc.exceptions import SpecError

    spec = parse_tuning_spec(ISSUE_CELL, metric="val_loss:minimize", max_trials=4)
    with pytest.raises(SpecError) as e:  # refused before the cluster is looked at: nothing is recorded
        api.create_study("any-cluster", spec, name="lr-sweep\n")
    assert str(e.value) == ("name: 'lr-sweep\\n' is not valid; 1 to 63 letters, digits, '.', '_' or '-', "
                            "starting with a letter or digit")
    assert "lr-sweep\n" not in [s.name for s in api.list_studies()]


@pytest.mark.parametrize("trial", ["2\n", " 2", "two", "0", "02", True, 0, -1])
def test_a_trial_id_is_one_the_study_shows(trial):
    from jupyter_gtc.exceptions import SpecError
    from jupyter_gtc.services.tuning import Study

    # Checked before the study is asked anything, so no study (and no cluster) is needed here.
    with pytest.raises(SpecError) as e:
        Study("lr-sweep", service=None).stop_trial(trial)
    assert str(e.value) == f"trial: {trial!r} is not valid; a trial id as the study's trials show it: 1, 2, 3, ..."


def test_an_environment_variable_name_with_a_newline_is_refused():
    pools = {"worker_pool_specs": [{"container_spec": {"command": ["python", "t.py"],
                                                       "env": [{"name": "MODE", "value": "a"},
                                                               {"name": "X\nrm -rf ~", "value": "b"}]}}]}
    with pytest.raises(SpecError) as e:
        script_from_worker_pools(pools)
    assert (e.value.field, e.value.value) == ("trial_job_spec.worker_pool_specs[0].container_spec.env[1].name",
                                              "X\nrm -rf ~")
    assert "an environment variable name: letters, digits and _" in str(e.value)
    found = problems({"display_name": "v", "max_trial_count": 2, "trial_job_spec": pools, "study_spec": {
        "metrics": [{"metric_id": "m", "goal": "MINIMIZE"}],
        "parameters": [{"parameter_id": "x", "double_value_spec": {"min_value": 0, "max_value": 1}}]}})
    assert "trial_job_spec.worker_pool_specs[0].container_spec.env[1].name" in found


def test_a_grid_of_ten_billion_points_is_refused_before_any_point_is_listed():
    import tracemalloc

    spec = {"metric": "m:minimize", "max_trials": 2, "algorithm": "grid", "job": JOB,
            "parameters": {"n": {"integer": [0, 1e10]}}}
    tracemalloc.start()
    try:
        with pytest.raises(SpecErrors) as e:
            parse_tuning_spec(spec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5_000_000  # listing the grid would take hundreds of GB; counting it takes nothing
    assert [str(err) for err in e.value.errors] == [
        "parameters.n.integer: [0, 10000000000] is not valid; a grid has at most 100,000 points and n alone has "
        "10,000,000,001 values; narrow the ranges, list the values to try as a discrete parameter, or use "
        "algorithm random or bayesian"]


def test_a_grid_too_large_as_a_product_says_how_it_adds_up():
    found = problems(f"metric: m:minimize\nmax_trials: 2\nalgorithm: grid\njob: '{JOB}'\n"
                     "parameters: {a: {integer: [1, 1000]}, b: {integer: [1, 200]}, c: {categorical: [x, y]}}")
    assert found == {"parameters": "a grid has at most 100,000 points and this one has a 1,000 x b 200 x c 2; "
                                   "narrow the ranges, list the values to try as a discrete parameter, or use "
                                   "algorithm random or bayesian"}
    from jupyter_gtc.spec.study import grid_size

    spec = parse_tuning_spec(f"metric: m:minimize\nmax_trials: 2\nalgorithm: grid\njob: '{JOB}'\n"
                             "parameters: {a: {integer: [1, 1000]}, b: {integer: [-4, 4]}, c: {discrete: [1, 2]}}")
    assert grid_size(spec) == 18_000


@pytest.mark.parametrize("srun", [
    "srun -N 1 --gpus 2 python train.py",
    "srun -N1 --gpus=2 python train.py",
    "srun --nodes 1 --ntasks-per-node=1 --gpus-per-node 2 --cpu-bind none python train.py",
    "srun -l -u -N 1 -K --exclusive --overlap python train.py",  # flags, and options whose value is optional
    "srun -lN 1 -J trial --label python train.py",  # bundled short options, the last one taking a value
    "srun --ntasks-per-n 1 python train.py",  # an abbreviation, as getopt_long takes it
    "srun -N 1 -- python train.py",
])
def test_the_vertex_command_is_the_program_without_srun_options_or_their_values(srun):
    spec = parse_tuning_spec({"metric": "m:minimize", "max_trials": 2, "parameters": {"x": {"double": [0, 1]}},
                              "job": f'#SBATCH --nodes=1\n{srun} "$@"\n'})
    pools = spec.to_vertex()["trialJobSpec"]["workerPoolSpecs"]
    assert pools[0]["containerSpec"]["command"] == ["python", "train.py"]

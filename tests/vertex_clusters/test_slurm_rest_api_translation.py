"""The v0.0.42 <-> v0.0.38 translation of the local Slurm Job API (slurm/rest_v42.py), alone: the
answers here are slurmrestd 22.05.8's own, cut down (captured from a local cluster)."""

from __future__ import annotations

import json

import pytest

from jupyter_gtc.slurm import rest_v42
from jupyter_gtc.slurm.rest_v42 import Refused, answer_42, exit_code_42, request_38

SUBMIT = "/slurm/v0.0.42/job/submit"


def submit(job: dict, **top) -> dict:
    return request_38("POST", SUBMIT, {}, {"job": job, **top})[4]


def test_a_submit_moves_the_script_and_turns_each_field_into_v0038s():
    body = submit({"name": "t", "minimum_nodes": 2, "maximum_nodes": 4, "environment": ["PATH=/bin", "A=b=c"],
                   "time_limit": {"set": True, "infinite": False, "number": 30}, "tres_per_node": "gres/gpu:h100:8",
                   "tres_per_task": "gres/gpu:1", "memory_per_node": {"set": True, "number": 2048},
                   "requeue": False, "current_working_directory": "/w"}, script="#!/bin/bash\nsrun true\n")
    assert body == {"script": "#!/bin/bash\nsrun true\n", "job": {
        "name": "t", "nodes": "2-4", "environment": {"PATH": "/bin", "A": "b=c"}, "time_limit": 30,
        "gres": "gpu:h100:8", "gpus_per_task": "1", "memory_per_node": 2048, "no_requeue": True,
        "current_working_directory": "/w"}}
    assert submit({"script": "#!/bin/sh\n", "time_limit": {"set": False, "infinite": True}})["job"] == {
        "time_limit": "UNLIMITED"}
    assert submit({"script": "#!/bin/sh\n", "tres_per_job": "gres/gpu:4"})["job"] == {"gpus": "4"}


@pytest.mark.parametrize("job, field", [
    ({"oom_kill_step": 1}, "job.oom_kill_step"),
    ({"tres_per_node": "cpu=4"}, "job.tres_per_node"),
    ({"user_id": "0"}, "job.user_id"),
    ({"environment": ["NOEQUALS"]}, "job.environment[0]"),
    ({"memory_per_cpu": {"infinite": True}}, "job.memory_per_cpu"),
    ({"minimum_nodes": "2"}, "job.minimum_nodes"),
])
def test_a_field_v0038_cannot_carry_is_refused_naming_it(job, field):
    with pytest.raises(Refused) as refused:
        submit({"script": "#!/bin/bash\n", **job})
    assert str(refused.value).startswith(field + ":")
    body = refused.value.body()
    assert refused.value.status == 400 and body["errors"][0]["description"].startswith(field)


def test_a_submit_without_a_script_or_with_a_het_job_list_is_refused():
    with pytest.raises(Refused, match="job.script"):
        submit({"name": "x"})
    with pytest.raises(Refused, match="^jobs"):
        request_38("POST", SUBMIT, {}, {"jobs": [{}], "script": "#!/bin/bash\n"})


def test_paths_and_queries():
    assert request_38("DELETE", "/slurm/v0.0.42/job/7", {"signal": "TERM"}, None)[1:4] == (
        "DELETE", "/slurm/v0.0.38/job/7", {"signal": "TERM"})
    assert request_38("GET", "/slurmdb/v0.0.42/jobs/", {"users": "root"}, None)[2] == "/slurmdb/v0.0.38/jobs"
    assert request_38("POST", "/slurm/v0.0.42/job/7", {}, {"hold": False})[4] == {"hold": False}  # a release
    with pytest.raises(KeyError):
        request_38("GET", "/slurm/v0.0.42/reservations/", {}, None)
    with pytest.raises(Refused, match="query bogus"):
        request_38("GET", "/slurm/v0.0.42/jobs/", {"bogus": "1"}, None)



def test_a_submits_arguments_become_a_wrapper_and_its_environment_never_slurmrestds_argv():
    """slurmrestd 22.05.8 frees a submit's argv before using it (the table): the arguments come out
    of the v0.0.38 body, and wrap_argv submits a fixed script that runs the kept one with them."""
    args = ["a b", "-n", "$HOME", "l1\nl2", ""]
    body = submit({"script": "#!/usr/bin/env python3\n", "environment": ["PATH=/bin"], "argv": ["x", *args]})
    assert body["argv"] == args and "argv" not in body["job"]  # argv[0] is Slurm's to set
    wrapped = rest_v42.wrap_argv(body, "/c/job-scripts/k.script")
    assert wrapped == {"script": rest_v42.ARGV_WRAPPER, "job": {"environment": {
        "PATH": "/bin", "GTC_ARGV_COUNT": "5", "GTC_ARGV_SCRIPT": "/c/job-scripts/k.script", "GTC_ARGV_1": "a b",
        "GTC_ARGV_2": "-n", "GTC_ARGV_3": "$HOME", "GTC_ARGV_4": "l1\nl2", "GTC_ARGV_5": ""}}}
    assert "argv" not in submit({"script": "#!/bin/sh\n", "environment": ["PATH=/bin"], "argv": ["x"]})


@pytest.mark.parametrize("job, field", [
    ({"argv": "x --lr=1"}, "job.argv"),
    ({"argv": ["x", "a\0b"]}, "job.argv[1]"),
    ({"argv": ["x", "--lr=1"], "environment": ["PATH=/bin", "GTC_ARGV_1=mine"]}, "job.environment GTC_ARGV_1"),
    ({"argv": ["x", "--lr=1"], "environment": []}, "job.environment"),
])
def test_arguments_the_wrapper_cannot_pass_as_given_are_refused_naming_them(job, field):
    with pytest.raises(Refused) as refused:
        submit({"script": "#!/bin/bash\n", "environment": ["PATH=/bin"], **job})
    assert str(refused.value).startswith(field + ":")



def test_the_wrapper_runs_the_kept_script_with_its_arguments_whatever_the_jobs_environment(tmp_path):
    """The wrapper as slurmstepd would run it (bash, here without Slurm): the kept script gets the
    arguments in "$@" and none of the wrapper's variables; an exported function named ``unset`` and
    a ``BASH_ENV`` in the job's environment are the script's business, not the wrapper's."""
    import subprocess

    kept, wrapper, sourced = tmp_path / "kept", tmp_path / "wrapper", tmp_path / "bash_env"
    kept.write_text("#!/bin/bash\nprintf '%s\\0' \"$@\" > args; env | grep '^GTC_ARGV' > ours || true\n")
    wrapper.write_text(rest_v42.ARGV_WRAPPER)
    sourced.write_text("echo sourced >> sourced_by\n")
    kept.chmod(0o700)
    wrapper.chmod(0o700)
    args = ["a b", "-n", "$(id)", "l1\nl2", ""]
    body = submit({"script": "#!/bin/bash\n", "environment": ["PATH=/usr/bin:/bin", f"BASH_ENV={sourced}",
                                                               "BASH_FUNC_unset%%=() { :; }"], "argv": ["x", *args]})
    env = rest_v42.wrap_argv(body, str(kept))["job"]["environment"]
    subprocess.run([str(wrapper)], env=env, cwd=tmp_path, check=True, timeout=30)
    assert (tmp_path / "args").read_text().split("\0")[:-1] == args
    assert (tmp_path / "ours").read_text() == ""
    assert (tmp_path / "sourced_by").read_text() == "sourced\n"  # by the script's bash only

def test_argv_outside_a_submit_is_refused():
    with pytest.raises(Refused, match="^argv:.*at its submit"):
        request_38("POST", "/slurm/v0.0.42/job/7", {}, {"argv": ["x", "--lr=1"]})


META = {"plugin": {"type": "openapi/v0.0.38"}, "Slurm": {"version": {"major": 22, "micro": 8, "minor": 5},
                                                          "release": "22.05.8"}}


def test_a_job_comes_back_with_state_arrays_exit_code_structs_and_number_structs():
    job = {"job_id": 4, "job_state": "FAILED", "exit_code": 3 << 8, "derived_exit_code": 0, "time_limit": 5,
           "start_time": 1796426880, "cores_per_socket": None, "node_count": 2}
    status, out = answer_42("job", 200, json.dumps({"meta": META, "errors": [], "jobs": [job]}))
    got = out["jobs"][0]
    assert got["job_state"] == ["FAILED"]
    assert got["exit_code"] == {"status": ["ERROR"], "return_code": {"set": True, "infinite": False, "number": 3},
                                "signal": {"id": {"set": False, "infinite": False, "number": 0}, "name": ""}}
    assert got["time_limit"] == {"set": True, "infinite": False, "number": 5}
    assert got["cores_per_socket"] == {"set": False, "infinite": False, "number": 0}
    assert out["meta"]["slurm"]["release"] == "22.05.8"
    assert exit_code_42(9)["status"] == ["SIGNALED"] and exit_code_42(9)["signal"]["name"] == "KILL"
    assert exit_code_42(0xFFFFFFFF)["status"] == ["PENDING"]


def test_nodes_partitions_accounting_errors_and_text_answers():
    node = {"name": "a3-0", "state": "idle", "state_flags": ["DRAIN"], "next_state_after_reboot": "invalid",
            "next_state_after_reboot_flags": [], "free_memory": 100, "boot_time": 0}
    out = answer_42("nodes", 200, json.dumps({"meta": META, "nodes": [node]}))[1]["nodes"][0]
    assert out["state"] == ["IDLE", "DRAIN"] and "state_flags" not in out and out["free_mem"]["number"] == 100
    part = {"name": "a3", "state": "UP", "nodes": "a3-[0-1]", "total_nodes": 2, "max_time_limit": -1,
            "flags": ["default"]}
    out = answer_42("partitions", 200, json.dumps({"meta": META, "partitions": [part]}))[1]["partitions"][0]
    assert out["partition"]["state"] == ["UP"] and out["maximums"]["time"]["infinite"] is True
    db = {"job_id": 4, "state": {"current": "FAILED", "reason": "None"}, "time": {"limit": 5},
          "exit_code": {"status": "SUCCESS", "return_code": 0}, "steps": [
              {"step": {"job_id": 4, "id": "batch"}, "state": "FAILED", "exit_code": {"status": "SUCCESS"}}]}
    status, out = answer_42("db_job", 200, json.dumps({"meta": META, "jobs": [db]}))
    rest_v42.correct_db_exit_codes(out, {"4": ("3:0", "0:0"), "4.batch": ("3:0", "")})
    got = out["jobs"][0]
    assert got["state"]["current"] == ["FAILED"] and got["steps"][0]["state"] == ["FAILED"]
    assert got["exit_code"]["status"] == ["ERROR"] and got["exit_code"]["return_code"]["number"] == 3
    assert got["steps"][0]["exit_code"]["return_code"]["number"] == 3
    assert rest_v42.exit_code_from_sacct("0:15")["signal"]["name"] == "TERM"
    status, out = answer_42("submit", 500, json.dumps({"meta": META, "errors": [
        {"error_code": 2009, "error": "Job script not specified"}]}))
    assert out["errors"] == [{"description": "", "error_number": 2009, "error": "Job script not specified",
                              "source": "slurmrestd"}]
    status, out = answer_42("submit", 200, json.dumps({"meta": META, "job_id": 5, "step_id": "BATCH", "errors": [
        {"error_code": 2042, "error": "Job is in held state, pending scheduler release"}]}))
    assert out["job_id"] == 5 and out["step_id"] == "batch" and out["errors"] == []
    assert out["warnings"][0]["description"].startswith("Job is in held state")
    status, out = answer_42("jobs", 404, b"Unable find requested URL. Please view /openapi/v3 for API reference.")
    assert status == 404 and out["errors"][0]["description"].startswith("Unable find requested URL")

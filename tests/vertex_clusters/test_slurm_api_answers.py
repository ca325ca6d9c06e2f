"""Slurm's v0.0.42 REST answers read into our JobStatus and NodeStatus (slurm_answers.py), and
the Slurm Job API's envelope (client.py). Pure; fixtures in fixtures/slurm_v0.0.42 (built from
Slurm's own spec and dumpers, each validated against that spec here: SOURCES.md)."""

import json
from pathlib import Path

import jsonschema
import pytest

from jupyter_gtc.exceptions import ActionNotSupported, CommandError, SlurmError, SpecError
from jupyter_gtc.slurm.commands import state_refusal
from jupyter_gtc.slurm.parse import JobStatus
from jupyter_gtc.vertex_clusters.client import SlurmApiError, slurm_answer, slurm_error_text
from jupyter_gtc.vertex_clusters.slurm_answers import (jobs_from_accounting, jobs_from_info, nodes_from_answer,
                                                       ping_ok)
from jupyter_gtc.vertex_clusters.slurm_api import SlurmJobApi

FIXTURES = Path(__file__).parent / "fixtures" / "slurm_v0.0.42"
SQUEUE_V42 = Path(__file__).parent.parent / "slurm" / "fixtures" / "squeue_json" / "v0.0.42_24.11.json"
SCHEMAS = json.loads((FIXTURES / "openapi_v0.0.42_schemas.json").read_text())["schemas"]


def answer(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


@pytest.mark.parametrize("name, schema", [
    ("nodes.json", "v0.0.42_openapi_nodes_resp"), ("slurmdb_jobs.json", "v0.0.42_openapi_slurmdbd_jobs_resp"),
    ("job_submit.json", "v0.0.42_openapi_job_submit_response"),
    ("job_submit_refused.json", "v0.0.42_openapi_job_submit_response"),
    ("job_update_refused.json", "v0.0.42_openapi_job_post_response"), ("ping.json", "v0.0.42_openapi_ping_array_resp"),
])
def test_each_fixture_is_what_slurms_spec_says(name, schema):
    jsonschema.Draft7Validator({"$ref": f"#/components/schemas/{schema}", "components": {"schemas": SCHEMAS}}) \
        .validate(answer(name))


def test_nodes_read_as_scontrol_reads_them():
    nodes = {n.name: n for n in nodes_from_answer(answer("nodes.json"))}
    idle, drained, down, maint, login = (nodes[n] for n in ("a3-0", "a3-1", "a3-2", "a3-3", "login-0"))
    assert (idle.state, idle.flags, idle.reason, idle.ready, idle.gpus, idle.gpus_allocated) == \
        ("IDLE", (), None, True, 8, 0)
    assert (drained.state, drained.flags, drained.display_state) == ("MIXED", ("DRAIN",), "mixed+drain")
    assert drained.reason == "gtc health: ecc errors on GPU 3" and not drained.ready
    assert (drained.gpus_allocated, drained.cpus, drained.cpus_allocated) == (2, 208, 16)
    assert (drained.memory_mb, drained.memory_allocated_mb) == (1872000, 65536)
    assert (down.state, down.flags, down.reason) == ("DOWN", ("NOT_RESPONDING",), "Not responding")
    assert maint.flags == ("DRAIN", "MAINTENANCE") and maint.partitions == ("a3", "debug")
    assert (login.gpus, login.partitions, idle.partitions) == (0, (), ("a3",))
    assert idle.address == "a3-0" and idle.extra["Version"] == "24.11.7"


def test_a_node_whose_gres_is_empty_counts_its_gpus_from_tres():
    [node] = nodes_from_answer({"nodes": [{"name": "g", "state": ["ALLOCATED"], "gres": "",
                                           "tres": "cpu=8,gres/gpu=4", "tres_used": "cpu=8,gres/gpu=4"}]})
    assert (node.state, node.gpus, node.gpus_allocated) == ("ALLOCATED", 4, 4)


def job(job_id, state, **fields):
    return JobStatus(job_id=job_id, state=state, user="ada", work_dir="/home/ada/proj", name=fields.pop("name"),
                     submit_time=1735725590.0, log_path=f"/home/ada/proj/slurm-{fields.pop('out', job_id)}.out",
                     **fields)


ACCOUNTED = [
    job("103", "COMPLETED", exit_code=0, reason=None, nodes="a3-[0-1]", name="train", start_time=1735725600.0,
        end_time=1735726600.0, comment="gtc-hang-timeout=600"),
    job("104", "FAILED", exit_code=3, reason="NonZeroExitCode", nodes="a3-[0-1]", name="eval",
        start_time=1735725600.0, end_time=1735725700.0),
    job("105", "FAILED", exit_code=128 + 11, reason="RaisedSignal", nodes="a3-[0-1]", name="crash",
        start_time=1735725600.0, end_time=1735725650.0),
    job("106_0", "COMPLETED", exit_code=0, nodes="a3-[0-1]", name="sweep", array_job_id="106", array_task_id=0,
        start_time=1735725600.0, end_time=1735725900.0, out="107"),
    job("106_[2-3]", "PENDING", reason="Resources", name="sweep", array_job_id="106", out="106"),
    job("110", "CANCELLED", exit_code=128 + 9, nodes="a3-[0-1]", name="long", start_time=1735725600.0,
        end_time=1735725800.0, restart_count=1),
    job("111", "RUNNING", nodes="a3-[0-1]", name="running", start_time=1735725600.0),
]


def test_accounting_reads_as_sacct_does():
    assert jobs_from_accounting(answer("slurmdb_jobs.json")) == ACCOUNTED


def test_the_jobs_list_is_squeues_document():
    """GET /slurm/v0.0.42/jobs/ answers what squeue --json prints on 24.11 (one dumper)."""
    jobs = {j.job_id: j for j in jobs_from_info(json.loads(SQUEUE_V42.read_text()))}
    assert (jobs["101"].state, jobs["101"].nodes, jobs["101"].exit_code) == ("RUNNING", "a3-[0-1]", None)
    assert (jobs["104"].state, jobs["104"].exit_code, jobs["105"].exit_code) == ("FAILED", 3, 139)
    assert (jobs["106_1"].array_job_id, jobs["109"].state) == ("106", "COMPLETING")


def test_errors_in_an_answer_are_raised_with_slurms_words():
    with pytest.raises(SlurmError, match="Invalid partition name specified"):
        nodes_from_answer(answer("job_submit_refused.json"))
    assert ping_ok(answer("ping.json")) and not ping_ok({"pings": [{"responding": False, "primary": True}]})


def test_the_envelope_body_string_or_structured_body():
    text = json.dumps(answer("job_submit.json"))
    assert slurm_answer({"status": 200, "body": text}) == (200, answer("job_submit.json"))
    assert slurm_answer({"status": "200", "structuredBody": {"job_id": 7}}) == (200, {"job_id": 7})
    status, data = slurm_answer({"status": 502, "body": "<html>Bad Gateway</html>"})
    assert status == 502 and slurm_error_text(data) == "<html>Bad Gateway</html>"
    assert slurm_error_text(answer("job_submit_refused.json")) == \
        "Invalid partition name specified; Batch job submission failed"


def test_a_slurm_refusal_is_a_command_error_whose_reason_the_services_read():
    """services/jobs.py turns a refused hold into JobStateConflict by Slurm's reason in stderr,
    and services/submit.py a refused submit into JobSubmitError (and removes the job's folder)."""
    text = slurm_error_text(answer("job_update_refused.json"))
    error = SlurmApiError("HTTP_METHOD_POST", "/slurm/v0.0.42/job/7", 500, text, "demo")
    assert isinstance(error, CommandError) and state_refusal(error) == "Job has already finished"
    assert str(error) == ("Slurm REST API POST /slurm/v0.0.42/job/7 on training cluster demo answered 500: "
                          "Job has already finished; Job update requested failed")


def test_requeue_says_what_to_do_and_a_job_id_cannot_name_another_path():
    api = SlurmJobApi(clusters=None, cluster_id="demo", host=None)
    with pytest.raises(ActionNotSupported, match="`jobs: ssh`"):
        api.requeue("42")
    with pytest.raises(SpecError, match="job_id"):
        api.cancel(["42/../../nodes"])


def test_accounting_that_found_no_job_is_an_empty_answer_not_a_failed_poll():
    # Slurm 22.05's dbv0.0.38 (the local endpoint's) says "no match" as an error; the poller asks
    # for jobs that just left the queue, which slurmctld may not have sent to slurmdbd yet.
    nothing = {"jobs": [], "errors": [{"description": "Nothing found with query", "error_number": 9003,
                                       "error": "Nothing found", "source": "_dump_jobs"}]}
    assert jobs_from_accounting(nothing) == []
    with pytest.raises(SlurmError, match="Unable to query"):  # any other error still is one
        jobs_from_accounting({"jobs": [], "errors": [{"error": "Unable to query slurmdbd"}]})

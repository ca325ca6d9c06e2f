"""``squeue --json`` of every Slurm release users run, read into the same JobStatus.

Each fixture holds the same nine jobs in one release's layout (tests/slurm/fixtures/squeue_json,
provenance in SOURCES.md), so one table of expected values serves them all.
"""

import json
from pathlib import Path

import pytest

from jupyter_gtc.slurm.parse import JobStatus, parse_squeue_json

FIXTURES = Path(__file__).parent / "fixtures" / "squeue_json"
LAYOUTS = sorted(FIXTURES.glob("v0.0.*.json"))
WORK = "/home/ada/proj"


def job(job_id, state, **fields):
    return JobStatus(job_id=job_id, state=state, user="ada", work_dir=WORK, **fields)


EXPECTED = [
    job("101", "RUNNING", nodes="a3-[0-1]", name="train", start_time=1735725600.0, submit_time=1735725590.0,
        restart_count=1, log_path=f"{WORK}/logs/train-101.out"),  # -o logs/%x-%j.out
    job("102", "PENDING", reason="Resources", name="eval", submit_time=1735725700.0,
        log_path=f"{WORK}/slurm-102.out"),  # sbatch's default
    job("103", "COMPLETED", exit_code=0, nodes="a3-2", name="prep", start_time=1735720010.0,
        end_time=1735720610.0, submit_time=1735720000.0, log_path="/scratch/ada/a3-2-103.log"),  # -o .../%N-%j.log
    job("104", "FAILED", exit_code=3, reason="NonZeroExitCode", nodes="a3-3", name="fit", start_time=1735721005.0,
        end_time=1735721065.0, submit_time=1735721000.0, log_path=f"{WORK}/slurm-104.out"),
    job("105", "FAILED", exit_code=128 + 11, reason="RaisedSignal", nodes="a3-3", name="crash",  # SIGSEGV
        start_time=1735722004.0, end_time=1735722034.0, submit_time=1735722000.0, log_path=f"{WORK}/crash.out"),
    job("106_0", "COMPLETED", exit_code=0, nodes="a3-1", name="sweep", array_job_id="106", array_task_id=0,
        start_time=1735723010.0, end_time=1735723310.0, submit_time=1735723000.0,
        log_path=f"{WORK}/sweep-106_0.out"),  # -o sweep-%A_%a.out
    job("106_1", "RUNNING", nodes="a3-2", name="sweep", array_job_id="106", array_task_id=1,
        start_time=1735723320.0, submit_time=1735723000.0, log_path=f"{WORK}/sweep-106_1.out"),
    # The array's tasks 2-3, not started: one record, no task id; %a of no task is NO_VAL, as
    # Slurm itself reports it from 23.02 to 24.11.
    job("106", "PENDING", reason="Resources", name="sweep", submit_time=1735723000.0,
        log_path=f"{WORK}/sweep-106_4294967294.out"),
    job("109", "COMPLETING", name="export", nodes="a3-0", start_time=1735724005.0, submit_time=1735724000.0,
        log_path=f"{WORK}/slurm-109.out"),  # finished, epilog still running: not finished for us yet
]


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: p.stem)
def test_every_release_reads_the_same(layout):
    jobs = parse_squeue_json(layout.read_text())
    assert [j.job_id for j in jobs] == [j.job_id for j in EXPECTED]
    for got, want in zip(jobs, EXPECTED):
        assert got == want, got.job_id


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda p: p.stem)
def test_a_fixture_is_the_layout_its_name_says(layout):
    meta = json.loads(layout.read_text())["meta"]
    version, release = layout.stem.split("_")
    if version == "v0.0.38":
        assert meta["plugin"]["type"] == "openapi/v0.0.38" and meta["Slurm"]["release"].startswith(release)
    elif version == "v0.0.39":  # 23.02's CLI meta: "plugins" and "Slurm"
        assert meta["plugins"]["data_parser"] == "data_parser/v0.0.39" and meta["Slurm"]["release"].startswith(release)
    else:
        assert meta["plugin"]["data_parser"] == f"data_parser/{version}"
        assert meta["slurm"]["release"].startswith(release)


def test_all_the_releases_are_there():
    assert [p.stem.split("_")[0] for p in LAYOUTS] == [f"v0.0.{n}" for n in range(38, 44)]
    assert (FIXTURES / "SOURCES.md").read_text().count(".json`") >= len(LAYOUTS)


def _one(job_state, exit_code=None):
    fields = {"job_id": 7, "job_state": job_state, "name": "n", "user_name": "ada"}
    if exit_code is not None:
        fields["exit_code"] = exit_code
    [status] = parse_squeue_json(json.dumps({"jobs": [fields]}))
    return status


@pytest.mark.parametrize("listed, word", [
    (["RUNNING"], "RUNNING"),
    (["RUNNING", "CONFIGURING", "POWER_UP_NODE"], "CONFIGURING"),  # nodes still booting
    (["COMPLETED", "COMPLETING"], "COMPLETING"),
    (["PENDING", "REQUEUED"], "REQUEUED"),
    (["FAILED", "LAUNCH_FAILED"], "FAILED"),  # a flag squeue does not print
])
def test_a_listed_state_reads_as_squeue_prints_it(listed, word):
    assert _one(listed).state == word


def _unset():
    return {"set": False, "infinite": False, "number": 0}


def _set(n):
    return {"set": True, "infinite": False, "number": n}


@pytest.mark.parametrize("exit_code, ours", [
    ({"status": ["SUCCESS"], "return_code": _set(0), "signal": {"id": _unset(), "name": ""}}, 0),
    ({"status": ["ERROR"], "return_code": _set(2), "signal": {"id": _unset(), "name": ""}}, 2),
    ({"status": ["SIGNALED"], "return_code": _unset(), "signal": {"id": _set(15), "name": "TERM"}}, 143),
    ({"status": ["SIGNALED"], "return_code": _unset(), "signal": {"id": _set(9), "name": "KILL"}}, 137),
    ({"status": ["PENDING"], "return_code": _unset(), "signal": {"id": _unset(), "name": ""}}, None),
    (_set(15), 143),  # 23.02: the wait status as a number
])
def test_exit_codes_of_23_02_on(exit_code, ours):
    assert _one(["CANCELLED"], exit_code).exit_code == ours
    assert _one(["RUNNING"], exit_code).exit_code is None  # only a finished job has one

"""``sacct -P`` as the accounting database reports jobs (fixtures/sacct, a real capture)."""

from __future__ import annotations

from pathlib import Path

from jupyter_gtc.slurm.parse import parse_sacct

FIXTURE = Path(__file__).parent / "fixtures" / "sacct" / "22.05.8.txt"


def test_every_kind_of_ending_reads_as_squeue_would_say_it():
    jobs = {j.job_id: j for j in parse_sacct(FIXTURE.read_text())}
    assert [(jobs[i].state, jobs[i].exit_code) for i in ("1", "2", "3", "12", "13")] == [
        ("COMPLETED", 0), ("FAILED", 3), ("TIMEOUT", 0), ("CANCELLED", 0), ("FAILED", 128 + 9)]
    assert jobs["1"].name == "done|with bar"  # the delimiter inside the last field is the name's
    assert jobs["1"].work_dir.endswith("/done_with_bar-20261202-153252") and jobs["1"].user == "root"
    assert jobs["3"].end_time - jobs["3"].start_time == 89


def test_array_tasks_belong_to_their_array_and_running_jobs_have_no_exit_code_yet():
    jobs = {j.job_id: j for j in parse_sacct(FIXTURE.read_text())}
    assert [(j.array_task_id, j.exit_code) for i, j in sorted(jobs.items()) if j.parent_id == "4"] == [
        (0, 0), (1, 1), (2, 2)]
    running = jobs["6_2"]
    assert (running.state, running.exit_code, running.end_time, running.nodes) == ("RUNNING", None, None, "gpu-[0-1]")


def test_a_pending_array_remainder_and_a_job_without_nodes():
    [pending] = parse_sacct("7_[2-9]|PENDING|0:0|Unknown|Unknown|2026-12-02T15:32:52|None assigned|ada|/home/ada|train\n")
    assert (pending.parent_id, pending.array_task_id, pending.nodes, pending.start_time) == ("7", None, "", None)
    assert parse_sacct("\n  \nnot|enough|fields\n") == []

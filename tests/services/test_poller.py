"""The poller on its own: how it merges statuses, and that a failed poll is only a warning."""

import json
import os
import pwd
import sys
from pathlib import Path

from jupyter_gtc.services.poller import ClusterPoller, _aggregate
from jupyter_gtc.slurm.commands import SlurmCommands
from jupyter_gtc.slurm.parse import JobStatus, parse_jobcomp, parse_squeue_json
from jupyter_gtc.state import JobRecord, Store

DATA = Path(__file__).parent.parent / "data"
STUB = Path(__file__).parent.parent / "slurm" / "squeue_stub.py"


def stand_in_squeue(bin_dir: Path) -> None:
    """A ``squeue`` on PATH that prints the jobs of $QUEUE_FILE as the real one prints -O fields."""
    bin_dir.mkdir()
    (bin_dir / "squeue").write_text(f'#!/bin/sh\nexec {sys.executable} {STUB} "$@"\n')
    (bin_dir / "squeue").chmod(0o755)


def test_a_failed_poll_is_a_warning_and_the_last_state_stays(tmp_path):
    store = Store(tmp_path / "state.db")
    store.add_job(JobRecord("gone", "7", "j", "RUNNING", str(tmp_path)))
    (tmp_path / "slurm.conf").write_text("# a cluster that is not there\n")
    broken = SlurmCommands({"SLURM_CONF": str(tmp_path / "slurm.conf")}, timeout=10)
    poller = ClusterPoller("gone", lambda: broken, store)
    poller._watched.add("7")  # watched without starting the thread: this test ticks by hand
    assert poller.tick() is False
    assert poller.warning.startswith("could not poll gone: squeue")
    assert store.get_job("gone", "7").state == "RUNNING"


def test_array_tasks_merge_into_one_view():
    running = parse_squeue_json((DATA / "squeue-22.05.json").read_text())
    view = _aggregate("2", [s for s in running if s.parent_id == "2"])
    assert view.state == "RUNNING" and set(view.tasks) == {"0", "1"} and view.exit_code is None

    finished = parse_jobcomp((DATA / "jobcomp-22.05.txt").read_text())
    view = _aggregate("2", [s for s in finished if s.parent_id == "2"])
    assert view.state == "CANCELLED" and view.finished and view.end_time is not None


def test_the_worst_task_outcome_names_the_array():
    tasks = [JobStatus(f"5_{i}", st, code, array_job_id="5", array_task_id=i)
             for i, (st, code) in enumerate([("COMPLETED", 0), ("TIMEOUT", 0), ("FAILED", 2)])]
    view = _aggregate("5", tasks)
    assert (view.state, view.exit_code) == ("FAILED", 2)
    pending_rest = JobStatus("5", "PENDING", array_job_id="5")
    assert _aggregate("5", tasks + [pending_rest]).state == "PENDING"


def test_a_single_job_keeps_its_own_fields():
    view = _aggregate("9", [JobStatus("9", "COMPLETED", 0, None, "a-[0-1]", "n", start_time=1.0, end_time=5.0)])
    assert (view.state, view.exit_code, view.nodes, view.end_time) == ("COMPLETED", 0, "a-[0-1]", 5.0)


def test_a_job_that_ends_while_squeue_still_shows_it_completing_ends(tmp_path):
    """The completion line can be read while squeue still shows the job COMPLETING; it must
    still say how the job ended once squeue forgets it. Slurm cannot be made to do this on
    demand, so ``squeue`` here is a stand-in program on PATH that prints what the test says."""
    bin_dir, queue_file, jobcomp = tmp_path / "bin", tmp_path / "squeue.json", tmp_path / "jobcomp.txt"
    stand_in_squeue(bin_dir)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "QUEUE_FILE": str(queue_file)}
    store = Store(tmp_path / "state.db")
    store.add_job(JobRecord("c", "7", "train", "RUNNING", str(tmp_path)))
    poller = ClusterPoller("c", lambda: SlurmCommands(env, jobcomp_file=jobcomp), store)
    poller._watched.add("7")  # watched without starting the thread: this test ticks by hand

    job = {"JobId": "7", "ArrayJobId": "7", "State": "COMPLETING", "Name": "train", "NodeList": "a3-0",
           "exit_code": "0:0", "StartTime": "1795968064", "EndTime": "1795968070", "UserName": "root",
           "WorkDir": str(tmp_path)}
    queue_file.write_text(json.dumps([job]))
    jobcomp.write_text("JobId=7 UserId=root(0) GroupId=root(0) Name=train JobState=CANCELLED Partition=a3 "
                       "StartTime=2026-11-29T16:01:04 EndTime=2026-11-29T16:01:10 NodeList=a3-0 NodeCnt=1 "
                       "ExitCode=0:15\n")
    poller.tick()
    assert store.get_job("c", "7").state == "COMPLETING"  # slurmctld's view wins while it has one

    queue_file.write_text(json.dumps([]))
    poller.tick()
    assert store.get_job("c", "7").state == "CANCELLED"
    assert "7" not in poller._watched


def test_a_finished_job_only_the_completion_file_knows_is_listed_with_its_log(tmp_path):
    """A terminal's job that ended before this process looked (slurmctld forgot it): the
    completion file has it, but not where it wrote; sbatch's default file in its folder is its
    log if this job wrote it, not an older job's of the same id (a cluster made again numbers
    from 1 again). ``squeue`` is a stand-in that shows an empty queue, as Slurm would by then."""
    import time
    from datetime import datetime

    from jupyter_gtc.services.jobs import ForeignJob

    bin_dir, queue_file, jobcomp, work = (tmp_path / name for name in ("bin", "squeue.json", "jobcomp.txt", "w"))
    stand_in_squeue(bin_dir)
    work.mkdir()
    queue_file.write_text(json.dumps([]))
    started = time.time() - 30
    stamp = datetime.fromtimestamp(started).isoformat(timespec="seconds")
    # This machine's user, who owns the log below: a job's log is read only from its user's file.
    me = pwd.getpwuid(os.getuid())
    jobcomp.write_text(f"JobId=12 UserId={me.pw_name}({me.pw_uid}) GroupId={me.pw_name}({me.pw_gid}) Name=eval.sh JobState=COMPLETED Partition=a3 "
                       f"StartTime={stamp} EndTime={stamp} NodeList=a3-0 NodeCnt=1 WorkDir={work} "
                       f"SubmitTime={stamp} ExitCode=0:0\n")
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "QUEUE_FILE": str(queue_file)}
    poller = ClusterPoller("c", lambda: SlurmCommands(env, jobcomp_file=jobcomp), Store(tmp_path / "state.db"),
                           linger=0.1)

    snapshot = poller.snapshot(max_age=0)
    view = snapshot.views["12"]
    assert "12" not in snapshot.queued
    assert (view.state, view.name, view.user, view.exit_code, view.log_path) == ("COMPLETED", "eval.sh", me.pw_name, 0, "")
    job = ForeignJob("c", view, None, poller)
    assert job.log_path is None and not job.managed and job.finished
    log = work / "slurm-12.out"
    log.write_text("an older job 12's output\n")
    os.utime(log, (started - 3600, started - 3600))
    assert job.log_path is None
    log.write_text("eval done\n")
    assert job.log_path == log and job.logs() == "eval done\n"


def test_a_tick_builds_again_only_the_views_of_jobs_that_changed(tmp_path):
    """Three held jobs, then one released: the listener hears of that one only, and the
    other two keep the very views they had (squeue's lines for them did not change)."""
    bin_dir, queue_file = tmp_path / "bin", tmp_path / "squeue.json"
    stand_in_squeue(bin_dir)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "QUEUE_FILE": str(queue_file)}
    store = Store(tmp_path / "state.db")
    rows = [{"JobId": str(i), "ArrayJobId": str(i), "State": "PENDING", "Reason": "JobHeldUser", "UserName": "ada",
             "WorkDir": str(tmp_path), "Name": f"held {i}"} for i in (1, 2, 3)]
    poller = ClusterPoller("c", lambda: SlurmCommands(env), store)
    for row in rows:
        store.add_job(JobRecord("c", row["JobId"], row["Name"], "PENDING", str(tmp_path)))
        poller._watched.add(row["JobId"])  # watched without starting the thread: this test ticks by hand
    heard: list[list[str]] = []
    poller.subscribe(lambda changed: heard.append(sorted(v.slurm_id for v in changed)))
    queue_file.write_text(json.dumps(rows))
    poller.tick()
    before = {i: poller.view(i) for i in ("1", "2", "3")}
    rows[1] = {**rows[1], "State": "RUNNING", "Reason": "None", "StartTime": "1795968064", "NodeList": "a3-0"}
    queue_file.write_text(json.dumps(rows))
    poller.tick()
    assert heard == [["1", "2", "3"], ["2"]]
    assert poller.view("1") is before["1"] and poller.view("3") is before["3"]
    assert (poller.view("2").state, store.get_job("c", "2").state) == ("RUNNING", "RUNNING")

"""Parsing Slurm's output, on lines captured from Slurm 22.05."""

import json
from pathlib import Path

import pytest

from jupyter_gtc.slurm.parse import (
    expand_output_path, parse_gres_gpus, parse_jobcomp, parse_key_values, parse_scontrol_nodes, parse_squeue_json,
    parse_tres,
)

MIXED = (
    "NodeName=a3-0 Arch=x86_64 CoresPerSocket=208  CPUAlloc=1 CPUEfctv=208 CPUTot=208 CPULoad=0.75 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:h100:8 GresDrain=N/A GresUsed=gpu:h100:3(IDX:0-2) "
    "NodeAddr=127.0.0.1 NodeHostName=vm Port=56865 Version=22.05.8 OS=Linux 6.18.44-fc-v669 #1 SMP "
    "PREEMPT_DYNAMIC @0  RealMemory=1916928 AllocMem=1024 FreeMem=21586 Sockets=1 Boards=1 State=MIXED "
    "ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=a3  BootTime=2026-11-29T15:43:08 "
    "SlurmdStartTime=2026-11-29T15:50:46 LastBusyTime=2026-11-29T15:50:47 CfgTRES=cpu=208,mem=1872G,billing=208 "
    "AllocTRES=cpu=1,mem=1G CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
    "ExtSensorsTemp=n/s"
)
DRAINED = (
    "NodeName=a3-1 Arch=x86_64 CoresPerSocket=208  CPUAlloc=0 CPUTot=208 Gres=gpu:h100:8 GresUsed=gpu:h100:0(IDX:N/A) "
    "NodeAddr=127.0.0.1 RealMemory=1916928 AllocMem=0 State=IDLE+DRAIN Partitions=a3,debug "
    "Reason=xid 79 on gpu=3, see dmesg [root@2026-11-29T16:01:02]"
)
DOWN = "NodeName=a3-2 CPUTot=4 State=DOWN*+NOT_RESPONDING Partitions=a3 Reason=Not responding [slurm@2026-11-29T16:02:00]"


def test_a_mixed_node():
    [node] = parse_scontrol_nodes(MIXED)
    assert (node.name, node.state, node.flags, node.reason) == ("a3-0", "MIXED", (), None)
    assert (node.cpus, node.cpus_allocated) == (208, 1)
    assert (node.memory_mb, node.memory_allocated_mb) == (1916928, 1024)
    assert (node.gpus, node.gpus_allocated) == (8, 3)
    assert node.partitions == ("a3",) and node.ready
    assert node.extra["OS"] == "Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0"


def test_a_drained_node_keeps_its_whole_reason():
    [node] = parse_scontrol_nodes(DRAINED)
    assert node.state == "IDLE" and node.flags == ("DRAIN",)
    assert node.reason == "xid 79 on gpu=3, see dmesg [root@2026-11-29T16:01:02]"
    assert node.partitions == ("a3", "debug")
    assert not node.ready and node.display_state == "idle+drain"


def test_a_down_node_that_does_not_respond():
    [node] = parse_scontrol_nodes(DOWN)
    assert node.state == "DOWN" and node.flags == ("NOT_RESPONDING",) and not node.ready
    assert node.gpus == 0


def test_several_nodes_and_noise_lines():
    nodes = parse_scontrol_nodes("\n".join([MIXED, "", "   ", DRAINED, DOWN]))
    assert [n.name for n in nodes] == ["a3-0", "a3-1", "a3-2"]


def test_key_values_split_only_at_keys():
    assert parse_key_values("A=1 B=two words C=x=y") == {"A": "1", "B": "two words", "C": "x=y"}


def test_gres_and_tres():
    assert parse_gres_gpus("gpu:h100:8(S:0-1),gpu:l4:1") == 9
    assert parse_gres_gpus("gpu:h100:3(IDX:0,2,5)") == 3
    assert parse_gres_gpus("gpu:2") == 2
    assert parse_gres_gpus("(null)") == 0
    assert parse_tres("cpu=4,mem=8G,gres/gpu=2") == {"cpu": 4, "mem": 8192, "gres/gpu": 2}


# -- jobs, on output captured from Slurm 22.05 (tests/data) -------------------------------


DATA = Path(__file__).parent.parent / "data"


def test_squeue_json_jobs_and_array_tasks():
    jobs = {j.job_id: j for j in parse_squeue_json((DATA / "squeue-22.05.json").read_text())}
    assert set(jobs) == {"1", "2_0", "2_1"}
    failed = jobs["1"]
    assert (failed.state, failed.exit_code, failed.reason, failed.finished) == ("FAILED", 3, "NonZeroExitCode", True)
    task = jobs["2_1"]
    assert (task.state, task.array_job_id, task.array_task_id, task.parent_id) == ("RUNNING", "2", 1, "2")
    assert task.exit_code is None and task.end_time is None and not task.finished
    assert {j.user for j in jobs.values()} == {"root"}  # squeue's user_name


def test_squeue_json_of_newer_slurm_releases():
    newer = {"jobs": [{"job_id": 7, "job_state": ["COMPLETED"], "exit_code": {"set": True, "number": 0},
                       "array_job_id": {"set": True, "number": 0}, "array_task_id": {"set": False, "number": 0},
                       "start_time": {"set": True, "number": 100}, "end_time": {"set": True, "number": 160},
                       "name": "n", "nodes": "a-0", "state_reason": "None", "user_name": "ada"}]}
    [job] = parse_squeue_json(json.dumps(newer))
    assert (job.job_id, job.state, job.exit_code, job.end_time, job.reason) == ("7", "COMPLETED", 0, 160.0, None)
    assert job.user == "ada"


def test_signals_become_128_plus_the_signal():
    text = json.dumps({"jobs": [{"job_id": 1, "job_state": "CANCELLED", "exit_code": 15}]})
    assert parse_squeue_json(text)[0].exit_code == 143


def test_jobcomp_lines():
    jobs = parse_jobcomp((DATA / "jobcomp-22.05.txt").read_text())
    assert [(j.job_id, j.state, j.exit_code) for j in jobs] == [
        ("1", "FAILED", 3), ("2_1", "CANCELLED", 0), ("2_0", "CANCELLED", 0)]
    assert jobs[0].end_time is not None and jobs[1].parent_id == "2"
    assert jobs[0].user == "root"  # from UserId=root(0)


def test_squeue_json_errors_are_raised_not_read_as_an_empty_queue():
    from jupyter_gtc.exceptions import SlurmError

    down = {"errors": [{"error": "Unable to contact slurm controller (connect failure)", "error_number": 1007,
                        "source": "slurm_load_jobs"}], "jobs": []}
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        parse_squeue_json(json.dumps(down))


def test_where_a_job_writes_is_expanded_as_slurm_writes_it():
    jobs = {j.job_id: j for j in parse_squeue_json((DATA / "squeue-22.05.json").read_text())}
    # squeue --json (22.05) leaves standard_output empty for sbatch's default, relative to the job's folder.
    assert jobs["1"].log_path == "/work/main/slurm-1.out" and jobs["1"].work_dir == "/work/main"
    assert jobs["2_1"].log_path == "/work/main/slurm-2_1.out"
    assert jobs["1"].submit_time is not None

    def where(pattern, **job):
        return expand_output_path(pattern, **{"work_dir": "/w", "job_id": "42", **job})

    assert where("/logs/%x-%j.%u.log", name="train", user="ada") == "/logs/train-42.ada.log"
    assert where("out-%A_%a.txt", job_id="45", array_job_id="41", array_task_id=3) == "/w/out-41_3.txt"
    assert where("o-%5j-%%.log") == "/w/o-00042-%.log"
    assert where("o-%N.log") == "/w/o-%N.log"  # no node yet: left for a later tick to fill
    assert where("o-%N.log", node="gpu-1.cluster") == "/w/o-gpu-1.log"
    assert where(r"/x/o-\%j.log") == "/x/o-%j.log"  # a backslash: taken literally


def test_jobcomp_lines_say_where_the_job_ran():
    [first, *_] = parse_jobcomp((DATA / "jobcomp-22.05.txt").read_text())
    assert (first.work_dir, first.log_path, first.submit_time is not None) == ("/work/main", "", True)

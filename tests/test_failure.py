"""Why a job failed, from its log (jupyter_gtc/failure.py): on logs that real failing jobs
wrote on a local cluster (tests/data/failure_logs: a Python error, a chained one, a file python
cannot open, a command not found, srun running a missing command, a torchrun whose second
worker raised, a segfault, a time limit), and on hostile ones."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from jupyter_gtc.failure import (
    HEAD_BYTES, LINE_CHARS, TAIL_BYTES, LogEnds, exit_meaning, failure_line, first_error, read_log_ends,
)
from jupyter_gtc.hosts import LOCAL

LOGS = Path(__file__).parent / "data" / "failure_logs"


def log(name: str) -> str:
    return (LOGS / f"{name}.log").read_text(errors="replace")


@pytest.mark.parametrize("name, cause", [
    ("python_modulenotfound", "ModuleNotFoundError: No module named 'foo_nope_xyz'"),
    ("python_chained", "ValueError: bad config"),  # the last of a chain is what was raised
    ("cant_open", "can't open file '/tmp/b-gen/home/jobs/blogs/cant_open-20261204-164703/train_tiny_missing.py':"
                  " [Errno 2] No such file or directory"),
    ("command_not_found", "line 2: not_a_command_xyz: command not found"),
    ("srun_missing_command", "slurmstepd-gpu-0: error: execve(): not_a_command_xyz: No such file or directory"),
    ("srun_python_error", "RuntimeError: CUDA out of memory (pretend)"),  # srun's line cuts the traceback
    ("torchrun_worker", "ZeroDivisionError: rank 1 divided by zero"),  # not torchrun's ChildFailedError
    ("segfault", "Segmentation fault"),
    ("timeout", "DUE TO TIME LIMIT"),
])
def test_the_line_that_says_why_in_real_logs(name, cause):
    found = first_error(log(name))
    assert found is not None and cause in found, found


def test_what_a_traceback_ends_with_is_the_error_whatever_its_name():
    """A recipe given a --data it cannot find (a real log: `gtc recipe run llama-pretrain --data
    mydata.jsonl`) dies of jupyter_gtc's own SpecErrors under torchrun's [rank0]: prefix; it was
    passed over for srun's 'task 0: Exited with exit code 1'. So were TimeoutExpired, StopIteration."""
    assert first_error(log("recipe_bad_flag")) == \
        "jupyter_gtc.exceptions.SpecErrors: 1 problem(s) in the recipe config:"
    for raised in ("subprocess.TimeoutExpired: Command 'x' timed out after 5 seconds", "StopIteration"):
        text = f'Traceback (most recent call last):\n  File "t.py", line 3, in <module>\n{raised}\n' \
               "srun: error: node-0: task 0: Exited with exit code 1\n"
        assert first_error(text) == raised
    # Outside a traceback, a line that merely starts with a capitalised word is no error.
    assert first_error("Epoch: 3\nDone: saved\n") is None


def test_torchrun_names_the_worker_not_its_own_traceback():
    text = log("torchrun_worker")
    assert "ChildFailedError" in text and text.rstrip().endswith("Exited with exit code 1")
    assert first_error(text) == "ZeroDivisionError: rank 1 divided by zero"


def test_of_several_processes_the_first_to_fail():
    """torchrun's ``[rankN]:`` prefixes (and srun --label's ``N: ``) tell processes apart: the
    first error is the cause, the others' (a collective cut short) follow from it."""
    text = "\n".join([
        "[rank1]: Traceback (most recent call last):",
        "[rank0]: Traceback (most recent call last):",
        '[rank1]:   File "train.py", line 9, in <module>',
        "[rank1]: FileNotFoundError: [Errno 2] No such file or directory: 'data/shard-1'",
        '[rank0]:   File "train.py", line 12, in <module>',
        "[rank0]: torch.distributed.DistBackendError: NCCL communicator was aborted",
        "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
        "srun: error: node-1: task 0: Exited with exit code 1",
    ])
    assert first_error(text) == "[Errno 2] No such file or directory: 'data/shard-1'".join(
        ["FileNotFoundError: ", ""])


def test_a_cut_off_job_is_what_stopped_it_not_what_the_program_said_after():
    text = ("step 10\nslurmstepd: error: *** JOB 7 ON gpu-0 CANCELLED AT 2026-12-04T16:50:01 DUE TO TIME LIMIT ***\n"
            "Traceback (most recent call last):\n  File \"t.py\", line 3\nKeyboardInterrupt\n")
    assert "DUE TO TIME LIMIT" in first_error(text)
    oom = "slurmstepd: error: Detected 1 oom_kill event in StepId=7.0. Some of the step tasks have been OOM Killed.\n"
    assert "oom_kill" in first_error("loading\n" + oom + "srun: error: n1: task 0: Out Of Memory\n")


def test_srun_saying_a_task_exited_is_the_last_resort():
    assert first_error("hello\nsrun: error: n1: task 0: Exited with exit code 3\n") == \
        "srun: error: n1: task 0: Exited with exit code 3"
    assert first_error("hello\nworld\n") is None
    assert first_error("") is None


def test_hostile_logs():
    huge = "x" * 5_000_000
    assert first_error(huge) is None  # one line, no newline, no error
    found = first_error(huge + "\nValueError: " + "y" * 5_000_000)
    assert found.startswith("ValueError: yyy") and len(found) == LINE_CHARS
    binary = bytes(range(256)).decode(errors="replace") * 1000
    assert first_error(binary + "\nerror: disk quota exceeded") == "error: disk quota exceeded"
    assert first_error("\x1b[31mRuntimeError: red\x1b[0m\x00") == "RuntimeError: red"
    assert first_error("Traceback (most recent call last):\n  File \"x\"\nOSError: no newline at the end") == \
        "OSError: no newline at the end"
    # Names that look like exceptions inside prose are not taken for one.
    assert first_error("ValueError handling is tested below\nloss went down; NaNError was not raised\n") is None


def test_what_the_state_and_exit_code_mean():
    assert exit_meaning(127) == "a command was not found"
    assert exit_meaning(126) == "a command was found but is not executable"
    assert "SIGKILL" in exit_meaning(137) and "out of memory" in exit_meaning(137)
    assert "segmentation fault" in exit_meaning(139)
    assert exit_meaning(1) is None and exit_meaning(None) is None
    assert failure_line("COMPLETED", 0, LogEnds("ok"), "/x") is None
    assert failure_line("RUNNING", None, None, None) is None
    assert failure_line("FAILED", 1, LogEnds(log("python_modulenotfound")), "/x") == \
        "FAILED (exit code 1): ModuleNotFoundError: No module named 'foo_nope_xyz'"
    assert failure_line("FAILED", 1, LogEnds("", missing=True), "/j/slurm-4.out") == \
        "FAILED (exit code 1); its log does not exist: /j/slurm-4.out"
    assert failure_line("FAILED", 2, LogEnds(""), "/j/s.out") == "FAILED (exit code 2); its log is empty: /j/s.out"
    assert failure_line("TIMEOUT", 143, LogEnds(log("timeout")), "/x") == (
        "TIMEOUT (it reached its time limit): slurmstepd-gpu-0: error: *** JOB 10 ON gpu-0 CANCELLED AT"
        " 2026-12-04T16:48:33 DUE TO TIME LIMIT ***")
    assert failure_line("OUT_OF_MEMORY", 137, LogEnds(""), "/x") == \
        "OUT_OF_MEMORY (it ran out of memory); its log is empty: /x"
    assert failure_line("FAILED", 137, LogEnds("", missing=True), "/x").startswith(
        "FAILED (exit code 137: killed by SIGKILL: out of memory, or cancelled?); its log does not exist")
    assert failure_line("CANCELLED", None, LogEnds(
        "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-12-04T10:00:00 ***\n"), "/x") == \
        "CANCELLED: slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-12-04T10:00:00 ***"


class CountingHost:
    """This machine's files, counting the bytes each read asks for."""

    def __init__(self):
        self.asked = 0

    def stat(self, path):
        return LOCAL.stat(path)

    def read(self, path, offset=0, size=-1, *, owner=None):
        data = LOCAL.read(path, offset, size)
        self.asked += len(data)
        return data

    def read_many(self, requests, *, owner=None):
        return [self.read(p, o, s) for p, o, s in requests]


def test_a_10_gb_log_is_read_at_its_head_and_tail_only(tmp_path):
    path = tmp_path / "slurm-1.out"
    with open(path, "wb") as f:  # sparse: 10 GB that take no disk
        f.write(b"epoch 1\n")
        f.seek(10 * 1024**3)
        f.write(b"\nTraceback (most recent call last):\n  File \"t.py\"\nMemoryError: the 10 GB log\n")
    host = CountingHost()
    ends = read_log_ends(host, path)
    assert host.asked <= HEAD_BYTES + TAIL_BYTES
    assert first_error(ends.text) == "MemoryError: the 10 GB log"
    assert read_log_ends(host, tmp_path / "gone.out").missing


@pytest.mark.skipif(os.getuid() != 0, reason="a file root cannot read needs another user; as root, chmod does")
def test_a_log_it_may_not_read_is_said(tmp_path):
    path = tmp_path / "slurm-1.out"
    path.write_text("error: x\n")
    ends = read_log_ends(LOCAL.owned_by("nobody"), path)
    assert ends.refused and not ends.missing
    assert "may not be read" in failure_line("FAILED", 1, ends, path)

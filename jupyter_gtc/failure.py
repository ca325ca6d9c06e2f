"""Why a job failed, in one line: the line of its log that says so, and what its state and
exit code mean.

A failed job's log often ends with what does not help: torchrun's own ``ChildFailedError``
traceback after the worker's, srun's "task 0: Exited with exit code 1" after the Python
error. ``first_error`` reads a log's text for the line a person would point at; ``failure_line``
puts it after the state and exit code (``FAILED (exit code 1): ModuleNotFoundError: No module
named 'foo'``). ``read_log_ends`` reads only the head and the tail of a log, through the
cluster's host, so a 10 GB log costs a few hundred KiB. Pure but for that one read.
"""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass
from pathlib import Path

HEAD_BYTES = 64 * 1024   # a job that fails at once fails near the top (a command not found)
TAIL_BYTES = 256 * 1024  # tracebacks, srun's and slurmstepd's last words are at the end
LINE_CHARS = 300         # a line longer than this is cut (a logged tensor, a line of binary)
GAP = "\n[... the middle of the log is not read ...]\n"

# States that end a job other than by its script's success.
FAILED_STATES = frozenset({"FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
                           "BOOT_FAIL", "DEADLINE"})

STATE_MEANINGS = {
    "TIMEOUT": "it reached its time limit",
    "OUT_OF_MEMORY": "it ran out of memory",
    "NODE_FAIL": "a node it ran on failed",
    "PREEMPTED": "a job of higher priority took its nodes",
    "BOOT_FAIL": "a node failed to boot",
    "DEADLINE": "it reached its deadline",
    "CANCELLED": "cancelled",
}

EXIT_MEANINGS = {
    126: "a command was found but is not executable",
    127: "a command was not found",
    128 + signal.SIGKILL: "killed by SIGKILL: out of memory, or cancelled?",
    128 + signal.SIGSEGV: "SIGSEGV: a segmentation fault",
    128 + signal.SIGABRT: "SIGABRT: aborted",
    128 + signal.SIGTERM: "SIGTERM: terminated",
    128 + signal.SIGINT: "SIGINT: interrupted",
    128 + signal.SIGBUS: "SIGBUS: a bus error",
}

# A line that may carry a prefix of who wrote it: torchrun's "[rank1]:" / "[default0]:", srun
# --label's "0: ". Lines of one prefix are one process's.
_PREFIX = re.compile(r"^((?:\[(?:rank|default)\d+\]:|\d+: )\s?)")
_TRACEBACK = "Traceback (most recent call last):"
_CHAINED = ("During handling of the above exception, another exception occurred:",
            "The above exception was the direct cause of the following exception:")
# ``ModuleNotFoundError: No module named 'foo'``, ``torch.OutOfMemoryError: ...``, a bare
# ``AssertionError``, ``KeyboardInterrupt``: at the start of a line, a dotted name ending as
# Python's exception names do.
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Interrupt|Exit|Failure|Warning)"
                        r"(?::(?: .*)?)?$")
# What ends a traceback's frames is what was raised, whatever its name (jupyter_gtc's own
# SpecErrors, subprocess.TimeoutExpired, StopIteration): a class name, dotted or not, alone or
# with its message. Only there; elsewhere a line must look like _EXCEPTION.
_RAISED = re.compile(r"^(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?::(?: .*)?)?$")
# Launchers' own exceptions, which only say that a child failed: the child's error is the cause.
_WRAPPERS = re.compile(r"(?:^|\.)(?:ChildFailedError|CalledProcessError)\b")

# slurmstepd's words for a job stopped from outside: these are the cause, whatever the program
# printed after (a KeyboardInterrupt, a broken pipe).
_STOPPED = re.compile(r"(?:slurmstepd(?:-[\w.-]+)?: error: (?:\*\*\* (?:JOB|STEP) .*(?:CANCELLED|TIME LIMIT|"
                      r"PREEMPTION|NODE FAIL).*\*\*\*|.*oom[-_]kill.*)|.*Exceeded (?:job|step) memory limit.*)",
                      re.IGNORECASE)
# Lines that say what went wrong in a program other than Python, or before it ran.
_ERROR_LINES = re.compile(r"(?:slurmstepd(?:-[\w.-]+)?: error: .*|srun: error: .*|sbatch: error: .*|"
                          r"(?:[\w./-]+: )?(?:line \d+: )?.*: command not found|"
                          r".*can't open file .*|.*: (?:No such file or directory|Permission denied)|"
                          r"(?:fatal )?error: .*|.*\[Errno \d+\].*|"
                          # bash's word on a child killed by a signal: "line 2:   126 Segmentation fault   python ..."
                          r"(?:.*: line \d+: +\d+ )?(?:Segmentation fault|Killed|Aborted|Bus error)\b.*)$")
# srun's and torchrun's report that a task ended badly: a consequence, shown only for want of more.
_CONSEQUENCES = re.compile(r"(?:srun: error: .*(?:Exited with exit code|task \d+: (?:Killed|Terminated|"
                           r"Segmentation|Aborted))|srun: error: .*: tasks? [\d,-]+: .*|"
                           r"srun: (?:error: )?Job step aborted.*|.*Terminating (?:job|step).*)")
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")  # colours, then control bytes
MATCH_CHARS = 4096  # a line is matched on its start only: a 5 MB line costs no more than this


def first_error(text: str) -> str | None:
    """The line of a log that says why the job failed, or None where no line does.

    In order: slurmstepd's word that the job was stopped (time limit, out of memory,
    cancelled); the exception a Python program died of (each process's last traceback, and of
    several processes the first to end: torchrun's worker, not torchrun's ChildFailedError);
    a line of the shell, srun or slurmstepd that says what went wrong (a command not found, a
    file that cannot be opened); last, srun's report that a task exited badly."""
    lines = [_clean(line[:MATCH_CHARS]) for line in text.splitlines()]
    for line in lines:
        if _STOPPED.fullmatch(line):
            return _shorten(line)
    raised = _python_error(lines)
    if raised is not None:
        return _shorten(raised)
    for line in lines:
        if _ERROR_LINES.fullmatch(line) and not _CONSEQUENCES.fullmatch(line):
            return _shorten(line)
    for line in lines:
        if _CONSEQUENCES.fullmatch(line):
            return _shorten(line)
    return None


def _python_error(lines: list[str]) -> str | None:
    """The final line of each traceback (kept per process prefix, the last of a chain and of a
    process winning); of the processes, the one whose error came first."""
    ended: dict[str, tuple[int, str]] = {}  # prefix -> (line index where its error ended, the error)
    open_tb: dict[str, bool] = {}
    for i, raw in enumerate(lines):
        m = _PREFIX.match(raw)
        prefix, line = (m.group(1).strip(), raw[m.end():]) if m else ("", raw)
        if line.startswith(_TRACEBACK):
            open_tb[prefix] = True
            continue
        if not open_tb.get(prefix) or line.startswith((" ", "\t")) or not line.strip():
            continue
        if _EXCEPTION.match(line) or _RAISED.match(line):
            open_tb[prefix] = False
            if not _WRAPPERS.search(line.split(":", 1)[0]):
                first = ended.get(prefix, (i, line))[0]
                ended[prefix] = (first, line)  # a process's later traceback replaces its earlier one
            continue
        if line.startswith(_CHAINED):
            continue
        # Something else ends the traceback's frames (a line of another writer): not one of ours.
    if ended:
        return min(ended.values())[1]
    for line in reversed(lines):  # a logged exception without its traceback ("ValueError: bad")
        m = _PREFIX.match(line)
        bare = line[m.end():] if m else line
        if _EXCEPTION.match(bare) and ": " in bare and not _WRAPPERS.search(bare.split(":", 1)[0]) \
                and not bare.split(":", 1)[0].endswith("Warning"):
            return bare
    return None


def _clean(line: str) -> str:
    return _CONTROL.sub("", line).rstrip()


def _shorten(line: str) -> str:
    line = line.strip()
    return line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…"


def exit_meaning(exit_code: int | None) -> str | None:
    """What an exit code says beyond its number (127: a command was not found; 137: SIGKILL)."""
    if exit_code is None:
        return None
    if exit_code in EXIT_MEANINGS:
        return EXIT_MEANINGS[exit_code]
    if 128 < exit_code < 128 + 65:
        try:
            return f"killed by {signal.Signals(exit_code - 128).name}"
        except ValueError:
            return None
    return None


def cancelled_by(text: str) -> str | None:
    """Who cancelled the job, where slurmstepd wrote it ("... CANCELLED AT <time> BY <user>")."""
    m = re.search(r"CANCELLED AT \S+ (?:DUE TO (?P<why>[A-Z ]+?)|BY (?P<who>\S+)) \*\*\*", text)
    if not m:
        return None
    return f"by {m.group('who')}" if m.group("who") else f"due to {m.group('why').lower()}"


@dataclass(frozen=True)
class LogEnds:
    """What ``read_log_ends`` found: the text (head, a gap mark, tail), or why there is none."""

    text: str
    missing: bool = False        # no file at the path
    refused: str | None = None   # it may not be read, and why


def read_log_ends(host, path: str | Path, head: int = HEAD_BYTES, tail: int = TAIL_BYTES) -> LogEnds:
    """The head and the tail of the log at ``path`` on ``host`` (``hosts.base.Host``), at most
    ``head + tail`` bytes whatever its size, decoded with bad bytes replaced."""
    try:
        st = host.stat(path)
        if st is None:
            return LogEnds("", missing=True)
        if st.size <= head + tail:
            data = host.read(path, 0, head + tail)
            return LogEnds(data.decode(errors="replace"))
        first, last = host.read_many([(path, 0, head), (path, st.size - tail, tail)])
    except FileNotFoundError:
        return LogEnds("", missing=True)
    except PermissionError as e:
        return LogEnds("", refused=e.strerror or str(e))
    if first is None or last is None:
        return LogEnds("", missing=True)
    # The tail's first line is likely cut: drop it, so a half line is never taken as a cause.
    last = last.split(b"\n", 1)[1] if b"\n" in last else last
    return LogEnds(first.decode(errors="replace") + GAP + last.decode(errors="replace"))


def failure_line(state: str, exit_code: int | None, log: LogEnds | None, log_path: str | Path | None) -> str | None:
    """One line that says a job failed and why, or None where it did not (it runs, or it
    completed): ``FAILED (exit code 1): ModuleNotFoundError: No module named 'foo'``."""
    if state not in FAILED_STATES:
        return None
    if state == "CANCELLED" and log is not None and log.missing:
        return None  # cancelled while it waited: someone's choice, not a failure with a cause to show
    said = []
    if state in STATE_MEANINGS and state != "CANCELLED":
        said.append(STATE_MEANINGS[state])
    if state == "CANCELLED":
        who = cancelled_by(log.text) if log is not None else None
        if who:
            said.append(who)
    if exit_code and state == "FAILED":  # else Slurm stopped it, and the code is only its signal (143: SIGTERM)
        meaning = exit_meaning(exit_code)
        said.append(f"exit code {exit_code}" + (f": {meaning}" if meaning else ""))
    head = state + (f" ({'; '.join(said)})" if said else "")
    if log is None or log_path is None:
        return head
    if log.missing:
        return f"{head}; its log does not exist: {log_path}"
    if log.refused is not None:
        return f"{head}; its log may not be read ({log.refused}): {log_path}"
    cause = first_error(log.text)
    if cause is not None:
        return f"{head}: {cause}"
    if not log.text.strip():
        return f"{head}; its log is empty: {log_path}"
    return f"{head}; no line of its log says why: {log_path}"


def no_log(job_id: str, name: str, state: str, started: bool, path: str | Path) -> str:
    """Why a job has no log at ``path``, for a front end to say instead of printing nothing;
    ``started``: it was given nodes (a job cancelled while pending has a start time, no nodes)."""
    if state not in FAILED_STATES and state != "COMPLETED" and not started:
        return f"job {job_id} ({name}) has no log yet: it has not started ({state}); it will write {path}"
    if not started:
        return f"job {job_id} ({name}) has no log: it ended {state} before it started, so it never wrote {path}"
    return (f"job {job_id} ({name}) has no log at {path}: it was removed, or the job's --output names a folder "
            f"its node could not write")

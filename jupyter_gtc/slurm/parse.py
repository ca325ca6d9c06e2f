"""Parse the output of Slurm's commands. Pure functions on text, tested on captured output.

We read ``scontrol -o show node``: one line of ``Key=Value`` pairs per node, a format
that has stayed stable across Slurm releases (unlike the ``--json`` layouts).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..exceptions import SlurmError

# A key starts a new pair only after whitespace; values such as Reason= contain spaces.
_KEY = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_/:]*)=")
# Fields whose value runs to the end of the line (free text that may hold '=' and spaces).
_TRAILING_TEXT_KEYS = ("Reason",)


def parse_key_values(line: str) -> dict[str, str]:
    """``NodeName=n1 State=IDLE Reason=disk full [root@t]`` -> a dict of strings."""
    line = line.strip()
    tail: dict[str, str] = {}
    for key in _TRAILING_TEXT_KEYS:
        m = re.search(rf"(?:^|\s){key}=", line)
        if m:
            tail[key] = line[m.end():]
            line = line[: m.start()]
    matches = list(_KEY.finditer(line))
    out: dict[str, str] = {}
    for m, nxt in zip(matches, matches[1:] + [None]):
        end = nxt.start() if nxt else len(line)
        out[m.group(1)] = line[m.end():end].strip()
    out.update(tail)
    return out


READY_STATES = frozenset({"IDLE", "MIXED", "ALLOCATED", "COMPLETING"})  # a node's base states that take jobs


@dataclass(frozen=True)
class NodeStatus:
    """A node as Slurm sees it."""

    name: str
    state: str                 # base state: IDLE, MIXED, ALLOCATED, DOWN, UNKNOWN, ...
    flags: tuple[str, ...]     # DRAIN, NOT_RESPONDING, ...
    reason: str | None
    partitions: tuple[str, ...]
    cpus: int
    cpus_allocated: int
    memory_mb: int
    memory_allocated_mb: int
    gpus: int
    gpus_allocated: int
    address: str = ""
    extra: dict[str, str] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ready(self) -> bool:
        """Up and able to take jobs (running some already is fine)."""
        return self.state in READY_STATES and not (
            {"DRAIN", "NOT_RESPONDING", "POWERED_DOWN", "FAIL"} & set(self.flags))

    @property
    def display_state(self) -> str:
        return "+".join((self.state, *self.flags)).lower()


def parse_scontrol_nodes(text: str) -> list[NodeStatus]:
    """Parse ``scontrol -o show node``."""
    nodes = []
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        kv = parse_key_values(line)
        state, *flags = kv.get("State", "UNKNOWN").split("+")
        nodes.append(NodeStatus(
            name=kv["NodeName"],
            state=state.rstrip("*"),
            flags=tuple(flags),
            reason=_none(kv.get("Reason")),
            partitions=tuple(p for p in kv.get("Partitions", "").split(",") if p),
            cpus=_int(kv.get("CPUTot")),
            cpus_allocated=_int(kv.get("CPUAlloc")),
            memory_mb=_int(kv.get("RealMemory")),
            memory_allocated_mb=_int(kv.get("AllocMem")),
            gpus=parse_gres_gpus(kv.get("Gres", "")),
            gpus_allocated=parse_gres_gpus(kv.get("GresUsed", "")),
            address=kv.get("NodeAddr", ""),
            extra=kv,
        ))
    return nodes


def parse_gres_gpus(text: str) -> int:
    """GPUs in a GRES list: ``gpu:h100:8(S:0),gpu:l4:1`` -> 9; ``gpu:h100:3(IDX:0-2)`` -> 3."""
    total = 0
    for item in re.split(r",(?![^(]*\))", text):
        fields = item.split("(", 1)[0].split(":")
        if fields[0] == "gpu" and len(fields) >= 2 and fields[-1].isdigit():
            total += int(fields[-1])
    return total


def parse_tres(text: str) -> dict[str, int]:
    """``cpu=4,mem=8G,gres/gpu=2`` -> {"cpu": 4, "mem": 8192, "gres/gpu": 2} (mem in MB)."""
    out: dict[str, int] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key] = _megabytes(value) if key == "mem" else _int(value)
    return out


def _megabytes(value: str) -> int:
    units = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
    if value and value[-1] in units:
        return int(float(value[:-1]) * units[value[-1]])
    return _int(value)


def _int(value: str | None) -> int:
    try:
        return int(value) if value not in (None, "", "N/A") else 0
    except ValueError:
        return 0


def _none(value: str | None) -> str | None:
    return None if value in (None, "", "(null)", "none", "None") else value


# -- jobs --------------------------------------------------------------------------------

FINISHED_STATES = frozenset({
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED",
    "BOOT_FAIL", "DEADLINE",
})


@dataclass(frozen=True)
class JobStatus:
    """One job (or one array task) as Slurm reports it."""

    job_id: str                  # Slurm's id of this job or task: "42", or "41_3" for an array task
    state: str                   # PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
    exit_code: int | None = None  # the batch script's exit status once finished
    reason: str | None = None    # why it waits or failed (Resources, Dependency, NonZeroExitCode, ...)
    nodes: str = ""
    name: str = ""
    array_job_id: str | None = None
    array_task_id: int | None = None
    start_time: float | None = None
    end_time: float | None = None
    restart_count: int = 0
    user: str = ""               # the Slurm user who submitted it (its uid's name)
    submit_time: float | None = None
    log_path: str = ""           # where the batch script's output goes, as Slurm says (expanded); "" unknown
    work_dir: str = ""           # the folder it runs in (sbatch's --chdir, else where it was submitted)
    comment: str = ""            # sbatch's --comment (jupyter_gtc keeps a job's hang timeout there)

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    @property
    def parent_id(self) -> str:
        """The id a user submitted: the array's id for an array task, else the job's."""
        return self.array_job_id or self.job_id


def parse_squeue_json(text: str) -> list[JobStatus]:
    """Parse ``squeue --json`` of Slurm 22.05 to 25.05 (openapi v0.0.38, data_parser v0.0.39
    to v0.0.43; tests/slurm/fixtures/squeue_json has one document of each). From 23.02 on,
    ids and counts are ``{"set": .., "infinite": .., "number": ..}``; from 23.11 on, times
    are too, ``job_state`` is a list and ``exit_code`` an object (see ``_state``, ``_exit_code``)."""
    import json

    data = json.loads(text)
    errors = data.get("errors") or []
    if errors:  # squeue exits 0 with "jobs": [] when it cannot reach slurmctld
        first = errors[0]
        detail = first.get("description") or first.get("error") or str(first) if isinstance(first, dict) else str(first)
        raise SlurmError(f"squeue reported: {detail}")
    jobs = []
    for j in data.get("jobs", []):
        array_job = _number(j.get("array_job_id"))
        array_task = _number(j.get("array_task_id"))
        is_task = bool(array_job) and array_task is not None
        state = _state(j.get("job_state"))
        # standard_output: 22.05 and 25.05 (v0.0.43) give the pattern as the user gave it;
        # 23.02 to 24.11 give it expanded by libslurm (%A %a %j %u %x, work dir, sbatch's
        # default), where only %N is left to fill. There, a pattern's %% or backslash is
        # already lost, so "out-%%j" reads as out-<id>, not the out-%j that Slurm writes.
        log_path = expand_output_path(
            j.get("standard_output") or "", work_dir=j.get("current_working_directory") or "",
            job_id=str(j["job_id"]), array_job_id=str(array_job) if is_task else None,
            array_task_id=array_task if is_task else None, user=j.get("user_name") or "",
            name=j.get("name") or "", node=j.get("batch_host") or "")
        jobs.append(JobStatus(
            job_id=f"{array_job}_{array_task}" if is_task else str(j["job_id"]),
            state=state or "UNKNOWN",
            exit_code=_exit_code(j.get("exit_code"), state),
            reason=_none(j.get("state_reason")),
            nodes=j.get("nodes") or "",
            name=j.get("name") or "",
            array_job_id=str(array_job) if is_task else None,
            array_task_id=array_task if is_task else None,
            start_time=_time(j.get("start_time")),
            end_time=_time(j.get("end_time")) if state in FINISHED_STATES else None,
            restart_count=_number(j.get("restart_cnt")) or 0,
            user=j.get("user_name") or "",
            submit_time=_time(j.get("submit_time")),
            log_path=log_path,
            work_dir=j.get("current_working_directory") or "",
            comment=j.get("comment") or "",
        ))
    return jobs


def parse_jobcomp(text: str) -> list[JobStatus]:
    """Parse jobcomp/filetxt lines: finished jobs, once they have left slurmctld's memory."""
    from datetime import datetime

    jobs = []
    for line in text.splitlines():
        if not line.startswith("JobId="):
            continue
        kv = parse_key_values(line)
        array_job, array_task = kv.get("ArrayJobId"), kv.get("ArrayTaskId")
        code, _, signal = kv.get("ExitCode", "0:0").partition(":")
        jobs.append(JobStatus(
            job_id=f"{array_job}_{array_task}" if array_job else kv["JobId"],
            state=kv.get("JobState", "UNKNOWN"),
            exit_code=_int(code) if _int(signal) == 0 else 128 + _int(signal),
            nodes=kv.get("NodeList", ""),
            name=kv.get("Name", ""),
            array_job_id=array_job,
            array_task_id=int(array_task) if array_task else None,
            start_time=_iso(kv.get("StartTime"), datetime),
            end_time=_iso(kv.get("EndTime"), datetime),
            user=kv.get("UserId", "").partition("(")[0],  # "root(0)"
            submit_time=_iso(kv.get("SubmitTime"), datetime),
            work_dir=kv.get("WorkDir", ""),  # jobcomp/filetxt does not record StdOut
        ))
    return jobs


# What ``sacct`` is asked for: fields of every release from 22.05 on, with -P (``|`` between
# fields) and -X (allocations only, no steps). The name last: it alone may hold a ``|``.
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Start", "End", "Submit", "NodeList", "User", "WorkDir", "JobName")


def parse_sacct(text: str) -> list[JobStatus]:
    """Parse ``sacct -n -P -X -o`` ``SACCT_FIELDS``: jobs from the accounting database, finished
    ones included long after slurmctld forgot them. A format string, not ``--json``, whose
    schema changed in 23.02 and again since (tests/slurm/fixtures/sacct has each release's)."""
    from datetime import datetime

    jobs = []
    for line in text.splitlines():
        parts = line.split("|", len(SACCT_FIELDS) - 1)
        if len(parts) != len(SACCT_FIELDS) or not parts[0]:
            continue
        row = dict(zip(SACCT_FIELDS, parts))
        job_id = row["JobID"]
        # "41_3" is task 3 of array 41; "41_[4-9]" its tasks not yet started, one line.
        array_job, _, task = job_id.partition("_")
        code, _, signal = row["ExitCode"].partition(":")
        state = row["State"].split()[0] if row["State"].strip() else "UNKNOWN"  # "CANCELLED by 0"
        jobs.append(JobStatus(
            job_id=job_id,
            state=state,
            exit_code=(_int(code) if _int(signal) == 0 else 128 + _int(signal)) if state in FINISHED_STATES else None,
            nodes=row["NodeList"] if row["NodeList"] not in ("None assigned", "(null)") else "",
            name=row["JobName"],
            array_job_id=array_job if task else None,
            array_task_id=int(task) if task.isdigit() else None,
            start_time=_iso(row["Start"], datetime),
            end_time=_iso(row["End"], datetime),
            user=row["User"],
            submit_time=_iso(row["Submit"], datetime),
            work_dir=row["WorkDir"],
        ))
    return jobs


# sbatch's filename pattern letters (``man sbatch``, "filename pattern") that a batch
# script's output path can hold; %n and %t (node and task number) are 0 for the batch script.
_PATTERN = re.compile(r"%(\d*)([%AajJNntux])")


def expand_output_path(pattern: str, *, work_dir: str, job_id: str, array_job_id: str | None = None,
                       array_task_id: int | None = None, user: str = "", name: str = "", node: str = "") -> str:
    """Where a batch job's output goes, from what ``squeue --json`` (22.05) reports: its
    ``standard_output`` is the pattern as given (``out-%x-%j.log``), or empty for sbatch's
    default (``slurm-%j.out``; ``slurm-%A_%a.out`` for an array task), relative to the job's
    working directory. Letters whose value is not known yet (%N before the job has a node)
    are left as they are. A pattern with a backslash is taken literally, less the backslashes."""
    is_task = array_job_id is not None and array_task_id is not None
    if not pattern:
        pattern = "slurm-%A_%a.out" if is_task else "slurm-%j.out"
    if not pattern.startswith("/") and work_dir:
        pattern = f"{work_dir.rstrip('/')}/{pattern}"
    if "\\" in pattern:
        return pattern.replace("\\", "")
    no_val = "4294967294"  # Slurm's NO_VAL: what slurmstepd writes for %a of a job that is no array
    values = {"%": "%", "j": job_id, "J": job_id, "A": array_job_id if is_task else job_id,
              "a": str(array_task_id) if is_task else no_val, "u": user, "x": name, "N": node.split(".")[0],
              "n": "0", "t": "0"}

    def substitute(m: re.Match) -> str:
        width, letter = m.groups()
        value = values.get(letter)
        if not value:
            return m.group(0)
        return value.zfill(int(width)) if width and value.isdigit() else value

    return _PATTERN.sub(substitute, pattern)


def _number(value):
    if isinstance(value, dict):  # Slurm >= 23.02: {"set": true, "infinite": false, "number": 3}
        return value.get("number") if value.get("set", True) else None
    return value


# What squeue prints as a job's state, and what 22.05 and 23.02 put in job_state: one of the
# job's flags, in this order, else its base state (job_state_string() in
# src/common/slurm_protocol_defs.c, the same from 22.05 to 25.05).
_SHOWN_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


def _state(value) -> str | None:
    """Slurm >= 23.11 lists the base state, then the flags (["COMPLETED", "COMPLETING"]):
    read as the one word older releases give, so that a job finishing its epilog stays
    COMPLETING and one whose nodes boot stays CONFIGURING on every release."""
    if not isinstance(value, list):
        return value
    return next((f for f in _SHOWN_FLAGS if f in value[1:]), value[0] if value else None)


def _exit_code(value, state: str | None) -> int | None:
    """22.05 gives the wait status, 23.02 the same as ``{"number": ..}``; 23.11 on decode it:
    ``{"status": ["SIGNALED"], "return_code": {..}, "signal": {"id": {..}, "name": "TERM"}}``."""
    if isinstance(value, dict) and "return_code" in value:
        if state not in FINISHED_STATES:
            return None
        signal = _number((value.get("signal") or {}).get("id"))
        return 128 + signal if signal else _number(value.get("return_code"))
    return _wait_status(_number(value), state)


def _wait_status(status: int | None, state: str | None) -> int | None:
    """squeue reports a raw wait status (768 = exit 3); a signal becomes 128 + signal."""
    if status is None or state not in FINISHED_STATES:
        return None
    return status >> 8 if status & 0x7F == 0 else 128 + (status & 0x7F)


def _time(value) -> float | None:
    value = _number(value)
    return float(value) if value else None


def _iso(value: str | None, datetime) -> float | None:
    try:
        return datetime.fromisoformat(value).timestamp() if value and value != "Unknown" else None
    except ValueError:
        return None

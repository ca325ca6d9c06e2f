"""Parse the output of Slurm's commands. Pure functions on text, tested on captured output.

We read ``scontrol -o show node``: one line of ``Key=Value`` pairs per node, a format
that has stayed stable across Slurm releases (unlike the ``--json`` layouts).
"""

from __future__ import annotations

import re
from collections.abc import Callable
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

    return parse_job_info(json.loads(text))


def parse_job_info(data: dict) -> list[JobStatus]:
    """``parse_squeue_json`` of the document already decoded: also slurmrestd's answer to
    ``GET /slurm/v0.0.4x/jobs/`` (the same dumper, ``OPENAPI_JOB_INFO_RESP``)."""
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


# What the poller asks ``squeue -h -O`` for each tick: the fields JobStatus holds, no more
# (``--json`` sends ~3 KB a job, these ~250 bytes). -O's names and what they print are the
# same from 22.05 to 25.05 (src/squeue/opts.c, print.c at each release's tag) but for two:
# exit_code is the raw wait status in 22.05 and "code:signal" from 23.02; StdOut's default is
# "<dir>/slurm-<id>.out" to 23.11 and the pattern "<dir>/slurm-%j.out" (%A_%a) from 24.05.
# Slurm's own values come first; text a user chooses (paths, the comment, the name: any
# character, a newline included) after them, so it can shift no field that Slurm sets.
SQUEUE_FIELDS = ("JobId", "ArrayJobId", "ArrayTaskId", "State", "exit_code", "RestartCnt", "StartTime",
                 "EndTime", "SubmitTime", "UserName", "BatchHost", "NodeList", "Reason", "WorkDir", "StdOut",
                 "Comment", "Name")
# Times as epoch seconds (squeue's strftime: glibc's %s), not local time to be guessed back;
# in UTC, where no hour repeats at a clock change (and glibc reads no zone file per time).
SQUEUE_ENV = {"SLURM_TIME_FORMAT": "%s", "TZ": "UTC"}
FIELD_SEP = "\x1f"  # ASCII's unit separator: one byte a field, and never in what Slurm sets


def squeue_format(token: str) -> tuple[str, str, str]:
    """-O's argument for ``SQUEUE_FIELDS``, and the field and record separators it prints: each
    field at full width (``:0``) followed by FIELD_SEP, the last by a record end that holds
    ``token`` (a fresh one per call), so that no name, path or comment can end a record and
    forge another job's. A user's text that holds FIELD_SEP itself makes a record of too many
    fields: ``SqueueFormatReader`` reads that job from ``--json`` instead."""
    end = f"\x1e{token}\x1e"
    spec = ",".join(f"{name}:0{FIELD_SEP}" for name in SQUEUE_FIELDS[:-1])
    return f"{spec},{SQUEUE_FIELDS[-1]}:0{end}", FIELD_SEP, end


class SqueueFormatReader:
    """Reads ``squeue -h -O squeue_format(token)`` into JobStatus, parsing only the jobs whose
    record changed since the last call: an unchanged job keeps the JobStatus object it had
    (the poller then skips it too), and an output whose records are all as before returns the
    very list the last call did. Holds only the jobs of the last output."""

    def __init__(self):
        self._known: dict[str, JobStatus] = {}
        self._records: list[str] = []
        self._jobs: list[JobStatus] = []

    def read(self, text: str, sep: str, end: str,
             as_json: Callable[[], list[JobStatus]] | None = None) -> list[JobStatus]:
        """``as_json``: the queue as ``--json`` has it, asked for only where a record holds more
        fields than were asked for (a user's text with ``sep`` in it), and only when that
        record is new or changed; without it, such a record is an error."""
        records = text.split(end + "\n")[:-1]  # squeue ends each job's line after our record end
        if records == self._records:
            return self._jobs
        known, jobs, seen, odd = self._known, [], {}, []
        for record in records:
            status = known.get(record)
            if status is None:
                fields = record.split(sep)
                if len(fields) > len(SQUEUE_FIELDS) and as_json is not None:
                    odd.append((len(jobs), record, fields[0]))
                    jobs.append(None)
                    continue
                status = parse_squeue_fields(fields)
            seen[record] = status
            jobs.append(status)
        if odd:
            by_id = {j.job_id: j for j in as_json()}
            for at, record, raw_id in odd:
                status = _json_twin(by_id, raw_id, record.split(sep))
                seen[record] = jobs[at] = status
        self._known, self._records, self._jobs = seen, records, jobs
        return jobs


def _json_twin(by_id: dict[str, JobStatus], raw_id: str, fields: list[str]) -> JobStatus:
    """The ``--json`` status of the job whose -O record is ``fields`` (its first fields, Slurm's
    own, are intact); as far as those fields go where --json no longer lists it."""
    array_job, array_task = fields[1], fields[2]
    job_id = f"{array_job}_{array_task}" if array_task.isdigit() else (array_job if array_task != "N/A" else raw_id)
    twin = by_id.get(job_id)
    if twin is not None:
        return twin
    head = fields[:12] + [""] * (len(SQUEUE_FIELDS) - 12)
    return parse_squeue_fields(head)


def parse_squeue_format(text: str, sep: str, end: str) -> list[JobStatus]:
    """``squeue -h -O squeue_format(...)`` of Slurm 22.05 to 25.05, all of it."""
    return SqueueFormatReader().read(text, sep, end)


def parse_squeue_fields(fields: list[str] | tuple[str, ...]) -> JobStatus:
    """One job's ``SQUEUE_FIELDS`` as squeue printed them (any release from 22.05)."""
    if len(fields) != len(SQUEUE_FIELDS):
        raise SlurmError(f"squeue printed {len(fields)} fields for a job where {len(SQUEUE_FIELDS)} were asked "
                         f"({', '.join(SQUEUE_FIELDS)}): {fields[:3]}...")
    (raw_id, array_job, array_task, state, exit_code, restarts, start, end, submit, user, batch_host, nodes,
     reason, work_dir, stdout, comment, name) = fields
    # ArrayTaskId: "N/A" for a job that is no array, "2-3" (or "2-3%1") for the array's tasks not
    # yet started, which are one record under the array's id, as --json has them.
    is_task = array_task.isdigit()
    job_id = f"{array_job}_{array_task}" if is_task else (array_job if array_task != "N/A" else raw_id)
    if stdout in (f"{work_dir}/slurm-{raw_id}.out", f"{work_dir}/slurm-%j.out", f"{work_dir}/slurm-%A_%a.out"):
        stdout = ""  # squeue's spelling of sbatch's default, which expand_output_path knows
    return JobStatus(
        job_id=job_id,
        state=state or "UNKNOWN",
        exit_code=_format_exit_code(exit_code, state),
        reason=_none(reason),
        nodes=nodes,
        name=name,
        array_job_id=array_job if is_task else None,
        array_task_id=int(array_task) if is_task else None,
        start_time=_epoch(start),
        end_time=_epoch(end) if state in FINISHED_STATES else None,
        restart_count=_int(restarts),
        user=user,
        submit_time=_epoch(submit),
        log_path=expand_output_path(stdout, work_dir=work_dir, job_id=job_id,
                                    array_job_id=array_job if is_task else None,
                                    array_task_id=int(array_task) if is_task else None, user=user, name=name,
                                    node=batch_host if batch_host not in ("n/a", "(null)") else ""),
        work_dir=work_dir,
        comment=comment if comment != "(null)" else "",
    )


def _format_exit_code(text: str, state: str) -> int | None:
    """22.05 prints the wait status (768), 23.02 on "3:0" (code:signal; empty for none)."""
    if state not in FINISHED_STATES or not text:
        return None
    code, colon, signal = text.partition(":")
    if not colon:
        return _wait_status(_int(code), state)
    return 128 + _int(signal) if _int(signal) else _int(code)


def _epoch(text: str) -> float | None:
    """A time squeue printed with SLURM_TIME_FORMAT=%s; "N/A", "Unknown", "None", "NONE" are none."""
    return float(text) if text.isdigit() and text != "0" else None


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

"""Slurm's REST answers (OpenAPI v0.0.42) as our ``JobStatus`` and ``NodeStatus``. Pure.

Shapes from Slurm's own spec, ``testsuite/python/data/openapi_specs/openapi_spec_v42.json``
(SchedMD/slurm, commit 284c3b95f0), and the dumpers of ``src/plugins/data_parser/v0.0.42/
parsers.c`` at tag slurm-24-11-7-1 (defaf214db):

- ``GET /slurm/v0.0.42/jobs/``: ``v0.0.42_openapi_job_info_resp``, the very document ``squeue
  --json`` of 24.11 prints (one dumper, ``OPENAPI_JOB_INFO_RESP``): ``slurm.parse.parse_job_info``
  reads it (``job_state`` a list, numbers ``{set, infinite, number}``, ``exit_code`` ``{status,
  return_code, signal}``).
- ``GET /slurmdb/v0.0.42/jobs/``: ``v0.0.42_openapi_slurmdbd_jobs_resp``, each ``v0.0.42_job``:
  ``state {current [..], reason}``, ``time {start, end, submission}`` (plain integers),
  ``array {job_id, task_id {..}, task}``, ``exit_code``, ``working_directory``, ``stdout_expanded``.
- ``GET /slurm/v0.0.42/nodes/``: ``v0.0.42_openapi_nodes_resp``, each ``v0.0.42_node``: ``state``
  a list (``v0.0.42_node_states``: the base state, then its flags), ``gres``/``gres_used``
  strings as scontrol prints them, ``partitions`` a list.
"""

from __future__ import annotations

from typing import Any

from ..exceptions import SlurmError
from ..slurm.parse import (FINISHED_STATES, JobStatus, NodeStatus, expand_output_path, parse_gres_gpus, parse_job_info,
                           parse_tres)

# v0.0.42_node_states' base states (NODE_STATE_BASE in parsers.c); every other word is a flag.
NODE_BASE_STATES = ("INVALID", "UNKNOWN", "DOWN", "IDLE", "ALLOCATED", "ERROR", "MIXED", "FUTURE")
# A job's flags that squeue shows instead of its base state (job_state_string(), as slurm/parse.py).
_SHOWN_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD",
                "SPECIAL_EXIT", "STOPPED", "REVOKED", "RESV_DEL_HOLD", "SIGNALING")


def check_errors(data: dict[str, Any], what: str) -> None:
    """An answer whose ``errors`` list is not empty failed, whatever its status said."""
    errors = [e for e in data.get("errors") or [] if e]
    if errors:
        first = errors[0]
        text = (first.get("error") or first.get("description") or str(first)) if isinstance(first, dict) else str(first)
        raise SlurmError(f"{what}: Slurm reported: {text}")


def jobs_from_info(data: dict[str, Any]) -> list[JobStatus]:
    """``GET /slurm/v0.0.42/jobs/``'s answer: every job slurmctld knows."""
    return parse_job_info(data)


def jobs_from_accounting(data: dict[str, Any]) -> list[JobStatus]:
    """``GET /slurmdb/v0.0.42/jobs/``'s answer, as ``parse_sacct`` reads ``sacct -X``: one status
    per job or array task (steps are not read); ``41_[4-9]`` for an array's tasks not started."""
    if not data.get("jobs"):
        # No job matched: Slurm 22.05-23.02 say it as an error ("Nothing found with query"),
        # later releases as an empty list. A job accounting has not written yet (slurmctld sends
        # it a moment after the job ends) is not a failed poll.
        data = {**data, "errors": [e for e in data.get("errors") or [] if "Nothing found" not in str(e)]}
    check_errors(data, "slurmdb jobs")
    jobs = []
    for j in data.get("jobs") or []:
        array = j.get("array") or {}
        array_job = _number(array.get("job_id")) or None
        task = _number(array.get("task_id"))
        if array_job and task is not None:
            job_id, array_job_id, task_id = f"{array_job}_{task}", str(array_job), task
        elif array_job and array.get("task"):
            job_id, array_job_id, task_id = f"{array_job}_[{array['task']}]", str(array_job), None
        else:
            job_id, array_job_id, task_id = str(j["job_id"]), None, None
        state = job_state((j.get("state") or {}).get("current")) or "UNKNOWN"
        times = j.get("time") or {}
        work_dir = j.get("working_directory") or ""
        nodes = j.get("nodes") or ""
        jobs.append(JobStatus(
            job_id=job_id,
            state=state,
            exit_code=exit_code(j.get("exit_code"), state),
            reason=_none((j.get("state") or {}).get("reason")),
            nodes="" if nodes in ("None assigned", "(null)") else nodes,
            name=j.get("name") or "",
            array_job_id=array_job_id,
            array_task_id=task_id,
            start_time=_time(times.get("start")),
            end_time=_time(times.get("end")) if state in FINISHED_STATES else None,
            restart_count=_number(j.get("restart_cnt")) or 0,
            user=j.get("user") or "",
            submit_time=_time(times.get("submission")),
            log_path=j.get("stdout_expanded") or expand_output_path(
                j.get("stdout") or "", work_dir=work_dir, job_id=job_id, array_job_id=array_job_id,
                array_task_id=task_id, user=j.get("user") or "", name=j.get("name") or ""),
            work_dir=work_dir,
            comment=(j.get("comment") or {}).get("job") or "",
        ))
    return jobs


def nodes_from_answer(data: dict[str, Any]) -> list[NodeStatus]:
    """``GET /slurm/v0.0.42/nodes/``'s answer as ``parse_scontrol_nodes`` reads ``scontrol show
    node``: the base state and its flags (``["IDLE", "DRAIN"]`` is ``idle+drain``), the reason,
    GPUs from ``gres`` (else the ``gres/gpu`` of ``tres``), partitions."""
    check_errors(data, "nodes")
    nodes = []
    for n in data.get("nodes") or []:
        words = [str(w) for w in n.get("state") or []]
        base = next((w for w in words if w in NODE_BASE_STATES), "UNKNOWN")
        flags = tuple(w for w in words if w != base)
        gres, tres = n.get("gres") or "", n.get("tres") or ""
        gpus = parse_gres_gpus(gres) or parse_tres(tres).get("gres/gpu", 0)
        used = parse_gres_gpus(n.get("gres_used") or "") or parse_tres(n.get("tres_used") or "").get("gres/gpu", 0)
        nodes.append(NodeStatus(
            name=n["name"],
            state=base,
            flags=flags,
            reason=_none(n.get("reason")),
            partitions=tuple(_csv(n.get("partitions"))),
            cpus=_number(n.get("cpus")) or 0,
            cpus_allocated=_number(n.get("alloc_cpus")) or 0,
            memory_mb=_number(n.get("real_memory")) or 0,
            memory_allocated_mb=_number(n.get("alloc_memory")) or 0,
            gpus=gpus,
            gpus_allocated=used,
            address=n.get("address") or "",
            # scontrol's names for what callers read from ``extra`` (local_wait.py: Version).
            extra={k: str(v) for k, v in (("NodeName", n["name"]), ("State", "+".join(words)),
                                          ("NodeAddr", n.get("address")), ("NodeHostName", n.get("hostname")),
                                          ("Version", n.get("version")), ("Gres", gres), ("CfgTRES", tres),
                                          ("Reason", n.get("reason")), ("ActiveFeatures", ",".join(
                                              _csv(n.get("active_features"))))) if v},
        ))
    return nodes


def job_state(words: Any) -> str | None:
    """v0.0.42's ``job_state`` (the base state, then its flags) as the one word squeue shows."""
    if not isinstance(words, list):
        return words
    return next((f for f in _SHOWN_FLAGS if f in words[1:]), words[0] if words else None)


def exit_code(value: Any, state: str) -> int | None:
    """``{status, return_code, signal {id, name}}`` as a shell's code: 128 + a signal's number."""
    if not isinstance(value, dict) or state not in FINISHED_STATES:
        return None
    signal = _number((value.get("signal") or {}).get("id"))
    return 128 + signal if signal else _number(value.get("return_code"))


def ping_ok(data: dict[str, Any]) -> bool:
    """``GET /slurm/v0.0.42/ping/``: some controller ``responding`` (``pinged`` UP)."""
    return any(p.get("responding") or p.get("pinged") == "UP" for p in data.get("pings") or [] if isinstance(p, dict))


def _csv(value: Any) -> list[str]:
    """A ``v0.0.42_csv_string``: a list, or (as some dumpers give it) one comma-joined string."""
    if isinstance(value, list):
        return [str(v) for v in value if v]
    return [v for v in str(value or "").split(",") if v]


def _number(value: Any) -> Any:
    if isinstance(value, dict):  # {"set": true, "infinite": false, "number": 3}
        return value.get("number") if value.get("set", True) and not value.get("infinite") else None
    return value


def _time(value: Any) -> float | None:
    value = _number(value)
    return float(value) if value else None


def _none(value: Any) -> str | None:
    return None if value in (None, "", "(null)", "none", "None") else str(value)

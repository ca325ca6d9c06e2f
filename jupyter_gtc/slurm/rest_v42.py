"""Slurm's REST API as Vertex AI's Slurm Job API speaks it (OpenAPI v0.0.42, Slurm 24.11),
translated to and from what Debian 12's slurmrestd speaks (v0.0.38, Slurm 22.05). Pure
functions: a request in v0.0.42 becomes a v0.0.38 request (``request_38``), and a v0.0.38
answer a v0.0.42 one (``answer_42``). Used by the local Vertex endpoint's ``callSlurmRestApi``
(``services/vertex_slurm_rest.py``).

Only what real clients use is translated: submit, the queue, a job, its update and cancel,
nodes, partitions, accounting's jobs, ping. A request field v0.0.38 cannot express is refused
(400, Slurm's error shape, naming the field), never dropped: a job must not run other than asked.

The differences bridged (v0.0.42 <- -> v0.0.38). Sources: Slurm's
``doc/html/openapi_release_notes/slurm-23.02.html`` (v0.0.39: numbers became
``{set, infinite, number}``, states arrays, ``exit_code`` a struct), ``slurm-23.11.html`` and
``slurm-24.05.html`` / ``slurm-24.11.html`` (v0.0.40 to v0.0.42), the v0.0.42 schema in
``src/plugins/data_parser/v0.0.42/parsers.c`` (tag slurm-24-11-6-1: ``JOB_DESC_MSG``,
``JOB_INFO``, ``NODE``, ``PROCESS_EXIT_CODE_VERBOSE``, ``OPENAPI_ERROR``), and v0.0.38's in
``src/plugins/openapi/v0.0.38/jobs.c`` and ``nodes.c`` (tag slurm-22-05-8-1):

=====================================  ====================================  ==========================================
field (v0.0.42)                        v0.0.38                               translation
=====================================  ====================================  ==========================================
submit ``job.script`` or ``script``    top-level ``script`` only             moved to the top level
``job.environment``: ["K=V", ...]      ``environment``: {"K": "V"}           list -> dict (a dict is taken too)
``time_limit``, ``time_minimum``:      minutes, as sbatch's ``-t``           ``number``; ``infinite`` -> "UNLIMITED";
{set, infinite, number} or int                                               unset -> left out
``minimum_nodes``/``maximum_nodes``:   ``nodes``: "min[-max]" (v0.0.38's     -> ``nodes``
ints                                   ``minimum_nodes`` is sbatch's
                                       --use-min-nodes, a boolean)
``tres_per_node``: "gres/gpu:2"        ``gres``: "gpu:2"                     gres/ prefix dropped; a non-gres TRES refused
``tres_per_job``: "gres/gpu:4"         ``gpus``: "4"                         only gres/gpu
``tres_per_task``: "gres/gpu:1"        ``gpus_per_task``: "1"                only gres/gpu
``memory_per_node``/``_cpu``,          ints                                  ``number``; unset -> left out
``priority``: {set, infinite, number}
``hold``: bool                         ``hold``: bool (sbatch -H); false     as it is (false releases a held job)
                                       releases (as scontrol release)
``open_mode``: ["APPEND"]              ``open_mode``: "append"               the one word, lower-cased
``user_id``, ``group_id``              (jobs run as the caller)              refused
submit ``argv`` (the script's          ``argv``, but slurmrestd 22.05.8      the script kept by the endpoint; a fixed
arguments; Slurm overrides             frees it before the submit uses it    wrapper submitted (``ARGV_WRAPPER``), the
argv[0] with the script's path)        (``_fill_job_desc_from_opts``:        arguments in the job's environment, one
                                       ``desc->argv = sbopt->script_argv``;  variable each, read into "$@" and unset,
                                       ``slurm_free_options_members``        then ``exec`` of the kept script (its
                                       calls ``arg_reset_argv``, which       shebang); argv in an update refused
                                       frees it): the job is made, then
                                       the connection dropped unanswered
job ``job_state``: ["RUNNING", ...]    ``job_state``: "RUNNING"              string -> [string]
job ``exit_code``/``derived_exit_code``  wait status, an int (NO_VAL while    -> {status: [SUCCESS|ERROR|SIGNALED|PENDING],
: {status, return_code, signal}        running)                              return_code, signal {id, name}}
job numbers (``time_limit``,           int, or null for NO_VAL               -> {set, infinite, number}
``start_time``, ``priority``, ...)
node ``state``: ["IDLE", "DRAIN"]      ``state``: "idle" + ``state_flags``   upper-cased word + flags, one array
                                       ["DRAIN"]
partition ``partition.state``,         flat ``state``, ``nodes``,            -> v0.0.42's nested partition_info
``nodes.configured``, ``maximums``     ``max_time_limit`` (-1: infinite)
accounting ``state.current``: [..],    ``state.current``: "COMPLETED",       string -> array; exit code as above
``exit_code.status``: [..]             ``exit_code.status``: "SUCCESS"
accounting's exit codes              always SUCCESS, return_code 0, for    from ``sacct -o ExitCode`` ("3:0")
                                       any normal exit (22.05's              (``exit_code_from_sacct``)
                                       ``_dump_job_exit_code`` in dbv0.0.38
                                       parse.c tests WIFEXITED first: a bug)
submit of a held job: its id, no      its id, and ESLURM_JOB_HELD (2042)    that error moved to ``warnings``: the job
error                                  in ``errors``                         was made
accounting query ``users``            none (dbv0.0.38 jobs.c has no such    left out; the answer filtered by ``user``
                                       field: "Unknown Query field")
ping ``pinged``, ``responding``        ``ping``: "UP", ``status``            renamed
errors [{description, error_number,    the same, or {error_code, error}      -> v0.0.42's error entry
error, source}]                        (submit)
``step_id``: "batch"                   "BATCH"                               lower-case
=====================================  ====================================  ==========================================
"""

from __future__ import annotations

import re
import signal as _signal
from typing import Any

V42, V38 = "v0.0.42", "v0.0.38"
NO_VAL, INFINITE = 0xFFFFFFFF, 0xFFFFFFFE  # slurm.h's NO_VAL and INFINITE
NO_VAL16, INFINITE16 = 0xFFFF, 0xFFFE
ESLURM_REST_INVALID_QUERY = 9000  # slurm_errno.h: "Query empty or not RFC7320 compliant"
ESLURM_REST_UNKNOWN_URL = 9005  # "Unable to find requested URL"
ESLURM_JOB_HELD = 2042  # "Job is in held state, pending scheduler release"


class Refused(Exception):
    """A request v0.0.38 cannot carry out as asked: answered 400 with ``error_body``."""

    def __init__(self, field: str, value: Any, why: str, status: int = 400):
        super().__init__(f"{field}: {value!r}: {why}")
        self.field, self.status = field, status

    def body(self) -> dict[str, Any]:
        return error_body(str(self), "jupyter_gtc: v0.0.42 -> v0.0.38", ESLURM_REST_INVALID_QUERY)


def error_body(description: str, source: str, number: int = ESLURM_REST_INVALID_QUERY,
               error: str = "Invalid query") -> dict[str, Any]:
    """An answer in v0.0.42's error shape (``OPENAPI_ERROR``): Slurm's, with ``meta``."""
    return {"meta": _meta({}), "errors": [{"description": description, "error_number": number,
                                           "error": error, "source": source}], "warnings": []}


# -- requests ----------------------------------------------------------------------------

# (method, v0.0.42 path pattern) -> what it becomes; the first match wins.
ROUTES: list[tuple[str, re.Pattern[str], str]] = [
    ("POST", re.compile(r"/slurm/v0\.0\.42/job/submit/?"), "submit"),
    ("GET", re.compile(r"/slurm/v0\.0\.42/jobs/?"), "jobs"),
    ("GET", re.compile(r"/slurm/v0\.0\.42/job/(?P<id>[0-9_+]+)/?"), "job"),
    ("POST", re.compile(r"/slurm/v0\.0\.42/job/(?P<id>[0-9_+]+)/?"), "update"),
    ("DELETE", re.compile(r"/slurm/v0\.0\.42/job/(?P<id>[0-9_+]+)/?"), "cancel"),
    ("GET", re.compile(r"/slurm/v0\.0\.42/nodes/?"), "nodes"),
    ("GET", re.compile(r"/slurm/v0\.0\.42/partitions/?"), "partitions"),
    ("GET", re.compile(r"/slurm/v0\.0\.42/ping/?"), "ping"),
    ("GET", re.compile(r"/slurmdb/v0\.0\.42/job/(?P<id>[0-9_+]+)/?"), "db_job"),
    ("GET", re.compile(r"/slurmdb/v0\.0\.42/jobs/?"), "db_jobs"),
]
# The query parameters passed on, per kind (v0.0.38 takes the same names for these).
QUERIES = {"jobs": {"update_time"}, "cancel": {"signal"}, "nodes": {"update_time"}, "partitions": {"update_time"},
           "db_jobs": {"users", "start_time", "end_time", "account", "partition", "state", "job_name", "cluster",
                       "qos", "node", "step"}}  # step: job ids, as sacct -j (dbv0.0.38 jobs.c takes it too)


def request_38(method: str, path: str, query: dict[str, str], body: dict[str, Any] | None
               ) -> tuple[str, str, str, dict[str, str], dict[str, Any] | None]:
    """``(kind, method, path, query, body)`` of the v0.0.38 request for a v0.0.42 one; raises
    ``Refused`` (400) for a field it cannot carry, ``KeyError`` where no route matches (404).
    A submit with script arguments comes with them as the body's ``argv``, which must not reach
    slurmrestd 22.05: the caller keeps the script and sends ``wrap_argv``'s body instead."""
    for verb, pattern, kind in ROUTES:
        match = pattern.fullmatch(path)
        if verb == method and match:
            break
    else:
        raise KeyError(path)
    allowed = QUERIES.get(kind, set())
    for key in query:
        if key not in allowed:
            raise Refused(f"query {key}", query[key], f"v0.0.38 takes {', '.join(sorted(allowed)) or 'no query'} "
                                                     f"for {method} {path}")
    job_id = match.groupdict().get("id")
    new = {"submit": "/slurm/v0.0.38/job/submit", "jobs": "/slurm/v0.0.38/jobs", "nodes": "/slurm/v0.0.38/nodes",
           "partitions": "/slurm/v0.0.38/partitions", "ping": "/slurm/v0.0.38/ping",
           "db_jobs": "/slurmdb/v0.0.38/jobs"}.get(kind)
    if new is None:
        new = (f"/slurmdb/v0.0.38/job/{job_id}" if kind == "db_job" else f"/slurm/v0.0.38/job/{job_id}")
    out_body = None
    if kind == "submit":
        out_body = submit_38(body or {})
    elif kind == "update":
        out_body = job_desc_38(body or {}, "")
    return kind, method, new, dict(query), out_body


def submit_38(body: dict[str, Any]) -> dict[str, Any]:
    """A v0.0.42 submit body (``{"job": {...}}`` with the script in it or beside it) as v0.0.38's."""
    for key in body:
        if key not in ("job", "script"):
            raise Refused(key, body[key], "a submit here takes job (one job; a heterogeneous job's jobs list "
                                          "is not translated) and script")
    job = body.get("job")
    if not isinstance(job, dict):
        raise Refused("job", job, "an object: the job's description")
    script = job.get("script", body.get("script"))
    if not isinstance(script, str) or not script.startswith("#!"):
        raise Refused("job.script", script, "the batch script's text, starting with #!")
    out = {"script": script, "job": job_desc_38({k: v for k, v in job.items() if k not in ("script", "argv")}, "job.")}
    args = _script_args("job.argv", job["argv"]) if "argv" in job else []
    if args:  # not for slurmrestd 22.05 as it is: the caller keeps the script and sends wrap_argv's body
        _check_argv_env(out["job"], len(args))
        out["argv"] = args
    return out


# A job with arguments (the table's ``argv``) is submitted as this fixed script; its own script,
# kept by the endpoint in the cluster's folder, is the one it runs. The arguments come through
# the job's environment, one variable each (``GTC_ARGV_1``...), read back with bash's
# indirection (``${!name}``): no shell ever reads a string made of them. They are unset before
# the ``exec``, so the script and its steps see the environment they were sent. The script's
# shebang chooses its interpreter (the kernel's, as slurmstepd's exec of a batch script);
# ``$0`` (a Python script's ``sys.argv[0]``) is the kept copy's path, where Slurm's would be
# its spool copy's. Its ``#SBATCH`` lines were the client's to read (slurmrestd reads none).
# ``bash -p``: the job's environment cannot change the wrapper (no ``BASH_ENV`` read, no exported
# function standing in for ``set``, ``unset`` or ``exec``); the script gets that environment whole.
ARGV_PREFIX = "GTC_ARGV_"
ARGV_WRAPPER = """#!/bin/bash -p
# jupyter_gtc's local Slurm Job API: a job submitted with arguments (argv), which slurmrestd
# 22.05 mishandles. Its own script is kept in the cluster's folder and run here with them
# (jupyter_gtc/slurm/rest_v42.py, ARGV_WRAPPER).
count=${GTC_ARGV_COUNT-} script=${GTC_ARGV_SCRIPT-}
if [[ ! $count =~ ^[0-9]+$ || -z $script ]]; then
    echo "jupyter_gtc: GTC_ARGV_COUNT and GTC_ARGV_SCRIPT are not in the job's environment" >&2
    exit 2
fi
set --
for ((i = 1; i <= count; i++)); do
    name=GTC_ARGV_$i
    set -- "$@" "${!name}"
    unset "$name"
done
unset GTC_ARGV_COUNT GTC_ARGV_SCRIPT
exec "$script" "$@"
"""


def wrap_argv(body: dict[str, Any], kept: str) -> dict[str, Any]:
    """``request_38``'s submit body with ``argv`` (the script's arguments) as slurmrestd 22.05
    takes it: the script replaced by ``ARGV_WRAPPER``, which runs ``kept`` (where the caller
    keeps the submitted script) with the arguments, passed in the job's environment."""
    args = body["argv"]
    job = dict(body["job"])
    job["environment"] = {**job["environment"], f"{ARGV_PREFIX}COUNT": str(len(args)),
                          f"{ARGV_PREFIX}SCRIPT": kept, **{f"{ARGV_PREFIX}{i}": a for i, a in enumerate(args, 1)}}
    return {"script": ARGV_WRAPPER, "job": job}


def _script_args(name: str, value: Any) -> list[str]:
    """v0.0.42's ``argv`` without its first item, which Slurm overrides with the script's path
    (v0.0.42's description of the field): the arguments "$@" gets."""
    if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
        raise Refused(name, value, 'a list of strings: a placeholder (Slurm sets argv[0]), then the arguments')
    for i, arg in enumerate(value):
        if "\0" in arg:
            raise Refused(f"{name}[{i}]", arg, "an argument without a NUL character (a program's argument is a "
                                               "C string)")
    return value[1:]


def _check_argv_env(job: dict[str, Any], count: int) -> None:
    env = job.get("environment")
    if not env:  # as slurmrestd refuses it (ESLURM_ENVIRONMENT_MISSING): ours must not make it look set
        raise Refused("job.environment", env, "the job's environment, which Slurm requires for a submit "
                                              '(e.g. ["PATH=/usr/bin:/bin"])')
    ours = sorted(k for k in env if k.startswith(ARGV_PREFIX))
    if ours:
        raise Refused(f"job.environment {ours[0]}", env[ours[0]], f"names without the {ARGV_PREFIX} prefix: the "
                                                                   f"local Slurm Job API passes a job's {count} "
                                                                   f"argument(s) in such variables")


_STRINGS = ("account", "array", "comment", "constraints", "current_working_directory", "dependency", "name",
            "partition", "qos", "reservation", "standard_error", "standard_input", "standard_output", "nodes",
            "licenses", "mail_user", "distribution", "excluded_nodes", "prefer", "burst_buffer", "cpu_binding")
_INTS = ("tasks", "cpus_per_task", "tasks_per_node", "minimum_cpus_per_node", "nice", "tasks_per_core",
         "tasks_per_socket", "sockets_per_node", "threads_per_core", "minimum_cpus", "temporary_disk_per_node",
         "delay_boot")
_BOOLS = ("requeue", "contiguous", "hold", "reboot")


def job_desc_38(job: dict[str, Any], where: str) -> dict[str, Any]:
    """A v0.0.42 ``job_desc_msg`` as v0.0.38's (its sbatch option names), field by field."""
    out: dict[str, Any] = {}
    nodes = [job.get("minimum_nodes"), job.get("maximum_nodes")]
    for key, value in job.items():
        name = where + key
        if key in _STRINGS:
            if key == "nodes" and isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if key == "excluded_nodes" and isinstance(value, list):
                value = ",".join(map(str, value))
            if not isinstance(value, str):
                raise Refused(name, value, "a string")
            out[key] = value
        elif key in _INTS:
            out[key] = _int(name, value)
        elif key in _BOOLS:
            if not isinstance(value, bool):
                raise Refused(name, value, "true or false")
            # hold false passes as it is: v0.0.38 releases a held job with it (tried on 22.05.8:
            # PENDING JobHeldUser -> None); priority "INFINITE" is "Invalid priority" there and
            # "TOP" ESLURM_JOB_HELD (slurm_opt.c's arg_set_data_priority)
            if key == "requeue" and not value:
                out["no_requeue"] = True
            else:
                out[key] = value
        elif key in ("minimum_nodes", "maximum_nodes"):
            _int(name, value)
        elif key == "environment":
            out["environment"] = _environment(name, value)
        elif key == "open_mode":  # v0.0.42: ["APPEND"] (v0.0.42_open_mode); v0.0.38: sbatch's word
            words = value if isinstance(value, list) else [value]
            if len(words) != 1 or str(words[0]).upper() not in ("APPEND", "TRUNCATE"):
                raise Refused(name, value, '["APPEND"] or ["TRUNCATE"]')
            out["open_mode"] = str(words[0]).lower()
        elif key in ("time_limit", "time_minimum"):
            number = _number(name, value)
            if number is not None:
                out[key] = number
        elif key in ("memory_per_node", "memory_per_cpu", "priority"):
            number = _number(name, value, infinite_ok=False)
            if number is not None:
                out[key] = number
        elif key in ("tres_per_node", "tres_per_job", "tres_per_task"):
            out.update(_tres(name, key, value))
        elif key == "argv":
            # A submit's argv is taken out before (submit_38, wrap_argv); anywhere else it would
            # reach slurmrestd 22.05.8, which frees it before use (see the table): refused.
            raise Refused(name, value, "slurmrestd 22.05 (v0.0.38) loses the answer to a request with argv; "
                                       "a job's arguments are given at its submit (job/submit's job.argv)")
        elif key in ("user_id", "group_id"):
            raise Refused(name, value, "jobs run as the caller's account (the token's user); leave it out")
        else:
            raise Refused(name, value, "a field the local Slurm Job API does not translate to Slurm 22.05's "
                                       "v0.0.38 (see jupyter_gtc/slurm/rest_v42.py for those it does)")
    if any(n is not None for n in nodes):
        low = nodes[0] if nodes[0] is not None else 1
        out["nodes"] = f"{low}-{nodes[1]}" if nodes[1] not in (None, low) else str(low)
    return out


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(name, value, "a whole number")
    return value


def _number(name: str, value: Any, infinite_ok: bool = True) -> int | str | None:
    """v0.0.42's ``{set, infinite, number}`` (or a plain number) as v0.0.38's; None: unset."""
    if isinstance(value, dict):
        extra = set(value) - {"set", "infinite", "number"}
        if extra:
            raise Refused(name, value, "{set, infinite, number}")
        if value.get("infinite"):
            if not infinite_ok:
                raise Refused(name, value, "a finite number (v0.0.38 has no infinite here)")
            return "UNLIMITED"
        if not value.get("set", "number" in value):
            return None
        value = value.get("number")
    return _int(name, value)


def _environment(name: str, value: Any) -> dict[str, str]:
    if isinstance(value, dict) and all(isinstance(v, str) for v in value.values()):
        return dict(value)
    if not isinstance(value, list):
        raise Refused(name, value, 'a list of "NAME=value" strings')
    env = {}
    for i, item in enumerate(value):
        if not isinstance(item, str) or "=" not in item or item.startswith("="):
            raise Refused(f"{name}[{i}]", item, '"NAME=value"')
        key, _, val = item.partition("=")
        env[key] = val
    return env


def _tres(name: str, key: str, value: Any) -> dict[str, str]:
    """v0.0.42's TRES strings (``gres/gpu:2``) as v0.0.38's gres/gpus options."""
    if not isinstance(value, str):
        raise Refused(name, value, 'a TRES string such as "gres/gpu:2"')
    items = [t.strip() for t in value.split(",") if t.strip()]
    if not items or not all(t.startswith("gres/") for t in items):
        raise Refused(name, value, "gres TRES only (gres/gpu:N): Slurm 22.05's v0.0.38 takes no other TRES here")
    gres = [t.removeprefix("gres/").replace("=", ":") for t in items]
    if key == "tres_per_node":
        return {"gres": ",".join(gres)}
    if len(gres) != 1 or not gres[0].startswith("gpu:"):
        raise Refused(name, value, "one gres/gpu:N (v0.0.38 has gpus and gpus_per_task for these)")
    return {"gpus" if key == "tres_per_job" else "gpus_per_task": gres[0].removeprefix("gpu:")}


# -- answers -----------------------------------------------------------------------------

def answer_42(kind: str, status: int, raw: bytes | str) -> tuple[int, dict[str, Any]]:
    """slurmrestd's v0.0.38 answer (HTTP status, body) for a request of ``kind`` as v0.0.42's."""
    import json

    try:
        data = json.loads(raw)
    except ValueError:  # slurmrestd answers some failures in plain text ("Unable find requested URL")
        text = raw.decode(errors="replace") if isinstance(raw, bytes) else raw
        return status, error_body(text.strip()[:2000], "slurmrestd", ESLURM_REST_UNKNOWN_URL, "Unknown error")
    if not isinstance(data, dict):
        return status, error_body("slurmrestd answered something not a JSON object", "slurmrestd")
    out: dict[str, Any] = {"meta": _meta(data.get("meta") or {}), "errors": [_error(e) for e in data.get("errors") or []],
                           "warnings": data.get("warnings") or []}
    if kind == "submit":
        if data.get("job_id"):  # made: "held" is news, not a failure (a client would take errors as one)
            held = [e for e in out["errors"] if e["error_number"] == ESLURM_JOB_HELD]
            out["errors"] = [e for e in out["errors"] if e not in held]
            out["warnings"] = list(out["warnings"]) + [{"description": e["error"], "source": e["source"]} for e in held]
        for key in ("job_id", "job_submit_user_msg"):
            if key in data:
                out[key] = data[key]
        if "step_id" in data:
            out["step_id"] = str(data["step_id"]).lower()
    elif kind in ("jobs", "job"):
        out["jobs"] = [job_42(j) for j in data.get("jobs") or []]
        out["last_backfill"] = out["last_update"] = _no_val(None)
    elif kind == "nodes":
        out["nodes"] = [node_42(n) for n in data.get("nodes") or []]
        out["last_update"] = _no_val(None)
    elif kind == "partitions":
        out["partitions"] = [partition_42(p) for p in data.get("partitions") or []]
        out["last_update"] = _no_val(None)
    elif kind in ("db_job", "db_jobs"):
        out["jobs"] = [db_job_42(j) for j in data.get("jobs") or []]
    elif kind == "ping":
        out["pings"] = [{"hostname": p.get("hostname"), "pinged": p.get("ping"), "responding": p.get("ping") == "UP",
                         "latency": 0, "mode": p.get("mode"), "primary": p.get("mode") == "primary"}
                        for p in data.get("pings") or []]
    return status, out


def _meta(meta: dict[str, Any]) -> dict[str, Any]:
    slurm = meta.get("Slurm") or meta.get("slurm") or {}
    return {"plugin": {"type": "openapi/slurmctld", "name": "Slurm OpenAPI slurmctld",
                       "data_parser": f"data_parser/{V42} (translated from {V38} by jupyter_gtc)",
                       "accounting_storage": ""},
            "client": {"source": "callSlurmRestApi", "user": "", "group": ""},
            "slurm": {"version": {k: str(v) for k, v in (slurm.get("version") or {}).items()},
                      "release": slurm.get("release", ""), "cluster": ""}}


def _error(e: Any) -> dict[str, Any]:
    if not isinstance(e, dict):
        return {"description": str(e), "error_number": 0, "error": str(e), "source": "slurmrestd"}
    return {"description": e.get("description", ""), "error_number": e.get("error_number", e.get("error_code", 0)),
            "error": e.get("error", ""), "source": e.get("source", "slurmrestd")}


def _no_val(value: Any, infinite: tuple[int, ...] = (INFINITE, INFINITE16, -1)) -> dict[str, Any]:
    """A v0.0.38 number (None or NO_VAL: unset; INFINITE or -1: infinite) as ``{set, infinite, number}``."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, float)) or value in (NO_VAL, NO_VAL16):
        return {"set": False, "infinite": False, "number": 0}
    if value in infinite:
        return {"set": False, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": value}


# JOB_INFO's fields that v0.0.42 gives as {set, infinite, number} (parsers.c: *_NO_VAL).
JOB_NUMBERS = ("accrue_time", "array_job_id", "array_task_id", "array_max_tasks", "cores_per_socket", "billable_tres",
               "cpus_per_task", "cpu_frequency_minimum", "cpu_frequency_maximum", "cpu_frequency_governor",
               "deadline", "delay_boot", "eligible_time", "end_time", "het_job_id", "het_job_offset",
               "last_sched_evaluation", "max_cpus", "max_nodes", "tasks_per_core", "tasks_per_tres",
               "tasks_per_node", "tasks_per_socket", "tasks_per_board", "cpus", "node_count", "tasks",
               "minimum_cpus_per_node", "minimum_tmp_disk_per_node", "preempt_time", "preemptable_time",
               "pre_sus_time", "resize_time", "sockets_per_node", "start_time", "submit_time", "suspend_time",
               "time_limit", "time_minimum", "threads_per_core", "priority", "memory_per_cpu", "memory_per_node")


def job_42(job: dict[str, Any]) -> dict[str, Any]:
    out = dict(job)
    for key in JOB_NUMBERS:
        if key in out:
            out[key] = _no_val(out[key])
    state = job.get("job_state")
    out["job_state"] = [state] if isinstance(state, str) else list(state or [])
    for key in ("exit_code", "derived_exit_code"):
        if key in job:
            out[key] = exit_code_42(job[key], pending=state in ("PENDING", "RUNNING", "CONFIGURING"))
    return out


def exit_code_42(value: Any, pending: bool = False) -> dict[str, Any]:
    """v0.0.38's wait status (an int) or accounting's ``{status, return_code, signal}`` as v0.0.42's
    ``PROCESS_EXIT_CODE_VERBOSE``: ``status`` an array, numbers ``{set, infinite, number}``."""
    if isinstance(value, dict):  # accounting's: status already a word
        status = value.get("status")
        sig = value.get("signal") or {}
        return {"status": [status] if isinstance(status, str) else list(status or []),
                "return_code": _no_val(value.get("return_code")),
                "signal": {"id": _no_val(sig.get("signal_id", sig.get("id"))), "name": sig.get("name", "")}}
    if pending or value is None or not isinstance(value, int) or value >= INFINITE:
        return {"status": ["PENDING"], "return_code": _no_val(None), "signal": {"id": _no_val(None), "name": ""}}
    signum = value & 0x7F
    if signum:
        try:
            name = _signal.Signals(signum).name.removeprefix("SIG")
        except ValueError:
            name = ""
        return {"status": ["SIGNALED"] + (["CORE_DUMPED"] if value & 0x80 else []), "return_code": _no_val(None),
                "signal": {"id": _no_val(signum), "name": name}}
    code = (value >> 8) & 0xFF
    return {"status": ["SUCCESS" if code == 0 else "ERROR"], "return_code": _no_val(code),
            "signal": {"id": _no_val(None), "name": ""}}


NODE_NUMBERS = ("boot_time", "last_busy", "reason_changed_at", "slurmd_start_time", "cpu_load", "free_mem")


def node_42(node: dict[str, Any]) -> dict[str, Any]:
    """A node with v0.0.42's ``state`` array (the base state upper-cased, then its flags)."""
    out = dict(node)
    for key, flags in (("state", "state_flags"), ("next_state_after_reboot", "next_state_after_reboot_flags")):
        base = node.get(key)
        words = ([base.upper()] if isinstance(base, str) and base else []) + [f.upper() for f in node.get(flags) or []]
        out[key] = words
        out.pop(flags, None)
    if "free_memory" in out:
        out["free_mem"] = out.pop("free_memory")
    for key in NODE_NUMBERS:
        if key in out:
            out[key] = _no_val(out[key])
    return out


def partition_42(part: dict[str, Any]) -> dict[str, Any]:
    """v0.0.38's flat partition as v0.0.42's ``partition_info`` (the fields clients read)."""
    state = part.get("state")
    return {
        "name": part.get("name"),
        "nodes": {"configured": part.get("nodes", ""), "total": part.get("total_nodes", 0),
                  "allowed_allocation": part.get("allowed_allocation_nodes", "")},
        "cpus": {"total": part.get("total_cpus", 0)},
        "partition": {"state": [state] if isinstance(state, str) else list(state or [])},
        "maximums": {"time": _no_val(part.get("max_time_limit")),
                     "nodes": _no_val(part.get("maximum_nodes_per_job")),
                     "cpus_per_node": _no_val(part.get("maximum_cpus_per_node"))},
        "defaults": {"time": _no_val(part.get("default_time_limit"))},
        "minimums": {"nodes": part.get("min nodes per job", 0)},
        "flags": [f.upper() for f in part.get("flags") or []],
        "priority": {"job_factor": part.get("priority_job_factor", 0), "tier": part.get("priority_tier", 0)},
        "qos": {"assigned": part.get("qos", "")},
        "tres": {"configured": part.get("tres", ""), "billing_weights": part.get("billing_weights", "")},
        "accounts": {"allowed": part.get("allowed_accounts", ""), "deny": part.get("denied_accounts", "")},
        "groups": {"allowed": part.get("allowed_groups", "")},
        "alternate": part.get("alternative", ""),
    }


def db_job_42(job: dict[str, Any]) -> dict[str, Any]:
    """An accounting job: its state and its steps' states arrays, its exit codes v0.0.42's."""
    out = dict(job)
    state = dict(job.get("state") or {})
    if isinstance(state.get("current"), str):
        state["current"] = [state["current"]]
    out["state"] = state
    for key in ("exit_code", "derived_exit_code"):
        if key in job:
            out[key] = exit_code_42(job[key])
    time = dict(job.get("time") or {})
    if "limit" in time:
        time["limit"] = _no_val(time["limit"])
    out["time"] = time
    steps = []
    for step in job.get("steps") or []:
        step = dict(step)
        if isinstance(step.get("state"), str):
            step["state"] = [step["state"]]
        if "exit_code" in step:
            step["exit_code"] = exit_code_42(step["exit_code"])
        steps.append(step)
    out["steps"] = steps
    return out


def exit_code_from_sacct(text: str) -> dict[str, Any] | None:
    """sacct's ``ExitCode`` (``"3:0"``: return code, then signal) as v0.0.42's exit code; None
    where it is not one (an empty field)."""
    code, _, sig = text.strip().partition(":")
    if not code.isdigit() or not (sig or "0").isdigit():
        return None
    if int(sig or 0):
        return exit_code_42(int(sig) & 0x7F)
    return exit_code_42(int(code) << 8)


def only_users(answer: dict[str, Any], users: str) -> None:
    """Keep the accounting jobs of ``users`` (a comma-separated list, v0.0.42's ``users`` query,
    which dbv0.0.38 lacks: its jobs.c takes no such field)."""
    wanted = {u.strip() for u in users.split(",") if u.strip()}
    if wanted:
        answer["jobs"] = [j for j in answer.get("jobs") or [] if j.get("user") in wanted]


def correct_db_exit_codes(answer: dict[str, Any], sacct: dict[str, tuple[str, str]]) -> None:
    """Put sacct's exit codes (``{"ID" or "ID.STEP": (ExitCode, DerivedExitCode)}``) into a
    translated accounting answer in place of v0.0.38's (see the table: 22.05 reports every
    normal exit as SUCCESS)."""
    for job in answer.get("jobs") or []:
        ours = sacct.get(str(job.get("job_id")))
        if ours:
            job["exit_code"] = exit_code_from_sacct(ours[0]) or job.get("exit_code")
            if "derived_exit_code" in job:
                job["derived_exit_code"] = exit_code_from_sacct(ours[1]) or job["derived_exit_code"]
        for step in job.get("steps") or []:
            step_id = (step.get("step") or {}).get("id")
            ours = sacct.get(f"{job.get('job_id')}.{step_id}")
            if ours and "exit_code" in step:
                step["exit_code"] = exit_code_from_sacct(ours[0]) or step["exit_code"]

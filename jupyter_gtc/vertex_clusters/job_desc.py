"""What sbatch would get (our services' options, the script's ``#SBATCH`` lines, the job's
environment) as the job description Slurm's REST API takes: ``v0.0.42_job_desc_msg``. Pure.

slurmrestd reads no ``#SBATCH`` line (sbatch does, client side), so they are read here, with
sbatch's precedence: the script's lines first, the command line's options after them, the last
of an option winning (``slurm.sbatch.read_sbatch_options``, sbatch's own option table). Each
option becomes the field sbatch itself fills in ``slurm_opt_create_job_desc()``
(``src/common/slurm_opt.c``); an option with no field (``--wait``, ``--test-only``, pyxis's
``--container-image``, ...) is refused before anything is submitted, naming it and saying that
``jobs: ssh`` (sbatch on the login node) runs it. Nothing is dropped silently.

Field names and shapes are Slurm's own: ``components.schemas.v0.0.42_job_desc_msg`` of
``testsuite/python/data/openapi_specs/openapi_spec_v42.json`` (SchedMD/slurm, commit
284c3b95f0), the same set as ``PARSER_ARRAY(JOB_DESC_MSG)`` in
``src/plugins/data_parser/v0.0.42/parsers.c`` at tag slurm-24-11-7-1 (defaf214db). Numbers
that may be unset are ``{"set", "infinite", "number"}`` (``v0.0.42_uint32_no_val_struct``);
the environment is a list of ``K=V`` (``v0.0.42_string_array``); flags are lists of words.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..exceptions import CommandError, SpecError
from ..slurm.sbatch import read_sbatch_options
from ..spec.job import sbatch_directives

JOBS_SSH = ("Slurm's REST API has no field for it; set `jobs: ssh` for this cluster to submit through sbatch "
            "on its login node, which runs it")
# The PATH a job gets where the environment sent names none: the job starts from the environment
# it is given (slurmrestd has no login shell's to export, as sbatch does), and Slurm's own REST
# examples give a PATH. systemd's default, which Debian's and Rocky's logins start from.
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


class OptionRefused(SpecError, CommandError):
    """An option (or script line) the REST API cannot carry: nothing was submitted. A
    ``SpecError`` (the request's mistake, 400) that is also the ``CommandError`` a refused
    sbatch is, so that the submit path removes the job's folder it made and says why
    (``services/submit.py`` catches ``CommandError``)."""

    def __init__(self, option: str, value: str | None, why: str = JOBS_SSH):
        shown = option if value is None or option.startswith("#") else f"{option}={value}"
        message = f"{shown}: not submitted through the Slurm Job API: {why}"
        self.field, self.value, self.expected = option, shown, why  # SpecError's
        self.argv, self.returncode, self.stderr, self.timeout = ["callSlurmRestApi", shown], 2, message, None
        Exception.__init__(self, message)  # each base's own __init__ would write its own message


def job_description(script: str, options: list[str], env: Mapping[str, str] | None = None,
                    work_dir: str | None = None, script_path: str | None = None,
                    script_args: list[str] | None = None) -> dict[str, Any]:
    """The ``job`` of ``POST /slurm/v0.0.42/job/submit`` for ``script`` (its text, sent whole)
    submitted with ``options`` (sbatch's, which win over its ``#SBATCH`` lines), ``env`` in its
    environment, in ``work_dir`` unless an option chooses (``--chdir``), ``script_args`` as its
    ``"$@"``. Raises ``OptionRefused`` (a ``SpecError``) for an option with no REST field."""
    if any(line.startswith("#PBS") for line in _header(script)):
        raise OptionRefused("#PBS", None, "sbatch reads a script's #PBS lines, Slurm's REST API does not: write "
                                          "them as #SBATCH lines, or set `jobs: ssh` for this cluster")
    pairs = read_sbatch_options(sbatch_directives(script) + list(options))
    job: dict[str, Any] = {}
    state = _Gathered()
    for name, value in pairs:
        handler = _HANDLERS.get(name)
        if handler is None:
            why = CONTAINER_REFUSAL if name.startswith("container-") else _REFUSED.get(name, JOBS_SSH)
            raise OptionRefused(f"--{name}", value, why)
        handler(job, state, name, value)
    _finish_tres(job, state)
    if work_dir is not None and "current_working_directory" not in job:
        job["current_working_directory"] = str(work_dir)
    job["environment"] = _environment(state.export, dict(env or {}))
    if script_args:
        # argv[0] is slurmstepd's to set (the script's path on the node): ours is a placeholder.
        job["argv"] = [script_path or "job.sbatch", *script_args]
    job["script"] = script
    return job


def _header(script: str) -> list[str]:
    """The script's comment lines before its first command (where sbatch reads directives)."""
    lines = []
    for line in script.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            break
        lines.append(stripped)
    return lines


class _Gathered:
    """Options that share a field, combined once all are read (as sbatch combines them)."""

    def __init__(self):
        self.gpus_per_node: str | None = None
        self.gres: str | None = None
        self.export: str | None = None


# -- the options, one handler each -------------------------------------------------------------

Handler = Callable[[dict, _Gathered, str, "str | None"], None]


def _text(field: str) -> Handler:
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = _required(name, value)
    return handle


def _integer(field: str, least: int = 0) -> Handler:
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = _whole(name, value, least)
    return handle


def _set(field: str, to: Any) -> Handler:
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = to
    return handle


def _flag(word: str) -> Handler:
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        flags = job.setdefault("flags", [])
        if word not in flags:
            flags.append(word)
    return handle


def _ignored(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """What only changes sbatch's own output (``--parsable``, ``--quiet``): no field to fill."""


def _time(field: str) -> Handler:
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        minutes = slurm_minutes(_required(name, value))
        if minutes is None:
            raise SpecError(f"--{name}", value, "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
        job[field] = _no_val(minutes)
    return handle


def _memory(field: str, plain: bool = False) -> Handler:
    """A size in megabytes: ``{set, number}`` (``memory_per_*``), or a plain integer
    (``temporary_disk_per_node``, int32 in the spec)."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        megabytes = _megabytes(name, value)
        job[field] = megabytes if plain else _no_val(megabytes)
    return handle


def _gpu_tres(field: str) -> Handler:
    """``--gpus=2`` -> ``gres/gpu:2``, ``--gpus=h100:2`` -> ``gres/gpu:h100:2`` (``xfmt_tres``)."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = _gpu_items(name, value)
    return handle


def _gpu_items(name: str, value: str | None) -> str:
    return ",".join(f"gres/gpu:{item}" for item in _required(name, value).split(","))


def _gpus_per_node(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    state.gpus_per_node = _gpu_items(name, value)


def _gres(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """``--gres=gpu:2,shard:1`` -> ``gres/gpu:2,gres/shard:1`` (``gres_prepend_tres_type``);
    ``none`` asks for none."""
    text = _required(name, value)
    state.gres = None if text.lower() == "none" else ",".join(
        item if item.startswith("gres/") else f"gres/{item}" for item in text.split(","))


def _finish_tres(job: dict, state: _Gathered) -> None:
    """``tres_per_node``: ``--gpus-per-node``'s, then ``--gres``', as sbatch joins them."""
    parts = [p for p in (state.gpus_per_node, state.gres) if p]
    if parts:
        job["tres_per_node"] = ",".join(parts)


def _per_gpu(field: str) -> Handler:
    """``--cpus-per-gpu=4`` -> ``cpus_per_tres: gres/gpu:4``; ``--mem-per-gpu=8G`` ->
    ``memory_per_tres: gres/gpu:8192`` (megabytes)."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        amount = _megabytes(name, value) if name == "mem-per-gpu" else _whole(name, value, 1)
        job[field] = f"gres/gpu:{amount}"
    return handle


def _prefixed(field: str, prefix: str) -> Handler:
    """``--gpu-bind``/``--gpu-freq``: ``tres_bind: gres/gpu:...``, ``tres_freq: gpu:...``."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = prefix + _required(name, value)
    return handle


def _nodes(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """``--nodes=2`` or ``2-4``: ``minimum_nodes``/``maximum_nodes``."""
    text = _required(name, value).strip()
    found = re.fullmatch(r"(\d+)(?:-(\d+))?", text)
    if not found:
        raise OptionRefused(f"--{name}", value, "a node count (2) or range (2-4) is what the REST submit takes here; "
                                         "other forms (a list, a :step) go through `jobs: ssh`")
    job["minimum_nodes"] = int(found.group(1))
    job["maximum_nodes"] = int(found.group(2) or found.group(1))


def _host_list(field: str) -> Handler:
    """``--nodelist``/``--exclude``: a host list, sent as its comma-separated parts
    (``v0.0.42_csv_string``), brackets kept whole (``a3-[0-1],a3-4`` is two parts)."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        job[field] = re.findall(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*", _required(name, value))
    return handle


def _open_mode(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    mode = _required(name, value).lower()
    if mode not in ("append", "truncate"):
        raise SpecError("--open-mode", value, "append or truncate")
    job["open_mode"] = [mode.upper()]


def _exclusive(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """``--exclusive`` alone: no sharing (``shared: [none]``); ``=user``, ``=mcs``, ``=topo``."""
    word = (value or "none").lower()
    if word not in ("none", "user", "mcs", "topo"):
        raise SpecError("--exclusive", value, "no value, user, mcs or topo")
    job["shared"] = [word]


def _requeue(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    job["requeue"] = name == "requeue"


def _no_kill(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    job["kill_on_node_fail"] = (value or "").lower() == "off"


def _nice(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    job["nice"] = 100 if value is None else _whole(name, value, -2147483645)


def _priority(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    text = _required(name, value)
    job["priority"] = {"set": True, "infinite": True, "number": 0} if text.upper() == "TOP" else \
        _no_val(_whole(name, value, 0))


def _hold(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    job["hold"] = True  # parsers.c PARSE_FUNC(HOLD): priority 0, as sbatch -H


def _wait_all_nodes(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    if _required(name, value) not in ("0", "1"):
        raise SpecError("--wait-all-nodes", value, "0 or 1")
    job["wait_all_nodes"] = value == "1"


def _kill_on_invalid_dep(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    word = _required(name, value).lower()
    if word not in ("yes", "no"):
        raise SpecError("--kill-on-invalid-dep", value, "yes or no")
    _flag("KILL_INVALID_DEPENDENCY" if word == "yes" else "NO_KILL_INVALID_DEPENDENCY")(job, state, name, value)


def _gres_flags(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    words = {"enforce-binding": "GRES_BINDING_ENFORCED", "disable-binding": "GRES_BINDING_DISABLED"}
    word = words.get(_required(name, value).lower())
    if word is None:
        raise OptionRefused(f"--{name}", value, "enforce-binding and disable-binding are what the REST submit carries "
                                         "(as job flags); other gres flags go through `jobs: ssh`")
    _flag(word)(job, state, name, value)


# --mail-type's words (sbatch's man page) as v0.0.42_job_mail_flags has them.
_MAIL = {"BEGIN": ["BEGIN"], "END": ["END"], "FAIL": ["FAIL"], "REQUEUE": ["REQUEUE"], "INVALID_DEPEND":
         ["INVALID_DEPENDENCY"], "STAGE_OUT": ["STAGE_OUT"], "ARRAY_TASKS": ["ARRAY_TASKS"], "TIME_LIMIT":
         ["TIME=100%"], "TIME_LIMIT_90": ["TIME=90%"], "TIME_LIMIT_80": ["TIME=80%"], "TIME_LIMIT_50": ["TIME=50%"],
         "ALL": ["BEGIN", "END", "FAIL", "REQUEUE", "STAGE_OUT", "INVALID_DEPENDENCY"], "NONE": []}


def _mail_type(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    words: list[str] = []
    for item in _required(name, value).upper().split(","):
        if item not in _MAIL:
            raise SpecError("--mail-type", value, f"comma-separated words of {', '.join(_MAIL)}")
        words += [w for w in _MAIL[item] if w not in words]
    job["mail_type"] = words


def _profile(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    words = [w.upper() for w in _required(name, value).split(",")]
    if "ALL" in words:
        words = ["ENERGY", "LUSTRE", "NETWORK", "TASK"]
    if not set(words) <= {"NONE", "ENERGY", "LUSTRE", "NETWORK", "TASK"}:
        raise SpecError("--profile", value, "all, none, or comma-separated energy, lustre, network, task")
    job["profile"] = words


def _signal(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """``--signal=[{R|B}:]SIG[@TIME]``: ``kill_warning_signal``/``_delay``/``_flags``."""
    found = re.fullmatch(r"(?:([RB]{1,2}):)?([A-Za-z0-9]+)(?:@(\d+))?", _required(name, value))
    if not found:
        raise SpecError("--signal", value, "[{R|B}:]SIGNAL[@SECONDS], as B:USR1@90")
    where, signal, delay = found.groups()
    job["kill_warning_signal"] = signal.upper().removeprefix("SIG")
    job["kill_warning_delay"] = _no_val(int(delay or 60))
    job["kill_warning_flags"] = [w for letter, w in (("B", "BATCH_JOB"), ("R", "RESERVATION_JOB"))
                                 if letter in (where or "")]


def _switches(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    """``--switches=COUNT[@MAX-TIME]``: ``required_switches`` and ``wait_for_switch`` (seconds)."""
    count, _, wait = _required(name, value).partition("@")
    job["required_switches"] = _no_val(_whole(name, count, 0))
    if wait:
        minutes = slurm_minutes(wait)
        if minutes is None:
            raise SpecError("--switches", value, "COUNT[@MAX-TIME], as 1@10:00")
        job["wait_for_switch"] = minutes * 60


def _when(field: str) -> Handler:
    """``--begin``/``--deadline``: ``now``, ``now+N[units]`` or a UNIX time; a calendar time is
    the cluster's local time, which only sbatch on the cluster knows."""
    def handle(job: dict, state: _Gathered, name: str, value: str | None) -> None:
        seconds = _epoch(_required(name, value))
        if seconds is None:
            raise OptionRefused(f"--{name}", value,
                                "now, now+N[seconds|minutes|hours|days|weeks] or a UNIX time is what the REST submit "
                                "takes (a calendar time is the cluster's local time): or set `jobs: ssh` for this "
                                "cluster")
        job[field] = _no_val(seconds) if field == "begin_time" else seconds
    return handle


def _export(job: dict, state: _Gathered, name: str, value: str | None) -> None:
    state.export = _required(name, value)


def _environment(export: str | None, env: dict[str, str]) -> list[str]:
    """The job's ``environment``: ``env`` (our services' variables: the job contract; never a
    secret), and as ``--export`` says: ALL (sbatch's default) adds a PATH where ``env`` has
    none; NONE only ``env``; ``NAME=value`` items that value; a bare ``NAME`` the value ``env``
    gives it (the login shell's, which sbatch would export, is not visible to the API)."""
    variables = {"PATH": DEFAULT_PATH}
    if export is not None:
        items = [i for i in export.split(",") if i]
        if "NONE" in items or "ALL" not in items:
            variables = {}
        for item in items:
            key, eq, val = item.partition("=")
            if item in ("ALL", "NONE"):
                continue
            if eq:
                variables[key] = val
            elif key in env:
                variables[key] = env[key]
            else:
                raise OptionRefused("--export", export, f"{key} has no value here: the login node's environment, "
                                                      f"which sbatch would take it from, is not the REST API's; "
                                                      f"give it as {key}=VALUE, or set `jobs: ssh` for this cluster")
    variables.update(env)
    return [f"{k}={v}" for k, v in variables.items()]


# -- values -------------------------------------------------------------------------------------

def slurm_minutes(text: str) -> int | None:
    """A Slurm time (``time_str2mins``: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS) in
    whole minutes, seconds rounded up; -1 for UNLIMITED/INFINITE/-1. None if unreadable."""
    text = text.strip()
    if text.upper() in ("UNLIMITED", "INFINITE", "-1"):
        return -1
    days, dash, rest = text.rpartition("-") if "-" in text else ("", "", text)
    if dash and not days.isdigit():
        return None
    parts = rest.split(":")
    if not all(p.isdigit() for p in parts) or len(parts) > 3:
        return None
    numbers = [int(p) for p in parts]
    if dash:  # D-HH, D-HH:MM, D-HH:MM:SS
        hours, minutes, seconds = (numbers + [0, 0])[:3]
        total = ((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds
    elif len(numbers) == 1:
        total = numbers[0] * 60
    elif len(numbers) == 2:  # MM:SS
        total = numbers[0] * 60 + numbers[1]
    else:
        total = (numbers[0] * 60 + numbers[1]) * 60 + numbers[2]
    return (total + 59) // 60


def _no_val(number: int) -> dict[str, Any]:
    """A ``*_no_val_struct``: -1 (UNLIMITED) is ``infinite``."""
    if number < 0:
        return {"set": True, "infinite": True, "number": 0}
    return {"set": True, "infinite": False, "number": number}


_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _megabytes(name: str, value: str | None) -> int:
    """``--mem``'s size in megabytes (``str_to_mbytes``: K, M, G, T; M if none; K rounded up)."""
    found = re.fullmatch(r"(\d+)([KMGT]?)B?", _required(name, value).strip().upper())
    if not found:
        raise SpecError(f"--{name}", value, "a size in megabytes, or with a unit: 512K, 800M, 16G, 1T")
    number, unit = int(found.group(1)), found.group(2) or "M"
    return -(-number * 1024 // 1024 ** 2) if unit == "K" else int(number * _UNITS[unit])


def _whole(name: str, value: str | None, least: int) -> int:
    text = _required(name, value).strip()
    if not re.fullmatch(r"-?\d+", text) or int(text) < least:
        raise SpecError(f"--{name}", value, f"a whole number, {least} or more")
    return int(text)


def _required(name: str, value: str | None) -> str:
    if value is None:
        raise SpecError(f"--{name}", value, "a value (--{name}=VALUE)".replace("{name}", name))
    return value


_STEP = {"s": 1, "sec": 1, "second": 1, "seconds": 1, "m": 60, "min": 60, "minute": 60, "minutes": 60,
         "h": 3600, "hour": 3600, "hours": 3600, "d": 86400, "day": 86400, "days": 86400, "w": 604800,
         "week": 604800, "weeks": 604800, "": 1}


def _epoch(text: str, now: Callable[[], float] = time.time) -> int | None:
    """``now``, ``now+N[unit]`` (seconds by default, as sbatch) or a UNIX time (``uts``)."""
    text = text.strip().lower()
    if text.isdigit():
        return int(text)
    found = re.fullmatch(r"now(?:\+(\d+)([a-z]*))?", text)
    if not found or found.group(2) not in _STEP:
        return None
    return int(now()) + int(found.group(1) or 0) * _STEP[found.group(2)]


# sbatch's options (its table's long names) and the field each fills. Where a line cites
# nothing, the field is the v0.0.42 name of what slurm_opt_create_job_desc() sets.
_HANDLERS: dict[str, Handler] = {
    "account": _text("account"), "acctg-freq": _text("account_gather_frequency"), "array": _text("array"),
    "batch": _text("batch_features"), "bb": _text("burst_buffer"), "begin": _when("begin_time"),
    "chdir": _text("current_working_directory"), "cluster-constraint": _text("cluster_constraint"),
    "clusters": _text("clusters"), "cluster": _text("clusters"), "comment": _text("comment"),
    "constraint": _text("constraints"), "container": _text("container"), "context": _text("selinux_context"),
    "core-spec": _integer("core_specification"), "cpu-freq": _text("cpu_frequency"),
    "cpus-per-gpu": _per_gpu("cpus_per_tres"), "cpus-per-task": _integer("cpus_per_task", 1),
    "deadline": _when("deadline"), "dependency": _text("dependency"), "distribution": _text("distribution"),
    "error": _text("standard_error"), "exclude": _host_list("excluded_nodes"), "export": _export,
    "gid": _text("group_id"), "gpu-bind": _prefixed("tres_bind", "gres/gpu:"),
    "gpu-freq": _prefixed("tres_freq", "gpu:"), "gpus": _gpu_tres("tres_per_job"),
    "gpus-per-node": _gpus_per_node, "gpus-per-socket": _gpu_tres("tres_per_socket"),
    "gpus-per-task": _gpu_tres("tres_per_task"), "gres": _gres, "gres-flags": _gres_flags, "hold": _hold,
    "input": _text("standard_input"), "job-name": _text("name"), "kill-on-invalid-dep": _kill_on_invalid_dep,
    "licenses": _text("licenses"), "mail-type": _mail_type, "mail-user": _text("mail_user"),
    "mcs-label": _text("mcs_label"), "mem": _memory("memory_per_node"), "mem-per-cpu": _memory("memory_per_cpu"),
    "mem-per-gpu": _per_gpu("memory_per_tres"), "mincpus": _integer("minimum_cpus_per_node", 1),
    "network": _text("network"), "nice": _nice, "no-kill": _no_kill, "no-requeue": _requeue, "nodes": _nodes,
    "nodelist": _host_list("required_nodes"), "ntasks": _integer("tasks", 1),
    "ntasks-per-core": _integer("tasks_per_core", 1), "ntasks-per-gpu": _integer("ntasks_per_tres", 1),
    "ntasks-per-node": _integer("tasks_per_node", 1), "tasks-per-node": _integer("tasks_per_node", 1),
    "ntasks-per-socket": _integer("tasks_per_socket", 1), "ntasks-per-tres": _integer("ntasks_per_tres", 1),
    "open-mode": _open_mode, "output": _text("standard_output"), "overcommit": _set("overcommit", True),
    "oversubscribe": _set("shared", ["oversubscribe"]), "exclusive": _exclusive, "partition": _text("partition"),
    "prefer": _text("prefer"), "priority": _priority, "profile": _profile, "qos": _text("qos"),
    "reboot": _set("reboot", True), "requeue": _requeue, "reservation": _text("reservation"), "signal": _signal,
    "sockets-per-node": _integer("sockets_per_node", 1), "spread-job": _flag("SPREAD_JOB"), "switches": _switches,
    "thread-spec": _integer("thread_specification"), "threads-per-core": _integer("threads_per_core", 1),
    "time": _time("time_limit"), "time-min": _time("time_minimum"),
    "tmp": _memory("temporary_disk_per_node", plain=True),
    "uid": _text("user_id"), "use-min-nodes": _flag("PREFER_MINIMUM_NODE_COUNT"),
    "wait-all-nodes": _wait_all_nodes, "wckey": _text("wckey"), "contiguous": _set("contiguous", True),
    # sbatch's own output, no field: --parsable is how our services read sbatch; #PBS lines are refused above.
    "parsable": _ignored, "quiet": _ignored, "verbose": _ignored, "ignore-pbs": _ignored,
}

# Options with no field, and why (the rest get JOBS_SSH).
_REFUSED = {
    "wait": "sbatch --wait waits for the job's end; the REST submit answers at once. " + JOBS_SSH,
    "test-only": "the REST submit has no test mode: it would submit the job. " + JOBS_SSH,
    "wrap": "our services submit a script; --wrap replaces it with a command line. " + JOBS_SSH,
    "export-file": "the file is read by sbatch where it runs. " + JOBS_SSH,
    "nodefile": "the file is read by sbatch where it runs. " + JOBS_SSH,
    "bbf": "the file is read by sbatch where it runs. " + JOBS_SSH,
    "get-user-env": "the login environment is loaded by sbatch's helper on the node. " + JOBS_SSH,
    "propagate": "the limits are the submitting shell's, read by sbatch. " + JOBS_SSH,
}
# pyxis's --container-* are a SPANK plugin's options, which sbatch hands to the plugin itself.
CONTAINER_REFUSAL = "pyxis's options are read by its plugin inside sbatch and srun. " + JOBS_SSH

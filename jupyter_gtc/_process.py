"""The only place jupyter_gtc starts processes.

Every command is an argument list, never a shell string, and has a timeout. A failure
raises ``CommandError`` carrying argv, exit code and stderr.
"""

from __future__ import annotations

import atexit
import logging
import os
import subprocess
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .exceptions import CommandError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Result:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class BytesResult:
    """``run_bytes``'s: stdout as the command wrote it (file contents, binary records)."""

    argv: list[str]
    returncode: int
    stdout: bytes
    stderr: str


# Secrets of the server we run in, which no command or job of ours needs: sbatch hands the
# environment it starts with to the job (and Slurm keeps it with the job), so a job submitted
# from the sidebar carried the Jupyter server's own token. A variable a caller passes in ``env``
# (the local endpoint's token, to its own process) is passed as given.
INHERITED_SECRETS = frozenset({
    "JUPYTERHUB_API_TOKEN", "JPY_API_TOKEN", "JUPYTER_TOKEN", "JUPYTER_SERVER_TOKEN", "GTC_VERTEX_TOKEN",
})


def _child_env(env: Mapping[str, str] | None) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in INHERITED_SECRETS}, **(env or {})}


def run(
    argv: Sequence[str],
    *,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: str | None = None,
) -> Result:
    """Run ``argv`` to completion. ``env`` entries are added to this process's environment."""
    done = run_bytes(argv, timeout=timeout, env=env, check=check, input=None if input is None else input.encode())
    return Result(done.argv, done.returncode, done.stdout.decode(errors="replace"), done.stderr)


def run_bytes(
    argv: Sequence[str],
    *,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    input: bytes | None = None,
) -> BytesResult:
    """``run``, with bytes in (``input``) and out (``stdout``); stderr is text."""
    argv = [str(a) for a in argv]
    full_env = _child_env(env)
    log.debug("run %s", argv)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, cwd=_usable_cwd())
    except FileNotFoundError:
        raise CommandError(argv, 127, f"{argv[0]}: command not found") from None
    with _running_lock:
        _running.add(proc)
    try:
        stdout, stderr_bytes = proc.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr_bytes = proc.communicate()
        raise CommandError(argv, None, stderr_bytes.decode(errors="replace"), timeout=timeout) from None
    finally:
        with _running_lock:
            _running.discard(proc)
    stderr = stderr_bytes.decode(errors="replace")
    if check and proc.returncode != 0:
        raise CommandError(argv, proc.returncode, stderr or stdout.decode(errors="replace"))
    return BytesResult(argv, proc.returncode, stdout, stderr)


def _usable_cwd() -> str | None:
    """Where a command starts: this process's folder (None: inherited), or ``/`` where that
    folder was deleted (a notebook that removed its temporary folder), since sbatch, squeue and
    the rest refuse to start without one ("getcwd failed"). Commands take their places as
    arguments (sbatch's --chdir), not from the folder they start in."""
    try:
        os.getcwd()
    except FileNotFoundError:
        return "/"
    return None


# Commands that ``run`` waits for. A thread of a process that is exiting (a poller's squeue)
# would leave its command running without anyone to read it: they are ended with the process.
_running: set[subprocess.Popen] = set()
_running_lock = threading.Lock()


@atexit.register
def _end_running_commands() -> None:
    with _running_lock:
        left = list(_running)
    for proc in left:
        try:
            proc.kill()
        except OSError:
            pass


def run_in_terminal(argv: Sequence[str]) -> int:
    """Run ``argv`` on this process's terminal (its prompts answered there, as ssh's password
    prompt is); returns its exit status."""
    argv = [str(a) for a in argv]
    log.debug("run in terminal %s", argv)
    return subprocess.run(argv, check=False).returncode


def start_piped(argv: Sequence[str], *, stderr_file) -> subprocess.Popen:
    """Start a process that this one talks to over its stdin and stdout (bytes), for as long
    as both live (an SSH host's file server); its stderr goes to ``stderr_file``, an open
    file, for the error message when it ends. It stays in our process group: it ends when
    its pipes close, with us."""
    argv = [str(a) for a in argv]
    log.debug("start piped %s", argv)
    return subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file, close_fds=True)


def start_daemon(argv: Sequence[str], *, log_file: Path, env: Mapping[str, str] | None = None,
                 detach: bool = True) -> int:
    """Start a long-running process; return its PID.

    ``detach``: in a session of its own, so it outlives this Python process (a cluster
    outlives the kernel that made it); its PID is recorded in the state store. Without it,
    the process stays in our process group and dies with it (a kernel's TensorBoard).
    """
    argv = [str(a) for a in argv]
    full_env = _child_env(env)
    log.debug("start %s", argv)
    with open(log_file, "ab") as out:
        proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
            env=full_env, start_new_session=detach, close_fds=True,
            # One that outlives us starts beside its log, not in the folder the user happens to
            # be in (a notebook's): it would hold that folder, and a crash's core would land there.
            cwd=log_file.parent if detach else None,
        )
    # Kept so reap_exited() can collect it: a daemon that exits while this process lives
    # would otherwise stay a zombie and still look alive to a PID check.
    with _reapers_lock:
        _reapers.append(proc)
    return proc.pid


_reapers: list[subprocess.Popen] = []
# Threads reap at once (a server deletes a cluster while its change feed reads another's
# status): without the lock two of them removed the same exited daemon, and one failed.
_reapers_lock = threading.Lock()


def reap_exited() -> None:
    """Collect daemons started by this process that have exited (avoids zombies)."""
    with _reapers_lock:
        _reapers[:] = [proc for proc in _reapers if proc.poll() is None]


def started_since_boot(pid: int) -> float:
    """When process ``pid`` started, in seconds since the machine booted (``starttime`` of
    /proc/PID/stat). What tells a process from a later one given its pid: a wall-clock start
    time (psutil's ``create_time``: boot time + this) moves whenever the system clock is set
    (NTP, a VM resumed), and every live process then looked gone. OSError where it is gone."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        fields = f.read().rpartition(b")")[2].split()  # the name, in parentheses, may hold spaces
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22; fields[0] is field 3


def same_start(pid: int, recorded: Mapping[str, object], slack: float = 0.01) -> bool:
    """Whether ``pid`` is the process a record (``"boot_started"``, else ``"started"``, the wall
    time older records hold, compared within ``slack`` seconds) describes."""
    if "boot_started" in recorded:
        return abs(started_since_boot(pid) - float(recorded["boot_started"])) < 1e-6
    import psutil

    return abs(psutil.Process(pid).create_time() - float(recorded["started"])) < slack


def this_process() -> dict[str, object]:
    """This process as another one can check it (``process_alive``): pid, host, and start
    time, since a pid is reused once its process has gone."""
    import socket

    return {"pid": os.getpid(), "host": socket.gethostname(), "boot_started": started_since_boot(os.getpid())}


def process_alive(who: Mapping[str, object]) -> bool:
    """Whether the process ``this_process()`` described still runs. One on another host
    counts as alive: nothing here can tell. Where no start time was recorded (a study's
    driver keeps only pid and host), any live process with that pid counts."""
    import socket

    import psutil

    if who.get("host") != socket.gethostname():
        return True
    try:
        pid = int(who["pid"])
        if "started" not in who and "boot_started" not in who:
            return psutil.pid_exists(pid)
        return same_start(pid, who, slack=1.0)
    except (OSError, psutil.Error, KeyError, TypeError, ValueError):
        return False


def run_forwarding(argv: Sequence[str], env: Mapping[str, str], on_signal) -> int:
    """Run ``argv`` with this process's stdin, stdout and stderr and ``env`` as its whole
    environment, to its end; returns its exit status. SIGTERM, SIGINT and SIGHUP to this
    process call ``on_signal(signum)`` instead of ending it: for a child whose work lives
    outside this process's tree (a container, run by the runtime's own monitor), which a
    signal to the child alone, or the child's death, would leave running."""
    import signal

    argv = [str(a) for a in argv]
    log.debug("run forwarding signals %s", argv)
    handled = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {s: signal.signal(s, lambda signum, _frame: on_signal(signum)) for s in handled}
    try:
        return subprocess.run(argv, env=dict(env), check=False).returncode
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def replace_with(argv: Sequence[str], env: Mapping[str, str]) -> None:
    """Run ``argv`` in place of this process (``exec``: same PID, so Slurm signals and
    accounts the program itself); never returns. ``argv[0]`` is looked up on ``env``'s PATH."""
    argv = [str(a) for a in argv]
    log.debug("exec %s", argv)
    os.execvpe(argv[0], argv, dict(env))

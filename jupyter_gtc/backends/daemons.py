"""Start and stop the local cluster's daemons, each in a PID namespace of its own.

Each daemon runs as ``unshare --pid --fork --mount-proc tini -- DAEMON``: tini is PID 1 of
the namespace and reaps the orphans Slurm leaves (slurmstepd double-forks), and killing it
makes the kernel kill everything else in the namespace. So stopping a node also stops
every job process it started, with no orphan, which a plain kill of slurmd does not do
(slurmstepd ignores SIGTERM and outlives it).

A node's daemon starts through node_init.sh, which can give the namespace its own
/etc/hosts (a bind mount), hostname and shared storage (more bind mounts), and run the
pool's startup script, first. The mount namespace is private (``--propagation=private``,
unshare's default, spelled out because correctness depends on it): the bind mounts never
reach the machine's own /etc/hosts or mount table.

We hold the PID of the ``unshare`` process, with its start time so a recycled PID is
never mistaken for ours, in ``<run_dir>/<label>.json``. A process killed between starting a
daemon and writing that file leaves one no label holds; each daemon's environment names
its label (``GTC_DAEMON``), so ``stop_unrecorded`` still finds it.

A record is only what the folder's owner wrote, and root deletes a normal user's cluster from
that user's folder: so only processes of the cluster's user are ever found or signalled (real
and effective uid; ``uid``, by default the owner of the run folder, which that user made and
from which every daemon is started), whatever PID a record names.

Run by a normal user (not root), the same namespaces are made inside a user namespace
(``isolation() == "userns"``): ``unshare --user --map-root-user`` makes the user root of the
namespace, which node_init.sh needs for its bind mounts, and node_init.sh's ``--as-user`` then
enters a second user namespace that maps that root back to the user, so every daemon, and
every job, runs as the user and knows it (Slurm would not run as a mapped root: slurmd
cannot drop supplementary groups there and stops). Where the kernel allows no user
namespaces (``isolation() == "none"``) each daemon is a plain process in a session of its
own, under ``tini -s``: a child subreaper, so the slurmstepds that double-fork out of
slurmd's tree land in tini's, not init's, and stopping the node kills that whole tree. Such
nodes share this machine's /etc/hosts and mount nothing.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import stat
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import psutil

from .. import _process
from ..exceptions import CommandError
from . import owned

RECORD_MAX = 64 * 1024  # a record is a line of JSON; a bigger one is no record of ours
MARK = "GTC_DAEMON"  # <run_dir>/<label>, in the environment of the daemon and its children
WRAPPER = ["unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", "--propagation=private"]
USER_WRAPPER = ["unshare", "--user", "--map-root-user", *WRAPPER[1:]]
PLAIN_WRAPPER = ["tini", "-s", "--"]  # no namespaces: tini as the subreaper of the daemon's tree
NODE_INIT = Path(__file__).with_name("node_init.sh")


@functools.cache
def isolation() -> str:
    """How this process's daemons are kept apart: ``"root"`` (PID and mount namespaces),
    ``"userns"`` (the same, inside user namespaces: a normal user where the kernel allows
    it) or ``"none"`` (plain processes). Probed once, with the very commands a node uses."""
    if os.geteuid() == 0:
        return "root"
    probe = [*USER_WRAPPER, *_as_user(), "true"]
    try:
        return "userns" if _process.run(probe, timeout=10, check=False).returncode == 0 else "none"
    except CommandError:  # unshare missing (problems() says so) or hung
        return "none"


def _as_user() -> list[str]:
    """The command that turns a user namespace's root back into this process's user."""
    return ["unshare", "--user", f"--map-user={os.geteuid()}", f"--map-group={os.getegid()}", "--"]


def start(label: str, argv: list[str], run_dir: Path, log_file: Path, env: dict[str, str],
          prefix: list[str] | None = None, hostname: str | None = None, hosts_file: Path | None = None,
          mounts: Sequence[tuple[Path, str]] = (), startup: tuple[Path, Path] | None = None,
          status_file: Path | None = None, plain: bool = False) -> int:
    """Start ``argv`` as ``label``. ``prefix`` runs it elsewhere (``nsenter --net=...``);
    ``hostname`` gives it a UTS namespace of its own with that name; ``hosts_file`` is
    what it and its children see as /etc/hosts; each ``(folder, path)`` of ``mounts`` is
    mounted at ``path`` for it alone; ``startup`` is a ``(script, log)`` run first (a pool's
    startup script); ``status_file`` receives its exit code, or 0 (see node_init.sh).
    ``plain``: no namespaces for this one, whatever ``isolation()`` says (a normal user's
    munged, which in a user namespace would find root's folders owned by nobody)."""
    mode = "plain" if plain else isolation()
    if mode in ("plain", "none") and (prefix or hostname or hosts_file or mounts):
        raise ValueError(f"{label}: a plain process has no namespaces for a prefix, hostname or mounts")
    init = [*(["--hosts", str(hosts_file)] if hosts_file else []), *(["--hostname", hostname] if hostname else [])]
    for folder, path in mounts:
        init += ["--mount", str(folder), path]
    if mode == "userns":
        init += ["--as-user", str(os.geteuid()), str(os.getegid())]
    if startup:
        init += ["--startup", str(startup[0]), str(startup[1])]
    if status_file:
        init += ["--status", str(status_file)]
    wrapped = [*(prefix or [])]
    if mode in ("root", "userns"):
        wrapped += [*(WRAPPER if mode == "root" else USER_WRAPPER), *(["--uts"] if hostname else []), "tini", "--"]
    else:
        wrapped += PLAIN_WRAPPER
    if init:
        wrapped += ["sh", str(NODE_INIT), *init, "--"]
    with _signals_unblocked():
        pid = _process.start_daemon([*wrapped, *argv], log_file=log_file, env={**env, MARK: str(run_dir / label)})
    (run_dir / f"{label}.json").write_text(json.dumps({
        "pid": pid, "boot_started": _process.started_since_boot(pid), "argv": argv,
        "namespaces": mode in ("root", "userns")}))
    return pid


@contextlib.contextmanager
def _signals_unblocked() -> Iterator[None]:
    """No signal blocked in this thread while a daemon starts: a child inherits the mask of the
    thread that forks it (and tini hands its own on to the daemon), so a cluster created from a
    thread that blocked SIGTERM got daemons that ignored the stop's SIGTERM. Each stop then
    waited out its grace before SIGKILL: the supervisor's 5 s and munged's 2 s made a delete
    take 9.4 s against 2.3 s (bench/delete_speed.py)."""
    old = signal.pthread_sigmask(signal.SIG_SETMASK, set())
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def find(label: str, run_dir: Path, uid: int | None = None) -> psutil.Process | None:
    """The live wrapper process of ``label`` (``unshare``, or tini for a plain one), or None.
    Only a process of ``uid`` (the run folder's owner by default): see the module's doc."""
    info = _record(label, run_dir, _daemons_uid(run_dir, uid))
    return info[0] if info else None


def _record(label: str, run_dir: Path, uid: int | None) -> tuple[psutil.Process, bool] | None:
    """``label``'s live wrapper process and whether it holds namespaces, or None (also where
    the process recorded is not ``uid``'s: a record is only its writer's word)."""
    _process.reap_exited()
    try:
        info = json.loads(_read_record(run_dir, f"{label}.json"))
        proc = psutil.Process(info["pid"])
        if not _process.same_start(proc.pid, info) or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if not _runs_as(proc, uid):
            return None
        return proc, info.get("namespaces", True)  # files from before the key: always namespaces
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None


def _read_record(run_dir: Path, name: str) -> bytes:
    """The record ``name`` of ``run_dir``: a regular file, reached through no link another user
    made (owned.py), opened without blocking (a FIFO in its place would hang root's delete)."""
    folder = owned.open_folder(run_dir)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder)
    finally:
        os.close(folder)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{name} is not a file")
        return f.read(RECORD_MAX)


def _daemons_uid(run_dir: Path, uid: int | None) -> int | None:
    """``uid``, or whom the daemons of ``run_dir`` run as: the user who made the folder (the
    cluster's, who starts them all). None, so nothing is found, where the folder is missing or
    reached through another user's link (its records would be another folder's)."""
    return uid if uid is not None else owned.owner(run_dir)


def _runs_as(proc: psutil.Process, uid: int | None) -> bool:
    """Whether ``proc`` runs as ``uid``, really and effectively (a set-uid program the user
    started has the user's real uid, and is not the user's to stop)."""
    try:
        uids = proc.uids()
    except psutil.Error:
        return False
    return uid is not None and uids.real == uid and uids.effective == uid


def labels(run_dir: Path) -> list[str]:
    """The labels ``run_dir`` holds records of; none where it is reached only through another
    user's link (owned.py: root would list, and a stop remove, the records of any folder)."""
    try:
        folder = owned.open_folder(run_dir)
    except OSError:
        return []
    try:
        return sorted(name[:-5] for name in os.listdir(folder) if name.endswith(".json") and len(name) > 5)
    finally:
        os.close(folder)


def stop(label: str, run_dir: Path, grace: float = 0.0, keep_record: bool = False, uid: int | None = None) -> None:
    """Stop ``label`` and everything in its namespace. With ``grace``, the daemon first gets
    SIGTERM and that many seconds to exit cleanly (slurmctld saves its state then).
    ``keep_record``: its record stays, saying it is to run (a crash, for the supervisor).
    ``uid``: whose processes may be signalled (the run folder's owner by default)."""
    uid = _daemons_uid(run_dir, uid)
    record = _record(label, run_dir, uid)
    if record is not None:
        wrapper, namespaces = record
        init = _namespace_init(wrapper, uid) if namespaces else wrapper
        if grace > 0 and init is not None:
            _signal(init, signal.SIGTERM)  # tini passes it on to the daemon
            _wait_gone(wrapper, grace)
        if namespaces and _alive(wrapper):
            inside = _tree([wrapper])  # the namespace's processes: the wrapper goes first, they a moment after
            for proc in (init, wrapper):
                if proc is not None:
                    _signal(proc, signal.SIGKILL)
            for proc in inside:  # "stopped": no process of it is left (a zombie is gone: ours reaped here)
                _wait_gone(proc, 10)
        elif not namespaces:
            _kill_tree([wrapper], uid)
    if not keep_record:
        _remove_record(run_dir, f"{label}.json")
    _process.reap_exited()


def send(label: str, run_dir: Path, sig: int) -> None:
    """Send ``sig`` to the daemon ``label`` (through its tini, which passes it on); nothing if
    it does not run. (SIGHUP: a slurmd reads slurm.conf again.)"""
    record = _record(label, run_dir, _daemons_uid(run_dir, None))
    if record is not None:
        wrapper, namespaces = record
        init = _namespace_init(wrapper, _daemons_uid(run_dir, None)) if namespaces else wrapper
        if init is not None:
            _signal(init, sig)


def _remove_record(run_dir: Path, name: str) -> None:
    """Unlink the record ``name`` through a dir fd of ``run_dir``, which no link of another
    user's leads to (owned.py): root deleting a user's cluster never unlinks elsewhere."""
    try:
        folder = owned.open_folder(run_dir)
    except OSError:
        return
    try:
        os.unlink(name, dir_fd=folder)
    except FileNotFoundError:
        pass
    finally:
        os.close(folder)


def _kill_tree(roots: list[psutil.Process], uid: int | None) -> None:
    """Kill ``roots`` and all their descendants that run as ``uid``: what stopping a plain
    daemon (tini, the subreaper of everything the daemon started) must do without a PID
    namespace to end. Each is stopped first and the trees looked at again, so nothing forks
    out of reach."""
    stopped: dict[int, psutil.Process] = {}
    for _ in range(5):
        # Never this process: stopped by its own hand, it would never send the SIGKILLs.
        found = [p for p in _tree(roots) if p.pid not in stopped and p.pid != os.getpid() and _runs_as(p, uid)]
        if not found:
            break
        for proc in found:
            _signal(proc, signal.SIGSTOP)
            stopped[proc.pid] = proc
    for proc in stopped.values():
        _signal(proc, signal.SIGKILL)
    psutil.wait_procs(list(stopped.values()), timeout=10)


def _tree(roots: list[psutil.Process]) -> list[psutil.Process]:
    found = {}
    for root in roots:
        try:
            for proc in [root, *root.children(recursive=True)]:
                found[proc.pid] = proc
        except psutil.Error:
            continue
    return [p for p in found.values() if _alive(p)]


def stop_unrecorded(run_dir: Path, uid: int | None = None) -> list[str]:
    """Kill the daemons of ``run_dir`` that no label holds (started by a process killed
    before it recorded them), of ``uid`` only (the run folder's owner by default); returns
    their labels."""
    uid = _daemons_uid(run_dir, uid)
    held: set[int] = set()
    for label in labels(run_dir):
        wrapper = find(label, run_dir, uid)
        if wrapper is not None:
            held |= {p.pid for p in _tree([wrapper])}
    found = {}
    for proc in psutil.process_iter(["environ"]):
        mark = (proc.info["environ"] or {}).get(MARK, "")
        if mark.startswith(f"{run_dir}/") and proc.pid not in held and _runs_as(proc, uid):
            found[proc] = mark.rsplit("/", 1)[-1]
    # A wrapper's death ends its namespace, and what is in it; a plain one (tini) leaves its
    # tree behind, so the trees go first.
    _kill_tree(list(found), uid)
    return sorted(set(found.values()))


def _namespace_init(wrapper: psutil.Process, uid: int | None) -> psutil.Process | None:
    try:
        children = wrapper.children()
    except psutil.Error:
        return None
    return children[0] if children and _runs_as(children[0], uid) else None


def _signal(proc: psutil.Process, sig: int) -> None:
    try:
        proc.send_signal(sig)
    except psutil.Error:
        pass


def _alive(proc: psutil.Process) -> bool:
    _process.reap_exited()
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _wait_gone(proc: psutil.Process, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while _alive(proc) and time.monotonic() < deadline:
        time.sleep(0.05)

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
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Sequence
from pathlib import Path

import psutil

from .. import _process

MARK = "GTC_DAEMON"  # <run_dir>/<label>, in the environment of the daemon and its children
WRAPPER = ["unshare", "--pid", "--fork", "--kill-child=SIGKILL", "--mount-proc", "--propagation=private"]
NODE_INIT = Path(__file__).with_name("node_init.sh")


def start(label: str, argv: list[str], run_dir: Path, log_file: Path, env: dict[str, str],
          prefix: list[str] | None = None, hostname: str | None = None, hosts_file: Path | None = None,
          mounts: Sequence[tuple[Path, str]] = (), startup: tuple[Path, Path] | None = None,
          status_file: Path | None = None) -> int:
    """Start ``argv`` as ``label``. ``prefix`` runs it elsewhere (``nsenter --net=...``);
    ``hostname`` gives it a UTS namespace of its own with that name; ``hosts_file`` is
    what it and its children see as /etc/hosts; each ``(folder, path)`` of ``mounts`` is
    mounted at ``path`` for it alone; ``startup`` is a ``(script, log)`` run first (a pool's
    startup script); ``status_file`` receives its exit code, or 0 (see node_init.sh)."""
    wrapped = [*(prefix or []), *WRAPPER, *(["--uts"] if hostname else []), "tini", "--"]
    init = [*(["--hosts", str(hosts_file)] if hosts_file else []), *(["--hostname", hostname] if hostname else [])]
    for folder, path in mounts:
        init += ["--mount", str(folder), path]
    if startup:
        init += ["--startup", str(startup[0]), str(startup[1])]
    if status_file:
        init += ["--status", str(status_file)]
    if init:
        wrapped += ["sh", str(NODE_INIT), *init, "--"]
    pid = _process.start_daemon([*wrapped, *argv], log_file=log_file, env={**env, MARK: str(run_dir / label)})
    started = psutil.Process(pid).create_time()
    (run_dir / f"{label}.json").write_text(json.dumps({"pid": pid, "started": started, "argv": argv}))
    return pid


def find(label: str, run_dir: Path) -> psutil.Process | None:
    """The live wrapper process of ``label``, or None."""
    _process.reap_exited()
    try:
        info = json.loads((run_dir / f"{label}.json").read_text())
        proc = psutil.Process(info["pid"])
        if abs(proc.create_time() - info["started"]) > 0.01 or proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        return None


def labels(run_dir: Path) -> list[str]:
    return sorted(p.stem for p in run_dir.glob("*.json")) if run_dir.is_dir() else []


def stop(label: str, run_dir: Path, grace: float = 0.0) -> None:
    """Stop ``label`` and everything in its namespace. With ``grace``, the daemon first gets
    SIGTERM and that many seconds to exit cleanly (slurmctld saves its state then)."""
    wrapper = find(label, run_dir)
    if wrapper is not None:
        init = _namespace_init(wrapper)
        if grace > 0 and init is not None:
            _signal(init, signal.SIGTERM)  # tini passes it on to the daemon
            _wait_gone(wrapper, grace)
        if _alive(wrapper):
            for proc in (init, wrapper):
                if proc is not None:
                    _signal(proc, signal.SIGKILL)
            _wait_gone(wrapper, 10)
    (run_dir / f"{label}.json").unlink(missing_ok=True)
    _process.reap_exited()


def stop_unrecorded(run_dir: Path) -> list[str]:
    """Kill the daemons of ``run_dir`` that no label holds (started by a process killed
    before it recorded them); returns their labels."""
    held: set[int] = set()
    for label in labels(run_dir):
        wrapper = find(label, run_dir)
        if wrapper is not None:
            try:
                held |= {wrapper.pid, *(child.pid for child in wrapper.children(recursive=True))}
            except psutil.Error:
                pass
    found = {}
    for proc in psutil.process_iter(["environ"]):
        mark = (proc.info["environ"] or {}).get(MARK, "")
        if mark.startswith(f"{run_dir}/") and proc.pid not in held:
            found[proc] = mark.rsplit("/", 1)[-1]
    for proc in found:
        _signal(proc, signal.SIGKILL)  # the wrapper's death ends its namespace, the others with it
    psutil.wait_procs(list(found), timeout=10)
    return sorted(set(found.values()))


def _namespace_init(wrapper: psutil.Process) -> psutil.Process | None:
    try:
        children = wrapper.children()
    except psutil.Error:
        return None
    return children[0] if children else None


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

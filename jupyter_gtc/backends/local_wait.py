"""Waiting for a local cluster's daemons: munged's socket, slurmctld's port and answer, every
node registered and up (backends/local.py starts them). Each wait fails at once, with the end of
the daemon's log, when the daemon has exited, and after ``READY_TIMEOUT`` otherwise."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from .._ports import listening as port_listening
from ..exceptions import ClusterStartError
from ..slurm.commands import SlurmCommands
from ..slurm.parse import READY_STATES, NodeStatus
from . import daemons
from .base import Progress

READY_TIMEOUT = 60.0


def munged(root: Path, sock_dir: Path) -> None:
    deadline = time.monotonic() + 10
    while not (sock_dir / "munge.socket").exists():  # made within ~20 ms: looked at often
        if time.monotonic() > deadline:
            raise ClusterStartError("munged did not start: " + tail(root / "log" / "munged.out"))
        time.sleep(0.01)


def controller(commands: SlurmCommands, runtime: dict[str, Any]) -> None:
    root = Path(runtime["dir"])

    def answers() -> bool:
        if daemons.find("slurmctld", root / "run") is None:
            raise ClusterStartError("slurmctld exited:\n" + tail(root / "log" / "slurmctld.log")
                                    + tail(root / "log" / "slurmctld.out"))
        return commands.ping()

    # Looked at often: slurmctld answers from 0.1 s (no accounting) to a second (it loads
    # associations from slurmdbd first), and every create waits here.
    wait_for(answers, READY_TIMEOUT, lambda: ClusterStartError(
        "slurmctld did not answer within 60 s:\n" + tail(root / "log" / "slurmctld.log")), longest=0.1)


def listening(runtime: dict[str, Any]) -> None:
    root = Path(runtime["dir"])
    deadline = time.monotonic() + READY_TIMEOUT
    while not port_listening(runtime["controller_port"]):
        if daemons.find("slurmctld", root / "run") is None:
            raise ClusterStartError("slurmctld exited:\n" + tail(root / "log" / "slurmctld.log")
                                    + tail(root / "log" / "slurmctld.out"))
        if time.monotonic() > deadline:
            raise ClusterStartError(f"slurmctld did not listen within {READY_TIMEOUT:.0f} s:\n"
                                    + tail(root / "log" / "slurmctld.log"))
        time.sleep(0.01)


def ready(commands: SlurmCommands, runtime: dict[str, Any], wanted: set[str], progress: Progress) -> None:
    """Until slurmctld answers and every node of ``wanted`` is up (``up``)."""
    controller(commands, runtime)
    root = Path(runtime["dir"])
    progress(f"waiting for {len(wanted)} node(s) to register and be idle")
    last: list = []

    def all_up() -> bool:
        nonlocal last
        dead = [n for n in sorted(wanted) if daemons.find(f"slurmd-{n}", root / "run") is None]
        if dead:
            raise ClusterStartError(f"slurmd of {dead[0]} exited:\n" + tail(root / "log" / f"slurmd-{dead[0]}.log"))
        last = [n for n in commands.nodes() if n.name in wanted]
        return len(last) == len(wanted) and all(up(n) for n in last)

    def not_ready() -> ClusterStartError:
        bad = ([n for n in last if not up(n)]
               or [n for n in wanted if n not in {x.name for x in last}])
        lines = []
        for n in bad[:3]:
            name = getattr(n, "name", n)
            state = "missing" if not hasattr(n, "state") else (
                f"{n.display_state} ({n.reason})" if registered(n) or not n.ready else
                f"{n.display_state}, but its slurmd has not registered with slurmctld yet")
            lines.append(f"{name}: {state}\n{tail(root / 'log' / f'slurmd-{name}.log')}")
        return ClusterStartError(f"nodes not ready after {READY_TIMEOUT:.0f} s:\n" + "\n".join(lines))

    wait_for(all_up, READY_TIMEOUT, not_ready)


def wait_for(check, timeout: float, error, longest: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    delay = 0.05
    while not check():
        if time.monotonic() > deadline:
            raise error()
        time.sleep(delay)
        delay = min(delay * 1.5, longest)


def up(node: NodeStatus) -> bool:
    """Started as a create, scale or restart needs: registered and answering. A drained node is
    up (an admin or a health check took it out of scheduling; its slurmd runs), so a drain on
    one node never makes a change of others, or a restart of a crashed one, fail."""
    return registered(node) and (node.ready or (node.state in READY_STATES and "DRAIN" in node.flags
                                                  and "NOT_RESPONDING" not in node.flags))


def registered(node: NodeStatus) -> bool:
    """Whether the node's slurmd has registered with slurmctld since slurmctld last (re)built its
    node table (a start or a reconfigure): only then does the node list its ``Version``.

    IDLE alone does not say so: slurmctld turns a node that never registered IDLE as soon as
    it answers any RPC (node_mgr.c, _node_did_resp), such as the reconfigure a scale sends,
    while the node's protocol version stays the oldest slurmctld supports (node_conf.c,
    create_node_record) until a registration sets it (validate_node_specs). A step on such
    a node is launched in that old protocol, its slurmstepds answer srun's I/O in the old
    format, which srun 22.05 cannot read (io_hdr.c, io_init_msg_read_from_fd): the step's
    output is lost and srun still exits 0."""
    return bool(node.extra.get("Version"))


def tail(path: Path, lines: int = 8) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
    except OSError:
        return f"({path.name} not written)\n"

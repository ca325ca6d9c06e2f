"""Scaling a running local cluster without restarting slurmctld.

Slurm 22.05 learns nodes at run time (doc/html/dynamic_nodes.shtml): ``scontrol create
NodeName=...`` adds one to slurmctld's node table (which keeps room for 100 more than
slurm.conf declares: node_conf.c, init_node_conf), ``scontrol delete NodeName=`` takes one
out (node_mgr.c, delete_nodes: any node without jobs), and ``scontrol update PartitionName=
Nodes=`` gives partitions their new lists. Its other way, ``slurmd -Z`` registering a node by
itself, does not fit here: such a node must listen on the one SlurmdPort (slurmd.c,
_validate_dynamic_conf: "alias_list doesn't pass port"), and a host-network cluster's nodes
share 127.0.0.1, each on a port of its own.

Nor does 22.05's slurmctld learn a created node's port: it reaches every node it did not read
in slurm.conf at SlurmdPort (read_config.c, slurm_reset_alias keeps no port; a port 0 means
SlurmdPort), while several nodes on this machine's network each need a port of their own. So
a cluster's slurm.conf names one SlurmdPort, chosen at its create, and a node added later has
an address of its own: in a network namespace, its own IP, its slurmd on SlurmdPort; on this
machine's network, a loopback address of its own (127.0.0.2, ...), where a relay (dbd_relay.py,
which forwards bytes) listens on SlurmdPort for its slurmd's own port. Everything else (srun,
the nodes) reads that port from slurm.conf and reaches its slurmd directly.

So a scale rewrites slurm.conf (the new nodes' slurmd, every client, and a later slurmctld
start read it), tells the running slurmctld the same with those commands, starts or stops the
nodes' slurmd, and has the nodes that stay read slurm.conf again (SIGHUP), so that steps
spanning old and new nodes find each other's ports. slurmctld, and every job on nodes that
stay, is left alone. Restarting slurmctld instead cost ~0.3 s, and ~2 s with accounting:
its shutdown then waits for fed_mgr's dependency thread, which sleeps 2 s at a time
(fed_mgr.c, _test_dep_job_thread).
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..exceptions import ClusterBusy, ClusterStartError, CommandError
from ..slurm.commands import SlurmCommands
from ..slurm.render import NodeDecl, PartitionDecl, render_node_line
from ..spec.cluster import ClusterSpec
from . import daemons
from .accounting import RELAY
from .base import Progress

if TYPE_CHECKING:
    from .local import LocalBackend

READY_TIMEOUT = 60.0
DRAIN_REASON = "gtc-scale-down"  # one word: scontrol -o shows it with "[user@time]" after it


def node_names(spec: ClusterSpec) -> list[str]:
    return [n for pool in spec.compute_pools() for n in pool.node_names()]


def partitions(spec: ClusterSpec) -> tuple[PartitionDecl, ...]:
    return tuple(PartitionDecl(part.id, tuple(n for pid in part.node_pool_ids for n in spec.pool(pid).node_names()),
                               default=(i == 0))
                 for i, part in enumerate(spec.slurm.partitions))


def scale(backend: LocalBackend, old: ClusterSpec, new: ClusterSpec, runtime: dict[str, Any],
          progress: Progress) -> None:
    """Resize to ``new``: nodes that go are drained first (a job placed on one between the check
    and the drain makes the scale refuse, and the drain is undone), then removed."""
    from .local_wait import wait_for

    live = bool(runtime.get("live_scale"))  # a cluster made before it: slurm.conf has no MaxNodeCount

    removed = sorted(set(node_names(old)) - set(node_names(new)))
    if removed:
        commands = backend.commands(runtime)

        # A job whose steps have all ended stays COMPLETING a moment (until every node has
        # run its epilog), just after `srun` returned: nothing the scale would cut short,
        # so wait for it to go rather than refuse.
        def completing() -> list[str]:
            return commands.job_ids(removed, states=["COMPLETING"])

        wait_for(lambda: not completing(), READY_TIMEOUT, lambda: ClusterBusy(
            new.display_name, f"job(s) {', '.join(completing())} on nodes {', '.join(removed)} "
            f"are still completing after {READY_TIMEOUT:.0f} s; scale again when they are gone"))
        _refuse_if_busy(commands, new, removed)
        if live:  # (the old way restarts slurmctld with the new node list: nothing to drain)
            _drain(commands, removed)
            try:
                _refuse_if_busy(commands, new, removed)  # placed between the first look and the drain
            except ClusterBusy:
                _resume(commands, removed)
                raise
    try:
        backend._apply(new, runtime, progress, restart_controller=not live)
    except Exception:
        progress("scaling failed; restoring the previous size")
        backend._apply(old, runtime, progress, restart_controller=not live)
        if live and removed:
            _resume(backend.commands(runtime), removed)
        raise


def _refuse_if_busy(commands: SlurmCommands, spec: ClusterSpec, removed: list[str]) -> None:
    busy = commands.job_ids(removed)
    if busy:
        raise ClusterBusy(spec.display_name, f"nodes {', '.join(removed)} would be removed but run job(s) "
                                             f"{', '.join(busy)}; cancel them (or wait for them) and scale again")


def _drain(commands: SlurmCommands, nodes: list[str]) -> None:
    commands.run(["scontrol", "update", f"NodeName={','.join(nodes)}", "State=DRAIN", f"Reason={DRAIN_REASON}"])


def _resume(commands: SlurmCommands, nodes: list[str]) -> None:
    """Undo ``_drain`` (only where it is ours: a drain by an admin or a health check stays)."""
    for node in commands.nodes():
        if node.name in nodes and (node.reason or "").startswith(DRAIN_REASON):
            commands.run(["scontrol", "update", f"NodeName={node.name}", "State=RESUME"], check=False)


def tell_controller(commands: SlurmCommands, spec: ClusterSpec, added: list[NodeDecl], removed: list[str]) -> None:
    """Make the running slurmctld's node table and partitions those of ``spec``, whose
    slurm.conf is written: ``added`` created (FUTURE until their slurmd registers), every
    partition given its list, ``removed`` deleted. Nodes slurmctld already has (or lacks) are
    left as they are, so a change interrupted half-way is finished by the next one."""
    have = {n.name for n in _all_nodes(commands)}
    for decl in added:
        if decl.name not in have:
            commands.run(["scontrol", "create", *render_node_line(decl, "FUTURE").split()])
    missing = sorted({d.name for d in added} - {n.name for n in _all_nodes(commands)})
    if missing:  # (scontrol create says nothing of a full node table: slurmctld only logs it)
        raise ClusterStartError(f"slurmctld did not add node(s) {', '.join(missing)}; see its log")
    for part in partitions(spec):
        commands.run(["scontrol", "update", f"PartitionName={part.name}", f"Nodes={','.join(part.nodes)}"])
    gone = [n for n in removed if n in have]
    if gone:
        commands.run(["scontrol", "delete", f"NodeName={','.join(gone)}"])


def _all_nodes(commands: SlurmCommands) -> list[Any]:
    """Every node slurmctld has, FUTURE ones too (a created node whose slurmd has not registered)."""
    from ..slurm.parse import parse_scontrol_nodes

    try:
        return parse_scontrol_nodes(commands.run(["scontrol", "-o", "--future", "show", "node"]).stdout)
    except CommandError:
        return []


def reread_config(run: Path, nodes: list[str]) -> None:
    """Have the slurmd of ``nodes`` read slurm.conf again (SIGHUP; their jobs run on): a step's
    nodes send its completion up a tree of nodes, and a node that stayed finds a new one's port
    only there (the alias list slurmctld sends with a job carries no port)."""
    for name in nodes:
        daemons.send(f"slurmd-{name}", run, signal.SIGHUP)


def new_runtime() -> dict[str, Any]:
    """What a new cluster records for scaling live: its SlurmdPort, and the addresses given."""
    from .._ports import free_ports

    return {"slurmd_port": free_ports(1)[0], "addrs": {}}


def relay_label(node: str) -> str:
    return f"relay-{node}"  # (not "slurmd-...": those labels are the nodes)


def stop_relay(run: Path, node: str, uid: int | None = None) -> None:
    # SIGTERM, of which it dies at once; SIGKILLed, a plain daemon's tree was waited for until
    # this machine's init reaped it (1.3 s here), as accounting.stop says of slurmdbd's relay.
    daemons.stop(relay_label(node), run, grace=2, uid=uid)


def stop_relays(run: Path, uid: int | None = None) -> None:
    for label in daemons.labels(run):
        if label.startswith("relay-"):
            stop_relay(run, label.removeprefix("relay-"), uid)


def host_addr(runtime: dict[str, Any], node: str) -> str:
    """A host-network node's address: its own loopback one where a scale added it, else 127.0.0.1."""
    return (runtime.get("live_scale") or {}).get("addrs", {}).get(node, "127.0.0.1")


def place(runtime: dict[str, Any], net: Any, added: list[str], removed: list[str]) -> None:
    """Give nodes a live scale adds what slurmctld can reach (see above): SlurmdPort in their
    network namespace, or a loopback address of their own; forget those of ``removed``."""
    live = runtime["live_scale"]
    addrs = live.setdefault("addrs", {})
    for name in removed:
        addrs.pop(name, None)
    for name in added:
        if net is not None:
            runtime["node_ports"][name] = live["slurmd_port"]
        elif name not in addrs:
            taken = set(addrs.values())
            addrs[name] = next(a for a in (f"127.0.0.{i}" for i in range(2, 255)) if a not in taken)


def start_relays(runtime: dict[str, Any], run: Path, env: dict[str, str]) -> None:
    """Start the relay of every host-network node added at run time whose relay does not run,
    and wait until each listens."""
    port, started = runtime["live_scale"]["slurmd_port"], []
    for name, addr in runtime["live_scale"].get("addrs", {}).items():
        if name in runtime["node_ports"] and daemons.find(relay_label(name), run) is None:
            daemons.start(relay_label(name), [sys.executable, "-I", str(RELAY), addr, str(port), "127.0.0.1",
                                              str(runtime["node_ports"][name])],
                          run, run.parent / "log" / f"{relay_label(name)}.out", env, plain=True)
            started.append((name, addr))
    deadline = time.monotonic() + READY_TIMEOUT
    for name, addr in started:
        while not _answers(addr, port):
            if daemons.find(relay_label(name), run) is None or time.monotonic() > deadline:
                raise ClusterStartError(f"the relay of node {name} did not listen on {addr}:{port}: "
                                        + _tail(run.parent / "log" / f"{relay_label(name)}.out"))
            time.sleep(0.01)


def _answers(addr: str, port: int) -> bool:
    try:
        socket.create_connection((addr, port), timeout=0.2).close()
    except OSError:
        return False
    return True


def _tail(path: Path) -> str:
    try:
        return path.read_text(errors="replace")[-500:]
    except OSError:
        return "(no log)"

"""A local cluster's nodes as the supervisor and ``gtc fault`` work on them (part of
``LocalBackend``, local.py): their health checks, the remediation ladder's rungs (restart,
reimage, replace, power off) and the faults a test or a demo injects. Each rung ends by
starting what is not running, through ``LocalBackend._apply``."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .. import _process
from ..exceptions import SpecError
from ..health.checks import FAIL, FAULTS, CheckResult, NodeHealth
from ..spec.cluster import ClusterSpec
from . import daemons, local_scale, netns
from .base import no_progress

BACKEND_FAULTS = ("crash", "partition")  # made by the backend, not read by the checks (FAULTS)


def node_names(spec: ClusterSpec) -> list[str]:
    return [n for pool in spec.compute_pools() for n in pool.node_names()]


def cluster_net(runtime: dict[str, Any]) -> netns.ClusterNet | None:
    info = runtime.get("network")
    return netns.ClusterNet(info["cluster_id"], info["subnet"]) if info else None


def stop_node(root: Path, net: netns.ClusterNet | None, slots: dict[str, int], name: str) -> None:
    """Stop node ``name`` and remove what it had: its namespace, its slot, its spool and GPU files."""
    daemons.stop(f"slurmd-{name}", root / "run")
    local_scale.stop_relay(root / "run", name)
    if net is not None:
        netns.remove_node(net, name)
    slots.pop(name, None)
    shutil.rmtree(root / "spool" / name, ignore_errors=True)
    shutil.rmtree(root / "gpus" / name, ignore_errors=True)


class LocalNodes:
    """The node operations of ``LocalBackend`` (which gives ``home`` and ``_apply``)."""

    def restart_node(self, spec: ClusterSpec, runtime: dict[str, Any], node: str) -> None:
        """Start ``node``'s slurmd again (and whatever else of the cluster is not running),
        and wait until it has registered. One still running is stopped first, with everything
        the node runs, as a reboot would: a health check's failure may be the node's state."""
        daemons.stop(f"slurmd-{node}", Path(runtime["dir"]) / "run")
        self._apply(spec, runtime, no_progress, restart_controller=False)

    def reimage_node(self, spec: ClusterSpec, runtime: dict[str, Any], node: str) -> None:
        """What reinstalling a node's disk does, locally: stop it (everything it runs), wipe its
        local state (slurmd's spool, its last health record), start it as new, wait until it
        has registered. Its hardware stays: an injected fault (``faults/<node>``) survives."""
        root = Path(runtime["dir"])
        daemons.stop(f"slurmd-{node}", root / "run")
        shutil.rmtree(root / "spool" / node, ignore_errors=True)
        (root / "health" / f"{node}.json").unlink(missing_ok=True)
        self._apply(spec, runtime, no_progress, restart_controller=False)

    def replace_node(self, spec: ClusterSpec, runtime: dict[str, Any], node: str) -> None:
        """A fresh node in place of ``node``, as Cluster Toolkit's slurm-gcp replaces a VM: a new
        machine under the same name and address. The old one's processes, network namespace,
        spool, GPU files, health record and hardware (its injected faults) go; a new one is
        made and started. Same name and address because Slurm 22.05 learns a new node name only
        from a new slurm.conf and a slurmctld restart, which would also rename the node in its
        pool's list; the name is the node's slot in the cluster, not a machine."""
        root = Path(runtime["dir"])
        stop_node(root, cluster_net(runtime), runtime.setdefault("node_slots", {}), node)
        shutil.rmtree(root / "faults" / node, ignore_errors=True)
        (root / "health" / f"{node}.json").unlink(missing_ok=True)
        self._apply(spec, runtime, no_progress, restart_controller=False)  # the same slot (the lowest free) again

    def power_off_node(self, runtime: dict[str, Any], node: str) -> None:
        """What pulling a node's power does (a cloud's stop of its VM): its slurmd and every job
        process on it end at once, with no word to anyone. Its record stays, saying it is to run:
        ``restart_node`` (or a crash's ``clear``) starts it again. The supervisor fences a node cut
        off by a partition this way, since only the power reaches it."""
        daemons.stop(f"slurmd-{node}", Path(runtime["dir"]) / "run", keep_record=True)

    def check_node(self, spec: ClusterSpec, runtime: dict[str, Any], node: str, budget: float = 10.0) -> NodeHealth:
        """Run ``node``'s checks now, as its HealthCheckProgram does but without acting on the
        verdict: how the supervisor sees whether a remediation cured it."""
        return self._check_now(runtime, node, budget)

    def health(self, spec: ClusterSpec, runtime: dict[str, Any], now: bool) -> list[NodeHealth]:
        """The last run of each node's checks (etc/health_check.sh, every HealthCheckInterval).
        ``now`` runs them first, every node at once, as that program does but without acting
        on the verdict (draining is Slurm's HealthCheckProgram's to do)."""
        root = Path(runtime["dir"])
        names = node_names(spec)
        if now:
            with ThreadPoolExecutor(len(names)) as pool:
                return list(pool.map(lambda name: self._check_now(runtime, name, 10.0), names))
        out = []
        for name in names:
            try:
                out.append(NodeHealth.from_json(json.loads((root / "health" / f"{name}.json").read_text())))
            except FileNotFoundError:
                continue
        return out

    def _check_now(self, runtime: dict[str, Any], node: str, budget: float) -> NodeHealth:
        """Run ``node``'s checks now (and record them, as its HealthCheckProgram does); this run's
        result, read from its output: the record may already hold a later run, or one that began
        before a fault was injected and ended after (a race a CI-like run lost)."""
        root = Path(runtime["dir"])
        done = _process.run([sys.executable, "-m", "jupyter_gtc.health.node", "--json", "--budget", f"{budget:g}",
                             "--record", str(root / "health"), "--path", str(self.home / "jobs")],
                            check=False, timeout=budget + 60,
                            env={"SLURMD_NODENAME": node, "GTC_FAULT_DIR": str(root / "faults" / node)})
        try:
            return NodeHealth.from_json(json.loads(done.stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError, KeyError):  # the program itself failed: that is the verdict
            why = (done.stderr.strip().splitlines() or [f"exit status {done.returncode}"])[-1]
            return NodeHealth(node, time.time(), (CheckResult("checks", FAIL, f"the checks did not run: {why}"),))

    def inject_fault(self, spec: ClusterSpec, runtime: dict[str, Any], node: str, fault: str, clear: bool) -> None:
        """A fault file in the node's fault folder, which its checks read (``FAULTS``); ``crash``
        stops the node's slurmd and every job process on it at once, as a kernel panic would
        (``clear`` starts it again: the restart a supervisor does); ``partition`` takes the
        node's network link down (namespace-mode nodes only: the others share this machine's)."""
        names = node_names(spec)
        if node not in names:
            raise SpecError("node", node, f"nodes of {spec.name}: {', '.join(names)}")
        if fault not in (*FAULTS, *BACKEND_FAULTS):
            raise SpecError("fault", fault, f"one of: {', '.join((*FAULTS, *BACKEND_FAULTS))}")
        root = Path(runtime["dir"])
        if fault == "partition":
            net = cluster_net(runtime)
            if net is None:
                raise SpecError("fault", fault, f"a partition cuts a node's own network link, and only nodes of "
                                                f"`local: {{network: namespaces}}` have one; {spec.name}'s share "
                                                f"this machine's")
            netns.set_link(net, runtime["node_slots"][node], up=clear)
            return
        if fault == "crash":
            if clear:  # starts what is not running (a node that runs is left as it is)
                self._apply(spec, runtime, no_progress, restart_controller=False)
            else:  # as a node that panicked: at once, and it was to run
                self.power_off_node(runtime, node)
            return
        path = root / "faults" / node / fault
        if clear:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{fault} injected by gtc fault at {time.strftime('%H:%M:%S')}\n")

    def node_answers(self, runtime: dict[str, Any], node: str, timeout: float = 1.0) -> bool:
        """Whether ``node`` can be reached at its slurmd's address: false for a node cut off by
        a partition, though its processes run on. A refused connection is an answer (the node
        is there; its slurmd is starting or ending), only silence is not."""
        net = cluster_net(runtime)
        addr = net.address(runtime["node_slots"][node]) if net else "127.0.0.1"
        try:
            socket.create_connection((addr, runtime["node_ports"][node]), timeout=timeout).close()
        except ConnectionRefusedError:
            return True
        except OSError:  # timed out, no route to host
            return False
        return True

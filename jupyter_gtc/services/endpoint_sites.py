"""Where an endpoint's replicas run when it is not this machine's loopback: an attached ``slurm``
cluster's nodes, or a local cluster's of network namespaces (each node an address of its own).

A replica's node is another machine: it cannot bind loopback and be reached, and no port can be
chosen for it from here. So its job picks a free port on its node, binds all of the node's
addresses (``0.0.0.0``), and writes its node and port to ``replica-N.address`` in the endpoint's
folder on the cluster (``serving/replica.py``); the front finds it there on its health checks.
Its spec and the replica token are in that folder (0700 from its creation, on the cluster's
host: the node reads them there). The replica asks for the token on every request, so that the
port being open to the cluster's network (as a Vertex private endpoint is inside its VPC) lets
no one else in.

The front reaches a node through the cluster's host: over SSH, a port of this machine's loopback
forwarded on the host's shared connection (``SSHHost.forward``), cancelled when the replica
goes; from a login node (no SSH) or this machine (a local cluster), the node's address directly. Each forward is in the
deployment's row, so an undeploy from another process cancels it too.
"""

from __future__ import annotations

import json
import threading
from pathlib import PurePosixPath
from typing import Any

from .._ports import free_ports
from ..exceptions import CommandError, GtcError, SpecError
from ..hosts.ssh import SSHHost


class RemoteSite:
    def __init__(self, host, commands, folder: str):
        self.host, self.commands = host, commands
        self.folder = PurePosixPath(folder)
        self._lock = threading.Lock()
        self.forwards: dict[str, dict[str, Any]] = {}  # job -> {"node", "address", "port", "local"}

    @classmethod
    def open(cls, host, commands, jobs_root: str, endpoint_id: str, artifact_uri: str, cluster: str) -> "RemoteSite":
        """Checks that the cluster's host has the model folder, then makes the endpoint's folder there."""
        if not artifact_uri.startswith("gs://"):
            found = host.stat(artifact_uri)
            if found is None or not found.is_dir:
                raise SpecError("artifact_uri", artifact_uri, f"a folder the nodes of {cluster} read; {cluster}'s "
                                                              f"host ({host.name}) has no folder there: register "
                                                              f"the model from a folder on the cluster")
        folder = PurePosixPath(jobs_root) / "endpoints" / endpoint_id
        host.make_dirs(folder.parent)
        host.make_dirs(folder, exist_ok=False, mode=0o700)  # the token's folder: the user's alone from the start
        return cls(host, commands, str(folder))

    def write(self, name: str, text: str) -> str:
        path = self.folder / name
        self.host.write(path, text.encode())
        return str(path)

    def locate(self, job: str, index: int) -> tuple[str, int] | None:
        """Where the front reaches replica ``index`` (job ``job``), once its job said where it
        listens; None before."""
        try:
            said = json.loads(self.host.read(self.folder / f"replica-{index}.address"))
        except (FileNotFoundError, ValueError):
            return None
        node, port = str(said["node"]), int(said["port"])
        address = next((n.address for n in self.commands.nodes() if n.name == node and n.address), node)
        ssh = _ssh(self.host)
        if ssh is None:
            return address, port
        for _ in range(3):  # a free port here may be taken before ssh binds it
            local = free_ports(1, "127.0.0.1")[0]
            try:
                ssh.forward(address, port, local)
            except CommandError as e:
                if "in use" in str(e) or "forwarding failed" in str(e).lower():
                    continue
                raise
            with self._lock:
                self.forwards[job] = {"node": node, "address": address, "port": port, "local": local}
            return "127.0.0.1", local
        raise GtcError(f"could not forward a local port to replica {job} at {address}:{port}")

    def release(self, job: str) -> None:
        with self._lock:
            forward = self.forwards.pop(job, None)
        if forward is not None:
            cancel(self.host, forward)

    def remove(self) -> None:
        """The endpoint's folder on the cluster (its token, specs and addresses)."""
        try:
            self.host.remove_tree(self.folder)
        except GtcError:
            pass


def cancel(host, forward: dict[str, Any]) -> None:
    ssh = _ssh(host)
    if ssh is not None:
        ssh.cancel_forward(forward["address"], forward["port"], forward["local"])


def _ssh(host) -> SSHHost | None:
    """The SSH host that forwards ports to the cluster's nodes: ``host`` itself, or the one a
    training cluster's login node is reached through (``vertex_login.LoginHost``); None where the
    nodes are reached directly."""
    if isinstance(host, SSHHost):
        return host
    resolve = getattr(type(host), "ssh_host", None)
    found = resolve(host) if resolve is not None else None
    return found if isinstance(found, SSHHost) else None

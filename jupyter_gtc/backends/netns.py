"""Network namespaces for the local backend (``local.network: namespaces``, root only).

Each node gets a namespace with its own interface, IP and hostname, joined to the
cluster's bridge on this machine, where slurmctld listens on the bridge's address:

    host: bridge gtcb<id> 10.213.S.1/24 -- veth gtcv<id><i> <-> eth0 in netns gtc-<id>-<node> 10.213.S.(10+i)
                                                                  (MAC 02:00:0a:d5:S:(10+i), from the IP)

So ``srun -N3 hostname`` prints three names, nodes talk over a real (virtual) network,
and a node can be cut off by taking its link down. The subnet 10.213.S.0/24 is chosen
free on this machine; every address lives on interfaces this module made.
"""

from __future__ import annotations

import fcntl
import re
from dataclasses import dataclass
from pathlib import Path

from .. import _process

SUBNET_PREFIX = "10.213"


@dataclass(frozen=True)
class ClusterNet:
    cluster_id: str  # short hex id unique per cluster directory; keeps interface names < 16 bytes
    subnet: int      # S in 10.213.S.0/24

    @property
    def bridge(self) -> str:
        return f"gtcb{self.cluster_id}"

    @property
    def gateway(self) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet}.1"

    def netns(self, node: str) -> str:
        return f"gtc-{self.cluster_id}-{node}"

    def veth(self, index: int) -> str:
        return f"gtcv{self.cluster_id}{index}"

    def address(self, index: int) -> str:
        if not 0 <= index < 240:
            raise ValueError(f"node index {index} out of range for a /24 subnet")
        return f"{SUBNET_PREFIX}.{self.subnet}.{10 + index}"

    def mac(self, index: int) -> str:
        """The node's hardware address, made from its IP address (a locally administered 02:...,
        as Docker made its containers'). A replaced node, a new machine at the same address,
        keeps it: the other nodes' ARP caches still hold the old node's, and with a new one
        they would send it nowhere for up to a minute (srun's "Communication connection
        failure" on a job started just after a replace)."""
        octets = [int(x) for x in self.address(index).split(".")]
        return "02:00:" + ":".join(f"{o:02x}" for o in octets)


LOCK = Path("/run/jupyter_gtc/subnets.lock")


def create_network(cluster_id: str) -> ClusterNet:
    """The cluster's bridge, on the lowest free subnet. Chosen and made under a lock: two
    clusters created at once (two notebooks, two test workers) would otherwise both see the
    same subnet free and route one address range to two bridges."""
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with open(LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        net = ClusterNet(cluster_id, free_subnet())
        create_bridge(net)
    return net


def free_subnet() -> int:
    """The lowest S such that no interface here has an address in 10.213.S.0/24."""
    out = _ip("-o", "-4", "addr", "show").stdout
    used = {int(m) for m in re.findall(rf"inet {re.escape(SUBNET_PREFIX)}\.(\d+)\.", out)}
    for subnet in range(1, 255):
        if subnet not in used:
            return subnet
    raise RuntimeError(f"every {SUBNET_PREFIX}.S.0/24 subnet is in use on this machine")


def create_bridge(net: ClusterNet) -> None:
    _ip("link", "add", "name", net.bridge, "type", "bridge")
    _ip("addr", "add", f"{net.gateway}/24", "dev", net.bridge)
    _ip("link", "set", net.bridge, "up")


def add_node(net: ClusterNet, node: str, index: int) -> None:
    ns, veth = net.netns(node), net.veth(index)
    _ip("netns", "add", ns)
    _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
    _ip("link", "set", veth, "master", net.bridge, "up")
    _ip("-n", ns, "link", "set", "eth0", "address", net.mac(index))
    _ip("-n", ns, "addr", "add", f"{net.address(index)}/24", "dev", "eth0")
    _ip("-n", ns, "link", "set", "eth0", "up")
    _ip("-n", ns, "link", "set", "lo", "up")


def set_link(net: ClusterNet, index: int, up: bool) -> None:
    """Take a node's link down (its network partitioned off: nothing reaches it, it reaches
    nothing) or up again; its processes run on either way."""
    _ip("link", "set", net.veth(index), "up" if up else "down")


def remove_node(net: ClusterNet, node: str) -> None:
    """Delete the node's namespace (its veth pair goes with it). Idempotent."""
    if node_exists(net, node):
        _ip("netns", "del", net.netns(node))


def remove_bridge(net: ClusterNet) -> None:
    if _ip("link", "show", net.bridge, check=False).returncode == 0:
        _ip("link", "del", net.bridge)


def node_exists(net: ClusterNet, node: str) -> bool:
    return net.netns(node) in _ip("netns", "list").stdout.split()


def exec_prefix(net: ClusterNet, node: str) -> list[str]:
    """Argument prefix that runs a command inside the node's network namespace. Not `ip netns
    exec`: that remounts /sys, which hides /sys/fs/cgroup from slurmd."""
    return ["nsenter", f"--net=/run/netns/{net.netns(node)}"]


def _ip(*argv: str, check: bool = True) -> _process.Result:
    return _process.run(["ip", *argv], timeout=15, check=check)

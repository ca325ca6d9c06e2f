"""Name resolution for a local cluster's nodes, without touching this machine's /etc/hosts.

Each cluster has ``<root>/etc/hosts``: the machine's /etc/hosts plus a marked block that maps
every node name to its address (127.0.0.1 with ``network: host``, the node's own IP with
``network: namespaces``). node_init.sh bind-mounts it over /etc/hosts in each slurmd's
private mount namespace, so a job step on any node resolves every node name, as
``scontrol show hostnames | head -n1`` followed by ``torchrun --rdzv-endpoint=$head:PORT``
expects on a real cluster.

A bind mount pins the file's inode: the file is rewritten in place, never replaced by a
rename, so nodes that stay up through a scale see the nodes it added.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

BEGIN = "# BEGIN jupyter_gtc nodes"
END = "# END jupyter_gtc nodes"
SYSTEM_HOSTS = Path("/etc/hosts")


def render_hosts(system: str, cluster: str, nodes: Iterable[tuple[str, str]]) -> str:
    """``system`` (a hosts file's text, less any block of ours) followed by a block with one
    ``ADDRESS NAME`` line per ``(name, address)`` of ``nodes``. The block comes last so that
    names the machine already knows (``localhost``) keep their first, canonical entry."""
    kept, inside = [], False
    for line in system.splitlines():
        if line.startswith(BEGIN):
            inside = True
        elif inside and line.strip() == END:
            inside = False
        elif not inside:
            kept.append(line)
    while kept and not kept[-1].strip():
        kept.pop()
    block = [f"{BEGIN} (cluster {cluster}; written by jupyter_gtc, rewritten on scale)",
             *(f"{address}\t{name}" for name, address in nodes), END]
    return "\n".join([*kept, "", *block]) + "\n" if kept else "\n".join(block) + "\n"


def write_hosts(path: Path, cluster: str, nodes: Iterable[tuple[str, str]]) -> None:
    """Write the cluster's hosts file at ``path``, in place (see the module's docstring)."""
    try:
        system = SYSTEM_HOSTS.read_text(errors="replace")
    except OSError:
        system = "127.0.0.1\tlocalhost\n"
    data = render_hosts(system, cluster, nodes).encode()
    # Write over the old bytes, then cut what is left of them: a reader never finds the
    # file empty, as it would between a truncate and a write.
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        written = 0
        while written < len(data):
            written += os.write(fd, data[written:])
        os.ftruncate(fd, len(data))
    finally:
        os.close(fd)

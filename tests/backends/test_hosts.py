"""The cluster's hosts file, rendered and written without a cluster."""

from __future__ import annotations

import os

from jupyter_gtc.backends import hosts
from jupyter_gtc.backends.hosts import BEGIN, render_hosts


def block(text: str) -> list[str]:
    """The lines between our markers."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(BEGIN))
    return lines[start + 1: lines.index(hosts.END)]


def test_the_hosts_file_keeps_the_machines_entries_and_replaces_its_own_block():
    system = "127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
    once = render_hosts(system, "c", [("c-0", "10.0.0.10"), ("c-1", "10.0.0.11")])
    assert once.startswith(system)
    assert block(once) == ["10.0.0.10\tc-0", "10.0.0.11\tc-1"]
    again = render_hosts(once, "c", [("c-0", "127.0.0.1")])
    assert again.startswith(system) and again.count(BEGIN) == 1
    assert block(again) == ["127.0.0.1\tc-0"]


def test_a_rewrite_keeps_the_inode_that_a_bind_mount_pins(tmp_path):
    path = tmp_path / "hosts"
    hosts.write_hosts(path, "c", [("c-0", "10.0.0.10"), ("c-1", "10.0.0.11"), ("c-2", "10.0.0.12")])
    inode = os.stat(path).st_ino
    hosts.write_hosts(path, "c", [("c-0", "10.0.0.10")])  # shorter: the old tail must go
    assert os.stat(path).st_ino == inode
    assert block(path.read_text()) == ["10.0.0.10\tc-0"]
    assert path.read_text().count(BEGIN) == 1

from __future__ import annotations

import pytest

from jupyter_gtc.hosts.ssh import SSHHost


@pytest.fixture
def ssh_host(sshd, tmp_path_factory) -> SSHHost:
    host = SSHHost(sshd.alias, config_file=sshd.config, control_dir=tmp_path_factory.mktemp("ctl"))
    yield host
    host.close()


@pytest.fixture
def control_dir(tmp_path_factory):
    """A folder for SSH's connection socket, short as a socket path must be (104 bytes):
    a test's own tmp_path is named after the test, and under xdist after the worker too."""
    return tmp_path_factory.mktemp("ctl")

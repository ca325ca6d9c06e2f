from __future__ import annotations

import os

import pytest

from jupyter_gtc.hosts.ssh import SSHHost
from tests.hosts.sshd import SSHD, start_sshd


@pytest.fixture(scope="session")
def sshd(tmp_path_factory):
    if SSHD is None:
        pytest.skip("no sshd: apt-get install openssh-server (make setup does)")
    if os.getuid() != 0:
        pytest.skip("the test sshd runs as root (it needs /run/sshd); run the suite as root")
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def ssh_host(sshd, tmp_path_factory) -> SSHHost:
    host = SSHHost(sshd.alias, config_file=sshd.config, control_dir=tmp_path_factory.mktemp("ctl"))
    yield host
    host.close()

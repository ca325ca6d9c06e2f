from __future__ import annotations

import pytest

from jupyter_gtc.hosts.ssh import SSHHost


@pytest.fixture
def ssh_host(sshd, tmp_path_factory) -> SSHHost:
    host = SSHHost(sshd.alias, config_file=sshd.config, control_dir=tmp_path_factory.mktemp("ctl"))
    yield host
    host.close()

"""A model folder copied through a cluster's host over a real sshd (a login node's files come
by ranges of the host's reads, as a job's log does): every file whole, in as many reads as a
large file needs, and nothing its job's user does not own, whatever a link in it names."""

from __future__ import annotations

import getpass
import os
import stat

import pytest

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.hosts.ssh import SSHHost
from jupyter_gtc.services.models import COPY_CHUNK, copy_tree


def test_a_model_folder_comes_whole_through_an_ssh_host(sshd, tmp_path_factory, tmp_path):
    source = tmp_path / "job" / "model"
    (source / "tokenizer").mkdir(parents=True)
    weights = os.urandom(COPY_CHUNK + 12345)  # more than one read
    (source / "model.safetensors").write_bytes(weights)
    (source / "tokenizer" / "vocab.json").write_text('{"a": 1}')
    (source / "empty.txt").write_bytes(b"")
    (source / "link").symlink_to(source / "tokenizer" / "vocab.json")  # the user's own file: copied

    host = SSHHost(sshd.alias, config_file=sshd.config, control_dir=tmp_path_factory.mktemp("ctl"))
    try:
        target = tmp_path / "copy"
        copy_tree(host, str(source), target, owner=getpass.getuser())
        assert (target / "model.safetensors").read_bytes() == weights
        assert (target / "tokenizer" / "vocab.json").read_text() == '{"a": 1}'
        assert (target / "empty.txt").read_bytes() == b"" and (target / "link").read_text() == '{"a": 1}'
        assert stat.S_IMODE(target.stat().st_mode) == 0o700

        if os.geteuid() == 0:  # a job of user nobody whose model folder links to root's file
            for path in (source, *source.rglob("*")):
                os.chown(path, 65534, 65534, follow_symlinks=False)
            (source / "link").unlink()
            (source / "link").symlink_to("/etc/hostname")
            with pytest.raises(SpecError) as e:
                copy_tree(host, str(source), tmp_path / "again", owner="nobody")
            assert e.value.field == "artifact_uri" and e.value.value == f"{source}/link"
            assert "copied only from files its job's user owns" in str(e.value)
    finally:
        host.close()

"""A GTC_HOME and its state store are their user's alone from their creation, whatever the
umask: the store holds specs with their scripts and CustomJob bodies with their environment."""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from jupyter_gtc.state import open_store
from jupyter_gtc.state.config import set_value


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    """The usual umask, under which a file others may read is 0644 and a folder 0755."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_a_fresh_home_is_0700_and_the_database_and_its_wal_files_0600(tmp_path, umask_022):
    home = tmp_path / "deeper" / "home"
    store = open_store(home)  # its migrations are written through the WAL; its connection stays open
    assert store.list_clusters() == []
    assert mode(home) == 0o700
    files = sorted(p.name for p in home.iterdir())
    assert files == ["state.db", "state.db-shm", "state.db-wal"]
    assert [mode(home / name) for name in files] == [0o600] * 3


def test_an_install_from_before_is_made_private_when_its_store_is_opened(tmp_path, umask_022):
    # As installs were made before: a 0755 home and a database (with its -wal and -shm, held
    # by an open connection) that followed the umask.
    home = tmp_path / "old"
    home.mkdir(mode=0o755)
    old = sqlite3.connect(home / "state.db")
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE t (x)")
    files = ["state.db", "state.db-shm", "state.db-wal"]
    assert [mode(home / name) for name in files] == [0o644] * 3
    try:
        assert open_store(home).list_clusters() == []
        assert mode(home) == 0o700
        assert [mode(home / name) for name in files] == [0o600] * 3
    finally:
        old.close()


def test_a_shared_folder_given_as_the_home_is_never_made_private(tmp_path, umask_022):
    # GTC_HOME=/tmp (or any sticky, world-writable folder): its state.db is ours, the folder is
    # everyone's. Made 0700 once, every other user (and a normal user's cluster, whose jobs' TMPDIR
    # is /tmp) was locked out of /tmp.
    shared = tmp_path / "tmp"
    shared.mkdir()
    os.chmod(shared, 0o1777)
    assert open_store(shared).list_clusters() == []
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777 and mode(shared / "state.db") == 0o600


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root")
def test_a_home_of_another_users_is_left_as_it_is(tmp_path, umask_022):
    home = tmp_path / "theirs"
    open_store(home)
    for path in (home, home / "state.db"):
        os.chmod(path, 0o755 if path == home else 0o644)
        os.chown(path, 65534, 65534)
    open_store(home)  # root reading a user's store changes nothing of the user's
    assert (mode(home), mode(home / "state.db")) == (0o755, 0o644)


def test_gtc_config_makes_a_private_home_too(tmp_path, umask_022):
    home = tmp_path / "config-first"
    set_value(home, "vertex.region", "us-central1")
    assert mode(home) == 0o700


def test_a_studys_optuna_database_is_0600(tmp_path, umask_022):
    from jupyter_gtc.services.tuning.engine import open_storage

    path = tmp_path / "studies" / "s" / "optuna.db"
    open_storage(path)
    assert mode(path) == 0o600

"""The accounting database's files live in RAM (backends/db_files.py): a private folder in
/dev/shm, made for this user alone, given back when the last cluster keeping accounting goes,
and never one that someone else made."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from tests.conftest import sleep_until, slurm, small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")


@pytest.fixture
def home(monkeypatch) -> Iterator[Path]:
    """A GTC_HOME of its own, so that its database starts and stops with this test's cluster."""
    made = Path(tempfile.mkdtemp(prefix="gtc-"))  # short: MariaDB's socket path is limited
    monkeypatch.setenv("GTC_HOME", str(made))
    yield made
    for cluster in api.list_clusters(with_status=False):
        api.delete_cluster(cluster.name)
    shutil.rmtree(made, ignore_errors=True)


def _database_folder(home: Path) -> str | None:
    """The folder the GTC_HOME's MariaDB runs on, as the kernel resolves its working folder."""
    datadir = f"--datadir={home / 'accounting' / 'db'}"
    for proc in psutil.process_iter(["cmdline", "cwd"]):
        if (proc.info["cmdline"] or [""])[0].endswith("mariadbd") and datadir in proc.info["cmdline"]:
            return proc.info["cwd"]  # mariadbd works in its datadir
    return None


def test_the_database_runs_in_a_private_folder_in_ram_given_back_with_the_last_cluster(home):
    made = api.create_cluster(small_gpu_spec("ram", nodes=1, accounting=None))
    job = api.submit_job(made.name, "#!/bin/bash\nexit 0\n").wait(timeout=120)
    assert sleep_until(lambda: f"{job.id}|COMPLETED" in slurm(made.name, "sacct", "-n", "-P", "-X", "-j", job.id,
                                                                 "-o", "JobID,State").stdout)
    folder = Path(_database_folder(home))
    assert folder.parent == Path("/dev/shm"), folder
    found = os.lstat(folder)
    assert (found.st_uid, stat.S_IMODE(found.st_mode)) == (os.geteuid(), 0o700)
    api.delete_cluster(made.name)
    assert not folder.exists() and not os.path.lexists(home / "accounting" / "db")  # the RAM is given back
    # The next create starts from the template kept on disk, in a new folder in RAM.
    again = api.create_cluster(small_gpu_spec("ram", nodes=1, accounting=None))
    assert Path(_database_folder(home)).parent == Path("/dev/shm")
    api.delete_cluster(again.name)


def test_a_folder_in_ram_that_another_user_made_is_never_run_on(home):
    # After a restart of the machine the link's target is gone, and anyone may make a folder
    # of that name in /dev/shm (its listing showed the name): a database of theirs, there.
    theirs = Path(tempfile.mkdtemp(prefix="gtc-accounting-", dir="/dev/shm"))
    try:
        (theirs / "mysql").mkdir()
        (theirs / "planted").write_text("their database")
        os.chown(theirs, 65534, 65534)  # nobody's
        (home / "accounting").mkdir(mode=0o700)
        (home / "accounting" / "db").symlink_to(theirs)
        made = api.create_cluster(small_gpu_spec("ramx", nodes=1, accounting=None))
        folder = Path(_database_folder(home))
        assert folder != theirs and folder.parent == Path("/dev/shm") and os.lstat(folder).st_uid == os.geteuid()
        assert (theirs / "planted").read_text() == "their database"  # left as it was
        api.delete_cluster(made.name)
        assert theirs.is_dir()  # not ours to remove
    finally:
        shutil.rmtree(theirs, ignore_errors=True)

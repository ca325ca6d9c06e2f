"""The accounting database keeps its temporary files in a folder of its own: MariaDB removes
every ``#sql*`` file in its tmpdir when it starts (mariadb-install-db's bootstrap too), so in
the machine's shared /tmp one GTC_HOME's database start removed the temporary tables another
was installing with: a create failed, one time in a few with several at once ("could not make
the accounting database ... Unknown table 'mysql.tmp_user_sys' ... Aborting")."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from jupyter_gtc import api
from tests.conftest import small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")


def test_starting_the_database_leaves_other_databases_temporary_tables_alone(monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="gtc-"))  # its own GTC_HOME: its database is made and started here
    shared = Path(tempfile.mkdtemp(prefix="gtc-shared-tmp-"))  # the machine's tmpdir, as every MariaDB's default
    monkeypatch.setenv("GTC_HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(shared))
    # What another MariaDB (another GTC_HOME's, another user's) has in the shared tmpdir meanwhile.
    theirs = shared / "#sql-temptable-1f2e-1-3.MAI"
    theirs.write_bytes(b"another database's temporary table")
    try:
        cluster = api.create_cluster(small_gpu_spec("tmpdir", nodes=1, accounting=None))
        assert api.submit_job(cluster.name, "#!/bin/bash\nexit 0\n").wait(timeout=120).state == "COMPLETED"
        assert theirs.read_bytes() == b"another database's temporary table"
    finally:
        for made in api.list_clusters(with_status=False):
            api.delete_cluster(made.name)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(shared, ignore_errors=True)

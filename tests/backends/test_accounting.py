"""A local cluster keeps accounting by default (``slurm_spec.accounting``): its own slurmdbd,
over one MariaDB shared by the clusters of a GTC_HOME, so Slurm's accounting tools work on it
as on a site's cluster, and an attached cluster with accounting tells how a job ended after
slurmctld has forgotten it (``sacct``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import sleep_until, slurm, small_gpu_spec

pytestmark = pytest.mark.usefixtures("slurm_available")

NAME = "acct"


@pytest.fixture(scope="module")
def cluster(slurm_available):
    made = api.create_cluster(small_gpu_spec(NAME, nodes=2, accounting=None))  # no `accounting` key: on by default
    yield made
    run = Path(made.runtime["dir"]) / "run"
    api.delete_cluster(NAME)
    # Nothing of the accounting is left: its daemons went with the cluster, and the database
    # with the last cluster of this GTC_HOME.
    assert not [p for p in psutil.process_iter(["cmdline"]) if str(run) in " ".join(p.info["cmdline"] or [])]
    if not api.list_clusters(with_status=False):
        assert not _databases()


def _databases() -> list[psutil.Process]:
    """The MariaDB servers of this session's GTC_HOME."""
    datadir = f"--datadir={Path(os.environ['GTC_HOME']) / 'accounting' / 'db'}"
    return [p for p in psutil.process_iter(["cmdline"])
            if (p.info["cmdline"] or [""])[0].endswith("mariadbd") and datadir in p.info["cmdline"]]


def _schemas() -> list[str]:
    home = Path(os.environ["GTC_HOME"])
    out = subprocess.run(["mariadb", "--no-defaults", f"--socket={home / 'accounting' / 'run' / 'mysqld.sock'}",
                          "-N", "-e", "SHOW DATABASES"], capture_output=True, text=True, check=True, timeout=30)
    return out.stdout.split()


def _sacct(cluster_name: str, job_id: str) -> list[str]:
    out = slurm(cluster_name, "sacct", "-n", "-P", "-X", "-j", job_id, "-o", "JobID,State,ExitCode").stdout
    return out.split()


def test_sacct_sacctmgr_and_sreport_work_on_a_cluster_that_keeps_accounting(cluster):
    job = api.submit_job(NAME, "#!/bin/bash\necho hi\nexit 3\n", ["--job-name=acct-fails"])
    job.wait(timeout=120)
    assert (job.state, job.exit_code) == ("FAILED", 3)
    # slurmctld sends a job's end to slurmdbd on its own thread, a moment after.
    assert sleep_until(lambda: _sacct(NAME, job.id) == [f"{job.id}|FAILED|3:0"]), _sacct(NAME, job.id)
    assert NAME in slurm(NAME, "sacctmgr", "-n", "-P", "list", "cluster", "format=cluster").stdout.split()
    assert api.get_cluster(NAME).status.details["accounting"] == "slurmdbd (sacct)"  # gtc cluster describe shows it
    report = slurm(NAME, "sreport", "-n", "-P", "cluster", "utilization")
    assert report.returncode == 0 and "accounting storage is disabled" not in report.stderr.lower()


def test_slurmctld_and_sacct_reach_slurmdbd_through_the_clusters_relay_which_goes_with_it(cluster):
    """Slurm 22.05 sends each message as two writes and never sets TCP_NODELAY: over loopback
    every message to or from slurmdbd waited 40 ms for a delayed ACK (slurmctld's start took
    ~1 s loading TRES, QOS, associations and users one message at a time). slurm.conf names
    the relay's port, which forwards to slurmdbd's own; the timing is bench/bringup_defaults.py's."""
    root = Path(cluster.runtime["dir"])
    conf = dict(line.split("=", 1) for line in (root / "etc" / "slurm.conf").read_text().splitlines() if "=" in line)
    dbd = dict(line.split("=", 1) for line in (root / "etc" / "slurmdbd.conf").read_text().splitlines() if "=" in line)
    ports = cluster.runtime["accounting"]
    assert conf["AccountingStoragePort"] == str(ports["relay_port"]) != dbd["DbdPort"] == str(ports["dbd_port"])
    relay = [p for p in psutil.process_iter(["cmdline"]) if "dbd_relay.py" in " ".join(p.info["cmdline"] or [])
             and str(ports["relay_port"]) in p.info["cmdline"]]
    assert relay
    other = api.create_cluster(small_gpu_spec("acct-relay", nodes=1, accounting=None))
    try:
        # A job submitted as the create returns is in sacct once it ended.
        job = api.submit_job(other.name, "#!/bin/bash\nexit 0\n").wait(timeout=120)
        assert sleep_until(lambda: _sacct(other.name, job.id) == [f"{job.id}|COMPLETED|0:0"]), _sacct(other.name, job.id)
    finally:
        api.delete_cluster(other.name)
    assert not [p for p in psutil.process_iter(["cmdline"]) if "dbd_relay.py" in " ".join(p.info["cmdline"] or [])
                and str(other.runtime["accounting"]["relay_port"]) in p.info["cmdline"]]


def test_the_databases_password_is_written_in_slurmdbd_conf_alone(cluster):
    root = Path(cluster.runtime["dir"])
    conf = root / "etc" / "slurmdbd.conf"
    assert conf.stat().st_mode & 0o777 == 0o600
    password = next(line.split("=", 1)[1] for line in conf.read_text().splitlines() if line.startswith("StoragePass="))
    assert len(password) >= 24
    home = Path(os.environ["GTC_HOME"])
    # grep reads the state store, not this process: a process that opens and closes an SQLite
    # file it also has a connection to drops that connection's locks (POSIX advisory locks).
    logs = [*(root / "log").iterdir(), *(home / "accounting" / "log").iterdir()]  # the shared database's too
    found = subprocess.run(["grep", "-F", "-l", "-f", "-", *map(str, [*home.glob("state.db*"), *logs])],
                           input=password, capture_output=True, text=True)
    assert found.returncode == 1 and not found.stdout, found.stdout
    assert password not in json.dumps(api.get_cluster(NAME).runtime)
    for proc in psutil.process_iter(["cmdline"]):
        assert password not in " ".join(proc.info["cmdline"] or [])


def test_clusters_of_one_home_share_one_database_each_with_its_own_schema_dropped_at_delete(cluster):
    [database] = _databases()
    shared = Path(os.environ["GTC_HOME"]) / "accounting"
    modes = {p.name: p.stat().st_mode & 0o777 for p in (shared, shared / "db.json", shared / "lock",
                                                        shared / "clusters", shared / "clusters" / NAME)}
    assert modes == {"accounting": 0o700, "db.json": 0o600, "lock": 0o600, "clusters": 0o700, NAME: 0o600}
    other = api.create_cluster(small_gpu_spec("acct-2", nodes=1, accounting=None))
    try:
        assert _databases() == [database]  # joined the running one
        assert {"acct_acct", "acct_acct_2"} <= set(_schemas())
        job = api.submit_job(other.name, "#!/bin/bash\nexit 0\n").wait(timeout=120)
        assert sleep_until(lambda: _sacct(other.name, job.id) == [f"{job.id}|COMPLETED|0:0"]), _sacct(other.name, job.id)
        conf = (Path(other.runtime["dir"]) / "etc" / "slurmdbd.conf").read_text()
        assert "StorageLoc=acct_acct_2\n" in conf and "StorageUser=slurm_acct_2\n" in conf
    finally:
        api.delete_cluster(other.name)
    assert _databases() == [database] and "acct_acct_2" not in _schemas()  # the first cluster still uses it


def test_two_creates_at_once_in_a_new_home_start_one_database_which_their_deletes_stop(monkeypatch):
    home = Path(tempfile.mkdtemp(prefix="gtc-"))  # short: MariaDB's socket path is limited too
    monkeypatch.setenv("GTC_HOME", str(home))
    try:
        with ThreadPoolExecutor(2) as pool:
            made = list(pool.map(lambda name: api.create_cluster(small_gpu_spec(name, nodes=1, accounting=None)),
                                 ["twin-a", "twin-b"]))
        assert len(_databases()) == 1  # the lock let one create start it, the other join it
        assert all(m.status.details["accounting"] == "slurmdbd (sacct)" for m in made)
        api.delete_cluster("twin-a")
        assert len(_databases()) == 1
        api.delete_cluster("twin-b")
        assert not _databases()
    finally:
        for name in ("twin-a", "twin-b"):
            if name in [c.name for c in api.list_clusters(with_status=False)]:
                api.delete_cluster(name)
        shutil.rmtree(home, ignore_errors=True)


def test_accounting_off_runs_no_slurmdbd_and_sacct_says_so():
    spec = small_gpu_spec("noacct", nodes=1)
    spec["orchestratorSpec"]["slurmSpec"]["accounting"] = {"enabled": False}
    made = api.create_cluster(spec)
    try:
        assert "accounting" not in made.status.details
        assert not (Path(made.runtime["dir"]) / "etc" / "slurmdbd.conf").exists()
        assert "accounting storage is disabled" in slurm("noacct", "sacct", "-n", check=False).stderr.lower()
        # `accounting: null` is off too, and stored as {enabled: false} (stored specs leave nulls out).
        spec["orchestratorSpec"]["slurmSpec"]["accounting"] = None
        assert parse_cluster_spec(parse_cluster_spec(spec).to_json()).slurm.accounting.enabled is False
    finally:
        api.delete_cluster("noacct")


def test_a_bad_accounting_field_is_named_with_what_is_valid():
    spec = small_gpu_spec("badacct")
    spec["orchestratorSpec"]["slurmSpec"]["accounting"] = {"accountingStorageEnforce": "limits,quotas"}
    with pytest.raises(SpecErrors) as info:
        parse_cluster_spec(spec)
    [error] = info.value.errors
    assert error.field == "orchestrator_spec.slurm_spec.accounting.accounting_storage_enforce"
    assert "'quotas' is not one" in str(error) and "associations" in str(error)


def test_an_attached_cluster_learns_from_sacct_how_a_job_ended_after_slurmctld_forgot_it(cluster, tmp_path):
    spec = {"slurm_conf": api.cluster_env(NAME)["SLURM_CONF"], "jobs_root": str(tmp_path / "jobs"), "poll_interval": 1}
    hpc = api.attach_cluster(api.parse_spec(spec, "slurm", display_name="acctd"))
    try:
        assert hpc.status.details["accounting"] == "slurmdbd (sacct)"
        script = tmp_path / "ends.sh"
        script.write_text("#!/bin/bash\nexit 4\n")
        # Submitted by another process that is gone before the job ends: a kernel restarted later.
        out = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "job", "submit", str(script), "--cluster",
                              "acctd"], capture_output=True, text=True, check=True, timeout=120).stdout
        job_id = next(word for word in out.split() if word.isdigit())
        # The cluster's admin keeps finished jobs in slurmctld's memory for 2 s only (Slurm's
        # default is 300): slurmctld forgets the job within its purge interval (a minute).
        conf = Path(api.cluster_env(NAME)["SLURM_CONF"])
        conf.write_text(conf.read_text() + "MinJobAge=2\n")
        slurm(NAME, "scontrol", "reconfigure")
        assert sleep_until(lambda: job_id not in slurm(NAME, "squeue", "-h", "-t", "all", "-o", "%i").stdout.split(),
                           timeout=180)
        job = api.get_job(job_id, "acctd")
        assert job.state == "PENDING"  # all that the state store knew of it
        job.wait(timeout=60)
        assert (job.state, job.exit_code) == ("FAILED", 4)
    finally:
        api.detach_cluster("acctd")


def test_a_cancelled_job_reads_cancelled_through_sacct_as_submitit_asks(cluster):
    """submitit learns a job's state from sacct alone (``sacct -o JobID,State,NodeList
    --parsable2 -j ID``, submitit/slurm/slurm.py's SlurmInfoWatcher): without accounting every
    state read UNKNOWN and a cancelled job's ``result()`` waited for ever (issue 24)."""
    job = api.submit_job(NAME, "#!/bin/bash\nsleep 300\n", ["--job-name=acct-cancel"])
    assert sleep_until(lambda: api.get_job(job.id, NAME).state == "RUNNING", timeout=120)
    job.cancel()

    def states() -> dict[str, str]:
        out = slurm(NAME, "sacct", "-o", "JobID,State,NodeList", "--parsable2", "-j", job.id).stdout
        return {line.split("|")[0]: line.split("|")[1] for line in out.splitlines()[1:] if line}

    assert sleep_until(lambda: states().get(job.id, "").startswith("CANCELLED")), states()

"""What another local user must never get from a local cluster: the munge key of a cluster
being created (with it, credentials for any uid), nor root's help in removing root's folders or
killing root's processes by a record it wrote into its own state store.

These run as root (CI does) and use ``gtc-test`` (tests/non_root.py) as the other user.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
from pathlib import Path

import psutil
import pytest

from jupyter_gtc import api
from jupyter_gtc.backends import supervisor
from tests.conftest import sleep_until, small_gpu_spec
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)

pytestmark = pytest.mark.slurm

# gtc-test's reader: says it is ready, then opens the key until the stop file appears; prints
# how often it tried, and how often it read the key.
READER = """
import json, os, sys
key, stop = sys.argv[1], sys.argv[2]
print("ready", flush=True)
tries = reads = 0
while not os.path.exists(stop):
    tries += 1
    try:
        with open(key, "rb") as f:
            reads += len(f.read()) > 0
    except OSError:
        pass
print(json.dumps({"tries": tries, "reads": reads}), flush=True)
"""


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def open_home(monkeypatch):
    """A GTC_HOME that others may enter (made before homes were private, or by an admin), in
    a folder everyone can reach, under umask 022: where a file's mode is all that protects it.
    (Opening its store now makes it 0700, repairing an old install: a second lock on the key.)"""
    home = Path(tempfile.mkdtemp(prefix="gtc-open-", dir="/tmp"))
    home.chmod(0o755)
    monkeypatch.setenv("GTC_HOME", str(home))
    umask = os.umask(0o022)
    try:
        yield home
    finally:
        os.umask(umask)
        shutil.rmtree(home, ignore_errors=True)
        home.with_name(home.name + "-stop").unlink(missing_ok=True)


def test_another_user_never_reads_the_munge_key_while_a_cluster_is_created(slurm_available, normal_user, open_home):
    root = open_home / "clusters" / "keyrace"
    key, stop = root / "munge" / "munge.key", open_home.with_name(open_home.name + "-stop")
    reader = subprocess.Popen(["runuser", "-u", normal_user.name, "--", normal_user.python_exe, "-c", READER,
                               str(key), str(stop)], env=normal_user.env(), stdout=subprocess.PIPE, text=True)
    try:
        assert reader.stdout.readline().strip() == "ready"
        api.create_cluster(small_gpu_spec("keyrace", nodes=1))
        try:
            stop.touch()
            answer = json.loads(reader.communicate(timeout=60)[0].strip().splitlines()[-1])
            assert answer["tries"] > 0 and answer["reads"] == 0, answer
            # Private from their creation (a chmod afterwards would leave a moment), whatever the umask.
            assert (mode(root), mode(root / "munge"), mode(key)) == (0o700, 0o700, 0o400)
            assert mode(root / "etc" / "task_prolog.sh") == 0o700
            later = normal_user.python(f"open({str(key)!r}, 'rb').read()")
            assert later.returncode != 0 and "Permission denied" in later.stderr
        finally:
            api.delete_cluster("keyrace")
    finally:
        if reader.poll() is None:
            reader.kill()
            reader.wait()


# gtc-test writes a record of its own into its own state store: a cluster whose folder is
# root's, whose storage and munge folders are root's, and whose daemons are root's processes;
# it keeps accounting, in a GTC_HOME/accounting/ whose lock, markers' folder and database
# socket are links to root's files. A second cluster's run/ is a link to a folder of root's.
CRAFT = """
import json, os, subprocess
from pathlib import Path
import psutil
from jupyter_gtc.state import ClusterRecord, open_store
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import small_gpu_spec
given = json.loads(os.environ["CRAFT"])
home = Path(os.environ["GTC_HOME"])
run = home / "clusters" / "bait" / "run"
run.mkdir(parents=True)
for label, (pid, started, namespaces) in given["daemons"].items():
    (run / f"{label}.json").write_text(json.dumps({"pid": pid, "started": started, "argv": ["slurmd"],
                                                    "namespaces": namespaces}))
runtime = {"dir": given["victim"], "user": {"uid": 0, "name": "root"}, "made_dirs": [given["made"]],
           "munge_socket_dir": given["socket"], "node_ports": {}, "node_slots": {}, "hostname": "bait",
           "accounting": {"dbd_port": 1}}
for name in ("bait", "bait-link"):
    spec = parse_cluster_spec(small_gpu_spec(name, nodes=1)).to_json()
    open_store(home).add_cluster(ClusterRecord(name, "local", "RUNNING", spec, runtime))
(home / "clusters" / "bait-link").mkdir()
(home / "clusters" / "bait-link" / "run").symlink_to(given["records"])
accounting = home / "accounting"
(accounting / "run").mkdir(parents=True)
(accounting / "lock").symlink_to(given["planted"])
(accounting / "clusters").symlink_to(given["marks"])
(accounting / "run" / "mysqld.sock").symlink_to(given["db_socket"])
db = subprocess.Popen(["sleep", "600"], start_new_session=True, stdout=subprocess.DEVNULL,
                      stderr=subprocess.DEVNULL)  # stands for the user's MariaDB
(accounting / "run" / "mariadbd.json").write_text(json.dumps(
    {"pid": db.pid, "started": psutil.Process(db.pid).create_time(), "argv": ["mariadbd"], "namespaces": False}))
print("crafted")
"""


def connections_to(path: Path) -> tuple[socket.socket, list[int]]:
    """A Unix socket of root's at ``path`` (standing for a database of root's), and the
    list of connections it gets (each closed at once)."""
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    got: list[int] = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            got.append(1)
            conn.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, got


def test_root_deleting_a_users_cluster_touches_no_folder_or_process_of_roots(normal_user, tmp_path, monkeypatch):
    victim, made, socket_dir = tmp_path / "victim", tmp_path / "made", tmp_path / "socket"
    marks, records, planted = tmp_path / "marks", tmp_path / "records", tmp_path / "planted"
    for folder in (victim, made, socket_dir, marks, records):
        folder.mkdir()
    (victim / "precious").write_text("root's")
    (socket_dir / "munge.socket").write_text("root's")
    for folder, names in ((marks, ("bait", "precious")), (records, ("slurmctld.json", "precious.json"))):
        for name in names:
            (folder / name).write_text("root's")
    db_server, db_connections = connections_to(tmp_path / "db.sock")
    home = normal_user.new_home()
    # Root's processes: one a plain record names, one a namespace record names (with its child),
    # one carrying the run folder's mark in its environment, as an unrecorded daemon would.
    run = home / "clusters" / "bait" / "run"
    procs = [subprocess.Popen(["sleep", "600"]), subprocess.Popen(["sh", "-c", "sleep 600 & wait"]),
             subprocess.Popen(["sleep", "600"], env={**os.environ, "GTC_DAEMON": f"{run}/ghost"})]
    try:
        assert sleep_until(lambda: len(psutil.Process(procs[1].pid).children()) == 1, 30)
        started = {p.pid: psutil.Process(p.pid).create_time() for p in procs}
        labels = {"munged": (procs[0].pid, False), "slurmctld": (procs[1].pid, True),
                  "slurmd-gpu-0": (procs[0].pid, True), supervisor.LABEL: (procs[1].pid, False)}
        craft = {"victim": str(victim), "made": str(made), "socket": str(socket_dir), "marks": str(marks),
                 "records": str(records), "planted": str(planted), "db_socket": str(tmp_path / "db.sock"),
                 "daemons": {label: (pid, started[pid], ns) for label, (pid, ns) in labels.items()}}
        result = normal_user.python(CRAFT, home, CRAFT=json.dumps(craft))
        assert result.stdout.strip() == "crafted", result.stderr[-2000:]
        users_db = psutil.Process(json.loads((home / "accounting" / "run" / "mariadbd.json").read_text())["pid"])

        monkeypatch.setenv("GTC_HOME", str(home))
        api.delete_cluster("bait")

        assert (victim / "precious").read_text() == "root's"
        assert made.is_dir() and (socket_dir / "munge.socket").exists()
        alive = [p.poll() is None for p in procs]
        assert alive == [True, True, True], "root's processes were signalled by a user's record"
        assert len(psutil.Process(procs[1].pid).children()) == 1
        assert not (home / "clusters" / "bait").exists()  # the user's own folder goes
        # Nothing done in the user's accounting/: no lock made through its link, no marker
        # unlinked where clusters/ leads, no login to the socket its run/ names.
        assert not os.path.lexists(planted)
        assert sorted(p.name for p in marks.iterdir()) == ["bait", "precious"]
        assert db_connections == []
        assert users_db.is_running()  # the user's other cluster still has a folder

        api.delete_cluster("bait-link")  # its run/ leads to a folder of root's records
        assert sorted(p.name for p in records.iterdir()) == ["precious.json", "slurmctld.json"]
        assert not (home / "clusters" / "bait-link").exists()
        assert api.list_clusters(with_status=False) == []
        # The user's last cluster is gone: its database is stopped, as the user's process it is.
        assert sleep_until(lambda: not users_db.is_running() or users_db.status() == psutil.STATUS_ZOMBIE, 30)
        assert db_connections == [] and not os.path.lexists(planted)
    finally:
        db_server.close()
        for p in procs:
            for child in psutil.Process(p.pid).children() if p.poll() is None else []:
                child.kill()
            p.kill()
            p.wait()


# gtc-test's records: one naming a folder outside its clusters/, one its own cluster folder
# with a slurm.conf of its own (which could name plugins for Slurm's commands to load).
CRAFT_TWO = """
import os
from pathlib import Path
from jupyter_gtc.state import ClusterRecord, open_store
from jupyter_gtc.spec import parse_cluster_spec
from tests.conftest import small_gpu_spec
home = Path(os.environ["GTC_HOME"])
store = open_store(home)
own = home / "clusters" / "own"
(own / "etc").mkdir(parents=True)
(own / "etc" / "slurm.conf").write_text("PluginDir=" + str(home) + "\\n")
for name, folder in (("own", own), ("outside", Path(os.environ["OUTSIDE"]))):
    spec = parse_cluster_spec(small_gpu_spec(name, nodes=1)).to_json()
    runtime = {"dir": str(folder), "user": {"uid": 0, "name": "root"}, "node_ports": {}, "node_slots": {}}
    store.add_cluster(ClusterRecord(name, "local", "RUNNING", spec, runtime))
print("crafted")
"""


def test_root_never_runs_slurms_commands_with_a_slurm_conf_a_user_wrote(normal_user, tmp_path, monkeypatch):
    from jupyter_gtc.exceptions import BackendUnavailable

    outside = tmp_path / "outside"
    (outside / "etc").mkdir(parents=True)
    home = normal_user.new_home()
    result = normal_user.python(CRAFT_TWO, home, OUTSIDE=str(outside))
    assert result.stdout.strip() == "crafted", result.stderr[-2000:]
    monkeypatch.setenv("GTC_HOME", str(home))

    with pytest.raises(BackendUnavailable, match="not in"):
        api.cluster_env("outside")
    with pytest.raises(BackendUnavailable, match=f"runs as {normal_user.name}"):
        api.cluster_env("own")
    # Listing says so, without running sinfo as root.
    problems = {c.name: c.problem for c in api.list_clusters()}
    assert f"run them as {normal_user.name}" in problems["own"] and "not in" in problems["outside"]
    for name in ("own", "outside"):
        api.delete_cluster(name)
    assert api.list_clusters(with_status=False) == [] and (outside / "etc").is_dir()


def test_root_removes_no_made_folder_through_a_link_of_the_users(normal_user, tmp_path):
    from jupyter_gtc.backends import storage

    # A folder an admin gave the user in a folder of root's: the user cannot remove it, and root
    # must not for it, by a made_dirs entry that reaches it through the user's link.
    site, user = tmp_path / "site", (normal_user.uid, normal_user.pw.pw_gid)
    site.mkdir(mode=0o755)
    (site / "data").mkdir()
    os.chown(site / "data", *user)
    home = normal_user.new_home()
    (home / "link").symlink_to(site)
    os.lchown(home / "link", *user)
    (home / "own").mkdir()
    os.chown(home / "own", *user)
    storage.remove_made_dirs({"made_dirs": [str(home / "link" / "data"), str(home / "own")]}, normal_user.uid, 0)
    assert (site / "data").is_dir()
    assert not (home / "own").exists()  # the user's own empty folder, reached through no link, goes

"""What another local user must never get from a local cluster: the munge key of a cluster
being created (with it, credentials for any uid), nor root's help in removing root's folders or
killing root's processes by a record it wrote into its own state store.

These run as root (CI does) and use ``gtc-test`` (tests/non_root.py) as the other user.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import tempfile
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
    a folder everyone can reach, under umask 022: where a file's mode is all that protects it."""
    home = Path(tempfile.mkdtemp(prefix="gtc-open-", dir="/tmp"))
    home.chmod(0o755)
    monkeypatch.setenv("GTC_HOME", str(home))
    umask = os.umask(0o022)
    try:
        yield home
    finally:
        os.umask(umask)
        shutil.rmtree(home, ignore_errors=True)


def test_another_user_never_reads_the_munge_key_while_a_cluster_is_created(slurm_available, normal_user, open_home):
    root = open_home / "clusters" / "keyrace"
    key, stop = root / "munge" / "munge.key", open_home / "stop-reading"
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
# root's, whose storage and munge folders are root's, and whose daemons are root's processes.
CRAFT = """
import json, os
from pathlib import Path
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
           "munge_socket_dir": given["socket"], "node_ports": {}, "node_slots": {}}
spec = parse_cluster_spec(small_gpu_spec("bait", nodes=1)).to_json()
open_store(home).add_cluster(ClusterRecord("bait", "local", "RUNNING", spec, runtime))
print("crafted")
"""


def test_root_deleting_a_users_cluster_touches_no_folder_or_process_of_roots(normal_user, tmp_path, monkeypatch):
    victim, made, socket_dir = tmp_path / "victim", tmp_path / "made", tmp_path / "socket"
    for folder in (victim, made, socket_dir):
        folder.mkdir()
    (victim / "precious").write_text("root's")
    (socket_dir / "munge.socket").write_text("root's")
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
        craft = {"victim": str(victim), "made": str(made), "socket": str(socket_dir),
                 "daemons": {label: (pid, started[pid], ns) for label, (pid, ns) in labels.items()}}
        result = normal_user.python(CRAFT, home, CRAFT=json.dumps(craft))
        assert result.stdout.strip() == "crafted", result.stderr[-2000:]

        monkeypatch.setenv("GTC_HOME", str(home))
        api.delete_cluster("bait")

        assert (victim / "precious").read_text() == "root's"
        assert made.is_dir() and (socket_dir / "munge.socket").exists()
        alive = [p.poll() is None for p in procs]
        assert alive == [True, True, True], "root's processes were signalled by a user's record"
        assert len(psutil.Process(procs[1].pid).children()) == 1
        assert api.list_clusters(with_status=False) == []
        assert not (home / "clusters" / "bait").exists()  # the user's own folder goes
    finally:
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

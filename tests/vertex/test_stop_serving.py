"""Stopping a cluster's local Vertex endpoints signals only processes its records' writer
runs, really and effectively: root deleting a normal user's cluster reads that user's
endpoint records, which may name any process, a set-uid program of root's among them."""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import psutil

from jupyter_gtc.services.vertex_local import stop_serving
from tests.non_root import normal_user, normal_user_account  # noqa: F401  (fixtures)

# Run as the normal user: start each program given, and record it as an endpoint of cluster c
# (on ports 1, 2, ...) once it runs that program (a set-uid one has root's effective uid by then).
RECORD = """
import json, socket, subprocess, sys, time
from pathlib import Path
import psutil
from jupyter_gtc.vertex.local_endpoint import LocalEndpoint, write_endpoint_file
home, pids = Path(sys.argv[1]), []
for port, program in enumerate(sys.argv[2:], start=1):
    child = subprocess.Popen([program, "300"], start_new_session=True, stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # holds none of our pipes
    proc = psutil.Process(child.pid)
    give_up = time.monotonic() + 60
    while proc.cmdline()[:1] != [program] and time.monotonic() < give_up:
        time.sleep(0.05)
    process = {"pid": child.pid, "host": socket.gethostname(), "started": proc.create_time()}
    write_endpoint_file(home, LocalEndpoint("c", "127.0.0.1", port, "t", process, 0))
    pids.append(child.pid)
print(json.dumps(pids))
"""


def test_root_stops_only_what_the_records_writer_runs_really_and_effectively(normal_user):
    folder = Path(tempfile.mkdtemp(prefix="gtc-setuid-", dir="/tmp"))
    try:
        folder.chmod(0o755)
        set_uid = folder / "sleep"
        shutil.copy(shutil.which("sleep"), set_uid)
        set_uid.chmod(0o4755)  # root's: whoever runs it runs it with root's effective uid
        home = normal_user.new_home()
        ran = normal_user.run([normal_user.python_exe, "-c", RECORD, str(home), str(set_uid), shutil.which("sleep")],
                              normal_user.env(home))
        assert ran.returncode == 0, ran.stderr
        root_effective, users_own = (psutil.Process(pid) for pid in json.loads(ran.stdout))
        assert root_effective.uids()[:2] == (normal_user.uid, 0)  # real: the user's; effective: root's

        assert stop_serving(home, "c") == [2]  # as root
        assert root_effective.is_running() and root_effective.status() != psutil.STATUS_ZOMBIE
        assert not users_own.is_running() or users_own.status() == psutil.STATUS_ZOMBIE
        assert [p.name for p in (home / "vertex" / "endpoints").iterdir()] == ["1.json"]  # kept: not ours to stop
    finally:
        shutil.rmtree(folder)

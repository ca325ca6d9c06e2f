"""The host contract (jupyter_gtc/hosts), run against every host there is: this machine's,
and a login node's over a real OpenSSH server (tests/hosts/sshd.py). Hostile names
throughout: a path is never a shell word, here or on the far side of ssh."""

from __future__ import annotations

import os
import stat
import threading

import pytest

from jupyter_gtc.exceptions import CommandError
from jupyter_gtc.hosts import LOCAL, Host, RangeReader
from jupyter_gtc.metrics.reader import MetricsReader
from jupyter_gtc.services.logs import LogFollower, prefetch, read_log_range, tail_lines

HOSTILE = ["plain", "with space", "quote's \"both\"", "$(touch pwned)", "-dash", "semi;colon", "new\nline", "ünï"]


@pytest.fixture(params=["local", "ssh"])
def host(request) -> Host:
    return LOCAL if request.param == "local" else request.getfixturevalue("ssh_host")


@pytest.mark.parametrize("name", HOSTILE)
def test_files_with_hostile_names_are_written_read_listed_and_removed(host, tmp_path, name):
    folder = tmp_path / name / "sub"
    host.make_dirs(folder)
    host.write(folder / name, b"0123456789")
    assert host.read(folder / name) == b"0123456789"
    assert host.read(folder / name, 3, 4) == b"3456"
    assert host.read(folder / name, 8, 100) == b"89"  # fewer only at the end
    st = host.stat(folder / name)
    assert (st.size, st.is_dir) == (10, False)
    assert host.stat(folder).is_dir
    assert [(e.name, e.is_dir, e.is_file) for e in host.list_dir(folder)] == [(name, False, True)]
    host.remove_tree(tmp_path / name)
    assert host.stat(tmp_path / name) is None
    assert not (tmp_path / "pwned").exists() and not os.path.exists("pwned")


def test_what_is_not_there(host, tmp_path):
    assert host.stat(tmp_path / "none") is None
    assert host.list_dir(tmp_path / "none") is None
    host.write(tmp_path / "file", b"x")
    assert host.list_dir(tmp_path / "file") is None  # no folder
    with pytest.raises(FileNotFoundError):
        host.read(tmp_path / "none")
    with pytest.raises(FileNotFoundError):
        host.open_read(tmp_path / "none")
    host.remove_tree(tmp_path / "none")  # nothing there is fine


def test_make_dirs_can_refuse_a_folder_that_exists(host, tmp_path):
    host.make_dirs(tmp_path / "a" / "b")
    host.make_dirs(tmp_path / "a" / "b")
    with pytest.raises(FileExistsError):
        host.make_dirs(tmp_path / "a" / "b", exist_ok=False)


def test_make_dirs_makes_a_folder_its_users_alone_from_its_creation(host, tmp_path):
    old = os.umask(0o022)  # (this machine's: the local host's; the remote one has its own)
    try:
        host.make_dirs(tmp_path / "jobs" / "job", exist_ok=False, mode=0o700)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "jobs" / "job").st_mode) == 0o700


def test_a_listing_does_not_follow_links(host, tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "file").write_bytes(b"")
    (tmp_path / "to-real").symlink_to(tmp_path / "real")
    entries = {e.name: (e.is_dir, e.is_file) for e in host.list_dir(tmp_path)}
    assert entries == {"real": (True, False), "file": (False, True), "to-real": (False, False)}


def test_a_reader_sees_the_old_file_or_the_new_one_never_half(host, tmp_path):
    path = tmp_path / "job.sbatch"
    old, new = b"a" * 1_000_000, b"b" * 2_000_000
    host.write(path, old)
    seen, stop = set(), threading.Event()

    def read():
        while not stop.is_set():
            data = host.read(path)
            seen.add((len(data), data[:1]))

    reader = threading.Thread(target=read)
    reader.start()
    for _ in range(20 if host is LOCAL else 3):  # over ssh each write is a round trip
        host.write(path, new)
        host.write(path, old)
    stop.set()
    reader.join()
    assert seen <= {(len(old), b"a"), (len(new), b"b")}, seen
    assert [e.name for e in host.list_dir(tmp_path)] == ["job.sbatch"]  # no partial file left


def test_only_regular_files_are_read_and_with_an_owner_only_theirs(host, tmp_path):
    """A job names its own output: a FIFO there held a reader (a REST thread, the feed) until
    someone wrote to it; a device or /proc reads what is no job's; another user's file is theirs."""
    import pwd

    os.mkfifo(tmp_path / "fifo")
    me = pwd.getpwuid(os.getuid()).pw_name
    host.write(tmp_path / "mine", b"mine\n")
    outcome: list = []

    def read_fifo():
        try:
            host.read(tmp_path / "fifo")
        except PermissionError as e:
            outcome.append(e.strerror)

    reader = threading.Thread(target=read_fifo, daemon=True)
    reader.start()
    reader.join(30)
    assert outcome == ["not a regular file"]
    for path in ("/proc/self/environ", "/dev/zero"):
        with pytest.raises(PermissionError):
            host.read(path, 0, 10)
    assert host.read(tmp_path / "mine", owner=me) == b"mine\n"
    with pytest.raises(PermissionError, match="not owned by nobody"):
        host.read(tmp_path / "mine", owner="nobody")
    view = host.owned_by("nobody")
    assert view.read_many([(tmp_path / "mine", 0, -1), (tmp_path / "none", 0, -1)]) == [None, None]
    assert host.owned_by(me).read_many([(tmp_path / "mine", 0, -1)]) == [b"mine\n"]
    with pytest.raises(PermissionError):
        view.open_read(tmp_path / "mine")


def test_run_takes_an_argument_list_and_adds_env(host, tmp_path):
    weird = "$(touch pwned); echo no"
    result = host.run(["printf", "%s|%s", weird, "$HOME"], env={"GTC_TEST": "x y"})
    assert result.stdout == f"{weird}|$HOME"
    assert host.run(["sh", "-c", 'printf %s "$GTC_TEST"'], env={"GTC_TEST": "x y"}).stdout == "x y"
    with pytest.raises(CommandError) as refused:
        host.run(["sh", "-c", "echo nope >&2; exit 3"])
    assert refused.value.returncode == 3 and "nope" in str(refused.value)
    assert host.run(["false"], check=False).returncode == 1


def test_many_reads_come_back_in_order_with_none_where_there_is_no_file(host, tmp_path):
    files = [tmp_path / f"{HOSTILE[i % len(HOSTILE)]}-{i}.out" for i in range(150)]  # more than one batch
    for i, path in enumerate(files):
        path.write_bytes(f"line {i}\n".encode() * (i % 3 + 1))
    asked = [(path, 5, 100) for path in files] + [(tmp_path / "never written", 0, 10)]
    found = host.read_many(asked)
    assert found[:-1] == [path.read_bytes()[5:] for path in files] and found[-1] is None


class CountingHost(Host):
    """A real host (this machine's) that counts what goes over its seam: what an SSH host's
    round trips and bytes would be."""

    name = "counting"

    def __init__(self):
        self.calls: list[str] = []
        self.bytes_read = 0

    def run(self, argv, **kw):
        self.calls.append("run")
        return LOCAL.run(argv, **kw)

    def stat(self, path):
        self.calls.append("stat")
        return LOCAL.stat(path)

    def list_dir(self, path):
        self.calls.append("list_dir")
        return LOCAL.list_dir(path)

    def read(self, path, offset=0, size=-1):
        self.calls.append("read")
        data = LOCAL.read(path, offset, size)
        self.bytes_read += len(data)
        return data

    def read_many(self, requests):
        self.calls.append("read_many")
        found = LOCAL.read_many(requests)
        self.bytes_read += sum(len(data or b"") for data in found)
        return found

    def write(self, path, data):
        LOCAL.write(path, data)

    def make_dirs(self, path, exist_ok=True, mode=0o777):
        LOCAL.make_dirs(path, exist_ok, mode)

    def remove_tree(self, path):
        LOCAL.remove_tree(path)


def test_a_followed_log_costs_the_new_bytes_only(tmp_path):
    host, log = CountingHost(), tmp_path / "slurm-1.out"
    log.write_bytes(b"x" * 100_000 + b"\n")
    follower = LogFollower(log, host=host)
    assert len(follower.read_new()) == 100_001
    with open(log, "ab") as f:
        f.write("step 2 ü\n".encode())
    before = host.bytes_read
    assert follower.read_new() == "step 2 ü\n"
    assert host.bytes_read - before == len("step 2 ü\n".encode()) and host.calls[-1] == "read"
    assert tail_lines(log, 1, host=host) == "step 2 ü\n"
    page = read_log_range(log, None, 20, host)
    assert page["text"] == "step 2 ü\n" and page["size"] == 100_011


def test_a_poll_reads_every_followed_logs_new_lines_in_one_request(tmp_path):
    host = CountingHost()
    logs = [tmp_path / f"slurm-{i}.out" for i in range(100)]
    followers = [LogFollower(path, host=host) for path in logs]
    for round_ in range(2):
        for i, path in enumerate(logs):
            with open(path, "a") as f:
                f.write(f"job {i} step {round_}\n")
        host.calls.clear()
        prefetch(followers)
        # What a panel does at each tick: read until nothing is new.
        assert ["".join(iter(f.read_new, "")) for f in followers] == [f"job {i} step {round_}\n" for i in range(100)]
        assert host.calls == ["read_many"]
    # A read with nothing prefetched (or at another offset) asks the host itself, as before.
    with open(logs[0], "a") as f:
        f.write("more\n")
    assert followers[0].read_new() == "more\n" and host.calls[-1] == "read"


def test_a_range_reader_reads_through_its_host(tmp_path):
    host, path = CountingHost(), tmp_path / "f"
    path.write_bytes(b"0123456789")
    with RangeReader(host, path) as f:
        assert f.seek(-3, os.SEEK_END) == 7 and f.read() == b"789" and f.tell() == 10
        f.seek(2)
        assert f.read(3) == b"234"
    assert host.calls.count("read") == 2


def test_metrics_are_read_through_the_host(tmp_path):
    from tensorboardX import SummaryWriter

    with SummaryWriter(str(tmp_path / "logs")) as writer:
        for step in range(5):
            writer.add_scalar("train/loss", 1.0 / (step + 1), step)
    host = CountingHost()
    scalars = MetricsReader(tmp_path / "logs", host=host).read_new()
    assert [s.step for s in scalars] == [0, 1, 2, 3, 4]
    assert {"stat", "list_dir", "read"} <= set(host.calls) and host.bytes_read > 0

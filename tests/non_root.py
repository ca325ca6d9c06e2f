"""Run tests as an ordinary (non-root) user: make the user, let it reach this checkout and its
virtual environment, and run processes as it.

The local backend runs a normal user's cluster as that user; the tests that prove it run as
root (CI does) and start a Python process as the user ``gtc-test``:

    def test_something(normal_user):
        home = normal_user.new_home()        # a GTC_HOME the user owns
        result = normal_user.python(CODE, home)

``normal_user`` skips where this process is not root, fails, saying what to fix, where the
user cannot reach the repository or the venv, and holds the user for one test at a time.
"""

from __future__ import annotations

import contextlib
import fcntl
import grp
import os
import pwd
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

USER = "gtc-test"
REPO = Path(__file__).resolve().parent.parent
# What only root's clusters have: network namespaces (local.network: namespaces), mount paths
# made in root's folders (/mnt/...), munge's socket folder in /run.
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, /mnt, /run); "
                                "tests/backends/test_non_root.py covers a normal user's cluster")


def ensure_user(name: str = USER) -> pwd.struct_passwd:
    """The ordinary user ``name``, made (with a home and a group of its own) if missing. Idempotent."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    result = subprocess.run(["useradd", "--create-home", "--user-group", "--shell", "/bin/bash", name],
                            capture_output=True, text=True, timeout=60)
    if result.returncode not in (0, 9):  # 9: made meanwhile by another process
        raise RuntimeError(f"useradd {name} failed ({result.returncode}): {result.stderr.strip()}")
    return pwd.getpwnam(name)


def blocked_folders(user: pwd.struct_passwd, paths: list[Path]) -> list[Path]:
    """Folders above (and including) each of ``paths`` that ``user`` may not search (enter)."""
    groups = {user.pw_gid, *(g.gr_gid for g in grp.getgrall() if user.pw_name in g.gr_mem)}
    blocked = []
    for path in paths:
        for folder in [path, *path.parents] if path.is_dir() else list(path.parents):
            st = folder.stat()
            if st.st_uid == user.pw_uid:
                ok = st.st_mode & stat.S_IXUSR
            elif st.st_gid in groups:
                ok = st.st_mode & stat.S_IXGRP
            else:
                ok = st.st_mode & stat.S_IXOTH
            if not ok and folder not in blocked:
                blocked.append(folder)
    return blocked


def grant_search(user: pwd.struct_passwd, folders: list[Path]) -> list[Path]:
    """Let ``user`` search (enter, not list) each of ``folders``: an ACL entry for that user
    alone (``setfacl``, Debian package acl), or, without setfacl, search for all (``o+x``).
    Left in place afterwards: another test session on this machine may rely on it meanwhile.
    Returns the folders changed; raises, saying what to do, where neither works."""
    for folder in folders:
        if shutil.which("setfacl"):
            argv = ["setfacl", "-m", f"u:{user.pw_name}:x", str(folder)]
            result = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            if result.returncode == 0:
                continue
        try:
            folder.chmod(folder.stat().st_mode | stat.S_IXOTH)
        except OSError as e:
            raise RuntimeError(f"{user.pw_name} cannot enter {folder} (on the way to this checkout, its .venv or "
                               f"its Python), and it cannot be let in: {e.strerror}; run `chmod o+x {folder}` "
                               f"or `setfacl -m u:{user.pw_name}:x {folder}`, or clone where others can read") from None
    return list(folders)


def processes_of(uid: int) -> list[psutil.Process]:
    """Every live process whose real user is ``uid``."""
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info["uids"]
        if uids is not None and uids.real == uid and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def processes_left(uid: int, settle: float = 30) -> list[str]:
    """The command lines of what ``uid`` still runs after up to ``settle`` seconds: time for a
    Slurm client that a process of the user started and left (a poller's ``squeue`` against
    a controller just stopped gives up after its own timeout) to end; a daemon or a job's
    task does not end by itself, so it is still here."""
    deadline = time.monotonic() + settle
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = []
    for proc in processes_of(uid):
        try:
            left.append(" ".join(proc.cmdline()) or proc.name())
        except psutil.Error:
            pass
    return left


def kill_processes_of(uid: int) -> list[str]:
    """Kill, one by one (by PID), what ``uid`` still runs; returns their command lines."""
    procs = processes_of(uid)
    names = []
    for proc in procs:
        try:
            names.append(" ".join(proc.cmdline()) or proc.name())
            proc.send_signal(signal.SIGKILL)
        except psutil.Error:
            pass
    psutil.wait_procs(procs, timeout=10)
    return names


@dataclass
class NormalUser:
    """An ordinary user that can run this checkout's Python."""

    pw: pwd.struct_passwd
    python_exe: str = sys.executable
    homes: list[Path] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.pw.pw_name

    @property
    def uid(self) -> int:
        return self.pw.pw_uid

    def new_home(self) -> Path:
        """A fresh GTC_HOME that the user owns, in a folder everyone can enter (/tmp), with a
        short path (munge's socket lives under it)."""
        home = Path(tempfile.mkdtemp(prefix="gtc-nr-", dir="/tmp"))
        os.chown(home, self.uid, self.pw.pw_gid)
        self.homes.append(home)
        return home

    def env(self, gtc_home: Path | None = None, **extra: str) -> dict[str, str]:
        """A clean environment for the user: its HOME, this venv first on PATH, GTC_HOME."""
        env = {"HOME": self.pw.pw_dir, "USER": self.name, "LOGNAME": self.name, "LANG": "C.UTF-8",
               "PATH": f"{Path(self.python_exe).parent}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
               "PYTHONPATH": str(REPO), **({"GTC_HOME": str(gtc_home)} if gtc_home else {}), **extra}
        return env

    def run(self, argv: list[str], env: dict[str, str] | None = None, timeout: float = 300,
            cwd: Path | None = None) -> subprocess.CompletedProcess:
        """Run ``argv`` (a list, no shell) as the user, with ``env`` (default: ``self.env()``) only."""
        return subprocess.run(["runuser", "-u", self.name, "--", *argv], env=env or self.env(), cwd=cwd or "/tmp",
                              capture_output=True, text=True, timeout=timeout)

    def python(self, code: str, gtc_home: Path | None = None, timeout: float = 300,
               **env: str) -> subprocess.CompletedProcess:
        """Run Python ``code`` as the user, with this venv's interpreter and GTC_HOME."""
        return self.run([self.python_exe, "-c", code], self.env(gtc_home, **env), timeout=timeout)

    def cleanup(self) -> list[str]:
        """Kill what the user still runs; remove the GTC_HOMEs made. Returns what was killed."""
        killed = kill_processes_of(self.uid)
        for home in self.homes:
            shutil.rmtree(home, ignore_errors=True)
        self.homes.clear()
        return killed


@pytest.fixture(scope="session")
def normal_user_account() -> NormalUser:
    """``gtc-test``, made if missing and able to run this checkout's Python; skipped where
    this process is not root (it cannot make or become another user). Use ``normal_user``."""
    if os.geteuid() != 0:
        pytest.skip("making and becoming another user needs root; these tests run as root (CI does)")
    if shutil.which("runuser") is None:
        pytest.fail("runuser (Debian package util-linux) is missing; apt-get install -y util-linux")
    user = NormalUser(ensure_user())
    # The checkout, its venv and the Python the venv was made from (pyenv's is often in /root).
    needed = [REPO, Path(sys.prefix), Path(sys.base_prefix), Path(os.path.realpath(sys.executable)).parent]
    granted = grant_search(user.pw, blocked_folders(user.pw, needed))
    if granted:
        print(f"\nlet {user.name} enter {', '.join(map(str, granted))}, on the way to this checkout and its Python")
    # Under the lock: another worker's test ends by killing whatever the user runs, this probe too.
    with _holding_the_user(user):
        probe = user.python("import jupyter_gtc.api, psutil; print('ok')", timeout=120)
    if probe.stdout.strip() != "ok":
        pytest.fail(f"{user.name} cannot run {sys.executable} on this checkout ({REPO}): "
                    f"{(probe.stderr or probe.stdout).strip()[-800:]}\nMake the repository and its .venv readable "
                    f"by others (chmod -R o+rX), or clone it where they are")
    return user


@pytest.fixture
def normal_user(normal_user_account: NormalUser):
    """The user for one test, alone: other test sessions on this machine (a CI loop) use the
    same user, so each test holds a lock while it runs, and afterwards kills what the user
    still runs (by PID) and removes the GTC_HOMEs it made."""
    user = normal_user_account
    with _holding_the_user(user):
        try:
            user.cleanup()  # what a session killed mid-test left
            yield user
        finally:
            user.cleanup()
            _wait_gone(user.uid)


@contextlib.contextmanager
def _holding_the_user(user: NormalUser):
    """Hold the lock every test session on this machine takes before it runs anything as the user."""
    with open(LOCK, "a") as lock:
        deadline = time.monotonic() + LOCK_WAIT
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    pytest.fail(f"another test session has used {user.name} for over {LOCK_WAIT:.0f} s "
                                f"(it holds {LOCK}); wait for it, or end it")
                time.sleep(0.5)
        yield


LOCK = Path("/tmp/jupyter_gtc-normal-user.lock")
LOCK_WAIT = 900.0


def _wait_gone(uid: int, timeout: float = 5) -> None:
    deadline = time.monotonic() + timeout
    while processes_of(uid) and time.monotonic() < deadline:
        time.sleep(0.1)

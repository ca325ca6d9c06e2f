"""A local cluster's accounting database (``orchestrator_spec.slurm_spec.accounting``, on by
default): slurmdbd, so that ``sacct``, ``sacctmgr`` and ``sreport`` work on it as on a site's
cluster, and finished jobs are remembered after slurmctld forgets them (its ``MinJobAge``).
Without it, sacct-based tools (submitit, dask-jobqueue) see every job's state as UNKNOWN.

One MariaDB serves every cluster of a GTC_HOME: started by the first create that needs it,
stopped when the last cluster using it is deleted. Nothing of the machine's own is touched
(no system service, no ``/var/lib/mysql``). Under ``<GTC_HOME>/accounting/`` (0700):

    db                    MariaDB's data: a link to a private folder in RAM, else a folder
                          (db_files.py: why RAM, and what it costs); db-template/ its first copy
    run/mysqld.sock       its socket, through which this user sets each cluster's database
                          password (unix_socket login: no password); run/mariadbd.json its record
    clusters/<name>       one file per cluster using it; the database stops when none is left
    lock                  held while a create or a delete joins or leaves (flock)
    db.json               its port (127.0.0.1 only)

Each cluster keeps a slurmdbd of its own (clusters have different munge keys, and slurmdbd
trusts one), with its own database (``acct_<name>``) and its own MariaDB user, whose
password is new at every start of that slurmdbd and written only in the cluster's
``etc/slurmdbd.conf`` (0600). slurmdbd listens where slurmctld does, so that a login node's
``sacct`` reaches it as Slurm's other commands reach slurmctld; slurm.conf names the port of
the cluster's relay there (dbd_relay.py), which forwards to slurmdbd's own without the 40 ms
each Slurm message otherwise waits over loopback (slurmctld's start: ~1 s -> ~0.15 s).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .. import _process
from .._ports import free_ports, listening
from ..exceptions import ClusterStartError, CommandError
from ..slurm.render import AccountingLayout, render_slurmdbd_conf
from . import daemons, db_files, owned

DB_LABEL, DBD_LABEL, RELAY_LABEL = "mariadbd", "slurmdbd", "slurmdbd-relay"
RELAY = Path(__file__).with_name("dbd_relay.py")
# Program -> Debian package that provides it (needed only by clusters that keep accounting).
REQUIRED_PROGRAMS = {"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server",
                     "mariadb": "mariadb-client", "slurmdbd": "slurmdbd", "sacctmgr": "slurm-client"}
READY_TIMEOUT = 60.0
# Small on purpose: a GTC_HOME's accounting holds a few thousand rows, and the defaults would
# take 128 MB of memory and 100 MB of redo log, and grow the system tablespace 64 MB at a time
# (its files are in RAM: db_files.py).
DB_SIZES = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M", "--innodb-autoextend-increment=1",
            "--innodb-temp-data-file-path=ibtmp1:1M:autoextend"]
DB_SPEED = ["--innodb-flush-log-at-trx-commit=2", "--innodb-doublewrite=0"]


def missing_packages(path: str) -> list[str]:
    return sorted({pkg for prog, pkg in REQUIRED_PROGRAMS.items() if shutil.which(prog, path=path) is None})


def layout(root: Path, cluster: str, runtime: dict[str, Any], dbd_addr: str, slurm_user: str,
           munge_socket: Path) -> AccountingLayout:
    """The cluster's accounting layout; its slurmdbd's port is chosen once and kept in
    ``runtime``. MariaDB's port is the shared database's, filled in by ``start``."""
    ports = runtime.get("accounting")
    if not ports:
        dbd_port, relay_port = free_ports(2)
        ports = runtime["accounting"] = {"dbd_port": dbd_port, "relay_port": relay_port}
    plain = cluster.replace("-", "_")  # names hold no "_": one name, one database
    return AccountingLayout(root=root, dbd_host=runtime["hostname"], dbd_addr=dbd_addr, dbd_port=ports["dbd_port"],
                            db_port=0, slurm_user=slurm_user, munge_socket=munge_socket,
                            db_user=f"slurm_{plain}", db_name=f"acct_{plain}",
                            relay_port=ports.get("relay_port"),  # none in a cluster made before relays
                            jwt_key=runtime.get("jwt_key"))  # slurmrestd's token for accounting (slurm_rest.py)


def start(acct: AccountingLayout, home: Path, cluster: str, env: dict[str, str], progress) -> None:
    """Join the GTC_HOME's database (starting it where none runs) and start the cluster's
    slurmdbd, and its relay, where they do not run. Before slurmctld starts: it loads its
    associations and TRES from slurmdbd as it starts."""
    root, run = acct.root, acct.root / "run"
    relay = bool(acct.relay_port) and daemons.find(RELAY_LABEL, run) is None
    if relay:  # first: its Python starts while slurmdbd does
        progress("starting the accounting relay")
        daemons.start(RELAY_LABEL, [sys.executable, "-I", str(RELAY), acct.dbd_addr, str(acct.relay_port),
                                    acct.dbd_addr, str(acct.dbd_port)],
                      run, root / "log" / "slurmdbd-relay.out", env, plain=True)
    if daemons.find(DBD_LABEL, run) is None:
        _start_dbd(acct, home, cluster, env, progress)
    if relay:
        _wait(lambda: listening(acct.relay_port), "the accounting relay", root / "log" / "slurmdbd-relay.out",
              alive=lambda: daemons.find(RELAY_LABEL, run) is not None, longest=0.02)


def _start_dbd(acct: AccountingLayout, home: Path, cluster: str, env: dict[str, str], progress) -> None:
    root, run = acct.root, acct.root / "run"
    # slurmctld has saved nothing yet: job ids start again at 1, so whatever a database of
    # that name holds (a cluster of the same name whose delete died) is another cluster's.
    fresh = not any((root / "state").iterdir())
    acct = dataclasses.replace(acct, db_port=join(home, cluster, acct.slurm_user, env, progress))
    progress("starting slurmdbd")
    password = secrets.token_urlsafe(24)
    _sql(home, acct.slurm_user, env,
         (f"DROP DATABASE IF EXISTS {acct.db_name}; " if fresh else "")
         + f"CREATE USER IF NOT EXISTS '{acct.db_user}'@'127.0.0.1'; "
           f"ALTER USER '{acct.db_user}'@'127.0.0.1' IDENTIFIED BY '{password}'; "
           f"GRANT ALL ON {acct.db_name}.* TO '{acct.db_user}'@'127.0.0.1';")
    conf = root / "etc" / "slurmdbd.conf"
    conf.unlink(missing_ok=True)
    # Made 0600 from the start (the password is never readable by others, even for an
    # instant); slurmdbd refuses a config anyone else may read.
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(render_slurmdbd_conf(acct, password))
    daemons.start(DBD_LABEL, ["slurmdbd", "-D"], run, root / "log" / "slurmdbd.out", env, plain=_plain())
    # slurmdbd listens once its tables are made. slurmctld's registration then adds the cluster
    # (Slurm 22.05 does; `sacctmgr add cluster` first cost 0.3 s more, its messages ~40 ms
    # each over loopback).
    _wait(lambda: listening(acct.dbd_port),
          "slurmdbd", root / "log" / "slurmdbd.log",
          alive=lambda: daemons.find(DBD_LABEL, run) is not None, longest=0.02)  # read from /proc: cheap


def stop(run: Path, uid: int | None = None) -> None:
    """Stop the cluster's slurmdbd (after slurmctld: it sends its last records on its way out).
    (A MariaDB in the cluster's own folder is one of a cluster made before they were shared.)
    ``uid``: the cluster's user, whose processes alone are signalled (daemons.stop)."""
    # SIGTERM, of which it dies at once: its tree then ends by itself, where SIGKILLed it was
    # waited for until this machine's init reaped it (2 s here).
    daemons.stop(RELAY_LABEL, run, grace=2, uid=uid)
    daemons.stop(DBD_LABEL, run, grace=10, uid=uid)
    daemons.stop(DB_LABEL, run, grace=20, uid=uid)


def leave(acct: AccountingLayout, home: Path, cluster: str, env: dict[str, str], uid: int | None = None) -> None:
    """The cluster is gone: drop its database and user, and stop the database if no other
    cluster of ``home`` uses it. ``uid``: the cluster's user.

    Root deleting a normal user's cluster does none of that in the user's ``accounting/``
    (nor where GTC_HOME is not root's): the user writes every file there and can make any a
    link (``lock`` to a file root would create, ``clusters/`` to a folder whose entries root
    would unlink, ``run/mysqld.sock`` to a database of root's, where root would drop what the
    user's record names). Root only stops the user's database, signalling that user's
    processes alone, once no cluster folder of the user's is left."""
    folder = _folder(home)
    if not (owned.mine(home) and owned.mine(folder)):
        if uid is not None and uid != os.geteuid() and not _other_clusters(home, cluster):
            daemons.stop(DB_LABEL, folder / "run", grace=20, uid=uid)
        return
    with _locked(folder):
        if daemons.find(DB_LABEL, folder / "run") is not None:
            # (check=False: root deleting another user's cluster cannot log in as that user.)
            _sql(home, acct.slurm_user, env, f"DROP DATABASE IF EXISTS {acct.db_name}; "
                                             f"DROP USER IF EXISTS '{acct.db_user}'@'127.0.0.1';", check=False)
        (folder / "clusters" / cluster).unlink(missing_ok=True)
        if not _users(home):
            daemons.stop(DB_LABEL, folder / "run", grace=20)  # SIGTERM: InnoDB shuts down cleanly
            db_files.release(folder)


def join(home: Path, cluster: str, user: str, env: dict[str, str], progress) -> int:
    """Count ``cluster`` among the database's users, start the database if it does not run,
    and return its port. Under the lock: two creates at once start one database."""
    folder = _folder(home)
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    with _locked(folder):
        (folder / "clusters").mkdir(mode=0o700, exist_ok=True)
        (folder / "clusters" / cluster).touch(mode=0o600)
        if daemons.find(DB_LABEL, folder / "run") is None:
            progress("starting the accounting database (MariaDB), shared by this GTC_HOME's clusters")
            _start_database(home, user, env)
        return json.loads((folder / "db.json").read_text())["port"]


def _folder(home: Path) -> Path:
    return home / "accounting"


def _other_clusters(home: Path, cluster: str) -> bool:
    """Whether ``home``'s clusters/ holds a folder besides ``cluster``'s (listed through no link
    of another user's, owned.py)."""
    try:
        fd = owned.open_folder(home / "clusters")
    except OSError:
        return False
    try:
        return any(name != cluster for name in os.listdir(fd))
    finally:
        os.close(fd)


def _users(home: Path) -> list[str]:
    """The clusters counted as the database's users, less those whose folder has gone (a
    delete that died after removing it)."""
    marks = _folder(home) / "clusters"
    found = sorted(p.name for p in marks.iterdir()) if marks.is_dir() else []
    for name in [n for n in found if not (home / "clusters" / n).is_dir()]:
        (marks / name).unlink(missing_ok=True)
        found.remove(name)
    return found


@contextmanager
def _locked(folder: Path) -> Iterator[None]:
    fd = os.open(folder / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def _start_database(home: Path, user: str, env: dict[str, str]) -> None:
    folder = _folder(home)
    datadir, run, log = folder / "db", folder / "run", folder / "log"
    # A tmpdir of its own: MariaDB removes every #sql* file in its tmpdir when it starts (the
    # bootstrap of mariadb-install-db too), so in the shared /tmp one GTC_HOME's database start
    # removed another's temporary tables mid-install ("Unknown table 'mysql.tmp_user_sys'").
    tmp = folder / "tmp"
    for sub in (run, log, tmp):
        sub.mkdir(mode=0o700, exist_ok=True)
    # Root's mariadbd must be told to stay root; a normal user's runs as that user anyway.
    as_user = [f"--user={user}"] if os.geteuid() == 0 else []

    def install(where: Path) -> None:
        try:
            _process.run(["mariadb-install-db", "--no-defaults", f"--datadir={where}", *as_user, f"--tmpdir={tmp}",
                          "--skip-test-db", "--auth-root-authentication-method=socket", *DB_SIZES],
                         timeout=120, env=env)
        except CommandError as e:
            raise ClusterStartError(f"could not make the accounting database in {where}: {e}") from None

    db_files.prepare(folder, install)
    sock = run / "mysqld.sock"
    sock.unlink(missing_ok=True)
    port = _port(folder)
    record = folder / "db.json"
    record.unlink(missing_ok=True)
    fd = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # the user's alone, as all here
    with os.fdopen(fd, "w") as f:
        f.write(json.dumps({"port": port}))
    daemons.start(DB_LABEL, ["mariadbd", "--no-defaults", f"--datadir={datadir}", *as_user, f"--socket={sock}",
                             f"--tmpdir={tmp}", f"--port={port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                             "--skip-log-bin", f"--pid-file={run / 'mariadbd.pid'}",
                             *DB_SPEED,
                             f"--log-error={log / 'mariadbd.log'}", *DB_SIZES],
                  run, log / "mariadbd.out", env, plain=_plain())
    _wait(lambda: _sql(home, user, env, "SELECT 1", check=False).returncode == 0,
          "MariaDB", log / "mariadbd.log",
          alive=lambda: daemons.find(DB_LABEL, run) is not None)


def _port(folder: Path) -> int:
    """The database's last port where it is free (a database started again after a crash: the
    running slurmdbds' configs name that port), else a free one."""
    try:
        port = json.loads((folder / "db.json").read_text())["port"]
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", port))
        return port
    except (OSError, ValueError, KeyError, TypeError):
        return free_ports(1, "127.0.0.1")[0]


def _plain() -> bool:
    """A normal user's database daemons run without namespaces, as its munged does: in a user
    namespace they would be root there, and MariaDB's socket login would take the user for root."""
    return os.geteuid() != 0


def _sql(home: Path, user: str, env: dict[str, str], statements: str, check: bool = True) -> _process.Result:
    """Run SQL as ``user`` over the shared database's socket (unix_socket login). The statements
    go on standard input, never on a command line that ``ps`` shows."""
    return _process.run(["mariadb", "--no-defaults", f"--socket={_folder(home) / 'run' / 'mysqld.sock'}",
                         f"--user={user}"], input=statements, timeout=30, env=env, check=check)


def _wait(ready, name: str, log: Path, alive, longest: float = 0.3) -> None:
    """Until ``ready()``, looked at every ``longest`` seconds at most; a daemon no longer
    ``alive()`` fails at once, with its log's end."""
    deadline, delay = time.monotonic() + READY_TIMEOUT, 0.02
    while not ready():
        gone = not alive()
        if gone or time.monotonic() > deadline:
            try:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:])
            except OSError:
                tail = "(no log)"
            why = "exited before it answered" if gone else f"did not answer within {READY_TIMEOUT:.0f} s"
            raise ClusterStartError(f"{name} {why}; the end of {log}:\n{tail}")
        time.sleep(delay)
        delay = min(delay * 1.5, longest)

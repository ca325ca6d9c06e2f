"""A local cluster's accounting database, when its spec asks for one
(``orchestrator_spec.slurm_spec.accounting``): slurmdbd, over a MariaDB of the cluster's own,
so that ``sacct``, ``sacctmgr`` and ``sreport`` work on it as on a site's cluster, and finished
jobs are remembered after slurmctld forgets them (its ``MinJobAge``).

Nothing of the machine's own is touched: no system service, no ``/var/lib/mysql``. Under the
cluster's folder:

    db/                   MariaDB's data (made by mariadb-install-db at the cluster's creation)
    run/mysqld.sock       MariaDB's socket, through which the cluster's user sets the
                          database's password for slurmdbd (unix_socket login: no password)
    etc/slurmdbd.conf     0600: the only place that password is written (a new one at every start)
    log/mariadbd.log, log/slurmdbd.log

MariaDB listens on 127.0.0.1 only; slurmdbd where slurmctld listens, so that a login node's
``sacct`` reaches it as Slurm's other commands reach slurmctld.
"""

from __future__ import annotations

import os
import secrets
import shutil
import time
from pathlib import Path
from typing import Any

from .. import _process
from .._ports import free_ports
from ..exceptions import ClusterStartError, CommandError
from ..slurm.render import AccountingLayout, render_slurmdbd_conf
from . import daemons

DB_LABEL, DBD_LABEL = "mariadbd", "slurmdbd"
# Program -> Debian package that provides it (needed only by clusters that ask for accounting).
REQUIRED_PROGRAMS = {"mariadbd": "mariadb-server", "mariadb-install-db": "mariadb-server",
                     "mariadb": "mariadb-client", "slurmdbd": "slurmdbd", "sacctmgr": "slurm-client"}
READY_TIMEOUT = 60.0
# Small on purpose: a cluster's accounting holds a few thousand rows, and the defaults would
# take 128 MB of memory and 100 MB of redo log per cluster.
DB_SIZES = ["--innodb-buffer-pool-size=16M", "--innodb-log-file-size=4M"]


def missing_packages(path: str) -> list[str]:
    return sorted({pkg for prog, pkg in REQUIRED_PROGRAMS.items() if shutil.which(prog, path=path) is None})


def layout(root: Path, runtime: dict[str, Any], dbd_addr: str, slurm_user: str, munge_socket: Path) -> AccountingLayout:
    """The cluster's accounting layout; its ports are chosen once and kept in ``runtime``."""
    ports = runtime.get("accounting")
    if not ports:
        db_port, dbd_port = free_ports(2)
        ports = runtime["accounting"] = {"db_port": db_port, "dbd_port": dbd_port}
    return AccountingLayout(root=root, dbd_host=runtime["hostname"], dbd_addr=dbd_addr, dbd_port=ports["dbd_port"],
                            db_port=ports["db_port"], slurm_user=slurm_user, munge_socket=munge_socket)


def start(acct: AccountingLayout, cluster: str, env: dict[str, str], progress) -> None:
    """Start MariaDB and slurmdbd where they do not run, and register the cluster. Before
    slurmctld starts: it sends its records to slurmdbd from its first job on."""
    root, run = acct.root, acct.root / "run"
    if daemons.find(DB_LABEL, run) is None:
        progress("starting the accounting database (MariaDB)")
        _start_database(acct, env)
    if daemons.find(DBD_LABEL, run) is None:
        progress("starting slurmdbd")
        password = secrets.token_urlsafe(24)
        _sql(acct, env, f"CREATE USER IF NOT EXISTS '{acct.db_user}'@'127.0.0.1'; "
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
        _wait(lambda: _sacctmgr(env, "-n", "list", "cluster", check=False).returncode == 0,
              f"slurmdbd did not answer within {READY_TIMEOUT:.0f} s", root / "log" / "slurmdbd.log")
    # slurmctld registers with slurmdbd only as a cluster slurmdbd knows.
    found = _sacctmgr(env, "-n", "-P", "list", "cluster", "format=cluster").stdout.split()
    if cluster not in found:
        _sacctmgr(env, "-i", "add", "cluster", cluster)


def stop(run: Path) -> None:
    """Stop slurmdbd, then MariaDB (after slurmctld: it sends its last records on its way out)."""
    daemons.stop(DBD_LABEL, run, grace=10)
    daemons.stop(DB_LABEL, run, grace=20)  # SIGTERM: InnoDB shuts down cleanly


def _start_database(acct: AccountingLayout, env: dict[str, str]) -> None:
    root, run = acct.root, acct.root / "run"
    datadir, sock = root / "db", run / "mysqld.sock"
    # Root's mariadbd must be told to stay root; a normal user's runs as that user anyway.
    as_user = [f"--user={acct.slurm_user}"] if os.geteuid() == 0 else []
    if not (datadir / "mysql").is_dir():
        shutil.rmtree(datadir, ignore_errors=True)  # a half-made one, from a create that died
        try:
            _process.run(["mariadb-install-db", "--no-defaults", f"--datadir={datadir}", *as_user, "--skip-test-db",
                          "--auth-root-authentication-method=socket", *DB_SIZES], timeout=120, env=env)
        except CommandError as e:
            raise ClusterStartError(f"could not make the accounting database in {datadir}: {e}") from None
    sock.unlink(missing_ok=True)
    daemons.start(DB_LABEL, ["mariadbd", "--no-defaults", f"--datadir={datadir}", *as_user, f"--socket={sock}",
                             f"--port={acct.db_port}", "--bind-address=127.0.0.1", "--skip-name-resolve",
                             "--skip-log-bin", f"--pid-file={run / 'mariadbd.pid'}",
                             f"--log-error={root / 'log' / 'mariadbd.log'}", *DB_SIZES],
                  run, root / "log" / "mariadbd.out", env, plain=_plain())
    _wait(lambda: _sql(acct, env, "SELECT 1", check=False).returncode == 0,
          f"MariaDB did not answer within {READY_TIMEOUT:.0f} s", root / "log" / "mariadbd.log")


def _plain() -> bool:
    """A normal user's database daemons run without namespaces, as its munged does: in a user
    namespace they would be root there, and MariaDB's socket login would take the user for root."""
    return os.geteuid() != 0


def _sql(acct: AccountingLayout, env: dict[str, str], statements: str, check: bool = True) -> _process.Result:
    """Run SQL as the cluster's user over the socket (unix_socket login). The statements go on
    standard input, never on a command line that ``ps`` shows."""
    return _process.run(["mariadb", "--no-defaults", f"--socket={acct.root / 'run' / 'mysqld.sock'}",
                         f"--user={acct.slurm_user}"], input=statements, timeout=30, env=env, check=check)


def _sacctmgr(env: dict[str, str], *args: str, check: bool = True) -> _process.Result:
    return _process.run(["sacctmgr", *args], timeout=30, env=env, check=check)


def _wait(ready, message: str, log: Path) -> None:
    deadline = time.monotonic() + READY_TIMEOUT
    while not ready():
        if time.monotonic() > deadline:
            try:
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-5:])
            except OSError:
                tail = "(no log)"
            raise ClusterStartError(f"{message}; the end of {log}:\n{tail}")
        time.sleep(0.3)

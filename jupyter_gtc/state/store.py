"""SQLite state store (WAL, numbered migrations).

The database is the memory that outlives a kernel: a cluster created in one process is
found by every other. Each call opens its own short transaction, so a Store is safe to
share between threads and processes.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from ..exceptions import ClusterExists, ClusterNotFound, StudyExists, StudyNotFound


def default_home() -> Path:
    """``$GTC_HOME``, else ``$XDG_DATA_HOME/jupyter_gtc``, else ``~/.local/share/jupyter_gtc``."""
    if os.environ.get("GTC_HOME"):
        return Path(os.environ["GTC_HOME"]).expanduser().absolute()
    data = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return Path(data) / "jupyter_gtc"


def make_home(home: Path) -> Path:
    """``home`` made where it is missing, for its user alone: 0700 from its creation, whatever
    the umask (it holds specs with their scripts, job folders, endpoints' records). The folders
    above it are made as usual; a home that exists is left as it is."""
    home.parent.mkdir(parents=True, exist_ok=True)
    try:
        home.mkdir(mode=0o700)
    except FileExistsError:
        pass
    return home


def create_private_file(path: Path) -> None:
    """An empty ``path``, 0600 from its creation, unless it exists. An empty file is an empty
    SQLite database, and SQLite makes a database's -wal and -shm files with its mode: so a
    database made this way is its user's alone from the start, whatever the umask (which is
    the whole process's, and threads run)."""
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass


def make_private_again(db: Path) -> None:
    """A one-time repair of installs made before GTC_HOME and state.db were private from their
    creation (make_home, create_private_file): they followed the umask, 0755 and 0644, and an
    existing home or file is left alone there. Where this process's user owns them: the
    database and its -wal and -shm 0600 (the database first: SQLite makes new -wal and -shm
    files with its mode), and no group or other bits on GTC_HOME. Never through a link, and
    nothing of another user's (root reading a user's store)."""
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"), db.parent):
        try:
            st = os.lstat(path)
        except OSError:
            continue
        private = stat.S_IMODE(st.st_mode) & ~0o077
        if path == db.parent and st.st_mode & (stat.S_ISVTX | stat.S_IWOTH):
            continue  # a shared folder (/tmp, GTC_HOME=/tmp): no one's home; made private, it locks everyone out
        if st.st_uid == os.geteuid() and not stat.S_ISLNK(st.st_mode) and stat.S_IMODE(st.st_mode) != private:
            os.chmod(path, private if path == db.parent else private & 0o600)


@dataclass
class ClusterRecord:
    name: str
    backend: str
    state: str
    spec: dict[str, Any]
    runtime: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    updated_at: float = 0.0
    owner: dict[str, Any] | None = None  # the process creating, scaling or deleting it (services/clusters.py)


@dataclass
class JobRecord:
    cluster: str
    slurm_id: str
    name: str
    state: str
    job_dir: str
    options: list[str] = field(default_factory=list)
    exit_code: int | None = None
    tasks: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    nodes: str = ""
    start_time: float | None = None
    end_time: float | None = None
    submitted_at: float = 0.0
    updated_at: float = 0.0
    user: str | None = None  # the Slurm user it runs as


@dataclass
class VertexJobRecord:
    """A job of the local Vertex endpoint: its resource name and request, and our job or study."""

    name: str        # projects/P/locations/L/customJobs/ID
    kind: str        # customJobs or hyperparameterTuningJobs
    parent: str      # projects/P/locations/L
    cluster: str
    ref: str         # our job's Slurm id, or our study's name
    body: dict[str, Any]  # the CustomJob as created, camelCase JSON
    cancelled: bool = False
    created_at: float = 0.0


@dataclass
class StudyRecord:
    name: str
    cluster: str
    spec: dict[str, Any]
    state: str
    study_dir: str
    storage: str
    reason: str | None = None
    sampler: str = ""
    stop_trials: list[int] = field(default_factory=list)
    driver_pid: int | None = None
    driver_host: str | None = None
    heartbeat_at: float | None = None
    created_at: float = 0.0
    updated_at: float = 0.0


def _statements(sql: str) -> list[str]:
    """Split a migration into statements. (executescript would commit our transaction,
    and a plain split on ';' breaks on a ';' inside a comment or string.)"""
    statements, pending = [], ""
    for line in sql.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            statements.append(pending)
            pending = ""
    if pending.strip() and not all(not line.strip() or line.strip().startswith("--") for line in pending.splitlines()):
        raise ValueError(f"unterminated statement in migration: {pending.strip()[:60]}")
    return statements


def _migrations() -> list[tuple[int, str]]:
    folder = resources.files(__package__) / "migrations"
    found = []
    for entry in folder.iterdir():
        if entry.name.endswith(".sql"):
            found.append((int(entry.name.split("_", 1)[0]), entry.read_text()))
    return sorted(found)


class Store:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        make_home(self.path.parent)
        create_private_file(self.path)  # specs' scripts, CustomJobs' environments: the user's alone
        make_private_again(self.path)
        wal = sqlite3.connect(self.path, timeout=30)
        try:
            wal.execute("PRAGMA journal_mode=WAL")  # persistent, and not allowed inside a transaction
        finally:
            wal.close()
        with self._connect() as db:
            self._migrate(db)

    @contextmanager
    def _connect(self) -> Iterator[sqlite3.Connection]:
        """One transaction on this thread's connection (opened once: sqlite3 connections
        must not cross threads, and opening one per call cost more than the query)."""
        db = getattr(self._local, "db", None)
        if db is None:
            db = self._local.db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            db.row_factory = sqlite3.Row
            # With WAL, NORMAL loses at most the last commits on power loss, never
            # consistency, and spares an fsync per write.
            db.execute("PRAGMA synchronous=NORMAL")
        try:
            db.execute("BEGIN IMMEDIATE")
            yield db
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                db.execute("ROLLBACK")
            raise

    @contextmanager
    def traced(self, callback: Callable[[str], None]) -> Iterator[None]:
        """Within the block, ``callback(sql)`` for every statement this thread runs on the
        store (sqlite3's trace callback): how tests and bench/ count the queries of an action."""
        with self._connect() as db:
            pass  # this thread's connection, opened if it was not
        db.set_trace_callback(callback)
        try:
            yield
        finally:
            db.set_trace_callback(None)

    def _migrate(self, db: sqlite3.Connection) -> None:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        for number, sql in _migrations():
            if number > version:
                for statement in _statements(sql):
                    db.execute(statement)
                db.execute(f"PRAGMA user_version = {int(number)}")

    @property
    def schema_version(self) -> int:
        with self._connect() as db:
            return db.execute("PRAGMA user_version").fetchone()[0]

    # -- clusters --------------------------------------------------------------------

    def add_cluster(self, record: ClusterRecord) -> None:
        now = time.time()
        try:
            with self._connect() as db:
                db.execute(
                    "INSERT INTO clusters (name, backend, state, spec, runtime, created_at, updated_at, owner)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.name, record.backend, record.state, json.dumps(record.spec),
                     json.dumps(record.runtime), now, now, _cluster_column(("owner", record.owner))),
                )
        except sqlite3.IntegrityError:
            raise ClusterExists(record.name) from None
        record.created_at = record.updated_at = now

    def get_cluster(self, name: str) -> ClusterRecord:
        with self._connect() as db:
            row = db.execute("SELECT * FROM clusters WHERE name = ?", (name,)).fetchone()
            if row is None:
                known = [r[0] for r in db.execute("SELECT name FROM clusters ORDER BY name")]
                raise ClusterNotFound(name, known)
        return _record(row)

    def list_clusters(self) -> list[ClusterRecord]:
        with self._connect() as db:
            return [_record(r) for r in db.execute("SELECT * FROM clusters ORDER BY created_at")]

    def update_cluster(self, name: str, expect: dict[str, Any] | None = None, **changes: Any) -> bool:
        """Change any of state, spec, runtime, owner. With ``expect`` ({"state": ..., "owner":
        ...}), only if the record still holds those values: False if it no longer does (another
        process got there first), where an unexpected change would be lost."""
        allowed = {"state", "spec", "runtime", "owner"}
        if not changes or set(changes) - allowed or set(expect or {}) - allowed:
            raise ValueError(f"update_cluster changes only {sorted(allowed)}, got {sorted(changes)}")
        columns = ", ".join(f"{k} = ?" for k in changes)
        conditions = "".join(f" AND {k} IS ?" for k in expect or {})
        with self._connect() as db:
            cur = db.execute(f"UPDATE clusters SET {columns}, updated_at = ? WHERE name = ?{conditions}",
                             (*map(_cluster_column, changes.items()), time.time(), name,
                              *map(_cluster_column, (expect or {}).items())))
            if cur.rowcount == 0 and (expect is None or db.execute(
                    "SELECT 1 FROM clusters WHERE name = ?", (name,)).fetchone() is None):
                raise ClusterNotFound(name)
        return cur.rowcount > 0

    def remove_cluster(self, name: str) -> None:
        """Forget a cluster, its jobs and its events (a new cluster of that name numbers jobs
        from 1 again; the jobs' folders stay on disk)."""
        with self._connect() as db:
            db.execute("DELETE FROM jobs WHERE cluster = ?", (name,))
            db.execute("DELETE FROM cluster_events WHERE cluster = ?", (name,))
            db.execute("DELETE FROM vertex_jobs WHERE cluster = ?", (name,))
            db.execute("DELETE FROM clusters WHERE name = ?", (name,))

    # -- the supervisor's decisions ----------------------------------------------------

    def add_event(self, cluster: str, node: str, event: str, detail: str = "") -> None:
        with self._connect() as db:
            db.execute("INSERT INTO cluster_events (cluster, time, node, event, detail) VALUES (?, ?, ?, ?, ?)",
                       (cluster, time.time(), node, event, detail))

    def events(self, cluster: str) -> list[dict[str, Any]]:
        """The cluster's events, oldest first: time, node, event, detail."""
        with self._connect() as db:
            rows = db.execute("SELECT time, node, event, detail FROM cluster_events WHERE cluster = ? ORDER BY id",
                              (cluster,)).fetchall()
        return [dict(r) for r in rows]


    # -- jobs ------------------------------------------------------------------------

    def add_job(self, job: JobRecord) -> None:
        now = time.time()
        with self._connect() as db:
            db.execute(
                "INSERT INTO jobs (cluster, slurm_id, name, state, exit_code, job_dir, options, tasks, reason,"
                " user, submitted_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job.cluster, job.slurm_id, job.name, job.state, job.exit_code, job.job_dir,
                 json.dumps(job.options), json.dumps(job.tasks), job.reason, job.user, now, now),
            )
        job.submitted_at = job.updated_at = now

    def get_job(self, cluster: str, slurm_id: str) -> JobRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM jobs WHERE cluster = ? AND slurm_id = ?", (cluster, slurm_id)).fetchone()
        return _job(row) if row else None

    def find_jobs(self, *, cluster: str | None = None, name: str | None = None,
                  slurm_id: str | None = None) -> list[JobRecord]:
        """Jobs matching every given filter, newest first."""
        where, args = [], []
        for column, value in (("cluster", cluster), ("name", name), ("slurm_id", slurm_id)):
            if value is not None:
                where.append(f"{column} = ?")
                args.append(value)
        sql = "SELECT * FROM jobs" + (" WHERE " + " AND ".join(where) if where else "")
        with self._connect() as db:
            return [_job(r) for r in db.execute(sql + " ORDER BY submitted_at DESC", args)]

    _JOB_FIELDS = ("state", "exit_code", "tasks", "reason", "nodes", "start_time", "end_time", "user")

    def update_job(self, cluster: str, slurm_id: str, **changes: Any) -> None:
        """Record what the poller saw: any of state, exit_code, tasks, reason, nodes, start/end time, user."""
        if not changes or set(changes) - set(self._JOB_FIELDS):
            raise ValueError(f"update_job changes only {self._JOB_FIELDS}, got {sorted(changes)}")
        columns = ", ".join(f"{k} = ?" for k in changes)
        values = [json.dumps(v) if k == "tasks" else v for k, v in changes.items()]
        with self._connect() as db:
            db.execute(f"UPDATE jobs SET {columns}, updated_at = ? WHERE cluster = ? AND slurm_id = ?",
                       (*values, time.time(), cluster, slurm_id))

    # -- Vertex AI CustomJobs (the local Vertex endpoint's) -----------------------------

    def add_vertex_job(self, record: VertexJobRecord) -> None:
        record.created_at = time.time()
        with self._connect() as db:
            db.execute("INSERT INTO vertex_jobs (name, kind, parent, cluster, ref, body, cancelled, created_at)"
                       " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                       (record.name, record.kind, record.parent, record.cluster, record.ref, json.dumps(record.body),
                        int(record.cancelled), record.created_at))

    def get_vertex_job(self, name: str) -> VertexJobRecord | None:
        with self._connect() as db:
            row = db.execute("SELECT * FROM vertex_jobs WHERE name = ?", (name,)).fetchone()
        return _vertex_job(row) if row else None

    def find_vertex_jobs(self, parent: str, kind: str) -> list[VertexJobRecord]:
        """The jobs of ``kind`` under ``parent`` (projects/P/locations/L), newest first."""
        with self._connect() as db:
            rows = db.execute("SELECT * FROM vertex_jobs WHERE parent = ? AND kind = ? ORDER BY created_at DESC",
                              (parent, kind))
            return [_vertex_job(r) for r in rows]

    def mark_vertex_job_cancelled(self, name: str) -> None:
        with self._connect() as db:
            db.execute("UPDATE vertex_jobs SET cancelled = 1 WHERE name = ?", (name,))

    def remove_vertex_job(self, name: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM vertex_jobs WHERE name = ?", (name,))

    # -- studies ---------------------------------------------------------------------

    def add_study(self, record: StudyRecord) -> None:
        """Record a new study; raises ``StudyExists`` if the name is taken."""
        now = time.time()
        try:
            with self._connect() as db:
                db.execute(
                    "INSERT INTO studies (name, cluster, spec, state, reason, study_dir, storage, sampler, stop_trials,"
                    " driver_pid, driver_host, heartbeat_at, created_at, updated_at)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.name, record.cluster, json.dumps(record.spec), record.state, record.reason,
                     record.study_dir, record.storage, record.sampler, json.dumps(record.stop_trials),
                     record.driver_pid, record.driver_host, record.heartbeat_at, now, now),
                )
        except sqlite3.IntegrityError:
            raise StudyExists(f"a study named {record.name!r} exists already; resume it "
                              f"(api.resume_study) or choose another name") from None
        record.created_at = record.updated_at = now

    def get_study(self, name: str) -> StudyRecord:
        with self._connect() as db:
            row = db.execute("SELECT * FROM studies WHERE name = ?", (name,)).fetchone()
            if row is None:
                known = [r[0] for r in db.execute("SELECT name FROM studies ORDER BY created_at")]
                hint = f"known studies: {', '.join(known)}" if known else "no studies yet"
                raise StudyNotFound(f"no study named {name!r}; {hint}")
        return _study(row)

    def find_studies(self, cluster: str | None = None) -> list[StudyRecord]:
        """Studies (of one cluster, when given), newest first."""
        sql, args = "SELECT * FROM studies", []
        if cluster is not None:
            sql, args = sql + " WHERE cluster = ?", [cluster]
        with self._connect() as db:
            return [_study(r) for r in db.execute(sql + " ORDER BY created_at DESC", args)]

    _STUDY_FIELDS = ("state", "reason", "sampler", "stop_trials", "driver_pid", "driver_host", "heartbeat_at")

    def update_study(self, name: str, **changes: Any) -> None:
        """Change any of state, reason, sampler, stop_trials, driver_pid, driver_host, heartbeat_at."""
        if not changes or set(changes) - set(self._STUDY_FIELDS):
            raise ValueError(f"update_study changes only {self._STUDY_FIELDS}, got {sorted(changes)}")
        columns = ", ".join(f"{k} = ?" for k in changes)
        values = [json.dumps(v) if k == "stop_trials" else v for k, v in changes.items()]
        with self._connect() as db:
            db.execute(f"UPDATE studies SET {columns}, updated_at = ? WHERE name = ?", (*values, time.time(), name))

    def claim_study(self, name: str, pid: int, host: str,
                    holder_alive: Callable[[StudyRecord], bool]) -> StudyRecord | None:
        """Make (pid, host) the study's driver unless another driver holds it and
        ``holder_alive(record)`` says it still runs; then returns that record (else None). One
        transaction, so two processes resuming at once cannot both win."""
        now = time.time()
        with self._connect() as db:
            row = db.execute("SELECT * FROM studies WHERE name = ?", (name,)).fetchone()
            if row is None:
                return None
            record = _study(row)
            other = (record.driver_pid, record.driver_host) != (pid, host)
            if other and record.driver_pid is not None and holder_alive(record):
                return record
            db.execute("UPDATE studies SET driver_pid = ?, driver_host = ?, heartbeat_at = ?, updated_at = ?"
                       " WHERE name = ?", (pid, host, now, now, name))
        return None


def _job(row: sqlite3.Row) -> JobRecord:
    return JobRecord(
        cluster=row["cluster"], slurm_id=row["slurm_id"], name=row["name"], state=row["state"],
        job_dir=row["job_dir"], options=json.loads(row["options"]), exit_code=row["exit_code"],
        tasks=json.loads(row["tasks"]), reason=row["reason"], nodes=row["nodes"], start_time=row["start_time"],
        end_time=row["end_time"], submitted_at=row["submitted_at"],
        updated_at=row["updated_at"], user=row["user"],
    )


def _vertex_job(row: sqlite3.Row) -> VertexJobRecord:
    return VertexJobRecord(row["name"], row["kind"], row["parent"], row["cluster"], row["ref"],
                           json.loads(row["body"]), bool(row["cancelled"]), row["created_at"])


def _study(row: sqlite3.Row) -> StudyRecord:
    return StudyRecord(
        name=row["name"], cluster=row["cluster"], spec=json.loads(row["spec"]), state=row["state"],
        study_dir=row["study_dir"], storage=row["storage"], reason=row["reason"], sampler=row["sampler"],
        stop_trials=json.loads(row["stop_trials"]), driver_pid=row["driver_pid"], driver_host=row["driver_host"],
        heartbeat_at=row["heartbeat_at"], created_at=row["created_at"], updated_at=row["updated_at"],
    )


def _cluster_column(item: tuple[str, Any]) -> Any:
    """A cluster field as its column holds it: JSON text, but no owner is NULL."""
    name, value = item
    return value if name == "state" or (name == "owner" and value is None) else json.dumps(value)


def _record(row: sqlite3.Row) -> ClusterRecord:
    return ClusterRecord(
        name=row["name"], backend=row["backend"], state=row["state"],
        spec=json.loads(row["spec"]), runtime=json.loads(row["runtime"]),
        created_at=row["created_at"], updated_at=row["updated_at"], owner=json.loads(row["owner"] or "null"),
    )


def open_store(home: Path | None = None) -> Store:
    return Store((home or default_home()) / "state.db")

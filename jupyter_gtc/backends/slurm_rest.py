"""Slurm's own REST API (``slurmrestd``) in front of a local cluster, for the Slurm Job API the
local Vertex endpoint serves (``callSlurmRestApi``; ``services/vertex_slurm_rest.py``).

What a cluster needs for it, decided at its create (``local.slurm_rest_api``, which the endpoint's
create sets; other local clusters are made as before):

- a JWT key: 32 random bytes, made 0600 (``O_EXCL``, never a chmod) in a 0700 folder of the
  cluster's own, owned by the cluster's user, its SlurmUser (Slurm's jwt.shtml: the key is
  read by slurmctld and slurmdbd only; ``auth_jwt.c`` ``init()`` loads it there and nowhere else);
- ``AuthAltTypes=auth/jwt`` and ``AuthAltParameters=jwt_key=...`` in slurm.conf and in
  slurmdbd.conf (slurmrestd's accounting queries go to slurmdbd with the caller's token).
  Only slurmctld and slurmdbd load the alternative types (``slurm_auth.c``), so the cluster's
  own commands (munge) are unchanged.

slurmrestd itself (one per cluster: its slurm.conf is the cluster's, and a cluster's delete takes
it along with its other daemons) is started at the first call, with ``-a rest_auth/jwt`` only:
every request carries ``X-SLURM-USER-NAME`` and ``X-SLURM-USER-TOKEN``, a token of 10 minutes
from ``scontrol token`` (its output read from a pipe; never in an argv, a URL or a log). It
listens on a unix socket in a 0700 folder of the cluster's: slurmrestd makes its sockets with
umask 0 (``slurmrestd.c``: ``umask(0)`` around ``con_mgr_create_sockets``), so the folder is
what keeps others out.

Whom slurmrestd runs as: 22.05 refuses root, root's group, the SlurmUser and its group
(``_lock_down()`` in ``src/slurmrestd/slurmrestd.c``). ``_lock_down()`` drops to ``-u``/``-g``
*before* it reads slurm.conf, so a dropped slurmrestd must read the cluster's config, which
lives in the cluster's 0700 folder. See ``RUN_AS`` below for what is done instead and why.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from ..exceptions import ClusterBusy, SlurmError
from . import daemons

LABEL = "slurmrestd"
KEY_BYTES = 32  # HS256's key: Slurm's jwt.shtml makes it with `dd if=/dev/random bs=32 count=1`
TOKEN_LIFESPAN = 600  # seconds; a token is minted again a minute before it ends
REQUEST_TIMEOUT = 60.0
MAX_ANSWER = 64 * 1024 * 1024  # slurmrestd's JSON for a big queue; more is refused, not read


def jwt_folder(root: Path) -> Path:
    return root / "jwt"


def write_jwt_key(root: Path) -> Path:
    """The cluster's JWT key, made where missing: 0600 and ``O_EXCL`` from its creation (whoever
    reads it mints tokens for any user, root included), in a 0700 folder."""
    folder = jwt_folder(root)
    folder.mkdir(mode=0o700, exist_ok=True)
    key = folder / "jwt_hs256.key"
    if not key.exists():
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_BYTES))
    return key


def keep_script(root: Path, text: str) -> Path:
    """A submitted script kept for the job that runs it with its arguments (``rest_v42.wrap_argv``:
    slurmrestd 22.05 mishandles argv), in a 0700 folder of the cluster's folder, so that it goes
    with the cluster: 0700 from its creation (the job, run as this user, execs it), under a new
    name (``O_EXCL``). Refused where that file system would not let it run (``noexec``)."""
    import secrets

    folder = root / "job-scripts"
    folder.mkdir(mode=0o700, exist_ok=True)
    if os.statvfs(folder).f_flag & os.ST_NOEXEC:
        raise ClusterBusy(root.name, f"{folder} is on a file system mounted noexec, where a job with arguments "
                                     "could not run its script; put GTC_HOME on another, or submit without arguments")
    path = folder / f"{secrets.token_hex(8)}.script"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "wb") as f:
        f.write(text.encode(errors="surrogatepass"))
    return path


def note_job(script: Path, job_id: Any) -> None:
    """Beside a kept script, the id of the job that runs it (an empty file, its name the id), so
    that ``forget_finished`` can remove the script once the job ended."""
    os.close(os.open(script.with_suffix(f".job-{int(job_id)}"), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                     0o600))


def forget_finished(root: Path, queued: list[str]) -> None:
    """Remove the kept scripts of jobs no longer in ``queued`` (squeue's ids: a requeued job is
    pending again, and keeps its script): they would otherwise pile up until the cluster's
    delete. A script with no note yet (its submit not answered) stays."""
    live = {job_id.split("_")[0] for job_id in queued}  # an array's tasks: 12_3 -> 12
    for note in (root / "job-scripts").glob("*.job-*"):
        if note.suffix.removeprefix(".job-") not in live:
            note.with_suffix(".script").unlink(missing_ok=True)
            note.unlink(missing_ok=True)


# Where Debian (and Slurm's default PluginDir elsewhere) keeps the auth/jwt plugin.
JWT_PLUGIN_GLOBS = ("/usr/lib/*/slurm-wlm/auth_jwt.so", "/usr/lib/slurm/auth_jwt.so", "/usr/lib64/slurm/auth_jwt.so",
                    "/usr/local/lib/slurm/auth_jwt.so")


def missing_packages(path: str | None = None) -> list[str]:
    """The Debian packages the Slurm Job API needs and this machine lacks."""
    import glob
    import shutil

    missing = [] if shutil.which("slurmrestd", path=path or _path()) else ["slurmrestd"]
    if not any(glob.glob(pattern) for pattern in JWT_PLUGIN_GLOBS):
        missing.append("slurm-wlm-jwt-plugin")
    return missing


def jwt_conf(root: Path, runtime: dict[str, Any]) -> dict[str, str]:
    """slurm.conf's lines for JWT, the key made first; ``runtime`` then names it, so that
    slurmdbd.conf gets the same lines (``accounting.layout``). No lines where the packages are
    missing: slurmctld would not start with an auth type it cannot load, and the Slurm Job API
    then says what to install."""
    if missing_packages():
        return {}
    key = write_jwt_key(root)
    runtime["jwt_key"] = str(key)
    return {"AuthAltTypes": "auth/jwt", "AuthAltParameters": f"jwt_key={key}"}


# Whom slurmrestd runs as. Root's endpoint: ``nobody`` (``-u``/``-g``), which holds nothing and
# cannot read the cluster's 0700 folder, so slurmrestd gets a copy of slurm.conf (no secrets in it:
# paths and ports) in a folder of its own in /run (a unix socket's path must stay under 108 bytes).
# Its sockets and config are then reachable by other ``nobody`` processes: a request without a
# token signed with the cluster's key is refused by slurmctld and slurmdbd whoever sends it.
# A normal user's endpoint: slurmrestd runs as that user (the only account it has), with its
# socket in the cluster's folder. 22.05 lets it start (``_lock_down`` compares the user with
# SlurmUser before slurm.conf is read); that user is already the cluster's SlurmUser, so a
# slurmrestd broken into gains nothing, and its one caller is this user's endpoint.
RUN_AS = ("nobody", "nogroup")
RUN_DIR = Path("/run/jupyter_gtc")


def rest_folder(root: Path) -> Path:
    """Where the slurmrestd of the cluster in ``root`` listens (and, as root's, finds its config)."""
    if os.geteuid() == 0:
        return RUN_DIR / f"rest-{_short_id(root)}"
    return root / "rest"


def stop(root: Path, uid: int | None = None) -> None:
    """Stop the slurmrestd of the cluster in ``root`` (of ``uid``, its folder's owner by default),
    and remove root's folder of it in /run (made by this process's user: root's alone)."""
    daemons.stop(LABEL, root / "run", uid=uid)
    if os.geteuid() == 0:
        import shutil

        shutil.rmtree(rest_folder(root), ignore_errors=True)


class SlurmRestd:
    """One cluster's slurmrestd: started on demand, its requests sent with a fresh token."""

    def __init__(self, root: Path, commands: Any, user: str, env: dict[str, str], accounting: bool = True):
        self.root, self.commands, self.user, self.env = root, commands, user, env
        self.accounting = accounting  # whether the cluster has slurmdbd: dbv0.0.38 fatals without one
        self.run = root / "run"
        self._token: tuple[str, float] | None = None

    # -- where it listens ------------------------------------------------------------------

    def _folder(self) -> Path:
        return rest_folder(self.root)

    def socket_path(self) -> Path:
        return self._folder() / "slurmrestd.socket"

    def running(self) -> bool:
        return daemons.find(LABEL, self.run) is not None and self.socket_path().exists()

    def ensure(self, timeout: float = 30.0) -> None:
        """Start slurmrestd where it does not run, and wait until its socket takes connections."""
        if self.running():
            return
        daemons.stop(LABEL, self.run)  # a dead one's record (or one whose socket went)
        folder = self._folder()
        plugins = "openapi/v0.0.38" + (",openapi/dbv0.0.38" if self.accounting else "")
        argv = ["slurmrestd", "-a", "rest_auth/jwt", "-s", plugins, "-t", "4"]
        if os.geteuid() == 0:
            import grp
            import pwd
            import shutil

            uid, gid = pwd.getpwnam(RUN_AS[0]).pw_uid, grp.getgrnam(RUN_AS[1]).gr_gid
            RUN_DIR.mkdir(mode=0o755, exist_ok=True)
            shutil.rmtree(folder, ignore_errors=True)  # root's folder in root's /run: a leftover of ours
            folder.mkdir(mode=0o700)  # 0700 from the start: root's while root writes in it, then nobody's
            conf = folder / "slurm.conf"
            fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            os.fchown(fd, uid, gid)
            with os.fdopen(fd, "w") as f:
                f.write((self.root / "etc" / "slurm.conf").read_text())
            os.chown(folder, uid, gid)  # last: until then no other user could put a link where root writes
            argv += ["-f", str(conf), "-u", RUN_AS[0], "-g", RUN_AS[1]]
            plain = False  # in a PID namespace: the kill of its (root) wrapper ends it, whoever it runs as
        else:
            folder.mkdir(mode=0o700, exist_ok=True)
            self.socket_path().unlink(missing_ok=True)
            argv += ["-f", str(self.root / "etc" / "slurm.conf")]
            plain = True  # never in a user namespace: there it would be root, which slurmrestd refuses
        # SLURM_JWT makes auth/jwt its own auth type (slurm_auth.c): it passes each caller's token on.
        env = {"PATH": _path(self.env.get("PATH")), "SLURM_JWT": "daemon"}
        log = self.root / "log" / "slurmrestd.log"
        daemons.start(LABEL, [*argv, f"unix:{self.socket_path()}"], self.run, log, env, plain=plain)
        deadline = time.monotonic() + timeout
        while True:  # its socket appears once it listens; connecting proves it
            if daemons.find(LABEL, self.run) is None:
                raise ClusterBusy(self.root.name, f"slurmrestd stopped as it started: {_tail(log)}")
            try:
                with socket.socket(socket.AF_UNIX) as s:
                    s.settimeout(1)
                    s.connect(str(self.socket_path()))
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise ClusterBusy(self.root.name, f"slurmrestd did not listen within {timeout:.0f} s: "
                                                      f"{_tail(log)}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        stop(self.root)

    # -- requests --------------------------------------------------------------------------

    def token(self) -> str:
        """A token for ``user`` from ``scontrol token`` (read from its output, never passed in an
        argv), minted again a minute before it ends."""
        if self._token and self._token[1] > time.monotonic() + 60:
            return self._token[0]
        out = self.commands.run(["scontrol", "token", f"username={self.user}", f"lifespan={TOKEN_LIFESPAN}"]).stdout
        value = out.strip().partition("SLURM_JWT=")[2].strip()
        if not value:
            raise ClusterBusy(self.root.name, "scontrol token gave no token: is auth/jwt configured for this cluster?")
        self._token = (value, time.monotonic() + TOKEN_LIFESPAN)
        return value

    def request(self, method: str, path: str, body: dict[str, Any] | None) -> tuple[int, bytes]:
        """slurmrestd's (status, body) for one request, as ``user`` (``ensure`` first: the caller
        starts it, one thread at a time)."""
        import http.client

        data = json.dumps(body).encode() if body is not None else None
        headers = {"X-SLURM-USER-NAME": self.user, "X-SLURM-USER-TOKEN": self.token(), "Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        conn = _UnixConnection(str(self.socket_path()), REQUEST_TIMEOUT)
        try:
            conn.request(method, path, body=data, headers=headers)
            answer = conn.getresponse()
            raw = answer.read(MAX_ANSWER + 1)
            if len(raw) > MAX_ANSWER:
                raise ClusterBusy(self.root.name, f"slurmrestd's answer to {method} {path} is over "
                                                  f"{MAX_ANSWER} bytes; ask for less (update_time, a job id)")
            return answer.status, raw
        except (OSError, http.client.HTTPException) as e:  # a slurmrestd gone mid-request
            raise SlurmError(f"slurmrestd of {self.root.name} did not answer {method} {path.split('?')[0]}: "
                             f"{type(e).__name__}: {e}; its log: {_tail(self.root / 'log' / 'slurmrestd.log')}") from None
        finally:
            conn.close()


def _UnixConnection(path: str, timeout: float):  # noqa: N802 - reads as the class it makes
    """HTTP over slurmrestd's unix socket (http.client imported here: every local cluster's
    import of this module would pay for it)."""
    import http.client

    class UnixConnection(http.client.HTTPConnection):
        def connect(self) -> None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(self.timeout)
            self.sock.connect(path)

    return UnixConnection("localhost", timeout=timeout)


def _path(path: str | None = None) -> str:
    """``path`` (this process's PATH by default) with where Debian puts slurmrestd: /usr/sbin is
    off a normal user's PATH."""
    return f"{path if path is not None else os.environ.get('PATH', '/usr/bin:/bin')}:/usr/sbin:/sbin"


def _short_id(root: Path) -> str:
    import hashlib

    return hashlib.sha1(str(root).encode()).hexdigest()[:8]


def _tail(log: Path, lines: int = 5) -> str:
    try:
        return " | ".join(log.read_text(errors="replace").strip().splitlines()[-lines:]) or "(its log is empty)"
    except OSError:
        return f"(no log at {log})"

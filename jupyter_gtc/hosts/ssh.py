"""A cluster's login node as a host, over OpenSSH.

OpenSSH itself, not a Python SSH library: it is what reads the user's ``~/.ssh/config``
(aliases, ``ProxyJump``, ``IdentityFile``, ``Match``), talks to their agent and their
security keys, and checks host keys as they expect. One authenticated connection per host
carries every command, poll and file read (``ControlMaster=auto`` with ``ControlPersist``,
as SkyPilot does), its socket in a folder of ours. When it drops, the next call opens a
new one by itself.

Commands and file operations go to ``hosts/remote_ops.py``, which the remote Python runs as
a server for as long as the connection lives: one request and answer each, no ssh session
per call, and commands reach it as argument lists, run there without a shell (in the
environment ssh gives a remote command: the user's shell, not a login one, whose PATH must
hold Slurm's commands). The one string ssh itself sends, the server's start, is quoted word by word with
``shlex.quote``. ``BatchMode`` is on: nothing ever waits for a password prompt that no one
sees (a notebook has no terminal), and ``StrictHostKeyChecking`` refuses unknown or changed
keys. Keys and agents work as they are; a host that asks for a password or a second factor
needs its connection opened once where the prompt can be answered: ``connect`` (``gtc
cluster connect``, in a terminal), which every later call reuses.
"""

from __future__ import annotations

import json
import os
import shlex
import tempfile
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from .. import _process
from ..exceptions import CommandError, HostKeyRefused, HostUnreachable
from .base import DirEntry, FileStat, Host, HostPath
from .remote_ops import EACCES, EEXIST, ENOENT, OK

REMOTE_OPS = (Path(__file__).with_name("remote_ops.py")).read_text()
# Reads sent at once by read_many: ~50 KB of requests, which the pipes and ssh's channel hold
# while the server, answering as it reads, waits for us to read its first answers.
READ_BATCH = 256
KEY_REFUSALS = ("Host key verification failed", "REMOTE HOST IDENTIFICATION HAS CHANGED",
                "No ED25519 host key is known", "No RSA host key is known", "No ECDSA host key is known")


class SSHHost(Host):
    def __init__(self, destination: str, *, control_dir: Path, port: int | None = None, user: str | None = None,
                 config_file: Path | None = None, python: str = "python3", connect_timeout: float = 10,
                 persist_s: int = 600):
        """``destination``: a host name or an alias of the SSH config; ``control_dir``: a
        folder of this user's where the shared connection's socket lives (kept short: a
        socket path has at most 104 bytes)."""
        self.name = destination
        self.destination = destination
        self.python = python
        control_dir = Path(control_dir)
        control_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.control_path = control_dir / "%C"  # ssh's hash of host, port and user
        self._server = None  # the remote file server's ssh process, while it lives
        self._server_errors = None
        self._lock = threading.Lock()  # one writer and one reader at a time on the server's pipes
        self._owed: deque[_Answer] = deque()  # requests sent whose answers are not read yet, in order
        # ssh keeps the first value it gets for an option: ours come before ~/.ssh/config's.
        self._common = [*(["-F", str(config_file)] if config_file else []),
                        "-o", f"ControlPath={self.control_path}", "-o", "StrictHostKeyChecking=yes",
                        "-o", f"ConnectTimeout={connect_timeout:g}",
                        "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3",
                        *(["-p", str(port)] if port else []), *(["-l", user] if user else [])]
        self._ssh = ["ssh", "-o", "ControlMaster=auto", "-o", f"ControlPersist={persist_s}", "-o", "BatchMode=yes",
                     *self._common]

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 60, input: str | None = None) -> _process.Result:
        argv = [str(a) for a in argv]
        data = b"" if input is None else input.encode()
        _, payload = self._op("run", "", [argv, dict(env or {}), timeout], data)
        head, _, stdout = payload.partition(b"\n")
        returncode, stderr, timed_out = json.loads(head)
        if timed_out:
            raise CommandError(argv, None, stderr, timeout=timeout)
        if check and returncode != 0:
            raise CommandError(argv, returncode, stderr or stdout.decode(errors="replace"))
        return _process.Result(argv, returncode, stdout.decode(errors="replace"), stderr)

    def connect(self, persist: str = "12h") -> int:
        """Open the shared connection here, in a terminal, for a login that asks for a password
        or a second factor: ssh prompts as it always does, then goes to the background and keeps
        the connection for ``persist`` (idle), which every command, poll and file read, of this
        process and of others (a kernel, the Jupyter server), then reuses without a prompt.
        Returns ssh's exit status."""
        return _process.run_in_terminal(["ssh", "-o", "ControlMaster=yes", "-o", f"ControlPersist={persist}",
                                         *self._common, "-fN", "--", self.destination])

    def close(self) -> None:
        """End the file server and the shared connection (``ssh -O exit``); the next call
        opens new ones."""
        with self._lock:
            self._stop_server()
        _process.run([*self._ssh, "-O", "exit", self.destination], check=False, timeout=10)

    def forward(self, address: str, port: int, local_port: int) -> None:
        """Forward 127.0.0.1:``local_port`` here to ``address:port`` as the login node reaches
        it, over the shared connection (``ssh -O forward``: no new login, no process of its
        own). Loopback only: another machine never reaches it. ``CommandError`` where the
        port is taken meanwhile."""
        self.stat("/")  # the shared connection is up (the file server's ssh is its master)
        _process.run([*self._ssh, "-O", "forward", "-L", f"127.0.0.1:{local_port}:{address}:{port}",
                      "--", self.destination], timeout=30)

    def cancel_forward(self, address: str, port: int, local_port: int) -> None:
        """Stop a ``forward``; one the connection no longer has (it dropped since) is fine."""
        _process.run([*self._ssh, "-O", "cancel", "-L", f"127.0.0.1:{local_port}:{address}:{port}",
                      "--", self.destination], check=False, timeout=30)

    # -- the remote server: every command and file operation is one request ----------------
    # (One at a time: a slow command holds up the file reads behind it; fine for sbatch and
    # squeue, to revisit if a cluster's squeue takes seconds.)

    def _op(self, op: str, path: HostPath, arg=None, data: bytes = b"") -> tuple[int, bytes]:
        """One request to the remote server (started on first use); returns its status and
        payload. A request whose connection dropped is sent again over a new one when doing
        it twice is harmless (a read, a stat, a write of the same bytes); a command is not
        (an sbatch would submit twice): it fails, and says it may have run."""
        request = json.dumps([op, os.fspath(path), arg, len(data)]).encode() + b"\n" + data
        again = op != "run" and not (op == "mkdirs" and not arg[0])
        with self._lock:
            for attempt in (1, 2):
                try:
                    answer = self._send(request)
                    self._collect(answer)
                    if answer.status is not None:
                        break
                except (OSError, TypeError, ValueError):
                    pass
                error = self._stop_server()
                if attempt == 2 or not again:
                    argv = arg[0] if op == "run" else [self.python, "remote_ops.py", op, os.fspath(path)]
                    if any(k in error for k in KEY_REFUSALS):
                        raise HostKeyRefused(argv, self.destination, error)
                    if not error.strip():
                        error = "the connection closed" + (" before the answer: the command may have run"
                                                           if op == "run" else "")
                    raise HostUnreachable(argv, self.destination, error)
        if answer.status not in (OK, ENOENT, EEXIST, EACCES):
            raise CommandError([op, os.fspath(path)], answer.status, answer.payload.decode(errors="replace"))
        return answer.status, answer.payload

    def _send(self, request: bytes) -> _Answer:
        """Write one request (under the lock), starting the server where none runs; its answer
        comes after those of every request sent before it (`_collect`)."""
        if self._server is not None and self._server.poll() is not None:
            self._stop_server()  # it ended since the last call (its connection dropped)
        server = self._server or self._start_server()
        server.stdin.write(request)
        server.stdin.flush()
        answer = _Answer()
        self._owed.append(answer)
        return answer

    def _collect(self, answer: _Answer) -> None:
        """Read answers, in the order their requests went, up to `answer` (under the lock).
        Those of requests nobody waits for any more (a read ahead that was not taken) are
        read and dropped here, so the stream stays in step."""
        while answer.status is None and self._owed:
            first = self._owed.popleft()
            status, length = json.loads(self._server.stdout.readline() or b"null")
            payload = self._server.stdout.read(length)
            if len(payload) != length:
                raise OSError("answer cut short")
            first.status, first.payload = status, payload

    def _pipelined_reads(self, requests: Sequence[tuple[HostPath, int, int]],
                         owner: str | None = None) -> list[tuple[int, bytes]] | None:
        """The reads written back to back, then their answers read in order: one round trip
        for all. None where the connection failed meanwhile (the caller reads one by one)."""
        with self._lock:
            try:
                answers = [self._send(json.dumps(["read", os.fspath(path), [offset, size, owner], 0]).encode()
                                      + b"\n") for path, offset, size in requests]
                self._collect(answers[-1])
                if answers[-1].status is not None:
                    return [(a.status, a.payload) for a in answers]
            except (OSError, TypeError, ValueError):
                pass
            self._stop_server()
            return None

    def _start_server(self):
        self._server_errors = tempfile.TemporaryFile()
        remote = " ".join(shlex.quote(w) for w in [self.python, "-c", REMOTE_OPS])
        self._server = _process.start_piped([*self._ssh, "--", self.destination, remote],
                                            stderr_file=self._server_errors)
        return self._server

    def _stop_server(self) -> str:
        """End the server's ssh process; returns what it wrote to stderr. Answers it still owed
        stay unanswered (`status` None): their requests go again over a new connection."""
        server, errors, self._server, self._server_errors = self._server, self._server_errors, None, None
        self._owed.clear()
        if server is None:
            return ""
        for pipe in (server.stdin, server.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            server.wait(timeout=10)
        except Exception:  # noqa: BLE001 - it must go, whatever state it is in
            server.kill()
            server.wait()
        errors.seek(0)
        text = errors.read().decode(errors="replace")
        errors.close()
        return text

    # -- files -----------------------------------------------------------------------------

    def stat(self, path: HostPath) -> FileStat | None:
        found = json.loads(self._op("stat", path)[1])
        return None if found is None else FileStat(*found)

    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        found = json.loads(self._op("list", path)[1])
        return None if found is None else [DirEntry(*entry) for entry in found]

    def read(self, path: HostPath, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        return _read_result(path, *self._op("read", path, [offset, size, owner]))

    def read_later(self, path: HostPath, offset: int, size: int, *,
                   owner: str | None = None) -> Callable[[], bytes]:
        """The request goes now; its answer is read when the bytes are taken, meanwhile crossing
        the connection while the caller decodes what it read before. Where the connection
        dropped in between, taking them reads again over a new one."""
        with self._lock:
            try:
                answer = self._send(json.dumps(["read", os.fspath(path), [offset, size, owner], 0]).encode() + b"\n")
            except (OSError, TypeError, ValueError):
                self._stop_server()
                answer = _Answer()

        def take() -> bytes:
            with self._lock:
                try:
                    self._collect(answer)
                except (OSError, TypeError, ValueError):
                    self._stop_server()
            if answer.status is None:
                return self.read(path, offset, size, owner=owner)
            if answer.status not in (OK, ENOENT, EACCES):
                raise CommandError(["read", os.fspath(path)], answer.status, answer.payload.decode(errors="replace"))
            return _read_result(path, answer.status, answer.payload)
        return take

    def read_many(self, requests: Sequence[tuple[HostPath, int, int]], *,
                  owner: str | None = None) -> list[bytes | None]:
        out: list[bytes | None] = []
        for start in range(0, len(requests), READ_BATCH):
            chunk = requests[start:start + READ_BATCH]
            answers = self._pipelined_reads(chunk, owner)
            if answers is None:  # dropped: a read is harmless twice, so one by one over a new connection
                out += super().read_many(chunk, owner=owner)
                continue
            for (status, payload), (path, _, _) in zip(answers, chunk):
                if status not in (OK, ENOENT, EACCES):
                    raise CommandError(["read", os.fspath(path)], status, payload.decode(errors="replace"))
                out.append(payload if status == OK else None)
        return out

    def write(self, path: HostPath, data: bytes) -> None:
        self._op("write", path, data=data)

    def make_dirs(self, path: HostPath, exist_ok: bool = True, mode: int = 0o777) -> None:
        if self._op("mkdirs", path, [exist_ok, mode])[0] == EEXIST:
            raise FileExistsError(17, "File exists", os.fspath(path))

    def remove_tree(self, path: HostPath) -> None:
        self._op("rmtree", path)


class _Answer:
    """The server's answer to one request, once read: `status` None until then, and for good
    where the connection dropped first."""

    __slots__ = ("status", "payload")

    def __init__(self):
        self.status: int | None = None
        self.payload = b""


def _read_result(path: HostPath, status: int, data: bytes) -> bytes:
    if status == ENOENT:
        raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
    if status == EACCES:
        raise PermissionError(13, data.decode(errors="replace"), os.fspath(path))
    return data

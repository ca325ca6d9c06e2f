"""A cluster's login node as a host, over OpenSSH.

OpenSSH itself, not a Python SSH library: it is what reads the user's ``~/.ssh/config``
(aliases, ``ProxyJump``, ``IdentityFile``, ``Match``), talks to their agent and their
security keys, and checks host keys as they expect. One authenticated connection per host
carries every command, poll and file read (``ControlMaster=auto`` with ``ControlPersist``:
the first command opens it, the others are sessions over it, a few milliseconds each), as
SkyPilot does. When it drops, the next command opens a new one by itself.

Commands are argument lists; ssh sends the remote side one string, so each word is quoted
with ``shlex.quote`` (a POSIX shell's rules: the login shell of almost every cluster user).
File operations run ``hosts/remote_ops.py`` with the remote Python. ``BatchMode`` is on:
nothing ever waits for a password prompt that no one sees (a notebook has no terminal), so
a host that needs one is logged in to once first (``ssh HOST`` in a terminal, which then
opens the shared connection), and ``StrictHostKeyChecking`` refuses unknown or changed keys.
"""

from __future__ import annotations

import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path

from .. import _process
from ..exceptions import CommandError, HostKeyRefused, HostUnreachable
from .base import DirEntry, FileStat, Host, HostPath
from .remote_ops import EEXIST_EXIT, ENOENT_EXIT

REMOTE_OPS = (Path(__file__).with_name("remote_ops.py")).read_text()
SSH_FAILED = 255  # ssh's own exit code: it could not connect or log in; the command never ran
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
        self._ssh = ["ssh", *(["-F", str(config_file)] if config_file else []),
                     "-o", "ControlMaster=auto", "-o", f"ControlPath={self.control_path}",
                     "-o", f"ControlPersist={persist_s}", "-o", "BatchMode=yes",
                     "-o", "StrictHostKeyChecking=yes", "-o", f"ConnectTimeout={connect_timeout:g}",
                     "-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=3",
                     *(["-p", str(port)] if port else []), *(["-l", user] if user else [])]

    # -- commands ---------------------------------------------------------------------

    def run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
            timeout: float = 60, input: str | None = None) -> _process.Result:
        done = self._run(argv, env=env, check=check, timeout=timeout, input=None if input is None else input.encode())
        return _process.Result(done.argv, done.returncode, done.stdout.decode(errors="replace"), done.stderr)

    def _run(self, argv: Sequence[str], *, env: Mapping[str, str] | None = None, check: bool = True,
             timeout: float = 60, input: bytes | None = None,
             ok_codes: tuple[int, ...] = ()) -> _process.BytesResult:
        argv = [str(a) for a in argv]
        words = (["env", *(f"{k}={v}" for k, v in env.items())] if env else []) + argv
        remote = " ".join(shlex.quote(w) for w in words)
        try:
            done = _process.run_bytes([*self._ssh, "--", self.destination, remote], timeout=timeout,
                                      check=False, input=input)
        except CommandError as e:  # a timeout: report the command, not ssh's wrapping of it
            raise CommandError(argv, e.returncode, e.stderr, timeout=e.timeout) from None
        if done.returncode == SSH_FAILED:
            if any(k in done.stderr for k in KEY_REFUSALS):
                raise HostKeyRefused(argv, self.destination, done.stderr)
            raise HostUnreachable(argv, self.destination, done.stderr)
        if check and done.returncode != 0 and done.returncode not in ok_codes:
            raise CommandError(argv, done.returncode, done.stderr or done.stdout.decode(errors="replace"))
        return _process.BytesResult(argv, done.returncode, done.stdout, done.stderr)

    def close(self) -> None:
        """End the shared connection (``ssh -O exit``); the next command opens a new one."""
        _process.run([*self._ssh, "-O", "exit", self.destination], check=False, timeout=10)

    # -- files ---------------------------------------------------------------------------

    def _op(self, op: str, path: HostPath, arg: str = "", input: bytes | None = None,
            ok_codes: tuple[int, ...] = ()) -> _process.BytesResult:
        return self._run([self.python, "-c", REMOTE_OPS, op, os.fspath(path), arg], input=input,
                         ok_codes=ok_codes)

    def stat(self, path: HostPath) -> FileStat | None:
        found = json.loads(self._op("stat", path).stdout)
        return None if found is None else FileStat(*found)

    def list_dir(self, path: HostPath) -> list[DirEntry] | None:
        found = json.loads(self._op("list", path).stdout)
        return None if found is None else [DirEntry(*entry) for entry in found]

    def read(self, path: HostPath, offset: int = 0, size: int = -1) -> bytes:
        done = self._op("read", path, f"{offset},{size}", ok_codes=(ENOENT_EXIT,))
        if done.returncode == ENOENT_EXIT:
            raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
        return done.stdout

    def write(self, path: HostPath, data: bytes) -> None:
        self._op("write", path, input=data)

    def make_dirs(self, path: HostPath, exist_ok: bool = True) -> None:
        done = self._op("mkdirs", path, "exist_ok" if exist_ok else "", ok_codes=(EEXIST_EXIT,))
        if done.returncode == EEXIST_EXIT:
            raise FileExistsError(17, "File exists", os.fspath(path))

    def remove_tree(self, path: HostPath) -> None:
        self._op("rmtree", path)

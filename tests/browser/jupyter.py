"""A real ``jupyter server`` or ``jupyter lab`` process for tests: a free port, a random
token, and its own root, config, data, runtime, workspaces and settings folders, so it
neither sees nor touches a user's Jupyter. It loads the server extensions the installed
environment enables (ours among them), as a user's server would."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path


# The app is started by its main() under a SIGUSR2 handler that writes every thread's stack
# to the log (``dump_threads``): what a failing test shows of a server that is stuck.
_MAIN = {"lab": "jupyterlab.labapp", "server": "jupyter_server.serverapp"}
_BOOT = ("import faulthandler, signal, sys; faulthandler.register(signal.SIGUSR2, all_threads=True); "
         "sys.argv[0] = 'jupyter-{app}'; from {module} import main; sys.exit(main())")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class JupyterProcess:
    """``with JupyterProcess(tmp_path, app="lab") as jp:`` ... ``jp.url``, ``jp.api(...)``."""

    def __init__(self, tmp: Path, app: str = "server", start_timeout: float = 60, extra_args: list[str] = (),
                 as_user=None, user_env: dict[str, str] | None = None):
        """``as_user`` (a ``tests.non_root.NormalUser``) starts it as that user, with the README's
        command (``.venv/bin/jupyter lab``) and only ``user_env`` for an environment."""
        self.app = app
        self.as_user, self.user_env = as_user, dict(user_env or {})
        self.extra_args = list(extra_args)
        self.tmp = Path(tmp)
        self.root_dir = self.tmp / "root"
        self.settings_dir = self.tmp / "settings"
        self.port = free_port()
        self.token = secrets.token_hex(16)
        self.base_url = "/"
        self.url = f"http://127.0.0.1:{self.port}/"
        self.start_timeout = start_timeout
        self.proc: subprocess.Popen | None = None
        self.log_path = self.tmp / f"jupyter-{app}.log"

    # -- life ------------------------------------------------------------------------------

    def __enter__(self) -> JupyterProcess:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        for d in ("root", "config", "data", "runtime", "workspaces", "settings", "ipython"):
            (self.tmp / d).mkdir(parents=True, exist_ok=True)
        # JupyterLab's news toast is not stopped by news_url=None, only by its setting (fetchNews).
        notification = self.settings_dir / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings"
        notification.parent.mkdir(parents=True, exist_ok=True)
        notification.write_text(json.dumps({"fetchNews": "false", "checkForUpdates": False}))
        env = {**os.environ,
               "JUPYTER_CONFIG_DIR": str(self.tmp / "config"),  # the environment's config still applies
               "JUPYTER_DATA_DIR": str(self.tmp / "data"),
               "JUPYTER_RUNTIME_DIR": str(self.tmp / "runtime"),
               "IPYTHONDIR": str(self.tmp / "ipython"),
               "JUPYTER_PLATFORM_DIRS": "1"}
        if self.as_user is not None:
            env = {**self.user_env, **{k: v for k, v in env.items() if k.startswith(("JUPYTER_", "IPYTHON"))}}
            for folder in [self.tmp, *self.tmp.rglob("*")]:
                os.chown(folder, self.as_user.uid, self.as_user.pw.pw_gid)
            command = [shutil.which("runuser") or "/usr/sbin/runuser", "-u", self.as_user.name, "--", str(Path(sys.prefix) / "bin" / "jupyter"), self.app]
        else:
            command = [sys.executable, "-c", _BOOT.format(app=self.app, module=_MAIN[self.app])]
        argv = [*command, "--no-browser", f"--port={self.port}", "--ip=127.0.0.1", f"--IdentityProvider.token={self.token}",
                f"--ServerApp.root_dir={self.root_dir}", "--ServerApp.port_retries=0",
                "--ServerApp.allow_remote_access=False"]
        if os.geteuid() == 0 and self.as_user is None:
            argv.append("--allow-root")
        argv += self.extra_args
        if self.app == "lab":
            argv += [f"--LabApp.workspaces_dir={self.tmp / 'workspaces'}",
                     f"--LabApp.user_settings_dir={self.settings_dir}", "--LabApp.news_url=None"]
        self._log = open(self.log_path, "ab")  # a restart adds to it
        self.proc = subprocess.Popen(argv, cwd=self.root_dir, env=env, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"jupyter {self.app} exited with {self.proc.returncode}:\n{self.log()}")
            try:
                self.api("GET", "api/status")
                return
            except (urllib.error.URLError, ConnectionError, OSError):
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"jupyter {self.app} did not answer /api/status in {self.start_timeout} s:\n{self.log()}")

    def shutdown_kernels(self) -> None:
        try:
            for kernel in self.api("GET", "api/kernels"):
                self.api("DELETE", f"api/kernels/{kernel['id']}")
        except (urllib.error.URLError, OSError, ValueError):
            pass  # a server that is already gone has no kernels left either

    def stop(self) -> None:
        """Shut kernels down, then stop the server's whole process group."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.shutdown_kernels()
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(timeout=10)
        self._log.close()
        self.proc = None

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)  # start_new_session: its group is its own pid
        except ProcessLookupError:
            pass

    def dump_threads(self) -> None:
        """Every thread's stack into the log (see ``_BOOT``)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR2)
            time.sleep(0.5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- HTTP ------------------------------------------------------------------------------

    def request(self, method: str, path: str, body: bytes | None = None, token: bool = True,
                headers: dict | None = None, timeout: float = 30):
        """(status, headers, body bytes) of one request; never follows redirects."""
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"token {self.token}"
        req = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        opener = urllib.request.build_opener(_NoRedirect)
        try:
            with opener.open(req, timeout=timeout) as resp:
                return resp.status, resp.headers, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, e.headers, e.read()

    def api(self, method: str, path: str, payload=None):
        body = None if payload is None else json.dumps(payload).encode()
        status, _, data = self.request(method, path, body, headers={"Content-Type": "application/json"})
        if status >= 400:
            raise urllib.error.URLError(f"{method} {path}: HTTP {status}: {data[:500]!r}")
        return json.loads(data) if data else None

    def wait_for_idle_kernel(self, notebook_path: str, timeout: float = 60) -> dict:
        """The session of ``notebook_path`` once its kernel is idle (a page opening the
        notebook starts it)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for session in self.api("GET", "api/sessions"):
                if session.get("path") == notebook_path and session["kernel"]["execution_state"] == "idle":
                    return session
            time.sleep(0.25)
        raise TimeoutError(f"no idle kernel for {notebook_path} within {timeout} s: {self.api('GET', 'api/sessions')}")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None

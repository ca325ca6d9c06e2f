"""A local copy of a folder on a cluster's host, kept up to date by reading only what is new.

TensorBoard reads files, not hosts: for a job on an attached cluster, its event files are
mirrored here (``$GTC_HOME/mirrors/...``) and TensorBoard reads the mirror. Event files only
grow, so each pass asks the host for a listing and, per file, the bytes past the copy's
size (one round trip each over the shared SSH connection); a file that shrank (rewritten)
is copied again whole.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path, PurePosixPath

from ..hosts import Host

log = logging.getLogger(__name__)


class Mirror:
    def __init__(self, host: Host, remote: PurePosixPath | Path, local: Path, interval: float = 2.0):
        self.host, self.remote, self.local, self.interval = host, PurePosixPath(remote), Path(local), interval
        self.local.mkdir(parents=True, exist_ok=True)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sync(self) -> int:
        """One pass: copy what is new under the remote folder; returns the bytes copied."""
        return self._sync_dir(self.remote, self.local)

    def _sync_dir(self, remote: PurePosixPath, local: Path) -> int:
        copied = 0
        for entry in self.host.list_dir(remote) or ():
            there, here = remote / entry.name, local / entry.name
            if entry.is_dir:
                here.mkdir(exist_ok=True)
                copied += self._sync_dir(there, here)
            elif entry.is_file:
                copied += self._sync_file(there, here)
        return copied

    def _sync_file(self, remote: PurePosixPath, local: Path) -> int:
        have = local.stat().st_size if local.exists() else 0
        found = self.host.stat(remote)
        if found is None or found.size == have:
            return 0
        if found.size < have:  # rewritten shorter: start the copy over
            local.unlink()
            have = 0
        data = self.host.read(remote, have)
        with open(local, "ab") as f:
            f.write(data)
        return len(data)

    def start(self) -> "Mirror":
        """Sync now, then every ``interval`` seconds in a thread until ``stop``."""
        self.sync()
        self._thread = threading.Thread(target=self._run, name=f"gtc-mirror-{self.remote.name}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.sync()
            except Exception as e:  # noqa: BLE001 - a dropped connection: the next pass tries again
                log.warning("mirroring %s failed: %s", self.remote, e)

    def stop(self) -> None:
        self._stop.set()

"""A real OpenSSH server for tests (Debian's ``openssh-server``): its own host key, port,
config and log, in a temporary folder; a client config with an alias, a key of its own and
a known_hosts of its own. Nothing of the machine's ssh setup is read or changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from jupyter_gtc._ports import free_ports

SSHD = shutil.which("sshd", path="/usr/sbin:/usr/bin:/sbin:/bin")


@dataclass
class SSHServer:
    root: Path
    port: int
    process: subprocess.Popen
    alias: str = "gtc-login"
    address: str = "127.0.0.1"

    @property
    def config(self) -> Path:
        return self.root / "client" / "config"

    @property
    def known_hosts(self) -> Path:
        return self.root / "client" / "known_hosts"

    @property
    def log(self) -> str:
        return (self.root / "sshd.log").read_text(errors="replace")

    def logins(self) -> int:
        """Connections that logged in: one per SSH connection, however many sessions it carries."""
        return self.log.count("Accepted publickey")

    def host_key_line(self) -> str:
        key = (self.root / "host_ed25519.pub").read_text().split()
        return f"[{self.address}]:{self.port} {key[0]} {key[1]}\n"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def start_sshd(root: Path, user: str = "root", mounts: dict[str, Path] | None = None,
               password_only: bool = False, address: str = "127.0.0.1", netns_prefix: list[str] | None = None
               ) -> SSHServer:
    """``mounts`` (path -> folder): what the server sees at ``path`` and this process does
    not, as a login node mounts the cluster's shared file system: the server runs in a mount
    namespace of its own, with ``folder`` bind-mounted there. Without SSH, a file under
    ``path`` cannot be read from here. ``password_only``: a login that takes no key, as
    sites with passwords or a second factor have. ``netns_prefix`` (``nsenter --net=...``)
    runs it in another network namespace, listening on ``address`` there: a machine of its own."""
    root.mkdir(parents=True, exist_ok=True)
    client = root / "client"
    client.mkdir(mode=0o700, exist_ok=True)
    keygen = ["ssh-keygen", "-q", "-t", "ed25519", "-N", ""]
    subprocess.run([*keygen, "-f", str(root / "host_ed25519")], check=True)
    subprocess.run([*keygen, "-f", str(client / "id_ed25519")], check=True)
    shutil.copy(client / "id_ed25519.pub", root / "authorized_keys")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    port = free_ports(1)[0]
    (root / "sshd_config").write_text(f"""\
Port {port}
ListenAddress {address}
HostKey {root}/host_ed25519
PidFile {root}/sshd.pid
AuthorizedKeysFile {root}/authorized_keys
PasswordAuthentication {"yes" if password_only else "no"}
PubkeyAuthentication {"no" if password_only else "yes"}
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
MaxSessions 100
MaxStartups 100
LogLevel VERBOSE
""")
    log = open(root / "sshd.log", "ab")
    argv = [*(netns_prefix or []), SSHD, "-D", "-e", "-f", str(root / "sshd_config")]
    if mounts:
        # `mount --bind` for each pair, then sshd, in a private mount namespace.
        binds = " && ".join(f'mount --bind "${2 * i + 1}" "${2 * i + 2}"' for i in range(len(mounts)))
        pairs = [str(v) for path, folder in mounts.items() for v in (folder, path)]
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                f'{binds} && shift {2 * len(mounts)} && exec "$@"', "sh", *pairs, *argv]
    process = subprocess.Popen(argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    server = SSHServer(root, port, process, address=address)
    (client / "config").write_text(f"""\
Host {server.alias}
    HostName {address}
    Port {port}
    User {user}
    IdentityFile {client}/id_ed25519
    IdentitiesOnly yes
    UserKnownHostsFile {client}/known_hosts
    GlobalKnownHostsFile /dev/null
""")
    server.known_hosts.write_text(server.host_key_line())
    deadline = time.monotonic() + 30
    while "Server listening" not in server.log:
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"sshd did not start:\n{server.log}")
        time.sleep(0.05)
    return server

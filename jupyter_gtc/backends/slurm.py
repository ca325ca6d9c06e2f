"""The ``slurm`` backend: a Slurm cluster that exists without us, attached, never changed.

Two ways in (``spec/attach.py``): over SSH to its login node (one shared OpenSSH connection,
``hosts/ssh.py``), or from a login node itself, where Slurm's commands work as they are (no
``ssh`` block). ``create`` attaches: it checks that Slurm answers, reads the partitions and
the Slurm version, and makes the jobs' folder on the cluster; ``delete`` detaches: it closes
the connection and leaves the cluster, its jobs and their folders as they are.

What differs from a local cluster, and where it is handled:
- No TaskProlog of ours runs there, so the job contract (``AIP_*``, ``CLOUD_ML_JOB_ID``) and the
  cluster's Python reach a job through its batch script (``job_launch``), not sbatch's
  environment, which is the login node's.
- Finished jobs come from ``squeue`` while slurmctld remembers them (its ``MinJobAge``, 300 s by
  default; the poller ticks far more often), as there is no completion file of ours to read;
  where the cluster keeps accounting (slurmdbd), from ``sacct`` after that (a kernel started
  hours after its job ended still learns how it ended).
- Its scheduler is shared: at most one poll per ``poll_interval`` (5 s by default).
"""

from __future__ import annotations

import os
import shlex
import stat
import threading
from pathlib import Path
from typing import Any

from ..exceptions import CommandError, GtcError, HostKeyRefused, HostUnreachable, SpecError
from ..hosts import LOCAL, Host
from ..hosts.ssh import SSHHost
from ..slurm.commands import SlurmCommands
from ..spec.attach import DEFAULT_POLL_INTERVAL, AttachSpec, parse_attach_spec
from ..spec.job import APPENDED_OUTPUT_ENV, ATTEMPT_NOTE, insert_after_header, is_shell_script
from .base import Backend, ClusterStatus, JobLaunch, PartitionLayout, Progress

# One SSHHost (one connection, one remote file server) per login node per process, shared by
# every cluster record, poller and job handle that reaches it.
_hosts: dict[tuple, SSHHost] = {}
_hosts_lock = threading.Lock()


class SlurmBackend(Backend):
    name = "slurm"
    attaches = True

    def problems(self) -> list[str]:
        return []  # what an attach needs (ssh, Slurm's commands there) is checked when it attaches

    def parse_spec(self, data: Any, display_name: str | None = None) -> AttachSpec:
        return parse_attach_spec(data, display_name)

    def check_spec(self, spec: AttachSpec) -> None:
        if not isinstance(spec, AttachSpec):
            raise SpecError("backend", "slurm", "the slurm backend attaches a cluster described by an attach "
                                                "spec (ssh, python, jobs_root...), not a cluster spec to create")

    def min_poll_interval(self, runtime: dict[str, Any]) -> float:
        return runtime.get("poll_interval", DEFAULT_POLL_INTERVAL)

    # -- attach and detach -----------------------------------------------------------------

    def create(self, spec: AttachSpec, runtime: dict[str, Any], progress: Progress) -> None:
        runtime.update(_reach(spec))
        host, commands = self.host(runtime), self.commands(runtime)
        if spec.slurm_conf is not None and host.stat(spec.slurm_conf) is None:
            # Without it sinfo looks for a config server in DNS and gives up only after 30 s.
            raise SpecError("slurm_conf", spec.slurm_conf, f"no such file on {_where(spec)}; give the cluster's "
                                                           f"slurm.conf there, or leave slurm_conf out")
        progress(f"asking Slurm on {_where(spec)}")
        try:
            version = commands.run(["sinfo", "--version"], timeout=30).stdout.strip()
            runtime["slurm_version"] = version.split()[-1] if version else "?"  # "slurm-wlm 22.05.8"
            runtime["partitions"] = _read_partitions(commands)
            runtime["accounting"] = _keeps_accounting(commands)
        except (HostUnreachable, HostKeyRefused):
            raise  # about the connection, and each says what to do
        except CommandError as e:
            raise GtcError(f"Slurm did not answer on {_where(spec)}: {e}. Its commands (sinfo, squeue, sbatch) "
                           f"must be on the PATH that {'ssh gives a command' if spec.ssh else 'this process has'}"
                           + ("" if spec.slurm_conf else ", or set slurm_conf in the attach spec")) from None
        root = spec.jobs_root
        if root == "~" or root.startswith("~/"):
            home = (host.run(["printenv", "HOME"], timeout=30).stdout.strip() if spec.ssh
                    else os.path.expanduser("~"))
            root = home.rstrip("/") + root[1:]
        host.make_dirs(root)
        runtime["jobs_root"] = root
        if spec.python is not None and host.stat(spec.python) is None:
            raise SpecError("python", spec.python, f"no such file on {_where(spec)}; give the cluster's Python "
                                                   f"for jobs (an environment's bin/python)")
        progress(f"attached: Slurm {runtime['slurm_version']}, partitions "
                 f"{', '.join(p['name'] for p in runtime['partitions']) or '(none)'}")

    def delete(self, spec: AttachSpec, runtime: dict[str, Any], progress: Progress) -> None:
        """Detach: close the shared connection. Jobs keep running and their folders stay."""
        if "ssh" in runtime:
            with _hosts_lock:
                host = _hosts.pop(_host_key(runtime), None)
            if host is not None:
                host.close()
        progress("detached; the cluster and its jobs are as they were")

    def scale(self, old, new, runtime: dict[str, Any], progress: Progress) -> None:
        raise GtcError("an attached cluster is never resized by jupyter_gtc; its admins do")

    # -- reaching it -----------------------------------------------------------------------

    def host(self, runtime: dict[str, Any]) -> Host:
        return _shared_host(runtime["ssh"]) if "ssh" in runtime else LOCAL

    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        return {"SLURM_CONF": runtime["slurm_conf"]} if runtime.get("slurm_conf") else {}

    def commands(self, runtime: dict[str, Any]) -> SlurmCommands:
        return SlurmCommands(self.client_env(runtime), timeout=60, host=self.host(runtime),
                             accounting=runtime.get("accounting", False))

    def status(self, spec: AttachSpec, runtime: dict[str, Any]) -> ClusterStatus:
        details = {"login": _where(spec), "slurm_version": runtime.get("slurm_version"),
                   "jobs_root": runtime.get("jobs_root"),
                   "accounting": "slurmdbd (sacct)" if runtime.get("accounting") else "none"}
        try:
            nodes = self.commands(runtime).nodes()
        except CommandError as e:  # HostUnreachable included: the next call tries again
            return ClusterStatus(False, [], details, f"{_where(spec)} did not answer: {e}; retried on the next look")
        return ClusterStatus(True, nodes, details)

    def partitions(self, spec: AttachSpec, runtime: dict[str, Any]) -> list[PartitionLayout]:
        return [PartitionLayout(p["name"], tuple(p["nodes"]), tuple(p["node_gpus"]), ("",) * len(p["nodes"]),
                                p["default"])
                for p in runtime.get("partitions", [])]

    def jobs_root(self, cluster: str, runtime: dict[str, Any]) -> str:
        return f"{runtime['jobs_root']}/{cluster}"

    # -- jobs ------------------------------------------------------------------------------

    def job_launch(self, spec: AttachSpec, runtime: dict[str, Any], script: str, variables: dict[str, str],
                   python_env: Any) -> JobLaunch:
        """The contract and the cluster's Python as ``export`` lines in the batch script, after
        its ``#SBATCH`` header (sbatch reads none past the first command), each value quoted.
        A script that is not a shell's gets the contract in sbatch's environment, which sbatch
        exports to it, and neither the Python environment nor the setup lines."""
        env_dir = self._python_env(spec, runtime, python_env)
        if not is_shell_script(script):  # a Python script, say: the contract through sbatch's environment
            return JobLaunch(script, {**variables}, env_dir)
        lines = ["# Added by jupyter_gtc: the job contract (no TaskProlog of ours runs on this cluster)."]
        lines += [f"export {k}={shlex.quote(v)}" for k, v in variables.items() if k != APPENDED_OUTPUT_ENV]
        lines.append('export CLOUD_ML_JOB_ID="$SLURM_JOB_ID"')
        if variables.get(APPENDED_OUTPUT_ENV) == "1":  # its output is appended to: the note is true
            lines.append(f'[ -z "${{SLURM_RESTART_COUNT:-}}" ] || echo "{ATTEMPT_NOTE}"')
        if env_dir is not None:
            lines.append(f'export PATH={shlex.quote(env_dir + "/bin")}:"$PATH"')
        lines += list(spec.setup)
        return JobLaunch(insert_after_header(script, lines), {}, env_dir)

    def job_container(self, spec: AttachSpec, runtime: dict[str, Any], request, launch: JobLaunch, job_dir,
                      work_dir: str):
        """pyxis's flags pass to sbatch unchanged where the cluster's srun has pyxis (its
        ``--help`` lists ``--container-image``); else a refusal saying whom to ask."""
        from ..containers.runtime import INSTALL
        from ..containers.slurm_job import ContainerRefused
        from .base import ContainerLaunch

        found = self.host(runtime).run(["srun", "--help"], check=False, timeout=30, env=self.client_env(runtime))
        if "--container-image" in found.stdout:
            return ContainerLaunch(launch, pass_through=True)
        raise ContainerRefused(f"image {request.image}: cluster {spec.name}'s srun has no pyxis (no --container-image "
                               f"in `srun --help` on {_where(spec)}); {INSTALL['pyxis']}")

    def _python_env(self, spec: AttachSpec, runtime: dict[str, Any], choice: Any) -> str | None:
        """The environment on the cluster first on a job's PATH: ``choice`` (a folder there, or
        "none"), else the attach spec's ``python``'s; None for none."""
        if choice is None:
            return str(Path(spec.python).parent.parent) if spec.python else None
        if choice is False or str(choice).strip().lower() == "none":
            return None
        path = str(choice).rstrip("/")
        if path.endswith(("/bin/python", "/bin/python3")):
            path = path.rsplit("/bin/", 1)[0]
        host = self.host(runtime)
        if not path.startswith("/") or not any(host.stat(f"{path}/bin/{n}") for n in ("python", "python3")):
            raise SpecError("python_env", str(choice), f"a Python environment on {_where(spec)}: an absolute "
                                                       f"folder with bin/python there, or 'none'")
        return path


def connect(ssh: dict[str, Any]) -> int:
    """Open the shared connection to a login node (``ssh``: an attach spec's ``ssh`` block) in
    this terminal, for a login that asks for a password or a second factor; ssh's exit status."""
    return _shared_host(ssh).connect()


def _shared_host(ssh: dict[str, Any]) -> SSHHost:
    """The process's one ``SSHHost`` for the login node an ``ssh`` block names."""
    key = _host_key({"ssh": ssh})
    with _hosts_lock:
        if key not in _hosts:
            _hosts[key] = SSHHost(ssh["host"], control_dir=_control_dir(), port=ssh.get("port"), user=ssh.get("user"),
                                  config_file=Path(ssh["config_file"]) if ssh.get("config_file") else None)
        return _hosts[key]


def _reach(spec: AttachSpec) -> dict[str, Any]:
    """What of the spec the backend needs to reach the cluster, kept in the runtime record."""
    out: dict[str, Any] = {"mode": "ssh" if spec.ssh else "login", "poll_interval": spec.poll_interval}
    if spec.ssh:
        out["ssh"] = spec.ssh.model_dump(exclude_none=True)
    if spec.slurm_conf:
        out["slurm_conf"] = spec.slurm_conf
    return out


def _where(spec: AttachSpec) -> str:
    if spec.ssh is None:
        return "this machine"
    user, port = f"{spec.ssh.user}@" if spec.ssh.user else "", f":{spec.ssh.port}" if spec.ssh.port else ""
    return f"{user}{spec.ssh.host}{port}"


def _host_key(runtime: dict[str, Any]) -> tuple:
    ssh = runtime["ssh"]
    return ssh["host"], ssh.get("user"), ssh.get("port"), ssh.get("config_file")


def _read_partitions(commands: SlurmCommands) -> list[dict[str, Any]]:
    """Partitions (the default first) with their nodes and each node's GPUs, from sinfo's
    list (its ``*`` marks the default) and ``scontrol show node``: both stable formats."""
    names = commands.run(["sinfo", "-h", "-o", "%P"]).stdout.split()
    nodes = commands.nodes()
    out = []
    for name in dict.fromkeys(names):
        plain = name.rstrip("*")
        members = [n for n in nodes if plain in n.partitions]
        out.append({"name": plain, "nodes": [n.name for n in members], "node_gpus": [n.gpus for n in members],
                    "default": name.endswith("*")})
    return sorted(out, key=lambda p: not p["default"])


def _keeps_accounting(commands: SlurmCommands) -> bool:
    """Whether the cluster sends jobs to slurmdbd, so that sacct has every one of them."""
    for line in commands.run(["scontrol", "show", "config"]).stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "AccountingStorageType":
            return value.strip() == "accounting_storage/slurmdbd"
    return False


def _control_dir() -> Path:
    """A folder of this user's alone for the shared connections' sockets, with a short path
    (a socket path holds at most 104 bytes): ``$XDG_RUNTIME_DIR``, else one in /tmp that is
    checked to be ours, since anyone can make a folder there first."""
    runtime_dir = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(runtime_dir) / "gtc-ssh" if runtime_dir else Path(f"/tmp/gtc-ssh-{os.getuid()}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise GtcError(f"{folder} is not a private folder of this user's (owner uid {info.st_uid}, mode "
                       f"{stat.S_IMODE(info.st_mode):o}); remove it, and jupyter_gtc makes its own")
    return folder

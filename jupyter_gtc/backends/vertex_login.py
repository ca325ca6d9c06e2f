"""A Vertex AI training cluster's jobs go through its login node: the login pool's node, which
Vertex reports in ``clusterStatus.nodesStatus`` (its ``instanceName``), reached over SSH as the
``slurm`` backend reaches an attached cluster's (one shared connection, ``backends/slurm.py``).

The host is an alias of the user's ssh config, the instance name by default (``gcloud compute
config-ssh``, or an IAP ``ProxyCommand`` entry, writes one per instance), in the config file
``gtc config vertex.ssh_config`` names (default: ssh's own). The spec's ``login`` section
(``spec/vertex_cluster.LoginSpec``: an attach spec's fields, plus ``jobs: api | ssh``) overrides
each of these per cluster. From it an attach spec is built, and the ``slurm`` backend's own
attach runs over it once (Slurm's version, partitions, accounting, the jobs' folder): its
runtime is kept in the training cluster's (``runtime["login"]``), and the ``slurm`` backend's
methods do the rest (host, job_launch, job_container, jobs_root, work_dir, partitions, and the
scheduler's commands for ``jobs: ssh``).

A login node not yet known (Vertex has not reported it) or not reachable at create is tried again
when a job needs it (at most once per ``RETRY_S`` per process); until it answers, a submit is
refused before anything is made, saying which host, which ssh config and how to fix it. The
Slurm Job API alone cannot carry a job of ours: its folder, log, metrics and checkpoints live
on the cluster's file system, which only the login node reaches.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from ..exceptions import CommandError, GtcError, HostKeyRefused, HostUnreachable, SpecError, SpecErrors
from ..hosts import Host
from ..spec.attach import AttachSpec
from ..spec.vertex_cluster import LoginSpec

RETRY_S = 30.0  # a login node that did not answer is asked again after this long, not on every call
# Attaches made (or failed) in this process after create, by (api endpoint, project, region, id).
_found: dict[tuple, dict[str, Any]] = {}
_failed: dict[tuple, tuple[float, str]] = {}
_lock = threading.Lock()


class LoginUnreachable(GtcError):
    """A training cluster's login node is not known or does not answer: no job can go in."""

    http_status = 409
    google_status = "FAILED_PRECONDITION"


# How the scheduler is called where the login section does not say: through the Slurm Job API
# (one list call a poll, no SSH command per tick); the files still go through the login node.
DEFAULT_JOBS = "api"


def login_instance(cluster: dict[str, Any], login_pool: str | None) -> str | None:
    """The instance name of the login pool's node in Vertex's ``nodesStatus``; None before it is reported."""
    for node in (cluster.get("clusterStatus") or {}).get("nodesStatus") or []:
        if login_pool and node.get("nodePoolId") == login_pool and node.get("instanceName"):
            return node["instanceName"]
    return None


def attach_spec(name: str, login: dict[str, Any], instance: str | None, ssh_config: str | None) -> AttachSpec:
    """The attach spec of cluster ``name``'s login node: the ``login`` section's fields, its
    ``ssh`` the section's or ``{host: instance, config_file: ssh_config}``."""
    section = LoginSpec.model_validate(login or {})
    ssh = section.ssh.model_dump(exclude_none=True) if section.ssh else ({"host": instance} if instance else None)
    if ssh is None:
        raise LoginUnreachable(f"cluster {name}: {_unknown(name, ssh_config)}")
    if ssh_config and "config_file" not in ssh:
        ssh["config_file"] = ssh_config
    fields = section.model_dump(exclude={"jobs", "display_name", "ssh"}, exclude_none=True)
    return AttachSpec.model_validate({**fields, "display_name": name, "ssh": ssh})


def attach(slurm, name: str, runtime: dict[str, Any], cluster: dict[str, Any], ssh_config: str | None,
           progress) -> bool:
    """Attach the login node of ``cluster`` (Vertex's resource) through ``slurm`` (the ``slurm``
    backend), keeping its runtime in ``runtime["login"]``; on failure the reason in
    ``runtime["login_problem"]``, said as a progress line. True when attached."""
    runtime.pop("login_problem", None)
    instance = login_instance(cluster, runtime.get("login_pool"))
    try:
        spec = attach_spec(name, runtime.get("login_section") or {}, instance, ssh_config)
        login: dict[str, Any] = {}
        slurm.create(spec, login, progress)
    except (HostUnreachable, HostKeyRefused, CommandError, SpecError, SpecErrors, GtcError) as e:
        runtime["login_problem"] = refusal(name, runtime, instance, ssh_config, e)
        progress(f"jobs wait for the login node: {runtime['login_problem']}")
        return False
    runtime["login"], runtime["login_spec"] = login, spec.to_json()
    return True


def login_runtime(backend, runtime: dict[str, Any], retry: bool = True) -> dict[str, Any] | None:
    """The ``slurm`` runtime of the cluster's login node: the one create kept, else one attached
    since in this process, else (``retry``) one attached now; None where it is not known."""
    if "login" in runtime:
        return runtime["login"]
    key = _key(runtime)
    with _lock:
        if key in _found:
            return _found[key]["login"]
        failed = _failed.get(key)
    if not retry:
        return None
    if failed is not None and time.monotonic() - failed[0] < RETRY_S:
        raise LoginUnreachable(failed[1])
    found = {k: v for k, v in runtime.items() if k in ("login_pool", "login_section")}
    cluster = backend.vertex_cluster(runtime)
    if attach(backend.slurm, runtime["cluster_id"], found, cluster, backend.ssh_config(), lambda _: None):
        with _lock:
            _found[key] = found
            _failed.pop(key, None)
        return found["login"]
    with _lock:
        _failed[key] = (time.monotonic(), found["login_problem"])
    raise LoginUnreachable(found["login_problem"])


class LoginHost(Host):
    """A login node not known yet, as a ``Host`` found at each use: the poller keeps a cluster's
    host from its first look, and a cluster whose login node does not answer must not fail
    every job listing; each file or command raises ``LoginUnreachable`` until it answers."""

    def __init__(self, backend, runtime: dict[str, Any]):
        self._backend, self._runtime = backend, runtime
        self.name = f"the login node of {runtime.get('cluster_id')}"

    def _host(self) -> Host:
        return self._backend.slurm.host(login_runtime(self._backend, self._runtime))

    def run(self, argv, **kwargs):
        return self._host().run(argv, **kwargs)

    def stat(self, path):
        return self._host().stat(path)

    def list_dir(self, path):
        return self._host().list_dir(path)

    def read(self, path, offset: int = 0, size: int = -1, *, owner: str | None = None) -> bytes:
        return self._host().read(path, offset, size, owner=owner)

    def read_many(self, requests, *, owner: str | None = None):
        return self._host().read_many(requests, owner=owner)

    def read_later(self, path, offset: int, size: int, *, owner: str | None = None):
        return self._host().read_later(path, offset, size, owner=owner)

    def write(self, path, data: bytes) -> None:
        self._host().write(path, data)

    def make_dirs(self, path, exist_ok: bool = True, mode: int = 0o777) -> None:
        self._host().make_dirs(path, exist_ok, mode)

    def remove_tree(self, path) -> None:
        self._host().remove_tree(path)

    def ssh_host(self):
        """The login node's SSH host (what serving forwards ports over), once it answers."""
        return self._host()

    def __getattr__(self, name: str):  # what an SSH host has beyond Host's (forwards, connect)
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._host(), name)


def login_spec(runtime: dict[str, Any]) -> AttachSpec:
    """The attach spec the login node was attached with (kept beside its runtime)."""
    if "login_spec" in runtime:
        return AttachSpec.model_validate(runtime["login_spec"])
    with _lock:
        return AttachSpec.model_validate(_found[_key(runtime)]["login_spec"])


def forget(runtime: dict[str, Any]) -> None:
    with _lock:
        _found.pop(_key(runtime), None)
        _failed.pop(_key(runtime), None)


def refusal(name: str, runtime: dict[str, Any], instance: str | None, ssh_config: str | None,
            error: Exception | None) -> str:
    section = runtime.get("login_section") or {}
    host = (section.get("ssh") or {}).get("host") or instance
    if host is None:
        return f"cluster {name}: {_unknown(name, ssh_config)}"
    config = (section.get("ssh") or {}).get("config_file") or ssh_config
    where = f"the ssh config {config}" if config else "ssh's own config (~/.ssh/config)"
    return (f"cluster {name}: its jobs go through its login node {host}, reached over SSH with {where}, and it "
            f"did not answer: {error}. Give ssh a Host entry for {host} (`gcloud compute config-ssh` writes one "
            f"per instance; an IAP ProxyCommand entry where it has no public address), then point "
            f"`gtc config vertex.ssh_config PATH` at that config if it is not ssh's own, or set login.ssh.host "
            f"(and login.ssh.config_file) in the cluster's spec. {API_ALONE}")


API_ALONE = ("The Slurm Job API alone cannot carry a job: its folder, log, metrics and checkpoints live on the "
             "cluster's file system, reached only through the login node.")


def _unknown(name: str, ssh_config: str | None) -> str:
    return (f"its login node is not known yet (Vertex reports no node of its login pool in nodesStatus; a spec "
            f"without orchestrator_spec.slurm_spec.login_node_pool_id has none); set login.ssh.host (and "
            f"login.ssh.config_file) in the cluster's spec to the host that reaches it"
            f"{'' if ssh_config else ', or give `gtc config vertex.ssh_config PATH` a config with its entry'}. "
            f"{API_ALONE}")


def _key(runtime: dict[str, Any]) -> tuple:
    return tuple(runtime.get(k) for k in ("api_endpoint", "project", "region", "cluster_id"))

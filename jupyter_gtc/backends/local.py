"""The local backend: a real Slurm cluster on this machine.

One munged, one slurmctld and one slurmd per node, all under ``<GTC_HOME>/clusters/<name>/``:

    etc/        slurm.conf, gres.conf, prolog/epilog chains and the spec's scripts (startup/
                holds each pool's startup script), and the nodes' /etc/hosts, which names
                every node (see hosts.py)
    munge/      the cluster's key, and a normal user's munged socket (root's lives in
                /run/jupyter_gtc/<hash>/, see _munge_socket_dir)
    run/        our PID files (see daemons.py)      state/  slurmctld's saved state
    spool/<n>/  each slurmd's spool                 log/    every daemon's log, and
                                                            startup-<n>.log
    gpus/<n>/   nvidia0.. -> /dev/null, so GRES works where there is no GPU
    storage/    the spec's filestores, lustres and home storage, mounted on the nodes (storage.py)

Nodes declare the machine type's sizes (``SlurmdParameters=config_overrides``), scaled by
the spec's ``local.resource_scale``.

Every daemon of a cluster runs as the user who created it. As root, each node has PID and
mount namespaces (daemons.py) and may have a network namespace (netns.py). As a normal user,
``SlurmUser`` and ``SlurmdUser`` are that user, the ports are unprivileged ones like all
ports here, munged runs as a plain process with its socket under ``munge/``, and the
nodes' namespaces are made inside user namespaces where the kernel allows them; network
namespaces need root. Such a cluster runs only that user's jobs: ``etc/job_submit.lua``
refuses anyone else's at submit (a slurmd that is not root cannot start a job as another
user), and only that user (or root) may scale or delete it.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import socket
import stat
import sys
from pathlib import Path
from typing import Any

from .._ports import free_ports
from ..exceptions import BackendUnavailable, ClusterStartError, CommandError, SpecError, SpecErrors
from ..slurm.commands import SlurmCommands
from ..slurm.render import (
    UNSAFE_IN_CONF, AccountingLayout, NodeDecl, SlurmLayout, accounting_slurm_conf, render_gres_conf,
    render_health_check, render_job_submit_lua, render_slurm_conf, render_task_prolog,
)
from ..spec.cluster import ClusterSpec, NodePool, ProvisioningModel
from . import accounting, daemons, hosts, local_scale, local_wait, netns, owned, slurm_rest, storage, supervisor
from . import cluster_files as files
from .base import Backend, ClusterStatus, NotApplied, Progress
from .local_nodes import LocalNodes
from .local_nodes import cluster_net as _net, node_names as _node_names, stop_node as _stop_node

# Program -> Debian package that provides it.
REQUIRED_PROGRAMS = {
    "munged": "munge", "slurmctld": "slurmctld", "slurmd": "slurmd", "scontrol": "slurm-client",
    "sbatch": "slurm-client", "srun": "slurm-client", "unshare": "util-linux", "tini": "tini",
}
MAX_NODES = 64
STARTUP_TIMEOUT = 600.0  # a pool's startup script may install things; Vertex's VMs give it as long
SOCKET_PATH_MAX = 107  # bytes in a Unix socket's path (sun_path holds 108, with its NUL)
NO_USERNS = ("this machine allows no user namespaces (sysctl user.max_user_namespaces is 0, or a "
             "security policy forbids them), so a normal user's nodes are plain processes")


def daemon_path() -> str:
    """This process's PATH with the system folders Debian installs daemons in (munged,
    slurmctld, slurmd are in /usr/sbin), which a normal user's PATH leaves out."""
    folders = os.environ.get("PATH", os.defpath).split(os.pathsep)
    return os.pathsep.join([*folders, *(f for f in ("/usr/sbin", "/sbin") if f not in folders)])


class LocalBackend(LocalNodes, Backend):
    name = "local"

    # -- checks ---------------------------------------------------------------------

    def problems(self) -> list[str]:
        found = []
        missing = sorted({pkg for prog, pkg in REQUIRED_PROGRAMS.items() if shutil.which(prog, path=daemon_path()) is None})
        if missing:
            found.append(f"programs missing; install them with: apt-get install -y {' '.join(missing)}")
        bad = sorted(set(str(self.home)) & UNSAFE_IN_CONF)
        if bad:
            found.append(f"GTC_HOME {str(self.home)!r} contains {''.join(bad)!r}, which Slurm's config files "
                         "cannot hold; set GTC_HOME to a path without spaces, quotes, '#' or '='")
        return found

    def check_spec(self, spec: ClusterSpec) -> None:
        total = sum(p.node_count for p in spec.compute_pools())
        if total > MAX_NODES:
            raise SpecErrors([SpecError("node_pools[].scaling_spec.min_node_count", total,
                                        f"the local backend runs at most {MAX_NODES} nodes in all")])
        if spec.local.network == "namespaces" and os.geteuid() != 0:
            raise SpecErrors([SpecError("local.network", "namespaces",
                                        f"it needs root (it makes a bridge, veth pairs and a network namespace "
                                        f"per node) and this process runs as {_user_name()}; use local.network: "
                                        "host (every node on this machine's network, the default), or run as "
                                        "root (`jupyter lab --allow-root`)")])
        if spec.local.network == "namespaces" and shutil.which("ip") is None:
            raise SpecErrors([SpecError("local.network", "namespaces",
                                        "it needs the `ip` program (apt-get install -y iproute2); or use host")])
        errors = storage.check(spec, storage.protected_paths(self.home))
        if os.geteuid() != 0 and not errors:
            errors = self._check_spec_as_user(spec)
        if errors:
            raise SpecErrors(errors)

    def _check_spec_as_user(self, spec: ClusterSpec) -> list[SpecError]:
        """What a normal user cannot have that root can: storage mounts without user
        namespaces, mount paths it cannot make, a munge socket path too long for the kernel."""
        socket_path = _munge_socket_dir(self.home / "clusters" / spec.name) / "munge.socket"
        if len(str(socket_path).encode()) > SOCKET_PATH_MAX:
            return [SpecError("display_name", spec.name,
                              f"munge's socket would be {socket_path}, longer than the {SOCKET_PATH_MAX} bytes a "
                              "socket path may have; choose a shorter name, or set GTC_HOME to a shorter path")]
        if daemons.isolation() == "none":
            return [SpecError(m.field if m.field == storage.HOME_FIELD else f"{m.field}.mount_path", m.path,
                              f"mounting it needs a mount namespace, and {NO_USERNS}; run as root, allow user "
                              "namespaces (sysctl -w user.max_user_namespaces=15000), or leave the storage out")
                    for pool in spec.compute_pools() for m in storage.pool_mounts(spec, pool, Path("/"))]
        return storage.check_makeable(spec)

    def not_applied(self, spec: ClusterSpec) -> list[NotApplied]:
        found = []
        login = spec.slurm.login_node_pool_id
        for pool in spec.node_pools:
            at = f"node_pools[{pool.id}]"
            if pool.boot_disk is not None:
                found.append(NotApplied(f"{at}.boot_disk", "nodes use this machine's disk"))
            if pool.provisioning_model != ProvisioningModel.ON_DEMAND:
                found.append(NotApplied(f"{at}.provisioning_model",
                                        "local nodes are always there, as ON_DEMAND ones are; none is ever reclaimed"))
            if pool.zone is not None:
                found.append(NotApplied(f"{at}.zone", "every node is on this machine"))
            if pool.enable_public_ips is not None:
                found.append(NotApplied(f"{at}.enable_public_ips", "nodes use this machine's network (local.network)"))
            if pool.machine_spec.reservation_affinity is not None:
                found.append(NotApplied(f"{at}.machine_spec.reservation_affinity", "no reservation holds local nodes"))
            if pool.id == login:
                for name in ("startup_script", "filestores", "lustres"):
                    if getattr(pool, name):
                        found.append(NotApplied(f"{at}.{name}", "the login pool is this machine, which the "
                                                "local backend never changes (no script runs, nothing is mounted)"))
        missing = accounting.missing_packages(daemon_path()) if spec.slurm.accounting.enabled else []
        if missing:  # on by default, so not a reason to refuse a cluster
            found.append(NotApplied("orchestrator_spec.slurm_spec.accounting",
                                    f"it needs slurmdbd and MariaDB (apt-get install -y {' '.join(missing)}); without "
                                    "them sacct says accounting storage is disabled, and sacct-based tools "
                                    "(submitit) see every job's state as UNKNOWN"))
        if spec.network is not None:
            found.append(NotApplied("network", "nodes use this machine's network (local.network)"))
        if spec.runtime_spec is not None and spec.runtime_spec.service_account is not None:
            found.append(NotApplied("runtime_spec.service_account",
                                    "jobs run as the user who submits them; there are no service accounts here"))
        if spec.local.network == "host" and os.geteuid() != 0 and daemons.isolation() == "none":
            found.append(NotApplied("local.network", f"{NO_USERNS}: the nodes share this machine's /etc/hosts, so "
                                    "node names do not resolve in jobs (use 127.0.0.1), and deleting the cluster "
                                    "finds a job's processes by its node's label, not by a PID namespace"))
        return found

    # -- lifecycle ------------------------------------------------------------------

    def create(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        problems = self.problems()
        if problems:
            raise BackendUnavailable("; ".join(problems))
        for item in self.not_applied(spec):
            progress(f"warning: not applied locally: {item}")
        root = self.home / "clusters" / spec.name
        runtime["dir"] = str(root)
        runtime["user"] = {"uid": os.geteuid(), "name": _user_name()}  # whom every daemon runs as
        if root.exists():
            self._remove(root)  # left by a create that died before it was recorded
        files.make_private_dir(root)
        for sub in ("etc", "run", "state", "log", "spool", "gpus"):
            (root / sub).mkdir(parents=True, exist_ok=True)
        # The nodes' disk check reads where jobs write (their health check's --path): a folder
        # missing before the first job failed it ("No such file or directory"), and a node the
        # supervisor replaced then never passed.
        (self.home / "jobs").mkdir(mode=0o700, exist_ok=True)
        runtime["hostname"] = socket.gethostname().split(".")[0]
        runtime["controller_port"] = free_ports(1)[0]
        runtime["node_ports"] = {}
        runtime["munge_socket_dir"] = str(_munge_socket_dir(root))
        runtime["node_slots"] = {}
        # slurmctld reaches a node added at run time only at SlurmdPort (local_scale.py); a
        # cluster made before this restarts slurmctld to scale.
        runtime["live_scale"] = local_scale.new_runtime()
        if spec.local.network == "namespaces":
            net = netns.create_network(_cluster_id(root))
            runtime["network"] = {"cluster_id": net.cluster_id, "subnet": net.subnet}
            progress(f"created bridge {net.bridge} ({net.gateway}/24)")
        files.write_munge_key(root)
        if spec.slurm.accounting.enabled and not accounting.missing_packages(daemon_path()):
            self._accounting_layout(spec.name, runtime)  # from here on, runtime says it keeps accounting
        self._apply(spec, runtime, progress, restart_controller=False)

    def scale(self, old: ClusterSpec, new: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        _check_owner(old, runtime, "scale", allow_root=False)  # root's daemons would not run as the user
        local_scale.scale(self, old, new, runtime, progress)  # slurmctld and the jobs of nodes that stay run on

    def delete(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress) -> None:
        _check_owner(spec, runtime, "delete", allow_root=True)
        # The folder this backend makes, never one the record names: root deleting a normal
        # user's cluster reads that user's state store, which that user can write. And every
        # process signalled, file removed and network taken down is the folder owner's only.
        root = self.home / "clusters" / spec.name
        if runtime.get("dir") not in (None, str(root)):
            progress(f"warning: the record names {runtime['dir']} as the cluster's folder, which is not "
                     f"where this backend makes it; only {root} is removed")
        uid = _folder_uid(root)
        if uid is None:
            if os.path.lexists(root):
                progress(f"warning: {root} is reached through a link, not the folder this backend made; left alone")
                return
            # No folder: a create that died before making it, or a folder removed by hand with
            # its daemons' records. What the cluster holds elsewhere still goes, where this
            # process's user wrote the record (its GTC_HOME): the daemons found by their mark.
            if not owned.mine(self.home):
                return
            uid = os.geteuid()
            daemons.stop_unrecorded(root / "run", uid=uid)
            self._release(spec, runtime, root, uid)
            return
        runtime = {**runtime, "dir": str(root)}
        run = root / "run"
        # First: the nodes stopping below are no crashes. SIGTERM, which it dies of at once: one
        # killed outright may stay a zombie for a while (reparented), which the stop waits for.
        daemons.stop(supervisor.LABEL, run, grace=5, uid=uid)
        slurm_rest.stop(root, uid)  # the Slurm Job API's slurmrestd and its folder in /run, where one was started
        # Slurm's commands read the cluster's slurm.conf, which names plugins to load: only its own user runs them.
        if uid == os.geteuid() and daemons.find("slurmctld", run, uid=uid):
            progress("cancelling jobs")
            self._cancel_all(runtime)
        for label in daemons.labels(run):
            if label.startswith("slurmd-"):
                daemons.stop(label, run, uid=uid)
        progress("stopping slurmctld and munged")
        daemons.stop("slurmctld", run, uid=uid)
        accounting.stop(run, uid)
        local_scale.stop_relays(run, uid)
        daemons.stop("munged", run, grace=2, uid=uid)
        daemons.stop_unrecorded(run, uid=uid)
        self._remove(root, uid)
        self._release(spec, runtime, root, uid)

    def _release(self, spec: ClusterSpec, runtime: dict[str, Any], root: Path, uid: int) -> None:
        """What a cluster of ``uid`` holds outside its folder, let go once its daemons are gone:
        its share of the accounting database (accounting.leave says what root does in another
        user's), root's network namespaces and munge socket folder, the mount paths made for it."""
        if _keeps_accounting(runtime):
            accounting.leave(self._accounting_layout(spec.name, runtime), self.home, spec.name,
                             {"PATH": daemon_path()}, uid=uid)
        net = _net(runtime) if uid == 0 else None  # only root makes network namespaces
        if net is not None:
            for node in runtime.get("node_slots", {}):
                netns.remove_node(net, node)
            netns.remove_bridge(net)
        storage.remove_made_dirs(runtime, uid)  # every node's mount namespace has gone with its daemons
        if uid == 0:  # root's munge socket folder is in /run; a normal user's was in the folder removed
            shutil.rmtree(_munge_socket_dir(root, uid), ignore_errors=True)

    def job_container(self, spec, runtime: dict[str, Any], request, launch, job_dir: Path, work_dir: str):
        """Through Slurm's own OCI support (``containers/slurm_job.py``): a ``srun`` first on the
        job's PATH adds ``--container=`` the job's bundle of the image."""
        from ..containers import slurm_job
        from .base import ContainerLaunch, JobLaunch

        from ..vertex.local_endpoint import gcs_root

        bin_dir = slurm_job.prepare(request, Path(runtime["dir"]) / "etc", self.home / "containers" / "bundles",
                                    job_dir, work_dir, gcs_root=gcs_root(self.home))
        return ContainerLaunch(JobLaunch(launch.script, slurm_job.path_with(bin_dir, launch.env), launch.python_env),
                               pass_through=False)

    def client_env(self, runtime: dict[str, Any]) -> dict[str, str]:
        """``SLURM_CONF``, for the cluster's own user only: slurm.conf names the plugins Slurm's
        commands load, and a normal user's is that user's to write (root would run its code)."""
        root = self._cluster_dir(runtime)
        uid = _folder_uid(root)
        if uid is None and os.path.exists(root):
            raise BackendUnavailable(f"the cluster's folder {root} is reached through a link, which root does not "
                                     "follow into a folder another user may change; delete the cluster")
        if uid is not None and uid != os.geteuid():
            raise BackendUnavailable(f"this cluster's Slurm runs as {_user_name(uid)} (uid {uid}), whose slurm.conf "
                                     f"names the plugins Slurm's commands load; run them as {_user_name(uid)}")
        return {"SLURM_CONF": str(root / "etc" / "slurm.conf")}

    def _cluster_dir(self, runtime: dict[str, Any]) -> Path:
        """The cluster's folder the record names, accepted only where this backend makes one
        (in this GTC_HOME's clusters/): a record is its writer's word, and root may be reading a
        normal user's."""
        root = Path(runtime["dir"])
        if root.name in ("", "..") or os.path.realpath(root.parent) != os.path.realpath(self.home / "clusters"):
            raise BackendUnavailable(f"the cluster's record names {root} as its folder, which is not in "
                                     f"{self.home / 'clusters'}; delete the cluster")
        return root

    def status(self, spec: ClusterSpec, runtime: dict[str, Any]) -> ClusterStatus:
        try:
            self.client_env(runtime)
        except BackendUnavailable as e:
            return ClusterStatus(False, details={"runs_as": (runtime.get("user") or {}).get("name", "root")},
                                 problem=str(e))
        run = Path(runtime["dir"]) / "run"
        net = _net(runtime)
        details = {"controller": f"{net.gateway if net else runtime.get('hostname')}:{runtime.get('controller_port')}",
                   "network": f"namespaces on {net.bridge} ({net.gateway}/24)" if net else "host",
                   "slurm_conf": str(Path(runtime["dir"]) / "etc" / "slurm.conf"),
                   "gpu_backing": runtime.get("gpu_backing", "none"),
                   "runs_as": (runtime.get("user") or {}).get("name", "root")}
        if _keeps_accounting(runtime):
            details["accounting"] = "slurmdbd (sacct)"
        mounts = storage.describe(spec, Path(runtime["dir"]))
        if mounts:
            details["storage"] = mounts
        if daemons.find("slurmctld", run) is None:
            return ClusterStatus(False, details=details, problem=(
                "slurmctld is not running (local clusters stop when the machine restarts); "
                f"delete the cluster with `gtc cluster delete {spec.name}` and create it again"))
        try:
            nodes = self.commands(runtime).nodes()
        except CommandError as e:
            return ClusterStatus(False, details=details, problem=str(e))
        return ClusterStatus(True, nodes=nodes, details=details)

    # -- internals ------------------------------------------------------------------

    def _apply(self, spec: ClusterSpec, runtime: dict[str, Any], progress: Progress, restart_controller: bool) -> None:
        """Make the running daemons match ``spec``: write the config, stop nodes that are not
        in it, (re)start slurmctld, start nodes that are missing, wait until all are ready."""
        root = Path(runtime["dir"])
        run, env = root / "run", {**self.client_env(runtime), "PATH": daemon_path()}
        wanted = _node_names(spec)
        ports, slots = runtime["node_ports"], runtime.setdefault("node_slots", {})
        net = _net(runtime)
        known = set(ports)  # the nodes before this change (slurmctld's, if it runs)
        added, removed = [n for n in wanted if n not in known], sorted(known - set(wanted))
        live = (not restart_controller and (added or removed) and runtime.get("live_scale")
                and daemons.find("slurmctld", run) is not None)
        if live:
            local_scale.place(runtime, net, added, removed)
        # Left by a change whose process died before recording them (a daemon's label, or its
        # port and slot): stopped here, and started afresh below if the spec wants them.
        for label in daemons.stop_unrecorded(run):
            progress(f"stopped {label}, left by an interrupted change")
        for label in daemons.labels(run):
            name = label.removeprefix("slurmd-")
            if label.startswith("slurmd-") and name not in ports:
                progress(f"stopping node {name}, left by an interrupted change")
                _stop_node(root, net, slots, name)
        for name in list(ports):
            if name not in wanted:
                del ports[name]
        new_ports = iter(free_ports(len([n for n in wanted if n not in ports])))
        for name in wanted:
            if name not in ports:
                ports[name] = next(new_ports)
            if name not in slots:  # a node keeps its slot (and so its IP) while it exists
                slots[name] = min(set(range(len(slots) + 1)) - set(slots.values()))
        self._write_config(spec, runtime)

        munged = daemons.find("munged", run) is None
        if munged:
            progress("starting munged")
            self._start_munged(root, Path(runtime["munge_socket_dir"]))
        running = {label.removeprefix("slurmd-") for label in daemons.labels(run)
                   if label.startswith("slurmd-") and daemons.find(label, run)}
        if restart_controller:
            progress("restarting slurmctld with the new node list")
            daemons.stop("slurmctld", run, grace=15)
        if live:  # a scale: the running slurmctld is told, not restarted (local_scale.py)
            progress("adding and removing nodes in slurmctld")
            local_scale.tell_controller(self.commands(runtime), spec, [
                self._node_decl(_pool_of(spec, n), n, spec, runtime) for n in added], removed)
        for name in sorted(running - set(wanted)):
            progress(f"stopping node {name}")
            _stop_node(root, net, slots, name)
        if live:
            local_scale.reread_config(run, sorted(running & set(wanted)))
        if runtime.get("live_scale"):
            local_scale.start_relays(runtime, run, env)
        if _keeps_accounting(runtime):
            # While munged starts: neither MariaDB nor slurmdbd asks it anything before slurmctld does.
            accounting.start(self._accounting_layout(spec.name, runtime), self.home, spec.name, env, progress)
        if munged:
            local_wait.munged(root, Path(runtime["munge_socket_dir"]))
        if daemons.find("slurmctld", run) is None:
            progress("starting slurmctld")
            daemons.start("slurmctld", ["slurmctld", "-D", "-i"], run, root / "log" / "slurmctld.out", env)
        to_start = [n for n in wanted if n not in running]
        if to_start:
            # A slurmd registers as it starts and, refused, again 1 s later (then 2, 4 ... s):
            # nodes started before slurmctld listened were idle a second late, in one create of
            # two on a 2-core machine and in every one keeping accounting (whose slurmctld
            # loads it from slurmdbd first). Nodes start once it listens.
            local_wait.listening(runtime)
        hosts_file = root / "etc" / "hosts"  # written by _write_config; each node sees it as /etc/hosts
        for i, name in enumerate(to_start, 1):
            progress(f"starting slurmd {i}/{len(to_start)}: {name}")
            (root / "spool" / name).mkdir(parents=True, exist_ok=True)
            argv, log = ["slurmd", "-D", "-N", name], root / "log" / f"slurmd-{name}.out"
            if net is None:
                # Without namespaces (a normal user, no user namespaces) nodes share /etc/hosts.
                daemons.start(f"slurmd-{name}", argv, run, log, env,
                              hosts_file=hosts_file if daemons.isolation() != "none" else None,
                              **self._node_init(spec, root, name))
                continue
            if not netns.node_exists(net, name):
                netns.add_node(net, name, slots[name])
            daemons.start(f"slurmd-{name}", argv, run, log, env, prefix=netns.exec_prefix(net, name), hostname=name,
                          hosts_file=hosts_file, **self._node_init(spec, root, name))
        self._wait_node_init(spec, root, net, slots, to_start, progress)
        if running & set(wanted) and restart_controller:
            # Nodes that stayed up re-read slurm.conf and learn the new node list. scontrol
            # answers once slurmctld has rebuilt its node table, which forgets every node's
            # registration; each slurmd registers again at the end of its reload, and
            # _wait_ready waits for that.
            local_wait.controller(self.commands(runtime), runtime)
            self.commands(runtime).reconfigure()
        local_wait.ready(self.commands(runtime), runtime, set(_node_names(spec)), progress)
        if spec.local.supervisor and daemons.find(supervisor.LABEL, run) is None:
            # Once the nodes are up: its Python's start takes CPU the nodes' bring-up would wait for.
            progress("starting the supervisor")
            daemons.start(supervisor.LABEL, [sys.executable, "-m", "jupyter_gtc.backends.supervisor", str(self.home),
                                             spec.name], run, root / "log" / "supervisor.out", env, plain=True)

    def _write_config(self, spec: ClusterSpec, runtime: dict[str, Any]) -> None:
        root = Path(runtime["dir"])
        nodes = []
        for pool in spec.compute_pools():
            for name in pool.node_names():
                nodes.append(self._node_decl(pool, name, spec, runtime))
        partitions = local_scale.partitions(spec)
        etc = root / "etc"
        has_prolog = files.write_chain(etc, "prolog", spec.slurm.prolog_bash_scripts)
        has_epilog = files.write_chain(etc, "epilog", spec.slurm.epilog_bash_scripts)
        files.write_startup_scripts(etc, spec)
        storage.prepare(spec, root, runtime)
        net = _net(runtime)
        scheduling = spec.slurm.scheduling
        extra = scheduling.slurm_conf() if scheduling else {}
        if runtime.get("live_scale"):  # room in slurmctld's node table for nodes a scale adds (local_scale.py)
            extra.update(MaxNodeCount=str(MAX_NODES), TreeWidth="65533",
                         SlurmdPort=str(runtime["live_scale"]["slurmd_port"]))
        if spec.local.slurm_rest_api:  # before the accounting layout: it reads the key's path from runtime
            extra.update(slurm_rest.jwt_conf(root, runtime))
        if _keeps_accounting(runtime):
            extra.update(accounting_slurm_conf(self._accounting_layout(spec.name, runtime)),
                         **spec.slurm.accounting.slurm_conf())
        layout = SlurmLayout(
            cluster_name=spec.name, root=root, controller_host=runtime["hostname"],
            controller_addr=net.gateway if net else "127.0.0.1", controller_port=runtime["controller_port"],
            munge_socket=Path(runtime["munge_socket_dir"]) / "munge.socket", nodes=tuple(nodes),
            partitions=partitions, has_prolog=has_prolog, has_epilog=has_epilog,
            extra=extra, slurm_user=_owner(runtime)["name"],
            health_check_interval=spec.local.health_check_interval, slurmd_timeout=spec.local.slurmd_timeout,
            cred_expire=spec.local.cred_expire)
        if layout.slurm_user != "root":
            files.atomic_write(etc / "job_submit.lua", render_job_submit_lua(_owner(runtime)["uid"], layout.slurm_user))
        files.atomic_write(etc / "slurm.conf", render_slurm_conf(layout))
        files.atomic_write(etc / "gres.conf", render_gres_conf(layout))
        # In place, not files.atomic_write: running nodes have this very file mounted as /etc/hosts.
        hosts.write_hosts(etc / "hosts", spec.name, [(n.name, n.addr) for n in nodes])
        files.write_script(etc / "task_prolog.sh", render_task_prolog(etc / "slurm.conf"))
        if spec.local.health_check_interval:
            (self.home / "jobs").mkdir(parents=True, exist_ok=True)  # its disk check: a missing one fails
            files.write_script(etc / "health_check.sh", render_health_check(
                sys.executable, etc / "slurm.conf", root / "faults", root / "health", (str(self.home / "jobs"),)))

    def _accounting_layout(self, name: str, runtime: dict[str, Any]) -> AccountingLayout:
        net = _net(runtime)
        return accounting.layout(Path(runtime["dir"]), name, runtime, net.gateway if net else "127.0.0.1",
                                 _owner(runtime)["name"], Path(runtime["munge_socket_dir"]) / "munge.socket")

    def _node_decl(self, pool: NodePool, name: str, spec: ClusterSpec, runtime: dict[str, Any]) -> NodeDecl:
        machine, scale = pool.machine, spec.local.resource_scale
        gpu_files: tuple[str, ...] = ()
        if machine.gpu_count:
            real = sorted(glob.glob("/dev/nvidia[0-9]*"), key=lambda p: int(p.removeprefix("/dev/nvidia")))
            if len(real) >= machine.gpu_count:
                gpu_files = tuple(real[: machine.gpu_count])
                runtime["gpu_backing"] = "real"
            else:
                folder = Path(runtime["dir"]) / "gpus" / name
                folder.mkdir(parents=True, exist_ok=True)
                for i in range(machine.gpu_count):
                    link = folder / f"nvidia{i}"
                    if not link.is_symlink():
                        link.symlink_to("/dev/null")
                gpu_files = tuple(str(folder / f"nvidia{i}") for i in range(machine.gpu_count))
                runtime["gpu_backing"] = "emulated (/dev/null)"
        net = _net(runtime)
        addr = net.address(runtime["node_slots"][name]) if net else local_scale.host_addr(runtime, name)
        return NodeDecl(
            name=name, addr=addr, hostname=name if net else runtime["hostname"], port=runtime["node_ports"][name],
            cpus=max(1, round(machine.vcpus * scale)), memory_mb=max(1024, int(machine.memory_gb * 1024 * scale)),
            gpus=machine.gpu_count, gpu_type=machine.gpu_model, gpu_files=gpu_files)

    def _node_init(self, spec: ClusterSpec, root: Path, name: str) -> dict[str, Any]:
        """What node ``name`` does before its slurmd starts, as ``daemons.start`` arguments: mount
        its pool's storage, run its pool's startup script. Clears what a previous node of that
        name left of its startup."""
        mounts, script = _init_plan(spec, root, name)
        if not mounts and script is None:
            return {}
        status, log = files.init_status(root, name), files.startup_log(root, name)
        status.unlink(missing_ok=True)
        log.unlink(missing_ok=True)
        return {"mounts": [(m.folder, m.path) for m in mounts], "startup": (script, log) if script else None,
                "status_file": status}

    def _wait_node_init(self, spec: ClusterSpec, root: Path, net: netns.ClusterNet | None, slots: dict[str, int],
                        started: list[str], progress: Progress) -> None:
        """Wait until each node just started has mounted its storage and run its startup
        script. A node whose script failed (or whose set-up did) is stopped and removed, and
        the change fails with the script's output and exit code; the caller rolls back."""
        run = root / "run"
        plans = {n: _init_plan(spec, root, n) for n in started}
        pending = {n: files.init_status(root, n) for n, (mounts, script) in plans.items() if mounts or script}
        if not pending:
            return
        with_script = sum(plans[n][1] is not None for n in pending)
        if with_script:
            progress(f"running the startup script on {with_script} node(s)")
        failed: dict[str, int | None] = {}  # node -> its script's exit code; None: its set-up failed

        def finished() -> bool:
            for name, status in list(pending.items()):
                if status.exists():
                    code = files.exit_code(status)
                    if code != 0:
                        failed[name] = code
                elif daemons.find(f"slurmd-{name}", run) is None and not status.exists():  # (written as it ended?)
                    failed[name] = None  # ended without a word: node_init.sh's own step failed
                else:
                    continue  # still setting up
                del pending[name]
            return not pending

        def too_long() -> ClusterStartError:
            name = sorted(pending)[0]
            return ClusterStartError(
                f"the startup script of pool {_pool_of(spec, name).id} still runs on node {name} after "
                f"{STARTUP_TIMEOUT:.0f} s; its output so far:\n" + local_wait.tail(files.startup_log(root, name), 20))

        local_wait.wait_for(finished, STARTUP_TIMEOUT, too_long)
        if not failed:
            return
        for name in failed:
            _stop_node(root, net, slots, name)
        name, code = sorted(failed.items())[0]
        others = f" (and on {', '.join(sorted(failed)[1:])})" if len(failed) > 1 else ""
        pool = _pool_of(spec, name)
        if code is None:
            raise ClusterStartError(f"node {name} could not be set up before its slurmd started{others} "
                                    f"(mounting its storage or starting its startup script):\n"
                                    + local_wait.tail(root / "log" / f"slurmd-{name}.out"))
        raise ClusterStartError(f"the startup script of pool {pool.id} failed on node {name} with exit code "
                                f"{code}{others}; its output:\n" + local_wait.tail(files.startup_log(root, name), 20))

    def _start_munged(self, root: Path, sock_dir: Path) -> None:
        munge = root / "munge"
        try:
            sock_dir.mkdir(parents=True, exist_ok=True)
            sock_dir.chmod(0o711)  # 0700 makes clients fail with "Socket is inaccessible"
        except OSError as e:
            raise ClusterStartError(f"cannot make munge's socket folder {sock_dir}: {e.strerror}; "
                                    "remove whatever is in the way and create the cluster again") from None
        # A normal user's munged: a plain process (it has no children; in a user namespace it
        # would see root's folders as nobody's, and every root client as nobody), and --force,
        # since its socket is in the user's own folders, which others need not be able to
        # search (munged wants every folder above it searchable by all).
        as_user = os.geteuid() != 0
        daemons.start("munged", [
            "munged", "--foreground", *(["--force"] if as_user else []), f"--socket={sock_dir / 'munge.socket'}",
            f"--key-file={munge / 'munge.key'}", f"--seed-file={munge / 'seed'}",
            f"--pid-file={root / 'run' / 'munged.internal-pid'}", f"--log-file={root / 'log' / 'munged.log'}",
        ], root / "run", root / "log" / "munged.out", {"PATH": daemon_path()}, plain=as_user)

    def _cancel_all(self, runtime: dict[str, Any]) -> None:
        # A controller that does not answer at once is going away with the rest: its
        # commands get seconds here, not the usual 30, so a delete never waits long on it.
        commands = self.commands(runtime, timeout=5)
        try:
            commands.cancel(commands.job_ids())
            local_wait.wait_for(lambda: not commands.job_ids(), 5, lambda: TimeoutError())
        except (CommandError, TimeoutError):
            pass  # the namespaces die with their nodes anyway; cancelling first is the polite part

    def commands(self, runtime: dict[str, Any], timeout: float = 30) -> SlurmCommands:
        return SlurmCommands(self.client_env(runtime), timeout=timeout,
                             jobcomp_file=Path(runtime["dir"]) / "log" / "jobcomp.txt")

    def _remove(self, root: Path, uid: int | None = None) -> None:
        run = root / "run"
        for label in daemons.labels(run):
            daemons.stop(label, run, uid=uid)
        _remove_folder(root)


def _folder_uid(root: Path) -> int | None:
    """Who owns the cluster folder ``root`` (``<GTC_HOME>/clusters/<name>``), looked at by root
    without following a link at ``root``, nor one another user could have made above it
    (owned.py: root's own ``clusters`` link is followed); None where there is no such folder.
    (A normal user's process can harm none but that user's files: a link is its own business.)"""
    if os.geteuid() != 0:
        try:
            st = os.stat(root)
        except OSError:
            return None
        return st.st_uid if stat.S_ISDIR(st.st_mode) else None
    try:
        parent = owned.open_folder(root.parent)
    except OSError:
        return None
    try:
        st = os.stat(root.name, dir_fd=parent, follow_symlinks=False)
    except OSError:
        return None
    finally:
        os.close(parent)
    return st.st_uid if stat.S_ISDIR(st.st_mode) else None


def _remove_folder(root: Path) -> None:
    """Remove the cluster folder ``root`` and all in it, never through a link: not at ``root``,
    nor at ``clusters`` or above it (which its owner could swap for a link after a check, and
    root would then remove what the link points at), nor inside (rmtree follows none); root's
    own link at ``clusters`` is followed (owned.py). A normal user's process may go through a
    link of its own at ``clusters``."""
    if os.geteuid() != 0:
        shutil.rmtree(root, ignore_errors=True)
        return
    try:
        parent = owned.open_folder(root.parent)
    except OSError:
        return
    try:
        shutil.rmtree(root.name, dir_fd=parent, ignore_errors=True)
    finally:
        os.close(parent)


def _keeps_accounting(runtime: dict[str, Any]) -> bool:
    """Whether the cluster has slurmdbd: decided at its create (the spec, and whether slurmdbd
    and MariaDB are installed), and kept in ``runtime`` from then on."""
    return bool(runtime.get("accounting"))


def _cluster_id(root: Path) -> str:
    return hashlib.sha1(str(root).encode()).hexdigest()[:6]


def _pool_of(spec: ClusterSpec, node: str) -> NodePool:
    return next(p for p in spec.compute_pools() if node in p.node_names())


def _init_plan(spec: ClusterSpec, root: Path, node: str) -> tuple[list[storage.Mount], Path | None]:
    """What ``node`` mounts, and the startup script it runs (None if its pool has none)."""
    pool = _pool_of(spec, node)
    return storage.pool_mounts(spec, pool, root), (files.startup_script(root / "etc", pool) if pool.startup_script else None)














def _munge_socket_dir(root: Path, uid: int | None = None) -> Path:
    """munged insists that every folder above its socket is searchable by all, which a
    private GTC_HOME (or pytest's tmp folders) is not; a socket path must also stay under
    108 bytes. So root's socket lives in /run, in a folder named after the cluster's path. A
    normal user cannot write there: its socket is in the cluster's munge/ folder (checked
    for length in check_spec; munged is told to accept private folders above it). ``uid``: the
    cluster's user (this process's by default)."""
    if (os.geteuid() if uid is None else uid) != 0:
        return root / "munge"
    return Path("/run/jupyter_gtc") / _cluster_id(root)


def _user_name(uid: int | None = None) -> str:
    """The name of ``uid`` (this process's user by default), or the number where no passwd
    entry has one (some containers): Slurm takes either as ``SlurmUser``."""
    uid = os.geteuid() if uid is None else uid
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _owner(runtime: dict[str, Any]) -> dict[str, Any]:
    """Whom the cluster's daemons run as; root for clusters recorded before this was."""
    return runtime.get("user") or {"uid": 0, "name": "root"}


def _check_owner(spec: ClusterSpec, runtime: dict[str, Any], action: str, allow_root: bool) -> None:
    """Refuse ``action`` on a cluster whose daemons run as another user: this process could
    neither signal them nor write the cluster's files (root can, which a delete allows)."""
    owner, me = runtime.get("user"), os.geteuid()
    if owner is None or me == owner["uid"] or (allow_root and me == 0):
        return  # (none recorded: a root cluster from before owners were, or a create that died at once)
    raise BackendUnavailable(f"cluster {spec.name}'s Slurm runs as user {owner['name']} (uid {owner['uid']}) and "
                             f"this process as {_user_name()} (uid {me}); {action} it as {owner['name']}"
                             + (" or as root" if allow_root else ""))

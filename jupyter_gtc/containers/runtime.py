"""Which container runtimes a machine has, each with its version, and how to get what is
missing. Found with the programs themselves (``--version``), never by a package manager, so
the same checks answer for a login node through its host's ``run``.

What is looked for: podman (rootless for a normal user, or root's), docker (its client, which
needs a daemon it can reach), the OCI runtimes crun and runc (Slurm 22.05 runs
``--container=BUNDLE`` through one of them, named in ``oci.conf``), and pyxis/enroot on a
Slurm cluster (``srun --help`` lists ``--container-image`` where pyxis's plugin is loaded).
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .._process import run
from ..exceptions import CommandError

# Debian's packages (the machines jupyter_gtc installs on); other systems: the same names.
INSTALL = {
    "podman": "apt-get install -y podman runc (or crun)",
    "docker": "apt-get install -y docker.io, then start its daemon",
    "crun": "apt-get install -y crun",
    "runc": "apt-get install -y runc",
    "umoci": "apt-get install -y umoci (unpacks an image into the bundle srun --container runs)",
    "pyxis": "ask the cluster's admins for pyxis and enroot (NVIDIA's Slurm plugin; Google's Cluster Toolkit "
             "images have it)",
}
ENGINES = ("podman", "docker")  # what runs an image from its name, in the order they are preferred
OCI_RUNTIMES = ("crun", "runc")
CHECK_TIMEOUT = 20  # a version takes milliseconds; podman's first call after boot sets up its store

Runner = Callable[[Sequence[str]], str]  # argv -> stdout; raises CommandError or OSError when it cannot run


@dataclass(frozen=True)
class Found:
    name: str           # podman, docker, crun, runc, pyxis
    path: str
    version: str
    rootless: bool = False
    note: str = ""      # what a user should know: docker without its daemon, crun under hybrid cgroups


@dataclass
class Runtimes:
    found: list[Found] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)  # name -> how to get it

    def get(self, name: str) -> Found | None:
        return next((f for f in self.found if f.name == name), None)

    @property
    def engine(self) -> Found | None:
        """The runtime that runs a task in an image: podman, else a docker whose daemon answers."""
        for name in ENGINES:
            found = self.get(name)
            if found and not found.note:
                return found
        return None

    @property
    def oci_runtime(self) -> Found | None:
        """The OCI runtime podman and Slurm's oci.conf should use here: crun, unless the machine's
        cgroups are hybrid (v1 controllers, v2 mounted beside them), which crun 1.8 refuses."""
        usable = [f for f in self.found if f.name in OCI_RUNTIMES and not f.note]
        return usable[0] if usable else None


def _local(argv: Sequence[str]) -> str:
    return run(list(argv), timeout=CHECK_TIMEOUT).stdout


def version_of(text: str) -> str:
    match = re.search(r"\d+\.\d+(?:\.\d+)?", text)
    return match.group(0) if match else text.strip().splitlines()[0] if text.strip() else "unknown"


def hybrid_cgroups(root: str = "/sys/fs/cgroup") -> bool:
    """cgroup v1 controllers with v2 mounted at ``unified`` beside them (systemd's hybrid mode)."""
    return os.path.isdir(os.path.join(root, "unified")) and os.path.isdir(os.path.join(root, "memory"))


def detect(which: Callable[[str], str | None] = shutil.which, runner: Runner = _local,
           slurm: bool = False, local: bool = True) -> Runtimes:
    """The runtimes this machine has (``which``/``runner``: another host's, for a login node,
    with ``local`` False). ``slurm``: also ask ``srun --help`` whether pyxis is there
    (``--container-image``), and Slurm's own OCI support (``--container``)."""
    result = Runtimes()
    hybrid = local and hybrid_cgroups()
    for name in (*ENGINES, *OCI_RUNTIMES):
        path = which(name)
        if not path:
            result.missing[name] = INSTALL[name]
            continue
        try:
            text = runner([path, "--version"])
        except (CommandError, OSError) as e:
            result.missing[name] = f"{path} is there but `{name} --version` failed ({e}); reinstall it"
            continue
        note = ""
        if name == "docker":
            note = _docker_daemon_problem(path, runner)
        elif name == "crun" and hybrid:
            note = "crun 1.8 refuses this machine's hybrid cgroups (v1 and v2 mounted together): runc is used"
        rootless = name == "podman" and (os.geteuid() if local else _uid(runner)) != 0
        result.found.append(Found(name, path, version_of(text), rootless, note))
    if slurm:
        srun = which("srun")
        try:
            text = runner([srun, "--help"]) if srun else ""
        except (CommandError, OSError):
            text = ""
        if "--container-image" in text:
            result.found.append(Found("pyxis", srun, "srun --container-image"))
        else:
            result.missing["pyxis"] = INSTALL["pyxis"]
        if re.search(r"--container[=\s]", text):
            result.found.append(Found("slurm-oci", srun, "srun --container=BUNDLE",
                                      note="" if result.oci_runtime else "needs crun or runc on the nodes"))
    if not result.oci_runtime and hybrid and result.get("crun") and "runc" in result.missing:
        result.missing["runc"] = INSTALL["runc"] + " (crun cannot run under this machine's hybrid cgroups)"
    return result


def _uid(runner: Runner) -> int:
    try:
        return int(runner(["id", "-u"]).strip())
    except (CommandError, OSError, ValueError):
        return -1


def detect_on_host(host) -> Runtimes:
    """What a cluster's login node has, through its host (``hosts/``: SSH for an attached
    cluster): the runtimes, pyxis, and Slurm's own OCI support."""
    def which(name: str) -> str | None:
        found = host.run(["which", name], check=False, timeout=CHECK_TIMEOUT)
        lines = found.stdout.strip().splitlines()
        return lines[0] if found.returncode == 0 and lines else None

    return detect(which, lambda argv: host.run(list(argv), timeout=CHECK_TIMEOUT).stdout, slurm=True, local=False)


def _docker_daemon_problem(path: str, runner: Runner) -> str:
    try:
        runner([path, "version", "--format", "{{.Server.Version}}"])
        return ""
    except (CommandError, OSError):
        return "its client is installed but no daemon answers (start dockerd, or use podman, which needs none)"


_cached: Runtimes | None = None


def local_runtimes() -> Runtimes:
    """This machine's runtimes, found once per process (a job's endpoint asks for every job)."""
    global _cached
    if _cached is None:
        _cached = detect()
    return _cached


def doctor_rows(runtimes: Runtimes | None = None) -> list[tuple[str, bool, str]]:
    """``gtc doctor``'s lines: which runtime runs images here, and how to get one. A machine
    without any is not broken (jobs run on the nodes), so the engine's row is the one marked."""
    runtimes = runtimes or local_runtimes()
    engine = runtimes.engine
    rows = []
    if engine:
        oci = runtimes.oci_runtime
        rows.append(("container runtime", True,
                     f"{engine.name} {engine.version}{' (rootless)' if engine.rootless else ''} at {engine.path}"
                     + (f", OCI runtime {oci.name} {oci.version}" if oci else "")
                     + ": Vertex jobs' container_spec images run in it"
                     + ("; local clusters' %%sbatch --container-image jobs through Slurm's OCI support"
                        if engine.name == "podman" and oci and all(shutil.which(t) for t in ("umoci", "skopeo"))
                        else "; %%sbatch --container-image on local clusters also needs podman, runc (or crun), "
                             "umoci and skopeo")))
    else:
        why = "; ".join(f.note for f in runtimes.found if f.note)
        rows.append(("container runtime", False,
                     f"none found{f' ({why})' if why else ''}: Vertex jobs run their command on the nodes and a "
                     f"job that needs its image's entrypoint is refused, as is %%sbatch --container-image on a "
                     f"local cluster; {INSTALL['podman']}, umoci, skopeo"))
    for found in runtimes.found:
        if found.note and found.name != "docker":
            rows.append((found.name, True, f"{found.version}: {found.note}"))
    return rows

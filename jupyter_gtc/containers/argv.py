"""The argument list that runs one task in an image: what the task's own process becomes
(``_process.replace_with``), so signals and the exit status are the task's.

Everything a user gave travels as separate arguments, never through a shell. The task's
environment is passed by name (``--env NAME``: the runtime copies the value from its own
environment), so no value, and no secret, is ever in argv where ``ps`` shows it.
"""

from __future__ import annotations

import glob
import json
import os
import resource
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .runtime import Found

GCS_MOUNT = "/gcs"  # where Cloud Storage FUSE mounts buckets in Vertex AI's containers
CDI_DIRS = ("/etc/cdi", "/var/run/cdi")


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool = False

    def option(self) -> str:
        return f"type=bind,source={self.source},target={self.target}" + (",ro" if self.read_only else "")


def parse_mounts(text: str, field: str = "--container-mounts") -> list[Mount]:
    """pyxis's ``SRC:DST[:ro],...`` (a bare ``SRC`` mounts at the same path)."""
    from ..exceptions import SpecError

    mounts = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        parts = item.split(":")
        if len(parts) > 3 or not parts[0].startswith("/") or (len(parts) > 1 and not parts[1].startswith("/")) \
                or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise SpecError(field, item, "SRC[:DST[:ro|rw]] with absolute paths, comma separated (pyxis's form)")
        mounts.append(Mount(parts[0], parts[1] if len(parts) > 1 else parts[0], len(parts) == 3 and parts[2] == "ro"))
    return mounts


def gpu_options(dev: str = "/dev", cdi_dirs: Sequence[str] = CDI_DIRS, wanted: bool = True) -> list[str]:
    """How the task's GPUs reach the container: NVIDIA's CDI spec where the machine has one
    (``nvidia.com/gpu=all``: the task's cgroup still limits it to what GRES gave), else the
    ``/dev/nvidia*`` devices this task can see. Nothing for a task without GPUs."""
    if not wanted:
        return []
    if any(glob.glob(os.path.join(d, "nvidia*.yaml")) + glob.glob(os.path.join(d, "nvidia*.json")) for d in cdi_dirs):
        return ["--device", "nvidia.com/gpu=all"]
    return [arg for device in sorted(glob.glob(os.path.join(dev, "nvidia*")))
            if not os.path.isdir(device) for arg in ("--device", device)]


def limits() -> list[str]:
    """The open-file and process limits this process holds, passed on explicitly: root's podman
    otherwise asks for more (1048576 files, and as many processes), which a process without
    CAP_SYS_RESOURCE (inside another container, as in CI) may not take: the run fails in setrlimit.
    The process limit is capped at the kernel's pid_max too, which such sandboxes enforce."""
    options = []
    try:
        pid_max = int(open("/proc/sys/kernel/pid_max").read())
    except (OSError, ValueError):
        pid_max = None
    for name, which in (("nofile", resource.RLIMIT_NOFILE), ("nproc", resource.RLIMIT_NPROC)):
        soft, hard = resource.getrlimit(which)
        if hard == resource.RLIM_INFINITY:
            continue
        if name == "nproc" and pid_max:
            soft, hard = min(soft, pid_max), min(hard, pid_max)
        options += ["--ulimit", f"{name}={soft}:{hard}"]
    return options


def run_argv(engine: Found, image: str, *, command: Sequence[str] = (), args: Sequence[str] = (),
             env_names: Iterable[str] = (), mounts: Sequence[Mount] = (), gpus: Sequence[str] = (),
             oci_runtime: Found | None = None, name: str | None = None) -> list[str]:
    """``engine run`` of ``image`` as Vertex runs a container_spec: ``command`` replaces the
    image's ENTRYPOINT (empty: the image's own runs), ``args`` its CMD (empty: the image's own);
    the host's network (a task's rendezvous addresses are its node's), ``mounts``, ``gpus``
    (``gpu_options``) and the variables ``env_names`` with this process's values."""
    argv = [engine.path]
    if engine.name == "podman" and oci_runtime is not None:
        argv += ["--runtime", oci_runtime.path]
    argv += ["run", "--rm", "--network", "host", "--init" if engine.name == "docker" else "--sig-proxy=true"]
    if name:  # --replace: a container of this name left by a run killed outright (SIGKILL) goes first
        argv += ["--name", name] + (["--replace"] if engine.name == "podman" else [])
    if engine.name == "podman":
        argv += limits()
    for mount in mounts:
        argv += ["--mount", mount.option()]
    for variable in dict.fromkeys(env_names):
        argv += ["--env", variable]
    argv += list(gpus)
    if command:
        argv += ["--entrypoint", json.dumps(list(command))]  # a JSON list: the whole command, not one word
    argv.append(image)
    argv += list(args)
    return argv

"""A job's ``srun`` steps in its image on a local cluster, through Slurm 22.05's own OCI
support (``srun --container=BUNDLE``), for pyxis's ``--container-image`` flags.

At submit: the image is had (``images.ensure``) and unpacked once into a bundle cached by its
id (``slurm_oci.bundle_for``); the job gets a bundle of its own (``JOB/container/bundle``:
only ``config.json``, its root the cached one, read-only, with ``/tmp`` and ``/var/tmp`` its
own per task) with the job folder, the folder it runs in and the user's ``--container-mounts``
bound, the working directory (``--container-workdir``, else where the job runs), and the
image's environment noted for ``oci_task``; the cluster's ``oci.conf`` runs each task through
``oci_task`` (its own Slurm ids, the image's variables, ``/gcs``); and a ``srun`` first on the
job's ``PATH`` adds ``--container=`` the job's bundle, so ``srun python train.py`` runs in the
image as under pyxis (the batch script itself runs on the node, as pyxis runs it).

The image's root is shared by the job's tasks and by jobs of the same image, so it is mounted
read-only: a task writes to ``/tmp``, its mounts, or the job folder, not into the image (pyxis
gives each container a writable copy; here ``--container-writable`` is refused by name)."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from ..exceptions import GtcError
from . import images, runtime, slurm_oci
from .argv import GCS_MOUNT
from .oci_task import CONTAINER_ENV, IMAGE_ENV
from .pyxis import ContainerRequest, not_run

SRUN = "srun"
SWITCH = "GTC_CONTAINERS"


class ContainerRefused(GtcError):
    """A job asks for an image this cluster cannot run; nothing was submitted."""

    http_status = 400
    google_status = "FAILED_PRECONDITION"


def missing_tools(found: runtime.Runtimes) -> list[str]:
    """What a local cluster lacks to run ``--container-image``, each with how to get it."""
    problems = []
    if found.engine is None or found.engine.name != "podman":
        problems.append("podman (" + found.missing.get("podman", runtime.INSTALL["podman"]) + ")")
    if found.oci_runtime is None:
        problems.append("an OCI runtime for Slurm's oci.conf: " + runtime.INSTALL["runc"])
    for tool, how in (("umoci", runtime.INSTALL["umoci"]), ("skopeo", "apt-get install -y skopeo")):
        if shutil.which(tool) is None:
            problems.append(f"{tool} ({how})")
    return problems


def prepare(req: ContainerRequest, cluster_etc: Path, cache: Path, job_dir: Path, work_dir: str,
            found: runtime.Runtimes | None = None, python: str = sys.executable, gcs_root: Path | None = None) -> Path:
    """Everything the job's steps need to run in ``req.image``; returns the folder to put
    first on the job's PATH (its ``srun``). Raises ``ContainerRefused`` or ``ImageUnavailable``
    before anything of the job's is written."""
    refused = not_run(list(req.flags))
    if refused:
        raise ContainerRefused(f"{', '.join(refused)}: pyxis's, not run on a local cluster (Slurm's own OCI "
                               f"support runs the image read-only, with --container-image, --container-mounts, "
                               f"--container-workdir and --container-env); drop them")
    if found is None:  # GTC_CONTAINERS=none: as on a machine with no runtime (the Vertex endpoint's switch)
        found = runtime.Runtimes() if os.environ.get(SWITCH, "").strip().lower() == "none" else runtime.local_runtimes()
    problems = missing_tools(found)
    if problems:
        raise ContainerRefused(f"image {req.image} cannot run on this local cluster: it needs "
                               + "; ".join(problems) + " (`gtc doctor` says which container runtime was found)")
    for mount in req.mounts:
        if not os.path.exists(mount.source):
            raise ContainerRefused(f"--container-mounts: {mount.source} does not exist on the cluster's nodes")
    reference = images.ensure(found.engine, req.image)
    base = slurm_oci.bundle_for(found.engine, reference, cache)
    _write_oci_conf(cluster_etc, found, python)
    config = json.loads((base / "config.json").read_text())
    # slurmstepd takes the root as BUNDLE/rootfs whatever config.json says: a link to the cached one.
    config["root"] = {"path": "rootfs", "readonly": True}
    image_env = config["process"].get("env", [])
    config["annotations"] = {**(config.get("annotations") or {}), IMAGE_ENV: json.dumps(image_env),
                             CONTAINER_ENV: json.dumps(list(req.env_names))}
    bound = {str(job_dir): False, work_dir: False}
    mounts = [{"destination": d, "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "nodev", "mode=1777"]}
              for d in ("/tmp", "/var/tmp")]
    mounts += [{"destination": path, "type": "bind", "source": path, "options": ["rbind", "rw"]}
               for path in bound]
    # The node's names and resolver, as enroot gives them: a rendezvous at the first node's name
    # (torchrun's --rdzv-endpoint, gloo's own host name) resolves in the container as on the node.
    mounts += [{"destination": path, "type": "bind", "source": path, "options": ["rbind", "ro"]}
               for path in ("/etc/hosts", "/etc/resolv.conf", "/etc/hostname") if os.path.exists(path)]
    if gcs_root is not None and gcs_root.is_dir():  # the local buckets, where Cloud Storage FUSE mounts them on Vertex
        mounts.append({"destination": GCS_MOUNT, "type": "bind", "source": str(gcs_root), "options": ["rbind", "rw"]})
    mounts += [{"destination": m.target, "type": "bind", "source": m.source,
                "options": ["rbind", "ro" if m.read_only else "rw"]} for m in req.mounts]
    config["mounts"] = [m for m in config.get("mounts", []) if m["destination"] not in {n["destination"] for n in mounts}]
    config["mounts"] += mounts
    config["process"]["cwd"] = req.workdir or work_dir
    # The node's process ids, as enroot's containers have them: in a namespace of its own every
    # task's torchrun agent was pid 1 on the same host name, so c10d's rendezvous took the two
    # nodes for one and waited for the second for ever.
    config["linux"]["namespaces"] = [n for n in config["linux"].get("namespaces", []) if n["type"] != "pid"]
    folder = job_dir / "container"
    (folder / "bundle").mkdir(parents=True, mode=0o700)
    (folder / "bundle" / "config.json").write_text(json.dumps(config, indent=1))
    (folder / "bundle" / "rootfs").symlink_to((base / "rootfs").resolve())
    bin_dir = folder / "bin"
    bin_dir.mkdir(mode=0o700)
    srun = shutil.which(SRUN) or "/usr/bin/srun"
    shim = bin_dir / "srun"
    # Our own words only (paths we chose, quoted): the user's arguments pass through "$@".
    shim.write_text(f"#!/bin/sh\n# jupyter_gtc: this job's srun steps run in {req.image!r} (--container-image)\n"
                    f"exec {shlex.quote(srun)} --container={shlex.quote(str(folder / 'bundle'))} \"$@\"\n")
    shim.chmod(0o700)
    return bin_dir


def _write_oci_conf(etc: Path, found: runtime.Runtimes, python: str) -> None:
    """The cluster's ``oci.conf`` (slurmstepd reads it at each step: no restart), written
    whole (a new file renamed over) and only when it changes."""
    text = slurm_oci.oci_conf(found.oci_runtime, rootless=os.geteuid() != 0,
                              wrapper=f"{python} -m jupyter_gtc.containers.oci_task")
    conf = etc / "oci.conf"
    if conf.is_file() and conf.read_text() == text:
        return
    partial = etc / f".oci.conf.{os.getpid()}"
    partial.write_text(text)
    partial.chmod(0o644)
    partial.replace(conf)


def path_with(bin_dir: Path, env: dict[str, str]) -> dict[str, str]:
    """``env`` with ``bin_dir`` first on its PATH (sbatch's own PATH where it sets none)."""
    path = env.get("PATH") or os.environ.get("PATH", os.defpath)
    return {**env, "PATH": os.pathsep.join([str(bin_dir), path])}

"""Slurm 22.05's own container support (``srun --container=BUNDLE``): an image unpacked into
an OCI bundle (``umoci``), and the ``oci.conf`` that tells slurmstepd which OCI runtime runs
it. slurmstepd reads ``oci.conf`` (beside ``slurm.conf``) at each step, so writing it into a
running cluster's configuration folder takes effect for the next step, no restart.

How ``%%sbatch --container-image`` (pyxis's flags) would plug in, in the submit path: the image
is had (``images.ensure``), made a bundle here once per image (``bundle_for``, cached by the
image's id under the cluster's folder, which every node of a local cluster sees), and each
``srun`` of the script gets ``--container=<bundle>``, with pyxis's ``--container-mounts``
(``argv.parse_mounts``) written into the bundle's ``config.json`` as bind mounts."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from .._process import run
from .argv import Mount
from .runtime import Found

# The container's id: unique per node, user, job, step and task (Slurm's OCI pattern).
CONTAINER_ID = "%n.%u.%j.%s.%t"
UNPACK_TIMEOUT = 900


def oci_conf(runtime: Found, rootless: bool, state_root: str | None = None, wrapper: str = "") -> str:
    """``oci.conf`` for ``runtime`` (crun or runc): RunTimeRun (run and wait) with Query, Kill
    and Delete, which 22.05 requires with it. A rootless runtime keeps its state in the user's
    runtime folder; root's in ``state_root``. ``wrapper``: a command that runs before the
    runtime, given the node and the task's local id (``oci_task``: each task's own ids)."""
    root = "/run/user/%U/gtc-oci" if rootless else (state_root or "/run/gtc-oci")
    base = f"{runtime.path}{' --rootless=true' if rootless else ''} --root={root}"
    return "\n".join([
        f"# jupyter_gtc: Slurm's --container=BUNDLE runs in {runtime.name} {runtime.version}",
        f'RunTimeQuery="{base} state {CONTAINER_ID}"',
        f'RunTimeKill="{base} kill -a {CONTAINER_ID}"',
        f'RunTimeDelete="{base} delete --force {CONTAINER_ID}"',
        f'RunTimeRun="{wrapper + " %n %t " if wrapper else ""}{base} run {CONTAINER_ID} -b %b"',
        "",
    ])


def image_id(engine: Found, reference: str) -> str:
    return run([engine.path, "image", "inspect", "--format", "{{.Id}}", reference], timeout=60).stdout.strip()


def bundle_for(engine: Found, reference: str, cache: Path, skopeo: str = "skopeo", umoci: str = "umoci",
               mounts: list[Mount] | tuple[Mount, ...] = ()) -> Path:
    """An OCI bundle (``config.json`` and ``rootfs/``) of ``reference`` (in ``engine``'s store),
    under ``cache/<image id>/``, made once: copied out as an OCI layout (skopeo), unpacked by
    umoci. ``mounts`` are added to its config as bind mounts (pyxis's --container-mounts)."""
    ident = image_id(engine, reference).removeprefix("sha256:")[:16]
    folder = cache / ident
    bundle = folder / "bundle"
    if not (bundle / "config.json").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        layout = folder / "layout"
        run([skopeo, "copy", "--quiet", f"containers-storage:{reference}", f"oci:{layout}:gtc"], timeout=UNPACK_TIMEOUT)
        partial = folder / f"bundle.{os.getpid()}"
        rootless = ["--rootless"] if os.geteuid() != 0 else []
        run([umoci, "unpack", *rootless, "--image", f"{layout}:gtc", str(partial)], timeout=UNPACK_TIMEOUT)
        config = json.loads((partial / "config.json").read_text())
        config["process"]["terminal"] = False  # a step's output goes to its log; there is no terminal
        # The node's network and host name, as pyxis gives them (a job's rendezvous addresses are its nodes').
        config["linux"]["namespaces"] = [n for n in config["linux"].get("namespaces", [])
                                         if n["type"] not in ("network", "uts")]
        config.pop("hostname", None)
        (partial / "config.json").write_text(json.dumps(config, indent=1))
        partial.replace(bundle)  # whole or not at all: another step may be reading the cache
        shutil.rmtree(layout, ignore_errors=True)
    if mounts:
        config = json.loads((bundle / "config.json").read_text())
        config.setdefault("mounts", []).extend(
            {"destination": m.target, "type": "bind", "source": m.source,
             "options": ["rbind", "ro" if m.read_only else "rw"]} for m in mounts)
        (bundle / "config.json").write_text(json.dumps(config, indent=1))
    return bundle

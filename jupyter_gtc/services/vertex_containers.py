"""A CustomJob pool's ``container_spec`` as the task runner gets it: run in its image through
this machine's container runtime (``containers/``), as Vertex AI runs it, or, where there is no
runtime or the image cannot be had, its command on the nodes themselves, saying so.

Run on the nodes, a pool's command gets the job's Python environment (the kernel's), which it
must never change: a command that needs the image's entrypoint (``command: []``), or one that
runs ``pip`` (``CustomJob.from_local_script``'s ``pip install --upgrade pip && pip3 install
--user ...``, written for the inside of an image), is refused then, with what to install.

The image is had here, in the endpoint, before the job is submitted: the local endpoint's
cluster is this machine's, its nodes share this runtime's image store, and an image that
cannot be had is the request's error, naming the image and each way tried.

A HyperparameterTuningJob's trials are Slurm jobs of a script (``spec/trial_job.py``): theirs
run in pool 0's image through the cluster's ``%%sbatch --container-image`` support (Slurm's
OCI runtime, ``containers/slurm_job.py``), the hyperparameter flags after the image's
ENTRYPOINT as Vertex passes them (they replace its CMD).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from ..containers import images
from ..containers.runtime import INSTALL, Runtimes, local_runtimes
from ..exceptions import SpecError

SWITCH = "GTC_CONTAINERS"  # "none": run every pool's command on the nodes, as before runtimes were used
_PIP = re.compile(r"(?:^|[\s/;&|(])pip(?:3(?:\.\d+)?)?(?:\s|$)|-m\s+pip\b")


# An image found in the runtime's store stays found for a while: the check is a podman call
# (~0.1 s, more under load) in every submit's path, and an image removed after it fails its job
# at the run with podman's error, as one removed between a check and the run always could.
# Only store names: an archive or layout is loaded again each time (its file may have changed).
PRESENT_FOR = 300.0
_present: dict[tuple[str, str], tuple[str, float]] = {}


def _ensure(engine: Any, image: str) -> str:
    key = (engine.path, image)
    known = _present.get(key)
    if known and time.monotonic() - known[1] < PRESENT_FOR:
        return known[0]
    reference = images.ensure(engine, image)
    if not images.is_local_source(image):
        _present[key] = (reference, time.monotonic())
    return reference


def runs_pip(argv: list[str]) -> bool:
    """Whether ``argv`` runs pip: as its program, ``python -m pip``, or inside a ``sh -c`` string."""
    return any(_PIP.search(word) for word in argv) or any(
        os.path.basename(word) in ("pip", "pip3") or re.fullmatch(r"pip3\.\d+", os.path.basename(word))
        for word in argv)


def runtimes() -> Runtimes | None:
    if os.environ.get(SWITCH, "").strip().lower() == "none":
        return None
    return local_runtimes()


def trial_in_image(job_spec: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A tuning job's ``trial_job_spec`` (its JSON, camelCase) whose pool 0 names an image: the
    spec with that pool's command made explicit (the image's ENTRYPOINT for ``command: []``),
    and the ``#SBATCH`` lines that run each trial's steps in the image. Without a runtime, or
    the image, the spec as given and no lines: its command runs on the nodes, unless it needs
    the image (``command: []``) or runs pip, which is refused as for a CustomJob."""
    from ..containers.slurm_job import missing_tools

    pools = job_spec.get("workerPoolSpecs") or []
    container = pools[0].get("containerSpec") if pools and isinstance(pools[0], dict) else None
    if not isinstance(container, dict) or not container.get("imageUri"):
        return job_spec, []
    where = "trial_job_spec.worker_pool_specs[0].container_spec"
    image = container["imageUri"]
    command, args = list(container.get("command") or []), list(container.get("args") or [])
    found = runtimes()
    problems = missing_tools(found) if found else []
    why_not = (f"{SWITCH}=none in the endpoint's environment" if not found else
               f"this cluster cannot run trials in images: it needs {'; '.join(problems)}")
    if found and not problems:
        try:
            reference = _ensure(found.engine, image)
        except images.ImageUnavailable as e:
            if not command or runs_pip([*command, *args]):
                raise SpecError(f"{where}.image_uri", image,
                                f"an image {found.engine.name} can have here: {e}") from None
            why_not = str(e)
        else:
            if not command:
                command = images.entrypoint(found.engine, reference)
                if not command:  # Vertex's flags would be the program: nothing a trial can run
                    raise SpecError(f"{where}.command", [], f"the program to run: image {image} has no ENTRYPOINT, "
                                    f"and a trial's hyperparameter flags replace its CMD")
            names = [e["name"] for e in container.get("env") or [] if isinstance(e, dict) and e.get("name")]
            lines = [f"#SBATCH --container-image={reference}"]
            if names:  # the pool's variables win over the image's own, as on Vertex
                lines.append(f"#SBATCH --container-env={','.join(names)}")
            pool = {**pools[0], "containerSpec": {**container, "command": command}}
            return {**job_spec, "workerPoolSpecs": [pool, *pools[1:]]}, lines
    if not command:
        raise SpecError(f"{where}.command", [], f"the program and its arguments, or a container runtime that runs "
                        f"image {image}'s entrypoint: {why_not}")
    if runs_pip([*command, *args]):
        raise SpecError(f"{where}.command", [*command, *args], f"a command that runs no pip, or a container runtime "
                        f"to run it in image {image}: {why_not}. On the nodes it would install into the Python "
                        f"environment the job runs with (the kernel's), which no job may change")
    return job_spec, []


def container_pool(container: Any, replicas: int, where: str) -> dict[str, Any]:
    image, command, args = container.image_uri, list(container.command), list(container.args)
    env = {e.name: e.value for e in container.env}
    found = runtimes()
    engine = found.engine if found else None
    why_not = (f"no container runtime on this cluster ({INSTALL['podman']})" if found else
               f"{SWITCH}=none in the endpoint's environment")
    if engine and image:
        try:
            reference = _ensure(engine, image)
        except images.ImageUnavailable as e:
            if not command or runs_pip([*command, *args]):
                raise SpecError(f"{where}.container_spec.image_uri", image,
                                f"an image {engine.name} can have here: {e}") from None
            why_not = str(e)
        else:
            oci = found.oci_runtime
            return {"replicas": replicas, "argv": [*command, *args], "env": env,
                    "container": {"engine": engine.path, "engine_name": engine.name, "image": reference,
                                  "command": command, "args": args,
                                  "oci_runtime": oci.path if oci else None},
                    "note": f"jupyter_gtc: image {image} runs in {engine.name} {engine.version}"}
    if not command:
        raise SpecError(f"{where}.container_spec.command", [],
                        f"the program and its arguments, or a container runtime that runs image {image}'s "
                        f"entrypoint: {why_not}")
    if runs_pip([*command, *args]):
        raise SpecError(f"{where}.container_spec.command", [*command, *args],
                        f"a command that runs no pip, or a container runtime to run it in image {image}: "
                        f"{why_not}. On the nodes it would install into the Python environment the job runs "
                        f"with (the kernel's), which no job may change")
    return {"replicas": replicas, "argv": [*command, *args], "env": env,
            "note": (f"jupyter_gtc: image {image} is not run ({why_not}); each pool's command runs on the nodes "
                     f"themselves") if image else ""}

"""The tests' own image, built here with no registry: a small Debian (bookworm) root with
python3 and pip, made by mmdebstrap from Debian's packages, imported with ``podman import``
with a CMD, then a trainer image on top of it with an ENTRYPOINT (``podman build``, no RUN),
as an image from a registry has them.

The root's tarball is built once per machine (33 s here) and kept under
``$GTC_TEST_IMAGE_CACHE`` (default ``~/.cache/jupyter_gtc/images``); the images stay in
podman's store, so a second session only checks they are there."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from jupyter_gtc._process import run

BASE = "localhost/gtc-test/python3:bookworm"
TRAINER = "localhost/gtc-test/trainer:1"
PACKAGES = "python3,python3-pip,python3-setuptools,python3-wheel"
# pip in the image is Debian's (PEP 668 marks it externally managed: dropped, as a Python image on
# a registry has none), and has no index to reach here: PIP_NO_INDEX keeps `pip install --upgrade
# pip` (what CustomJob.from_local_script runs first) offline; it finds pip up to date.
BASE_CHANGES = ["ENV PIP_NO_INDEX=1", "ENV PIP_ROOT_USER_ACTION=ignore", 'CMD ["python3"]']
HOOK = 'rm -f "$1"/usr/lib/python3*/EXTERNALLY-MANAGED'
# The trainer a Google sample's image would hold: it reports what it got, and writes its model
# where AIP_MODEL_DIR says, through /gcs as on Vertex AI.
TRAINER_TASK = '''import json, os, sys
model_dir = os.environ.get("AIP_MODEL_DIR", "")
if model_dir.startswith("gs://"):
    path = "/gcs/" + model_dir[len("gs://"):]
    os.makedirs(path, exist_ok=True)
    open(os.path.join(path, "model.txt"), "w").write("trained in a container\\n")
print(json.dumps({"argv": sys.argv[1:], "in_container": os.path.exists("/run/.containerenv"),
                  "cluster_spec": json.loads(os.environ.get("CLUSTER_SPEC", "{}")),
                  "greeting": os.environ.get("GREETING"), "python": sys.executable}))
'''


# A tuning trial's image, as the one Google's tuning sample names (python-aiplatform's
# samples/model-builder/create_hyperparameter_tuning_job_sample.py: command [], args []): its
# ENTRYPOINT takes the trial's flags, and it reports the loss as cloudml-hypertune writes it.
TUNER_TASK = '''import argparse, json, math, os, sys, time
parser = argparse.ArgumentParser()
for name, kind in (("lr", float), ("units", int), ("activation", str), ("batch_size", int)):
    parser.add_argument("--" + name, type=kind, required=True)
given = parser.parse_args()
loss = abs(math.log10(given.lr) + 2) + given.units / 1000 + (given.activation == "selu") + given.batch_size / 10000
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "w") as f:
    f.write(json.dumps({"loss": str(loss), "global_step": "1", "timestamp": time.time(),
                        "trial": os.environ.get("CLOUD_ML_TRIAL_ID", "")}) + "\\n")
print("TUNER " + json.dumps({"argv": sys.argv[1:], "in_container": os.path.exists("/opt/tuner/tuner"),
                             "python": sys.executable, "loss": loss, "greeting": os.environ.get("GREETING")}))
'''
TUNER = "localhost/gtc-test/tuner:" + hashlib.sha256(TUNER_TASK.encode()).hexdigest()[:12]


def cache_dir() -> Path:
    return Path(os.environ.get("GTC_TEST_IMAGE_CACHE") or Path.home() / ".cache" / "jupyter_gtc" / "images")


def _exists(image: str) -> bool:
    return run(["podman", "image", "exists", image], check=False).returncode == 0


def base_image() -> str:
    if _exists(BASE):
        return BASE
    recipe = f"minbase bookworm {PACKAGES} {HOOK}"
    tarball = cache_dir() / f"bookworm-python3-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}.tar"
    if not tarball.is_file():
        tarball.parent.mkdir(parents=True, exist_ok=True)
        partial = tarball.with_suffix(f".{os.getpid()}.partial.tar")
        run(["mmdebstrap", "--quiet", "--variant=minbase", f"--include={PACKAGES}", f"--customize-hook={HOOK}",
             "bookworm", str(partial)], timeout=1200)
        partial.replace(tarball)  # whole or not at all: a run killed halfway leaves no tarball to trust
    changes = [arg for change in BASE_CHANGES for arg in ("--change", change)]
    run(["podman", "import", "--quiet", *changes, str(tarball), BASE], timeout=600)
    return BASE


def trainer_image() -> str:
    base_image()
    if _exists(TRAINER):
        return TRAINER
    context = Path(tempfile.mkdtemp(prefix="gtc-trainer-"))
    try:
        (context / "trainer").mkdir()
        (context / "trainer" / "__init__.py").write_text("")
        (context / "trainer" / "task.py").write_text(TRAINER_TASK)
        (context / "Containerfile").write_text(f"FROM {BASE}\nCOPY trainer /opt/trainer/trainer\n"
                                               f"ENV PYTHONPATH=/opt/trainer\n"
                                               f'ENTRYPOINT ["python3", "-m", "trainer.task"]\nCMD ["--epochs", "1"]\n')
        run(["podman", "build", "--quiet", "--tag", TRAINER, str(context)], timeout=600)
    finally:
        shutil.rmtree(context, ignore_errors=True)
    return TRAINER


def tuner_image() -> str:
    """The tuning trial's image (tagged by its code's hash: a changed trainer is a new image)."""
    base_image()
    if _exists(TUNER):
        return TUNER
    context = Path(tempfile.mkdtemp(prefix="gtc-tuner-"))
    try:
        (context / "tuner").mkdir()
        (context / "tuner" / "__init__.py").write_text("")
        (context / "tuner" / "task.py").write_text(TUNER_TASK)
        # CMD is what Vertex's flags replace: a trial that ran it would fail on the unknown flag.
        (context / "Containerfile").write_text(f"FROM {BASE}\nCOPY tuner /opt/tuner/tuner\nENV PYTHONPATH=/opt/tuner\n"
                                               f'ENTRYPOINT ["python3", "-m", "tuner.task"]\nCMD ["--not-a-flag"]\n')
        run(["podman", "build", "--quiet", "--tag", TUNER, str(context)], timeout=600)
    finally:
        shutil.rmtree(context, ignore_errors=True)
    return TUNER

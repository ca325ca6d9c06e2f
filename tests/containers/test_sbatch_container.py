"""pyxis's ``--container-image`` flags on a real 2-node local cluster: each task of a job's
``srun`` steps runs in the image through Slurm 22.05's own OCI support, with its own rank,
the user's mounts, the folder it was submitted from, and the image's root read-only."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from jupyter_gtc import api
from jupyter_gtc.containers.slurm_job import ContainerRefused
from tests.containers.image import TRAINER, trainer_image

pytestmark = [pytest.mark.slurm,
              pytest.mark.skipif(any(shutil.which(p) is None for p in ("podman", "mmdebstrap", "umoci", "skopeo")),
                                 reason="podman, mmdebstrap, umoci and skopeo are not installed "
                                        "(scripts/install-system-deps.sh)")]

# What each task reports, from inside its container.
REPORT = r'''import json, os
def can_write(path):
    try:
        open(path, "w").write("x")
        return True
    except OSError:
        return False
print("REPORT " + json.dumps({
    "rank": os.environ["SLURM_PROCID"], "node": os.environ["SLURMD_NODENAME"], "node_id": os.environ["SLURM_NODEID"],
    "image": os.path.isdir("/opt/trainer/trainer"), "data": open("/data/input.txt").read(), "cwd": os.getcwd(),
    "gcs": open("/gcs/test-bucket/hello.txt").read(),
    "pythonpath": os.environ.get("PYTHONPATH"), "greeting": os.environ.get("GREETING"),
    "image_root_writable": can_write("/usr/written-by-a-task"), "tmp_writable": can_write("/tmp/scratch"),
    "job_dir_writable": can_write(os.path.join(os.environ["GTC_JOB_DIR"], "rank" + os.environ["SLURM_PROCID"]))}))
'''


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from tests.conftest import small_gpu_spec

    trainer_image()
    cluster = api.create_cluster(small_gpu_spec("sbc", nodes=2))
    yield cluster
    api.delete_cluster(cluster.name)


def reports(job) -> list[dict]:
    return sorted((json.loads(line[len("REPORT "):]) for line in job.logs().splitlines()
                   if line.startswith("REPORT ")), key=lambda r: r["rank"])


def test_each_task_of_a_two_node_job_runs_in_the_image_with_its_own_rank(cluster, tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "input.txt").write_text("the user's data")
    (tmp_path / "report.py").write_text(REPORT)
    bucket = Path(os.environ["GTC_HOME"]) / "gcs" / "test-bucket"  # the local buckets: gs://test-bucket/hello.txt
    bucket.mkdir(parents=True, exist_ok=True)
    (bucket / "hello.txt").write_text("from the bucket")
    monkeypatch.setenv("GREETING", "hello from the kernel")
    # The image as an #SBATCH line, the rest on the command line, as pyxis users write either.
    script = f"#!/bin/bash\n#SBATCH --container-image {TRAINER}\n#SBATCH --nodes 2\nsrun python3 report.py\n"
    job = api.submit_job(cluster.name, script, ["--ntasks-per-node=1", "--container-mounts", f"{data}:/data:ro",
                                                "--container-env=GREETING"], submit_dir=str(tmp_path))
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    got = reports(job)
    assert [(r["rank"], r["node_id"]) for r in got] == [("0", "0"), ("1", "1")], job.logs()
    assert sorted(r["node"] for r in got) == ["gpu-0", "gpu-1"]
    for report in got:
        assert report["image"] and report["data"] == "the user's data" and report["cwd"] == str(tmp_path)
        assert report["gcs"] == "from the bucket"
        assert report["pythonpath"] == "/opt/trainer"          # the image's own variable wins over the job's
        assert report["greeting"] == "hello from the kernel"  # --container-env: the job's value
        assert not report["image_root_writable"] and report["tmp_writable"] and report["job_dir_writable"]
    assert sorted(p.name for p in Path(job.job_dir).glob("rank*")) == ["rank0", "rank1"]


def test_the_working_directory_is_the_container_workdir_where_given(cluster, tmp_path):
    script = "#!/bin/bash\nsrun pwd\n"
    job = api.submit_job(cluster.name, script, [f"--container-image={TRAINER}", "--container-workdir=/opt/trainer"],
                         submit_dir=str(tmp_path))
    job.wait(timeout=300)
    assert job.state == "COMPLETED" and "/opt/trainer" in job.logs().splitlines(), job.logs()


def test_without_a_runtime_the_job_is_refused_at_submit_naming_the_image_and_what_to_install(cluster, monkeypatch):
    monkeypatch.setenv("GTC_CONTAINERS", "none")  # as on a machine where none is installed
    before = set(Path(os.environ["GTC_HOME"], "jobs", cluster.name).glob("*"))
    with pytest.raises(ContainerRefused) as info:
        api.submit_job(cluster.name, "srun true\n", ["--container-image", "docker://python:3.11"])
    message = str(info.value)
    assert "image python:3.11" in message and "apt-get install -y podman" in message and "gtc doctor" in message
    assert set(Path(os.environ["GTC_HOME"], "jobs", cluster.name).glob("*")) == before  # nothing half-made


def test_an_image_that_cannot_be_had_is_refused_at_submit(cluster):
    from jupyter_gtc.containers.images import ImageUnavailable

    with pytest.raises(ImageUnavailable) as info:
        api.submit_job(cluster.name, "srun true\n", ["--container-image", "./no/such/image.tar"], submit_dir="/tmp")
    assert "/tmp/no/such/image.tar" in str(info.value)


def test_pyxis_flags_not_run_here_are_refused_by_name(cluster):
    with pytest.raises(ContainerRefused) as info:
        api.submit_job(cluster.name, "srun true\n", ["--container-image", TRAINER, "--container-writable"])
    assert "--container-writable" in str(info.value)


def test_doctor_says_local_clusters_run_container_image_jobs():
    from jupyter_gtc.containers import runtime

    [row] = [r for r in runtime.doctor_rows(runtime.detect()) if r[0] == "container runtime"]
    assert row[1] and "%%sbatch --container-image jobs through Slurm's OCI support" in row[2], row


def test_gtc_job_submit_runs_an_image_from_an_archive_beside_the_script(cluster, tmp_path, monkeypatch, capsys):
    from jupyter_gtc import cli
    from jupyter_gtc._process import run

    (tmp_path / "images").mkdir()
    run(["podman", "save", "--quiet", "--format", "docker-archive", "--output", str(tmp_path / "images" / "train.tar"),
         TRAINER], timeout=300)
    (tmp_path / "train.sbatch").write_text("#!/bin/bash\nsrun python3 -m trainer.task --from-archive\n")
    monkeypatch.chdir(tmp_path)  # as a user runs gtc from the project folder: ./images/train.tar is there
    assert cli.main(["job", "submit", "train.sbatch", "--cluster", cluster.name, "--wait",
                     "--container-image", "./images/train.tar"]) == 0, capsys.readouterr()
    assert '"argv": ["--from-archive"]' in capsys.readouterr().out  # the image's trainer, in the image

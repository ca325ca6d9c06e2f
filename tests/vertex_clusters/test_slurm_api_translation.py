"""What sbatch would get, as the Slurm Job API's v0.0.42 job description (job_desc.py): our
services' options, the script's #SBATCH lines under them, the environment. Pure.

Every request is checked against Slurm's own v0.0.42 schema (fixtures/slurm_v0.0.42, copied
from SchedMD/slurm's openapi_spec_v42.json: SOURCES.md), field names included.
"""

import json
from pathlib import Path

import jsonschema
import pytest

from jupyter_gtc.exceptions import SpecError
from jupyter_gtc.vertex_clusters.job_desc import DEFAULT_PATH, OptionRefused, job_description, slurm_minutes

SCHEMAS = json.loads((Path(__file__).parent / "fixtures" / "slurm_v0.0.42" / "openapi_v0.0.42_schemas.json")
                     .read_text())["schemas"]


def valid_submit(job: dict) -> dict:
    """``{"job": job}`` as Slurm's schema for ``POST /slurm/v0.0.42/job/submit`` takes it, and
    each field one the schema names (it allows unknown ones: a misspelled field would pass)."""
    schema = {"$ref": "#/components/schemas/v0.0.42_job_submit_req", "components": {"schemas": SCHEMAS}}
    jsonschema.Draft7Validator(schema).validate({"job": job})
    unknown = set(job) - set(SCHEMAS["v0.0.42_job_desc_msg"]["properties"])
    assert not unknown, f"not v0.0.42 job_desc_msg fields: {unknown}"
    return job


SCRIPT = """#!/bin/bash
#SBATCH --job-name=from-script
#SBATCH -N 1 --time=10 --partition=a3
#SBATCH --gres=gpu:2   # two per node
#SBATCH --requeue

srun python train.py
#SBATCH --nodes=9
"""


def test_options_win_over_the_scripts_sbatch_lines_and_the_rest_of_the_script_is_read():
    job = valid_submit(job_description(SCRIPT, ["--nodes=2", "-J", "from-cli", "--no-requeue"], {}, "/home/ada"))
    assert job["name"] == "from-cli" and (job["minimum_nodes"], job["maximum_nodes"]) == (2, 2)
    assert job["partition"] == "a3" and job["time_limit"] == {"set": True, "infinite": False, "number": 10}
    assert job["tres_per_node"] == "gres/gpu:2" and job["requeue"] is False
    assert job["script"] == SCRIPT  # sent whole: its lines stay where the job can read them
    # "#SBATCH --nodes=9" comes after the first command: sbatch ignores it, so do we
    assert job_description(SCRIPT, [], {}, "/w")["minimum_nodes"] == 1


def test_every_option_our_submit_path_passes_has_its_field():
    """services/submit.py adds --job-name, --output, --open-mode and --comment (a hang timeout),
    and gives the folder to run in; these are what users pass most (README's examples)."""
    options = ["--job-name=train", "--output=/jobs/train/slurm-%A_%a.out", "--open-mode=append",
               "--comment=gtc-hang-timeout=600", "--nodes=2-4", "--ntasks-per-node=8", "--gpus-per-node=h100:8",
               "--cpus-per-task=12", "--mem=64G", "--time=1-02:03:04", "--partition=a3,debug", "--error=/jobs/e-%j",
               "--chdir=/home/ada/proj", "--dependency=afterok:41", "--requeue", "--array=0-3%2", "--exclusive",
               "--account=proj", "--qos=high", "--reservation=res1", "--constraint=h100", "--nodelist=a3-[0-1],a3-4",
               "--exclude=a3-9", "--mem-per-gpu=80G", "--cpus-per-gpu=24", "--gpus=16", "--ntasks=16",
               "--signal=B:USR1@90", "--mail-type=END,FAIL", "--mail-user=ada@example.com", "--hold",
               "--kill-on-invalid-dep=yes", "--begin=now+1hour", "--time-min=30", "--tmp=10G", "--parsable"]
    job = valid_submit(job_description("#!/bin/bash\nsrun hostname\n", options, {"AIP_MODEL_DIR": "/jobs/m/"},
                                       "/ignored", "/jobs/train/job.sbatch", ["--lr=0.1"]))
    assert job["name"] == "train" and job["standard_output"] == "/jobs/train/slurm-%A_%a.out"
    assert job["open_mode"] == ["APPEND"] and job["comment"] == "gtc-hang-timeout=600"
    assert (job["minimum_nodes"], job["maximum_nodes"], job["tasks_per_node"]) == (2, 4, 8)
    assert job["tres_per_node"] == "gres/gpu:h100:8" and job["tres_per_job"] == "gres/gpu:16"
    assert job["cpus_per_task"] == 12 and job["memory_per_node"]["number"] == 65536
    assert job["time_limit"]["number"] == (24 + 2) * 60 + 3 + 1  # 4 s rounded up to a minute, as Slurm
    assert job["partition"] == "a3,debug" and job["standard_error"] == "/jobs/e-%j"
    assert job["current_working_directory"] == "/home/ada/proj"  # the user's --chdir over ours
    assert job["dependency"] == "afterok:41" and job["requeue"] is True and job["array"] == "0-3%2"
    assert job["shared"] == ["none"] and job["account"] == "proj" and job["qos"] == "high"
    assert job["reservation"] == "res1" and job["constraints"] == "h100"
    assert job["required_nodes"] == ["a3-[0-1]", "a3-4"] and job["excluded_nodes"] == ["a3-9"]
    assert job["memory_per_tres"] == "gres/gpu:81920" and job["cpus_per_tres"] == "gres/gpu:24"
    assert job["tasks"] == 16 and job["kill_warning_signal"] == "USR1"
    assert job["kill_warning_delay"]["number"] == 90 and job["kill_warning_flags"] == ["BATCH_JOB"]
    assert job["mail_type"] == ["END", "FAIL"] and job["hold"] is True
    assert job["flags"] == ["KILL_INVALID_DEPENDENCY"] and job["begin_time"]["number"] > 0
    assert job["time_minimum"]["number"] == 30 and job["temporary_disk_per_node"] == 10240
    assert job["argv"] == ["/jobs/train/job.sbatch", "--lr=0.1"]


def test_the_environment_is_the_one_given_and_nothing_of_this_process():
    import os

    os.environ["GTC_R2_SECRET_TOKEN"] = "s3cret"  # a token in our own environment never reaches a job
    try:
        job = job_description("#!/bin/bash\ntrue\n", [], {"AIP_MODEL_DIR": "/j/model/", "PATH": "/venv/bin:/usr/bin"},
                              "/w")
    finally:
        del os.environ["GTC_R2_SECRET_TOKEN"]
    assert job["environment"] == ["PATH=/venv/bin:/usr/bin", "AIP_MODEL_DIR=/j/model/"]
    assert not any("s3cret" in v for v in json.dumps(job).split('"'))
    assert job_description("true", [], {"A": "1"}, "/w")["environment"] == [f"PATH={DEFAULT_PATH}", "A=1"]


@pytest.mark.parametrize("export, env, want", [
    ("ALL,FOO=bar", {"A": "1"}, [f"PATH={DEFAULT_PATH}", "FOO=bar", "A=1"]),
    ("NONE", {"A": "1"}, ["A=1"]),
    ("FOO=bar,A", {"A": "1"}, ["FOO=bar", "A=1"]),
])
def test_export(export, env, want):
    assert valid_submit(job_description("true", [f"--export={export}"], env, "/w"))["environment"] == want


@pytest.mark.parametrize("option, named", [
    ("--wait", "--wait"), ("--test-only", "--test-only"), ("--container-image=nvcr.io/nvidia/pytorch:24.01", "pyxis"),
    ("--nodefile=hosts.txt", "--nodefile"), ("--hint=compute_bound", "--hint"), ("--export=HOME", "HOME"),
    ("--begin=16:00", "--begin"), ("--nodes=1,3", "--nodes"), ("--wrap=hostname", "--wrap"),
])
def test_an_option_with_no_rest_field_is_refused_naming_it_and_jobs_ssh(option, named):
    with pytest.raises(OptionRefused) as refused:
        job_description("#!/bin/bash\ntrue\n", [option], {}, "/w")
    assert named in str(refused.value) and "`jobs: ssh`" in str(refused.value)
    assert str(refused.value).startswith(option.split("=")[0])


def test_a_refused_option_in_an_sbatch_line_is_refused_too_and_pbs_lines_are_not_read_silently():
    with pytest.raises(OptionRefused, match="--container-mounts"):
        job_description("#!/bin/bash\n#SBATCH --container-mounts=/data:/data\nsrun true\n", [], {}, "/w")
    with pytest.raises(OptionRefused, match="#PBS.*`jobs: ssh`"):
        job_description("#!/bin/bash\n#PBS -l nodes=2\nsrun true\n", [], {}, "/w")


def test_a_refusal_is_the_command_error_the_submit_path_cleans_up_after():
    """services/submit.py removes the job's folder on a CommandError and raises JobSubmitError
    with its stderr: a refusal here must leave no folder behind."""
    from jupyter_gtc.exceptions import CommandError

    with pytest.raises(CommandError) as refused:
        job_description("#!/bin/bash\ntrue\n", ["--wait"], {}, "/w")
    assert isinstance(refused.value, SpecError) and refused.value.http_status == 400
    assert refused.value.stderr == str(refused.value) and "--wait" in refused.value.argv


@pytest.mark.parametrize("option, message", [
    ("--time=soon", "--time: 'soon' is not valid; minutes, MM:SS"),
    ("--mem=lots", "--mem: 'lots' is not valid; a size in megabytes"),
    ("--cpus-per-task=0", "--cpus-per-task: '0' is not valid; a whole number, 1 or more"),
    ("--open-mode=never", "--open-mode: 'never' is not valid; append or truncate"),
])
def test_a_bad_value_names_the_option_the_value_and_what_is_valid(option, message):
    with pytest.raises(SpecError) as bad:
        job_description("true", [option], {}, "/w")
    assert str(bad.value).startswith(message)


@pytest.mark.parametrize("text, minutes", [
    ("10", 10), ("10:30", 11), ("2:00:00", 120), ("1-0", 1440), ("1-2:30", 1590), ("0-0:0:1", 1),
    ("UNLIMITED", -1), ("infinite", -1), ("1:2:3:4", None), ("x", None),
])
def test_slurm_time_formats(text, minutes):
    assert slurm_minutes(text) == minutes


def test_unlimited_time_is_infinite_and_mem_units():
    job = valid_submit(job_description("true", ["--time=UNLIMITED", "--mem=1500K", "--mem-per-cpu=2T"], {}, "/w"))
    assert job["time_limit"] == {"set": True, "infinite": True, "number": 0}
    assert job["memory_per_node"]["number"] == 2 and job["memory_per_cpu"]["number"] == 2 * 1024 * 1024

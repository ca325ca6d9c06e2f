"""The registry with real jobs on one real local cluster: a job's model registered (from the
api, the magic and the CLI), its lineage (the job, its script and options, its final metrics,
its newest checkpoint), a tuning trial's parameters, and jobs whose model is refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from jupyter_gtc import api
from jupyter_gtc.exceptions import SpecError
from tests.conftest import small_gpu_spec
from tests.tuning.conftest import short_spec

pytestmark = pytest.mark.slurm
CLUSTER = "models"

# A training job as the job contract has it: a model in AIP_MODEL_DIR, checkpoints in
# AIP_CHECKPOINT_DIR (one still being written), metrics through the hypertune file.
TRAIN = """#!/bin/bash
#SBATCH --nodes=1 --cpus-per-task=1
# the trainer of the registry tests
mkdir -p "$AIP_MODEL_DIR/tokenizer" "$AIP_CHECKPOINT_DIR/step-10" "$AIP_CHECKPOINT_DIR/step-20" \\
         "$AIP_CHECKPOINT_DIR/step-30.partial"
echo weights > "$AIP_MODEL_DIR/weights.bin"
echo '{"vocab": 3}' > "$AIP_MODEL_DIR/tokenizer/vocab.json"
printf '%s\\n' '{"val_loss": "0.9", "global_step": "1"}' '{"val_loss": "0.5", "global_step": "2"}' \\
    > "$CLOUD_ML_HP_METRIC_FILE"
"""


@pytest.fixture(scope="module")
def cluster(slurm_available):
    api.create_cluster(small_gpu_spec(CLUSTER, nodes=1, machine="n2-standard-8"))
    yield CLUSTER
    api.delete_cluster(CLUSTER)


@pytest.fixture(scope="module")
def trained(cluster):
    return api.submit_job(cluster, TRAIN, ["--job-name=trainer", "--time=5"]).wait(timeout=120)


def test_a_jobs_model_is_registered_with_its_lineage(trained):
    assert trained.state == "COMPLETED"
    model = api.register_model(trained, "tiny", alias="prod", labels={"team": "nlp"}, description="first")
    assert (model.version, model.aliases, model.artifact_uri) == (1, ["default", "prod"], str(trained.model_dir))
    lineage = model.lineage
    assert lineage["job"]["id"] == trained.id and lineage["job"]["cluster"] == CLUSTER
    assert lineage["job"]["name"] == "trainer" and lineage["job"]["state"] == "COMPLETED"
    assert lineage["script"]["path"] == str(trained.job_dir / "job.sbatch")
    assert "# the trainer of the registry tests" in lineage["script"]["text"]
    assert "--time=5" in lineage["options"]
    assert lineage["metrics"]["val_loss"]["value"] == pytest.approx(0.5)
    assert lineage["metrics"]["val_loss"]["step"] == 2
    assert lineage["checkpoint"] == str(trained.checkpoint_dir / "step-20")  # not the unfinished step-30
    assert lineage["trial"] is None and lineage["parent"] is None

    # A second version, copied through the cluster's host, from the first: `name` still means default.
    copied = api.register_model(trained.id, "tiny", cluster=CLUSTER, copy=True, parent="tiny@prod")
    assert copied.version == 2 and copied.lineage["parent"] == "tiny@1"
    assert (api.get_model("tiny").version, api.get_model("tiny@prod").version, api.get_model("tiny@2").version) \
        == (1, 1, 2)
    folder = api.default_home() / "models" / "tiny" / "2"
    assert copied.artifact_uri == str(folder)
    assert (folder / "tokenizer" / "vocab.json").read_text() == '{"vocab": 3}\n'
    api.set_model_alias("tiny@2", "prod")
    assert api.get_model("tiny@prod").version == 2 and api.get_model("tiny@1").aliases == ["default"]
    events = [(e["event"], e["version"], e["detail"].get("alias")) for e in api.get_model("tiny").events]
    assert events[-1] == ("alias", 2, "prod")
    assert [e for e in events if e[0] == "register"] == [("register", 1, None), ("register", 2, None)]


def test_a_failed_job_and_a_job_without_a_model_are_refused(cluster):
    failed = api.submit_job(cluster, "#!/bin/bash\nexit 3\n", ["--job-name=broken"]).wait(timeout=60)
    with pytest.raises(SpecError) as e:
        api.register_model(failed, "broken")
    assert e.value.field == "job" and "ended FAILED" in str(e.value) and "artifact_uri=" in str(e.value)
    empty = api.submit_job(cluster, "#!/bin/bash\ntrue\n", ["--job-name=nothing"]).wait(timeout=60)
    with pytest.raises(SpecError) as e:
        api.register_model(empty, "nothing")
    assert e.value.field == "artifact_uri" and "is empty" in str(e.value) and "AIP_MODEL_DIR" in str(e.value)
    assert "broken" not in [m.name for m in api.list_models()]


def test_a_trials_model_carries_the_study_and_its_parameters(cluster):
    study = api.create_study(cluster, short_spec("{x: {double: [0, 1]}, y: {integer: [1, 4]}}", trials=1,
                                                  parallel=1), name="models-study")
    study.wait(timeout=120)
    [trial] = study.snapshot().trials
    job = api.get_job(trial.job_id, cluster)
    model = api.register_model(job, "tuned", artifact_uri=str(job.job_dir))
    assert model.lineage["trial"] == {"study": "models-study", "trial_id": "1", "number": 0,
                                      "params": trial.params, "value": trial.value, "state": "COMPLETE"}
    assert set(trial.params) == {"x", "y"}
    assert model.lineage["metrics"]["val_loss"]["value"] == pytest.approx(trial.value)


def gtc(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", *argv], capture_output=True, text=True,
                          env=os.environ, timeout=120)


def test_the_cli_verbs(trained):
    done = gtc("model", "register", trained.id, "--model", "cli-model", "--label", "team=nlp", "--alias", "prod",
               "--cluster", CLUSTER)
    assert done.returncode == 0, done.stderr
    assert "registered cli-model@1 (default, prod)" in done.stdout
    assert gtc("model", "register", trained.id, "--model", "cli-model", "--cluster", CLUSTER).returncode == 0

    listed = gtc("model", "list")
    assert listed.returncode == 0, listed.stderr
    row = next(line.split() for line in listed.stdout.splitlines() if line.startswith("cli-model "))
    assert row[:4] == ["cli-model", "2", "1", "prod@1"]

    shown = gtc("model", "show", "cli-model@prod")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("cli-model@1  aliases: default, prod")
    assert f"job: {trained.id} (trainer) on {CLUSTER}, COMPLETED" in shown.stdout
    assert "metric val_loss: 0.5 at step 2" in shown.stdout and "labels: team=nlp" in shown.stdout
    assert json.loads(gtc("model", "show", "cli-model@2", "--json").stdout)["version"] == 2

    assert gtc("model", "alias", "cli-model@2", "prod").returncode == 0
    assert api.get_model("cli-model@prod").version == 2
    assert gtc("model", "alias", "cli-model@2", "--remove", "prod").returncode == 0
    refused = gtc("model", "alias", "cli-model@2", "--remove", "default")
    assert refused.returncode == 1 and "error: aliases: '-default'" in refused.stderr
    refused = gtc("model", "alias", "cli-model@2", "12")
    assert refused.returncode == 1 and "cannot be a number" in refused.stderr
    refused = gtc("model", "delete", "cli-model@1")
    assert refused.returncode == 1 and "holds 'default'" in refused.stderr
    assert gtc("model", "delete", "cli-model@2").returncode == 0
    refused = gtc("model", "delete", "cli-model@1")
    assert refused.returncode == 1 and "only version" in refused.stderr
    refused = gtc("model", "show", "cli-modle")
    # other tests' models share the session's GTC_HOME: 'cli-model' is among the guesses, maybe not alone
    assert refused.returncode == 1 and "did you mean 'cli-model'" in refused.stderr
    assert gtc("model", "delete", "cli-model").returncode == 0
    assert "cli-model" not in [m.name for m in api.list_models()]


def test_the_magic_registers_a_jobs_model(trained):
    from IPython.core.error import UsageError
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.testing.globalipapp import start_ipython

    shell = start_ipython() or InteractiveShell.instance()
    shell.run_line_magic("load_ext", "jupyter_gtc")
    model = shell.run_line_magic("gtc_register", f'{trained.id} --cluster {CLUSTER} --model magic-model '
                                                 f'--alias prod --description "from a cell" --label team=nlp')
    assert (model.name, model.version, model.aliases) == ("magic-model", 1, ["default", "prod"])
    assert model.description == "from a cell" and model.labels == {"team": "nlp"}
    with pytest.raises(UsageError, match="cannot be a number"):
        shell.run_line_magic("gtc_register", f"{trained.id} --cluster {CLUSTER} --model magic-model --alias 3")


def versions_of(name: str, job) -> list:
    """The versions of model ``name`` registered from ``job`` (other test files in this session
    may have run the recipe too: their runs are versions of the same model)."""
    models = {m.name: m for m in api.list_models()}
    return [v for v in (models[name].versions if name in models else [])
            if (v.lineage.get("job") or {}).get("id") == job.id and v.lineage["job"]["cluster"] == job.cluster]


def test_a_recipe_registers_its_model_once_it_has_completed(cluster):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    job = api.run_recipe("llama-pretrain", cluster,
                         args=["--steps", "3", "--checkpoint-every", "2", "--log-every", "1"])
    assert versions_of("llama-pretrain", job) == []  # nothing before it has completed
    job.wait(timeout=300)
    assert job.state == "COMPLETED", job.logs()
    [version] = versions_of("llama-pretrain", job)  # the registry's first read after the job ended registers it
    model = api.get_model(f"llama-pretrain@{version.version}")
    assert model.artifact_uri == str(job.model_dir)
    assert model.lineage["origin"] == {"recipe": "llama-pretrain", "config": "tiny", "init_from": None}
    assert model.lineage["checkpoint"] == str(job.checkpoint_dir / "step-00000003")  # the last, at the end
    assert model.lineage["metrics"]["train/loss"]["step"] == 3, model.lineage["metrics"]
    assert [e["event"] for e in model.events if e["version"] == model.version and e["event"] == "register"] \
        == ["register"]

    held = api.run_recipe("llama-pretrain", cluster, options=["--hold"], register=False)
    assert held.id not in [r["job_id"] for r in api._models().tables.pending() if r["cluster"] == cluster]
    held.cancel()
    failed = api.run_recipe("llama-pretrain", cluster, args=["--no-such-flag"], register="broken-pretrain")
    failed.wait(timeout=300)
    assert failed.state == "FAILED"
    assert "broken-pretrain" not in [m.name for m in api.list_models()]
    [why] = api._models().tables.events("broken-pretrain")
    assert why["event"] == "not_registered" and "ended FAILED" in why["detail"]["reason"]
    assert len(versions_of("llama-pretrain", job)) == 1  # registered once, however often the registry is read
    refused = gtc("recipe", "run", "llama-pretrain", "--cluster", cluster, "--register", "x", "--no-register")
    assert refused.returncode == 1 and "give --register MODEL or --no-register, not both" in refused.stderr

"""Recipes as jobs on the real local cluster: the multi-node torchrun pattern, the same
loss curve on two nodes as on one, and a requeued job resuming from its checkpoint."""

from __future__ import annotations

import os
import re

import pytest

from tests.conftest import sleep_until
from tests.recipes.conftest import RUN20_FLAGS, losses as losses_in

SPEC = {
    "display_name": "rcp",
    "node_pools": [{"id": "cpu", "machine_spec": {"machine_type": "n2-standard-8"},
                    "scaling_spec": {"min_node_count": 2, "max_node_count": 2}}],
    "orchestrator_spec": {"slurm_spec": {"partitions": [{"id": "cpu", "node_pool_ids": ["cpu"]}]}},
    "local": {"resource_scale": 0.25},
}


@pytest.fixture(scope="module")
def cluster(slurm_available):
    from jupyter_gtc import api

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    made = api.create_cluster(SPEC)
    yield made.name
    api.delete_cluster(made.name)


def losses(job) -> dict[int, float]:
    return losses_in(job.logs())


def test_two_nodes_give_the_loss_curve_of_one_node_with_the_same_global_batch(cluster, run20):
    """The one-node curve is the reference run's: the same program and flags, run by hand."""
    from jupyter_gtc import api

    _, one = run20
    two = api.run_recipe("llama-pretrain", cluster, nodes=2, args=[*RUN20_FLAGS, "--log-every", "1"]).wait(300)
    assert two.state == "COMPLETED", two.logs()
    assert "world 2 on cpu" in two.logs()
    assert sorted(losses(two)) == list(range(1, 21))
    assert losses(two) == pytest.approx(one, abs=1e-3)
    assert api.recipe_output("llama-pretrain", cluster) == two.model_dir


def test_the_cli_runs_the_next_recipe_from_the_newest_model_passing_unknown_flags_on(cluster):
    import subprocess
    import sys

    from jupyter_gtc import api

    result = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "recipe", "run", "continued-pretrain",
                             "--cluster", cluster, "--steps", "3", "--wait"], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    base = api.recipe_output("llama-pretrain", cluster)
    assert f"continuing from {base}" in result.stdout and "step 3/3" in result.stdout
    assert api.recipe_output("continued-pretrain", cluster) == api.get_job("continued-pretrain", cluster).model_dir


def test_a_data_file_named_relative_to_where_gtc_runs_is_found_there(cluster, tmp_path):
    """`gtc recipe run ... --data mytext.md` from the folder holding mytext.md: the recipe runs in
    its job folder, where the file is not, and failed ("data: 'mytext.md' is not valid")."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    shutil.copy(Path(__file__).parents[2] / "README.md", tmp_path / "mytext.md")
    result = subprocess.run([sys.executable, "-m", "jupyter_gtc.cli", "recipe", "run", "llama-pretrain",
                             "--cluster", cluster, "--no-register", "--wait", "--steps", "2", "--data", "mytext.md"],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "step 2/2" in result.stdout


def test_a_requeued_job_resumes_from_its_newest_checkpoint(cluster):
    from jupyter_gtc import api

    # The first run holds after its checkpoint at step 5, so it is still running when requeued
    # however fast this machine is; the requeued run resumes there and holds again at step 10
    # until the test has seen it start (only then is the first run surely gone) and lets it go.
    job = api.run_recipe("llama-pretrain", cluster, args=["--steps", "10", "--checkpoint-every", "5",
                                                        "--log-every", "1", "--hold-until", "go"])
    assert sleep_until(lambda: (job.checkpoint_dir / "step-00000005").is_dir(), 240), job.logs()
    job.requeue()
    assert sleep_until(lambda: "resuming from" in job.logs(), 240), job.logs()
    (job.job_dir / "go").touch()  # "go" is relative to the job's folder, where the program runs
    job.wait(300)
    assert job.state == "COMPLETED", job.logs()
    # The log keeps both attempts: steps 1-5, the requeue's marker, then 6-10 from the checkpoint.
    log = job.logs()
    first, marker, second = log.partition("--- jupyter_gtc: attempt 2 (requeued)")
    assert marker, log[-2000:]
    assert re.search(r"resuming from \S+step-00000005 \(step 5, restart 1\)", second), second[-2000:]
    assert sorted(losses_in(first)) == list(range(1, 6)) and sorted(losses_in(second)) == list(range(6, 11))
    # Where the restart's seconds went, in its own log (issue 29): from the batch script's start
    # (launch: srun, and no torchrun for one process) to its first step, part by part.
    startup = re.search(r"^startup [\d.]+ s to step 6: launch [\d.]+, imports [\d.]+, rendezvous [\d.]+, "
                        r"data [\d.]+, model [\d.]+, checkpoint [\d.]+, first step [\d.]+ \(restart 1\)$",
                        second, re.M)
    assert startup, second[-2000:]


def test_a_recipe_that_needs_a_model_says_which_run_to_do_first(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.exceptions import RecipeOutputMissing

    with pytest.raises(RecipeOutputMissing) as e:
        api.run_recipe("grpo", cluster)
    assert str(e.value) == (
        "grpo starts from the model of sft: no run of 'sft' on rcp has finished a model yet; run it first: "
        "`gtc recipe run sft --cluster rcp` or `api.run_recipe('sft', 'rcp').wait()`, as notebooks/recipes/sft.ipynb "
        "does (or give init_from, --init-from in the CLI: a model folder or a job id)")


def test_a_run_that_failed_is_named_with_its_logs_and_how_to_run_it_again(cluster):
    from jupyter_gtc import api
    from jupyter_gtc.exceptions import RecipeOutputMissing

    failed = api.submit_job(cluster, "#!/bin/bash\necho out of memory >&2\nexit 3\n",
                            ["--job-name", "gemma-pretrain"]).wait(120)
    assert failed.state == "FAILED"
    with pytest.raises(RecipeOutputMissing) as e:
        api.run_recipe("continued-pretrain", cluster, init_from="gemma-pretrain")
    assert str(e.value) == (
        f"job {failed.id} (gemma-pretrain) is FAILED and left no finished model in {failed.model_dir}; see "
        f"`gtc job logs {failed.id}`, then run it again: `gtc recipe run gemma-pretrain --cluster rcp` or "
        "`api.run_recipe('gemma-pretrain', 'rcp').wait()`, as notebooks/recipes/gemma_pretrain.ipynb does")


def test_any_script_resumes_under_a_requeue_with_jupyter_gtc_resume(cluster):
    """examples/resumable_regression.py (jupyter_gtc.resume), requeued after step 13 with its
    checkpoint at 10: the second attempt redoes 11-13 and the job's metrics show each step once."""
    from jupyter_gtc import api

    script = ("#!/bin/bash\n#SBATCH --requeue\n"
              'srun "${GTC_PYTHON:-python3}" -m jupyter_gtc.examples.resumable_regression --steps 30 '
              "--checkpoint_every 10 --hold_at_step 13 --hold_until \"$GTC_JOB_DIR/go\"\n")  # in its folder: the job runs where the test is
    job = api.submit_job(cluster, script)
    assert sleep_until(lambda: "step 13/30" in job.logs(), 240), job.logs()
    assert (job.checkpoint_dir / "step-00000010").is_dir()
    job.requeue()
    assert sleep_until(lambda: "resuming from" in job.logs(), 240), job.logs()
    (job.job_dir / "go").touch()
    job.wait(300)
    assert job.state == "COMPLETED", job.logs()
    first, marker, second = job.logs().partition("--- jupyter_gtc: attempt 2 (requeued)")
    assert marker and re.search(r"resuming from \S+/step-00000010 \(step 10\)", second), second[-2000:]
    assert [int(s) for s in re.findall(r"^step (\d+)/30", second, re.M)] == list(range(11, 31))
    scalars = job.metrics()
    steps = lambda table: sorted(table[table.tag == "train/loss"].step)  # noqa: E731
    assert steps(scalars) == list(range(1, 31))
    assert steps(job.metrics(all_attempts=True)) == sorted([*range(1, 31), 11, 12, 13])


def test_sbatch_options_win_over_the_recipes(cluster):
    from jupyter_gtc import api

    job = api.run_recipe("llama-pretrain", cluster, options=["--hold", "--job-name=held-recipe"])
    try:
        assert job.name == "held-recipe"
        assert sleep_until(lambda: job.refresh().reason == "JobHeldUser", 30), (job.state, job.reason)
    finally:
        job.cancel()

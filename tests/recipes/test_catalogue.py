"""The catalogue renders the standard multi-node torchrun job and refuses unknown names."""

from __future__ import annotations

import re

import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.recipes.catalogue import RECIPES, get_recipe, recipe_args, render_sbatch


def test_the_script_is_srun_torchrun_meeting_at_the_first_node_with_flags_as_arguments():
    recipe = get_recipe("llama-pretrain")
    script = render_sbatch(recipe, recipe.config("8b"))
    assert "#SBATCH --nodes=4\n" in script and "#SBATCH --gpus-per-node=8\n" in script
    assert "#SBATCH --requeue\n" in script
    assert 'head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)' in script
    assert "--nproc-per-node=8" in script and '--rdzv-endpoint="$head:$port"' in script
    assert script.rstrip().endswith('-m jupyter_gtc.recipes.pretrain "$@"')
    tiny = render_sbatch(recipe, recipe.config("tiny"), nodes=2)
    assert "#SBATCH --nodes=2\n" in tiny and "--gpus-per-node" not in tiny and "--nproc-per-node=1" in tiny


def test_a_one_process_job_runs_the_program_without_torchrun_and_stamps_its_start(tmp_path):
    """torchrun only imports torch a second time for a world of one: 1.5 s of every restart. The
    script decides by the node count Slurm gave (sbatch options may change it); torchrun stays
    for a multi-node job. Run here with srun and python3 stubbed as echo, on one node and on two."""
    import subprocess

    recipe = get_recipe("llama-pretrain")
    script = tmp_path / "job.sh"
    script.write_text(render_sbatch(recipe, recipe.config("tiny")))
    (tmp_path / "srun").write_text('#!/bin/sh\necho srun "$@" "GTC_ATTEMPT_STARTED=$GTC_ATTEMPT_STARTED"\n')
    (tmp_path / "scontrol").write_text("#!/bin/sh\necho n1\n")
    for stub in ("srun", "scontrol"):
        (tmp_path / stub).chmod(0o755)

    def run(nodes: int) -> str:
        env = {"PATH": f"{tmp_path}:/usr/bin:/bin", "SLURM_NNODES": str(nodes), "SLURM_JOB_NODELIST": "n1",
               "SLURM_JOB_ID": "7", "GTC_PYTHON": "python3"}
        done = subprocess.run(["bash", str(script), "--steps", "3"], env=env, capture_output=True, text=True, check=True)
        return done.stdout.strip()

    one = run(1)
    assert one.startswith("srun python3 -m jupyter_gtc.recipes.pretrain --steps 3 GTC_ATTEMPT_STARTED=1"), one
    assert re.fullmatch(r".*GTC_ATTEMPT_STARTED=\d{10}\.\d+", one), one
    assert "torch.distributed.run" in run(2) and "--nnodes=2" in run(2)


def test_flags_come_from_the_recipe_the_config_then_the_user():
    sft = get_recipe("sft")
    assert recipe_args(sft, sft.config("tiny-lora"), "/m o'del", ["--max-steps", "5"]) == [
        "--lora", "--max-steps", "300", "--batch-size", "16", "--init-from", "/m o'del", "--max-steps", "5"]
    assert recipe_args(get_recipe("gemma-pretrain"), get_recipe("gemma-pretrain").config("tiny"), None, []) == [
        "--model", "gemma", "--size", "tiny", "--steps", "100"]


def test_every_recipe_has_a_tiny_config_a_notebook_and_an_existing_source():
    for recipe in RECIPES.values():
        assert "tiny" in recipe.configs, recipe.name
        assert recipe.consumes is None or recipe.consumes in RECIPES
    chain = [get_recipe("grpo").consumes, get_recipe("sft").consumes, get_recipe("continued-pretrain").consumes]
    assert chain == ["sft", "continued-pretrain", "llama-pretrain"]


def test_unknown_names_say_what_exists():
    with pytest.raises(SpecErrors, match="recipe: 'llama' is not valid; one of llama-pretrain, gemma-pretrain"):
        get_recipe("llama")
    with pytest.raises(SpecErrors, match="config: '70b' is not valid; for llama-pretrain: one of tiny, 1b, 8b"):
        get_recipe("llama-pretrain").config("70b")


def test_the_model_of_a_recipe_never_run_is_an_error_saying_which_recipe_to_run_first(tmp_path, monkeypatch):
    """What sft.ipynb's first cells meet when continued_pretrain.ipynb was never run: an error
    that names the recipe to run, not a path that fails deep in the SFT program."""
    from jupyter_gtc import api
    from jupyter_gtc.exceptions import GtcError, RecipeOutputMissing

    monkeypatch.setenv("GTC_HOME", str(tmp_path))  # a user's first session: no job has run
    with pytest.raises(RecipeOutputMissing) as e:
        api.recipe_output("continued-pretrain")
    assert isinstance(e.value, GtcError)  # so a magic shows it as one line, the CLI exits non-zero
    assert str(e.value) == (
        "no run of 'continued-pretrain' has finished a model yet; run it first: `gtc recipe run continued-pretrain "
        "--cluster CLUSTER` or `api.run_recipe('continued-pretrain', 'CLUSTER').wait()`, as "
        "notebooks/recipes/continued_pretrain.ipynb does")
    with pytest.raises(RecipeOutputMissing, match="no job or recipe named 'continued-pretrian'; give a job id, "
                                                  "a model folder or one of the recipes: llama-pretrain, "):
        api.recipe_output("continued-pretrian")

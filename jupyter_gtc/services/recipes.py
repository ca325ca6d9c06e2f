"""Running recipes from the catalogue as jobs, and finding what an earlier recipe left.

A recipe's job is named after the recipe, so its newest finished run is found by name; its
model folder (``AIP_MODEL_DIR``) is complete once the program wrote ``recipe.json`` there.
"""

from __future__ import annotations

import sys
from pathlib import Path

from ..exceptions import GtcError
from ..recipes.catalogue import get_recipe, recipe_args, render_sbatch
from .jobs import Job, JobService

FINISHED_MARKER = "recipe.json"


class RecipeOutputMissing(GtcError):
    """No finished run of the recipe whose model another recipe starts from."""


def run_recipe(jobs: JobService, name: str, cluster: str, config: str = "tiny", *, nodes: int | None = None,
               init_from: str | None = None, args: list[str] | None = None) -> Job:
    recipe = get_recipe(name)
    chosen = recipe.config(config)
    if init_from is None and recipe.consumes:
        init_from = str(recipe_output(jobs, recipe.consumes, cluster))
    elif init_from is not None and not Path(init_from).exists():
        init_from = str(recipe_output(jobs, init_from, cluster))  # a job id or a recipe name
    # Jobs run this Python (its torch and transformers) unless the cluster's nodes set GTC_PYTHON.
    return jobs.submit(cluster, render_sbatch(recipe, chosen, nodes),
                       script_args=recipe_args(recipe, chosen, init_from, list(args or [])),
                       env={"GTC_PYTHON": sys.executable})


def recipe_output(jobs: JobService, ref: str, cluster: str | None = None) -> Path:
    """The model folder of job ``ref``, or of the newest run of recipe ``ref`` that finished one."""
    candidates = [j for j in jobs.list(cluster) if j.name == ref or j.id == ref]
    for job in candidates:
        model = job.model_dir
        if (model / FINISHED_MARKER).exists():
            return model
    if candidates:
        newest = candidates[0]
        raise RecipeOutputMissing(
            f"job {newest.id} ({ref}) is {newest.state} and left no finished model in {newest.model_dir}; "
            f"wait for it, or see `gtc job logs {newest.id}`")
    where = f" on {cluster}" if cluster else ""
    raise RecipeOutputMissing(f"no run of {ref!r}{where} has finished a model yet; run it first: "
                              f"`gtc recipe run {ref} --cluster CLUSTER` (or pass --init-from PATH)")


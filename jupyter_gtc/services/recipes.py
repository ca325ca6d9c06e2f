"""Running recipes from the catalogue as jobs, and finding what an earlier recipe left.

A recipe's job is named after the recipe, so its newest finished run is found by name; its
model folder (``AIP_MODEL_DIR``) is complete once the program wrote ``recipe.json`` there.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..exceptions import RecipeOutputMissing
from ..recipes.catalogue import RECIPES, get_recipe, recipe_args, render_sbatch
from .jobs import Job, JobService

FINISHED_MARKER = "recipe.json"

__all__ = ["FINISHED_MARKER", "RecipeOutputMissing", "recipe_output", "run_recipe"]


def run_recipe(jobs: JobService, name: str, cluster: str, config: str = "tiny", *, nodes: int | None = None,
               init_from: str | None = None, args: list[str] | None = None,
               options: list[str] | None = None, submit_dir: str | None = None) -> Job:
    """``submit_dir``: where the user is (a kernel's or ``gtc``'s folder): a ``--data`` file
    named relative to it is found there, as a shell would find it, though the recipe runs in
    its job folder (its own flags, ``--hold-until``, name files there)."""
    recipe = get_recipe(name)
    if submit_dir is not None:
        args = data_from(submit_dir, list(args or []))
    chosen = recipe.config(config)
    if init_from is None and recipe.consumes:
        try:
            init_from = str(recipe_output(jobs, recipe.consumes, cluster))
        except RecipeOutputMissing as e:
            raise RecipeOutputMissing(f"{name} starts from the model of {recipe.consumes}: {e} (or give "
                                      "init_from, --init-from in the CLI: a model folder or a job id)") from None
    elif init_from is not None and jobs.poller(cluster).host.stat(init_from) is None:
        init_from = str(recipe_output(jobs, init_from, cluster))  # a job id or a recipe name
    # Jobs run the python3 first on their PATH: the job's Python environment (this kernel's on a
    # local cluster, the attach spec's on an attached one), unless the nodes set GTC_PYTHON.
    return jobs.submit(cluster, render_sbatch(recipe, chosen, nodes), options,
                       script_args=recipe_args(recipe, chosen, init_from, list(args or [])))


def data_from(submit_dir: str, args: list[str]) -> list[str]:
    """``args`` with a relative ``--data`` file that exists in ``submit_dir`` made absolute; a
    corpus name (``pydoc-topics``) or a path that is not there is left for the recipe to judge."""
    out = list(args)
    for i, arg in enumerate(out):
        flag, eq, value = arg.partition("=")
        if flag != "--data":
            continue
        if not eq:
            if i + 1 >= len(out):
                break
            value = out[i + 1]
        if value and not os.path.isabs(value) and os.path.exists(os.path.join(submit_dir, value)):
            absolute = os.path.join(submit_dir, value)
            if eq:
                out[i] = f"--data={absolute}"
            else:
                out[i + 1] = absolute
    return out


def recipe_output(jobs: JobService, ref: str, cluster: str | None = None) -> Path:
    """The model folder of job ``ref``, or of the newest run of recipe ``ref`` that finished one.
    Never an empty or unfinished folder: without one, ``RecipeOutputMissing`` says which recipe
    to run first (or what became of its last run)."""
    candidates = [j for j in jobs.list(cluster) if j.name == ref or j.id == ref]
    for job in candidates:
        model = job.model_dir
        # A record without a folder would make ``model`` relative: the current directory's.
        if job.job_dir.is_absolute() and job.host.stat(model / FINISHED_MARKER) is not None:
            return model
    if candidates:
        newest = candidates[0]
        if not newest.finished:
            raise RecipeOutputMissing(
                f"job {newest.id} ({newest.name}) is {newest.state} and has not finished its model in "
                f"{newest.model_dir} yet; wait for it (job.wait()), or see `gtc job logs {newest.id}`")
        again = f"run it again: {_how_to_run(newest.name, cluster)}" if newest.name in RECIPES else "submit it again"
        raise RecipeOutputMissing(
            f"job {newest.id} ({newest.name}) is {newest.state} and left no finished model in {newest.model_dir}; "
            f"see `gtc job logs {newest.id}`, then {again}")
    where = f" on {cluster}" if cluster else ""
    if ref not in RECIPES:
        raise RecipeOutputMissing(f"no job or recipe named {ref!r}{where}; give a job id, a model folder or "
                                  f"one of the recipes: {', '.join(RECIPES)}")
    raise RecipeOutputMissing(f"no run of {ref!r}{where} has finished a model yet; run it first: "
                              f"{_how_to_run(ref, cluster)}")


def _how_to_run(recipe: str, cluster: str | None) -> str:
    """How to run ``recipe`` (a catalogue name): the CLI verb, the api call and its notebook."""
    name = cluster or "CLUSTER"
    return (f"`gtc recipe run {recipe} --cluster {name}` or `api.run_recipe({recipe!r}, {name!r}).wait()`, "
            f"as notebooks/recipes/{RECIPES[recipe].notebook} does")


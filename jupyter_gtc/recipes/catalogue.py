"""The recipe catalogue: what each recipe runs, its configs, and the sbatch script that
launches it. Pure: no torch, no Slurm; ``api.run_recipe`` submits what this renders.

Each recipe is a Python module run by ``srun torchrun`` on every node of the job, with
its flags passed as the script's arguments ("$@"), never spliced into the shell text.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..exceptions import SpecError, SpecErrors



@dataclass(frozen=True)
class RecipeConfig:
    """One size of a recipe: the program's flags and the hardware it was sized for."""
    name: str
    args: tuple[str, ...]
    nodes: int = 1
    gpus_per_node: int = 0  # 0: CPU, one process per node
    machine: str = "CPU node"  # the tiny configs' times are on a 2-core machine
    runtime: str = ""  # wall time on ``machine``: measured for tiny, estimated at 40% MFU ("est.") above

    @property
    def procs_per_node(self) -> int:
        return self.gpus_per_node or 1


@dataclass(frozen=True)
class Recipe:
    name: str  # also the job name, so api.get_job(name) finds the newest run
    title: str
    module: str
    notebook: str
    summary: str
    configs: dict[str, RecipeConfig]
    base_args: tuple[str, ...] = ()
    consumes: str | None = None  # the recipe whose model this one starts from (--init-from)

    def config(self, name: str) -> RecipeConfig:
        if name not in self.configs:
            raise SpecErrors([SpecError("config", name, f"for {self.name}: one of {', '.join(self.configs)}")],
                             what="recipe")
        return self.configs[name]


def _pretrain_configs(family: str, sizes: list[tuple[str, int, str, str]], tiny_args: tuple[str, ...] = (),
                      tiny_runtime: str = "~30 s") -> dict[str, RecipeConfig]:
    configs = {"tiny": RecipeConfig("tiny", ("--size", "tiny", *tiny_args), nodes=1, runtime=tiny_runtime)}
    for size, nodes, machine, runtime in sizes:
        configs[size] = RecipeConfig(size, ("--size", size), nodes=nodes, gpus_per_node=8, machine=machine,
                                     runtime=runtime)
    return configs


H200_NODE = "a3-ultragpu-8g"  # 8 x H200
H100_NODE = "a3-highgpu-8g"  # 8 x H100

RECIPES: dict[str, Recipe] = {r.name: r for r in [
    Recipe("llama-pretrain", "Llama pretraining", "jupyter_gtc.recipes.pretrain", "llama_pretrain.ipynb",
           "A Llama-architecture causal LM from random initialisation, FSDP2 over every GPU of every node.",
           _pretrain_configs("llama", [("1b", 1, H100_NODE, "~10 min est."),
                                       ("8b", 4, H200_NODE, "~1 h est.")]),
           base_args=("--model", "llama")),
    Recipe("gemma-pretrain", "Gemma pretraining", "jupyter_gtc.recipes.pretrain", "gemma_pretrain.ipynb",
           "A Gemma 3 architecture model, same trainer and data as Llama's.",
           # 100 steps: the loss fell by 1.05 to 1.12 (first 10 steps' mean to last 10's) in 3 seeds.
           _pretrain_configs("gemma", [("1b", 1, H100_NODE, "~10 min est."),
                                       ("4b", 2, H200_NODE, "~30 min est.")], tiny_args=("--steps", "100")),
           base_args=("--model", "gemma")),
    Recipe("continued-pretrain", "Continued pretraining", "jupyter_gtc.recipes.pretrain",
           "continued_pretrain.ipynb",
           "Start from a pretraining run's weights, train on new text with a new schedule.",
           {"tiny": RecipeConfig("tiny", ("--steps", "100", "--lr", "1e-3", "--warmup-steps", "5"),
                                 runtime="~25 s"),
            "1b": RecipeConfig("1b", ("--size", "1b", "--steps", "1000", "--lr", "1e-4"), gpus_per_node=8,
                               machine=H100_NODE, runtime="~5 min est.")},
           base_args=("--data", "stdlib-docstrings"), consumes="llama-pretrain"),
    Recipe("sft", "Supervised fine-tuning", "jupyter_gtc.recipes.sft", "sft.ipynb",
           "Instruction tuning with TRL's SFTTrainer on generated conversations: full, or LoRA with peft.",
           {"tiny": RecipeConfig("tiny", ("--max-steps", "300", "--batch-size", "16"), runtime="~30 s"),
            "tiny-lora": RecipeConfig("tiny-lora", ("--lora", "--max-steps", "300", "--batch-size", "16"),
                                      runtime="~30 s"),
            "1b-lora": RecipeConfig("1b-lora", ("--lora", "--max-steps", "1000", "--lr", "2e-4", "--max-operand", "20"), gpus_per_node=8,
                                    machine=H100_NODE, runtime="~10 min est.")},
           consumes="continued-pretrain"),
    Recipe("grpo", "RL with GRPO", "jupyter_gtc.recipes.rl", "rl.ipynb",
           "Group-relative policy optimisation with a rule-based reward on arithmetic answers.",
           {"tiny": RecipeConfig("tiny", (), runtime="~40 s"),
            "1b": RecipeConfig("1b", ("--max-steps", "500", "--lr", "1e-6", "--max-operand", "20", "--temperature", "1.0",
                                      "--max-completion-length", "64"),
                               gpus_per_node=8, machine=H100_NODE, runtime="~1 h est.")},
           base_args=("--algorithm", "grpo"), consumes="sft"),
    Recipe("dpo", "Preference tuning with DPO", "jupyter_gtc.recipes.rl", "rl.ipynb",
           "Direct preference optimisation on generated (chosen, rejected) pairs.",
           {"tiny": RecipeConfig("tiny", (), runtime="~20 s"),
            "1b": RecipeConfig("1b", ("--max-steps", "500", "--lr", "5e-7", "--max-operand", "20"), gpus_per_node=8,
                               machine=H100_NODE, runtime="~15 min est.")},
           base_args=("--algorithm", "dpo"), consumes="sft"),
]}


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise SpecErrors([SpecError("recipe", name, f"one of {', '.join(RECIPES)}")], what="recipe")
    return RECIPES[name]


def recipe_args(recipe: Recipe, config: RecipeConfig, init_from: str | None, extra: list[str]) -> list[str]:
    """The program's flags: the recipe's, the config's, --init-from, then the user's (last wins)."""
    args = [*recipe.base_args, *config.args]
    if init_from:
        args += ["--init-from", init_from]
    return [*args, *extra]


def render_sbatch(recipe: Recipe, config: RecipeConfig, nodes: int | None = None) -> str:
    """The standard multi-node torchrun job: one torchrun per node, rendezvous at the first
    node of the allocation, one process per GPU (or one per CPU node). A job of one process
    (one node, one GPU or none) runs the program without torchrun: torchrun would only import
    torch a second time and spawn it, 1.5 s of every (re)start (issue 29), with no world to form."""
    nodes = nodes or config.nodes
    gpus = f"#SBATCH --gpus-per-node={config.gpus_per_node}\n" if config.gpus_per_node else ""
    header = f"""#!/bin/bash
#SBATCH --job-name={recipe.name}
#SBATCH --nodes={nodes}
#SBATCH --ntasks-per-node=1
{gpus}#SBATCH --requeue
# {recipe.title}, config {config.name}. Written by jupyter_gtc; the recipe's flags arrive as "$@".
set -euo pipefail
# When this attempt began: the program's startup line counts from here (recipes/startup.py).
# (bash 5; empty under an older bash, and then the line leaves launch out.)
export GTC_ATTEMPT_STARTED=${{EPOCHREALTIME:-}}
"""
    if config.procs_per_node == 1:
        header += f"""if [ "$SLURM_NNODES" = 1 ]; then
    srun "${{GTC_PYTHON:-python3}}" -m {recipe.module} "$@"
    exit 0
fi
"""
    return header + f"""head=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
# A port free on the head now (this script runs there). A fixed one, or one made of the job
# id, is another job's too where jobs share a host (a local cluster's nodes, two clusters'
# job 3), and torchrun then joins that job's rendezvous store and fails with it.
port=$("${{GTC_PYTHON:-python3}}" -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
srun "${{GTC_PYTHON:-python3}}" -m torch.distributed.run --nnodes="$SLURM_NNODES" \\
    --nproc-per-node={config.procs_per_node} --rdzv-backend=c10d --rdzv-endpoint="$head:$port" \\
    --rdzv-id="$SLURM_JOB_ID" -m {recipe.module} "$@"
"""

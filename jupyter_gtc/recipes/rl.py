"""Preference and reinforcement learning after SFT: DPO on preference pairs, GRPO on a
verifiable task with a rule-based reward.

    torchrun --nproc_per_node=N -m jupyter_gtc.recipes.rl --algorithm grpo|dpo \\
        --init-from MODEL_DIR [--max-steps N] [--lr ...] [--batch-size N] [--data rows.jsonl]

``MODEL_DIR`` is usually an SFT job's model folder; a LoRA adapter folder is merged onto its
base first (recipe.json names the base). Without ``--data``:

- DPO trains on generated pairs whose chosen answer is right and rejected answer wrong;
  TensorBoard shows ``train/loss`` and ``train/rewards/margins`` among TRL's scalars;
- GRPO samples ``--num-generations`` answers to generated arithmetic questions and rewards
  them with `tasks.arithmetic_reward` (1 for the right number, a little for any number);
  TensorBoard shows ``train/reward``.

The job contract (model, checkpoint and log folders, resume, ``progress/total_steps``) is
the one `sft` describes and implements.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..exceptions import SpecError
from .trl_job import (INIT_EXPECTED, JobDirs, callbacks, check_common, finish, parse, resolve_init, run_checked,
                      train, trainer_args)

ALGORITHMS = ("grpo", "dpo")


# Per algorithm, the defaults of the fields left unset: the tiny config, as in the other
# recipes. Measured on the tiny chain (pretrain -> continued pretrain -> SFT): GRPO's reward
# rose over 200 steps in each of 3 seeds (about 35 s on one CPU thread). At temperature 1
# and without the KL term, a 4-layer model drifted into noise after its number in some seeds.
TINY_DEFAULTS: dict[str, dict[str, Any]] = {
    "grpo": dict(max_steps=200, lr=2e-4, beta=0.04, batch_size=32),
    "dpo": dict(max_steps=100, lr=5e-4, beta=0.1, batch_size=8),
}


@dataclass
class RLConfig:
    """The RL recipe's arguments; each field is a ``--flag`` and its help text. The defaults
    are the tiny config (`TINY_DEFAULTS` for those that differ by algorithm); bigger models
    pass the values their help names."""

    algorithm: str = field(default="", metadata={"required": True, "choices": ALGORITHMS, "help": (
        "grpo: sample answers and learn from a reward function; dpo: learn from chosen/rejected pairs")})
    init_from: str = field(default="", metadata={"required": True, "help": (
        "the model to improve, usually an SFT job's model folder: " + INIT_EXPECTED)})
    output_dir: str = field(default=".", metadata={"help": (
        "where model/, checkpoints/ and logs/ go when the AIP_* variables are not set")})
    max_steps: int | None = field(default=None, metadata={"help": "optimizer steps; default 200 (GRPO), 100 (DPO)"})
    lr: float | None = field(default=None, metadata={"help": (
        "peak learning rate; default 2e-4 (GRPO), 5e-4 (DPO) for the tiny models; 1B-8B models want about "
        "1e-6 (GRPO) or 5e-7 (DPO)")})
    batch_size: int | None = field(default=None, metadata={"help": (
        "per process: completions, a multiple of --num-generations (GRPO, default 32), or preference pairs "
        "(DPO, default 8)")})
    beta: float | None = field(default=None, metadata={"help": (
        "KL weight against the initial model; default 0.04 (GRPO), 0.1 (DPO); GRPO with 0 loads no "
        "reference model")})
    max_length: int = field(default=512, metadata={"help": "DPO: tokens of prompt and answer; longer ones are cut"})
    num_generations: int = field(default=8, metadata={"help": "GRPO: answers sampled per prompt (a group)"})
    max_completion_length: int = field(default=8, metadata={"help": (
        "GRPO: tokens per sampled answer (enough for a number; models that reason first want 256 or more)")})
    temperature: float = field(default=0.8, metadata={"help": "GRPO: sampling temperature"})
    data: str | None = field(default=None, metadata={"help": (
        'a .jsonl file (DPO: {"prompt", "chosen", "rejected"}; GRPO: {"prompt", "answer"}) or a datasets '
        "save_to_disk folder; default: generated tasks")})
    max_operand: int = field(default=2, metadata={"help": (
        "generated arithmetic: the largest operand; 2 for the tiny models, 20 or more for 1B+ models")})
    examples: int = field(default=4000, metadata={"help": "how many rows to generate without --data"})
    save_steps: int = field(default=50, metadata={"help": "steps between checkpoints"})
    seed: int = field(default=0, metadata={"help": "seed of the generated data, the data order and sampling"})

    def with_defaults(self) -> RLConfig:
        """This config with the unset fields given the algorithm's defaults."""
        unset = {k: v for k, v in TINY_DEFAULTS[self.algorithm].items() if getattr(self, k) is None}
        return dataclasses.replace(self, **unset)


def check(config: RLConfig) -> list[SpecError]:
    errors = check_common(config)
    if config.beta is not None and config.beta < 0:
        errors.append(SpecError("--beta", config.beta, "zero or more"))
    if config.algorithm == "grpo":
        if config.num_generations < 2:
            errors.append(SpecError("--num-generations", config.num_generations,
                                    "2 or more: GRPO compares the answers of a group"))
        elif config.batch_size % config.num_generations:
            errors.append(SpecError("--batch-size", config.batch_size,
                                    f"a multiple of --num-generations ({config.num_generations})"))
        if config.max_completion_length < 1:
            errors.append(SpecError("--max-completion-length", config.max_completion_length, "a positive integer"))
        if not config.temperature > 0:
            errors.append(SpecError("--temperature", config.temperature, "more than 0: GRPO needs varied answers"))
    return errors


def rl_rows(config: RLConfig) -> list[dict[str, Any]]:
    from .tasks import generated, load_rows
    if config.data:
        return load_rows(config.data, config.algorithm)
    return generated(config.algorithm, config.examples, config.seed, config.max_operand)


def dpo_trainer(config: RLConfig, dirs: JobDirs, dataset) -> tuple[Path, Any]:
    from trl import DPOConfig, DPOTrainer
    args = DPOConfig(**trainer_args(config, dirs, config.lr), beta=config.beta, max_length=config.max_length)
    init = resolve_init(config.init_from, dirs.checkpoints, args)
    # The model as a folder: DPOTrainer loads the reference model from the same path.
    return init, DPOTrainer(model=str(init), args=args, train_dataset=dataset,
                            processing_class=tokenizer(init), callbacks=callbacks(dirs))


def grpo_trainer(config: RLConfig, dirs: JobDirs, dataset) -> tuple[Path, Any]:
    from trl import GRPOConfig, GRPOTrainer
    from .tasks import arithmetic_reward
    args = GRPOConfig(**trainer_args(config, dirs, config.lr), beta=config.beta, num_generations=config.num_generations,
                      max_completion_length=config.max_completion_length, temperature=config.temperature)
    init = resolve_init(config.init_from, dirs.checkpoints, args)
    return init, GRPOTrainer(model=str(init), reward_funcs=arithmetic_reward, args=args,
                             train_dataset=dataset, processing_class=tokenizer(init), callbacks=callbacks(dirs))


def tokenizer(folder):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(folder))


def run(config: RLConfig) -> None:
    data = rl_rows(config)  # first: a bad --data is refused in a second, not after TRL's imports
    from datasets import Dataset
    dirs = JobDirs.from_env(config.output_dir)
    init, trainer = (dpo_trainer if config.algorithm == "dpo" else grpo_trainer)(config, dirs, Dataset.from_list(data))
    train(trainer, dirs)
    finish(trainer, dirs, {"recipe": config.algorithm, "base_model": str(init), "lora": False})


def main(argv: list[str] | None = None) -> None:
    config, parser = parse(RLConfig, argv, "python -m jupyter_gtc.recipes.rl", __doc__.split("\n\n")[0])
    config = config.with_defaults()
    run_checked(run, config, check(config), parser)


if __name__ == "__main__":
    main()

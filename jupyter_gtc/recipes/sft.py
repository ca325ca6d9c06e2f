"""Supervised fine-tuning of a pretrained model on conversations, in full or with LoRA.

    torchrun --nproc_per_node=N -m jupyter_gtc.recipes.sft --init-from MODEL_DIR [--lora] \\
        [--max-steps 100] [--lr ...] [--batch-size 8] [--data rows.jsonl] [--seed 0]

``MODEL_DIR`` is a pretraining job's model folder (config.json, safetensors, tokenizer) or an
earlier SFT job's LoRA adapter folder (merged onto its base first). Without ``--data`` the
generated instructions of `tasks` are used. The job contract:

- the final model goes to ``AIP_MODEL_DIR``: a full model folder, or with ``--lora`` a peft
  adapter folder (``PeftModel.from_pretrained(base, dir)``), with the tokenizer and a
  ``recipe.json`` that names the base model;
- resumable checkpoints go to ``AIP_CHECKPOINT_DIR``; a requeued job (or any run that finds
  a checkpoint there) resumes from the newest one;
- TensorBoard scalars go to ``AIP_TENSORBOARD_LOG_DIR``: TRL's own (``train/loss``,
  ``train/learning_rate``, ``train/grad_norm``...) plus ``progress/total_steps`` at step 0.

Without the ``AIP_*`` variables (a run by hand) they are ``--output-dir``'s model/,
checkpoints/ and logs/ folders.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..exceptions import SpecError
from .trl_job import (INIT_EXPECTED, JobDirs, callbacks, check_common, finish, parse, resolve_init, run_checked,
                      train, trainer_args)

# LoRA on every linear projection of the attention and MLP blocks: the QLoRA paper's finding
# that adapting all of them matches full fine-tuning far better than q/v alone. Llama and
# Gemma name them alike.
LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


@dataclass
class SFTConfig:
    """The SFT recipe's arguments; each field is a ``--flag`` and its help text. As in the
    pretraining recipe, the defaults are the tiny config (seconds on a CPU); bigger models pass
    the values their help names."""

    init_from: str = field(default="", metadata={"required": True, "help": (
        "the model to fine-tune: " + INIT_EXPECTED)})
    output_dir: str = field(default=".", metadata={"help": (
        "where model/, checkpoints/ and logs/ go when the AIP_* variables are not set")})
    lora: bool = field(default=False, metadata={"help": (
        "train a LoRA adapter on all linear projections instead of every weight")})
    lora_rank: int = field(default=16, metadata={"help": "LoRA rank r (alpha is 2r)"})
    max_steps: int = field(default=100, metadata={"help": "optimizer steps"})
    lr: float | None = field(default=None, metadata={"help": (
        "peak learning rate; default 1e-3 in full, 3e-3 with --lora (for the tiny models; 1B-8B models "
        "want about 2e-5 in full, 2e-4 with LoRA)")})
    batch_size: int = field(default=8, metadata={"help": "conversations per step per process"})
    max_length: int = field(default=512, metadata={"help": "tokens per conversation; longer ones are cut"})
    data: str | None = field(default=None, metadata={"help": (
        'a .jsonl file of {"messages": [...]} lines or a datasets save_to_disk folder; '
        "default: generated arithmetic, word reversal and upper-casing tasks")})
    max_operand: int = field(default=2, metadata={"help": (
        "generated arithmetic: the largest operand; 2 makes a task a tiny model learns in seconds, "
        "1B+ models want 20 or more")})
    examples: int = field(default=4000, metadata={"help": "how many conversations to generate without --data"})
    save_steps: int = field(default=50, metadata={"help": "steps between checkpoints"})
    seed: int = field(default=0, metadata={"help": "seed of the generated data, the data order and LoRA's init"})


# -- SFT --------------------------------------------------------------------------------------

def sft_rows(config: SFTConfig) -> list[dict]:
    from .tasks import generated, load_rows
    if config.data:
        return load_rows(config.data, "sft")
    return generated("sft", config.examples, config.seed, config.max_operand)


def run(config: SFTConfig) -> None:
    rows = sft_rows(config)  # first: a bad --data is refused in a second, not after TRL's imports
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig as TRLConfig, SFTTrainer

    dirs = JobDirs.from_env(config.output_dir)
    peft_config = None
    if config.lora:
        from peft import LoraConfig
        peft_config = LoraConfig(r=config.lora_rank, lora_alpha=2 * config.lora_rank, lora_dropout=0.0,
                                 target_modules=LORA_TARGETS, task_type="CAUSAL_LM")
    args = TRLConfig(**trainer_args(config, dirs, 3e-3 if config.lora else 1e-3), max_length=config.max_length,
                     # Learn the answers, not the questions, from the {% generation %} markers of
                     # data.CHAT_TEMPLATE; they hold <|eos|> too, so the model learns to stop.
                     assistant_only_loss=True)
    init = resolve_init(config.init_from, dirs.checkpoints, args)
    trainer = SFTTrainer(model=str(init), args=args, train_dataset=Dataset.from_list(rows),
                         processing_class=AutoTokenizer.from_pretrained(str(init)), peft_config=peft_config,
                         callbacks=callbacks(dirs))
    train(trainer, dirs)
    finish(trainer, dirs, {"recipe": "sft", "base_model": str(init), "lora": config.lora})


def main(argv: list[str] | None = None) -> None:
    config, parser = parse(SFTConfig, argv, "python -m jupyter_gtc.recipes.sft", __doc__.split("\n\n")[0])
    errors = check_common(config)
    if config.lora_rank < 1:
        errors.append(SpecError("--lora-rank", config.lora_rank, "a positive integer such as 16"))
    run_checked(run, config, errors, parser)


if __name__ == "__main__":
    main()

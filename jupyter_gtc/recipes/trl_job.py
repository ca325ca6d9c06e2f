"""What the TRL recipes (``sft``, ``rl``) share: flags made from a config dataclass, the job
contract's folders, starting from a model or a LoRA adapter, TensorBoard scalars, resuming
from the newest checkpoint and the final ``recipe.json``."""

from __future__ import annotations

import argparse
import json
import os
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from ..exceptions import SpecError, SpecErrors
from .paths import output_path

INIT_EXPECTED = ("a folder with config.json, e.g. a pretraining job's model/ folder "
                 "(or an SFT job's LoRA adapter folder, with adapter_config.json)")


# -- arguments ----------------------------------------------------------------------------

def parse(config_cls: type, argv: list[str] | None, prog: str, description: str) -> tuple[Any, argparse.ArgumentParser]:
    """An argparse parser made from a config dataclass's fields, and the parsed config."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    hints = typing.get_type_hints(config_cls)
    for f in fields(config_cls):
        flag = "--" + f.name.replace("_", "-")
        kind = hints[f.name]
        if kind is bool:
            parser.add_argument(flag, dest=f.name, action="store_true", help=f.metadata["help"])
            continue
        if typing.get_origin(kind) is not None:  # X | None: parse as X
            kind = next(t for t in typing.get_args(kind) if t is not type(None))
        parser.add_argument(flag, dest=f.name, type=kind, default=f.default, required=f.metadata.get("required", False),
                            choices=f.metadata.get("choices"), help=f.metadata["help"])
    return config_cls(**vars(parser.parse_args(argv))), parser


def check_common(config: Any) -> list[SpecError]:
    """The problems of the fields every recipe has; the model folder is checked by `check_init`."""
    errors = check_init(config.init_from)
    for name in ("max_steps", "batch_size", "save_steps"):
        if getattr(config, name) < 1:
            errors.append(SpecError("--" + name.replace("_", "-"), getattr(config, name), "a positive integer"))
    if config.lr is not None and not config.lr > 0:  # None: the recipe's default
        errors.append(SpecError("--lr", config.lr, "a positive learning rate such as 2e-5"))
    return errors


def check_init(value: str) -> list[SpecError]:
    path = Path(value).expanduser()
    if not path.is_dir():
        return [SpecError("--init-from", value, f"there is no such folder; expected {INIT_EXPECTED}")]
    if not (path / "config.json").is_file() and not (path / "adapter_config.json").is_file():
        return [SpecError("--init-from", value, f"the folder has no config.json; expected {INIT_EXPECTED}")]
    return []


def run_checked(run: Callable[[Any], None], config: Any, errors: list[SpecError],
                parser: argparse.ArgumentParser) -> None:
    """Refuse the flags' ``errors``, else ``run(config)``; what is found wanting only once
    loaded (``--data``, an adapter's base) is refused the same way."""
    fail_on(errors, parser)
    try:
        run(config)
    except SpecErrors as e:
        fail_on(e.errors, parser)


def fail_on(errors: list[SpecError], parser: argparse.ArgumentParser) -> None:
    """Exit with argparse's usage line and one line per problem (status 2), before torch is imported."""
    if len(errors) == 1:
        parser.error(str(errors[0]))
    if errors:
        parser.error("\n" + "\n".join(f"  {e}" for e in errors))


# -- the job contract -----------------------------------------------------------------------

@dataclass(frozen=True)
class JobDirs:
    """Where a recipe writes, from the job launcher's AIP_* variables or ``--output-dir``."""

    model: Path
    checkpoints: Path
    logs: Path

    @classmethod
    def from_env(cls, output_dir: str) -> JobDirs:
        base = Path(output_dir).expanduser().absolute()  # recipe.json records paths: no relative ones
        env = {name: output_path(os.environ[name]).absolute() for name in
               ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR") if os.environ.get(name)}
        return cls(model=env.get("AIP_MODEL_DIR", base / "model"),
                   checkpoints=env.get("AIP_CHECKPOINT_DIR", base / "checkpoints"),
                   logs=env.get("AIP_TENSORBOARD_LOG_DIR", base / "logs"))

    def last_checkpoint(self) -> str | None:
        """The newest ``checkpoint-N`` folder, whether or not Slurm says this is a restart: a
        job rerun by hand into the same folders continues too."""
        from transformers.trainer_utils import get_last_checkpoint
        return get_last_checkpoint(str(self.checkpoints)) if self.checkpoints.is_dir() else None


def resolve_init(value: str, scratch: Path, args) -> Path:
    """A full model folder to start from: ``value`` itself, or a LoRA adapter merged onto its
    base and saved under ``scratch``. A folder, not a model in memory, because DPO and GRPO
    (beta > 0) rebuild their reference model from ``config._name_or_path``.

    ``args`` are the TrainingArguments: making them sets up torch.distributed, so their
    ``main_process_first`` lets the first process merge while the others wait."""
    path = Path(value).expanduser().resolve()
    if (path / "config.json").is_file():
        return path
    target = scratch / "init-merged"
    with args.main_process_first(local=False, desc="merging the LoRA adapter onto its base"):
        if not (target / "config.json").is_file():  # a requeued job merged it already
            _merge_adapter(path, target)
    return target


def adapter_base(adapter: Path) -> str:
    """The model an adapter was trained on: our recipe.json, else peft's own record."""
    recipe = adapter / "recipe.json"
    if recipe.is_file() and "base_model" in (ours := json.loads(recipe.read_text())):
        return ours["base_model"]
    return json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"]


def _merge_adapter(adapter: Path, target: Path) -> None:
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer
    base = adapter_base(adapter)
    if not (Path(base) / "config.json").is_file():
        raise SpecErrors([SpecError("--init-from", str(adapter), f"an adapter whose base model {base!r} is still "
                                    "there; copy the base back or point --init-from at a full model")],
                         what="recipe arguments")
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(base), str(adapter)).merge_and_unload()
    partial = target.with_name(target.name + ".partial")
    merged.save_pretrained(partial)
    AutoTokenizer.from_pretrained(str(adapter)).save_pretrained(partial)
    partial.rename(target)  # atomic: a half-written merge is never taken for a finished one


def _tensorboard_callback():
    from transformers.integrations import TensorBoardCallback

    class JobMetrics(TensorBoardCallback):
        """TRL's scalars under ``train/...`` in our log dir, plus ``progress/total_steps``
        (value: max steps, at step 0) that the job panel's progress bar reads."""

        def __init__(self, log_dir: Path):
            super().__init__()
            self.logging_dir = str(log_dir)  # transformers 5 dropped TrainingArguments.logging_dir

        def on_train_begin(self, args, state, control, **kwargs):
            super().on_train_begin(args, state, control, **kwargs)
            if self.tb_writer is not None:  # None on every process but the first
                self.tb_writer.add_scalar("progress/total_steps", state.max_steps, 0)
                self.tb_writer.flush()

    return JobMetrics


def checkpointing_field(names: set[str] | None = None) -> str:
    """TrainingArguments' name for activation checkpointing: ``activation_checkpointing`` since
    transformers 5.2x, ``gradient_checkpointing`` before: a GPU machine's image may carry an
    older one (5.17 on the H200 machines bench/gpu.py is meant for), whose TrainingArguments
    refuse the new name, so every SFT and RL job would stop there at its first line. ``names``:
    the fields to choose from, the installed TrainingArguments' by default."""
    if names is None:
        from dataclasses import fields as dataclass_fields

        from transformers import TrainingArguments
        names = {f.name for f in dataclass_fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


def trainer_args(config: Any, dirs: JobDirs, default_lr: float) -> dict[str, Any]:
    """The TrainingArguments every recipe shares: logging every step, checkpoints, precision."""
    import torch
    gpu = torch.cuda.is_available()
    return dict(
        output_dir=str(dirs.checkpoints), max_steps=config.max_steps, per_device_train_batch_size=config.batch_size,
        learning_rate=config.lr or default_lr, warmup_steps=0.1, lr_scheduler_type="cosine",  # 0.1: 10% of steps
        logging_steps=1, report_to="none",  # our JobMetrics callback writes TensorBoard
        save_strategy="steps", save_steps=config.save_steps, save_total_limit=2, seed=config.seed,
        # bf16 where the hardware has it: TRL's default bf16=True would run CPU jobs in emulated bf16.
        # Activation checkpointing (TRL's default) only where memory is short, on the GPU.
        bf16=gpu, **{checkpointing_field(): gpu}, dataloader_pin_memory=gpu,
        # Without use_cpu, torchrun on a machine without GPUs starts N unrelated single-process
        # runs (accelerate sets up gloo only when told the job is CPU-only).
        use_cpu=not gpu)


def callbacks(dirs: JobDirs) -> list:
    return [_tensorboard_callback()(dirs.logs)]


def finish(trainer, dirs: JobDirs, recipe: dict[str, Any]) -> None:
    """The final model (or adapter) and tokenizer in the model dir, and recipe.json beside them."""
    trainer.save_model(str(dirs.model))  # the tokenizer too: it is the trainer's processing_class
    if trainer.is_world_process_zero():
        recipe = {**recipe, "steps": trainer.state.global_step}
        (dirs.model / "recipe.json").write_text(json.dumps(recipe, indent=2) + "\n")


def train(trainer, dirs: JobDirs) -> None:
    """Train, from the newest checkpoint if there is one (model, optimizer, schedule, step and
    data position: the Trainer saves them all)."""
    checkpoint = dirs.last_checkpoint()
    if trainer.is_world_process_zero():
        if checkpoint:
            print(f"resuming from {checkpoint}", flush=True)
        elif int(os.environ.get("SLURM_RESTART_COUNT") or 0) > 0:
            print(f"requeued, but {dirs.checkpoints} holds no checkpoint yet: starting at step 0", flush=True)
    trainer.train(resume_from_checkpoint=checkpoint)

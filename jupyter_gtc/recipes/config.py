"""The pretraining recipe's configuration: one dataclass, each field with its help text,
and per-size presets that command-line flags override."""

from __future__ import annotations

import argparse
import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..exceptions import SpecError, SpecErrors
from .distributed import PARALLEL_MODES
from .models import check_model
from .paths import output_path


def _f(default, help: str):
    return field(default=default, metadata={"help": help})


@dataclass
class PretrainConfig:
    model: str = _f("llama", "architecture family: llama or gemma")
    size: str = _f("tiny", "model size: tiny, 1b, 8b (llama) or tiny, 1b, 4b (gemma)")
    data: str = _f("pydoc-topics", "corpus: pydoc-topics, stdlib-docstrings, or a path to .txt/.jsonl files")
    tokenizer: str | None = _f(None, "a tokenizer folder; default: train byte-level BPE on the corpus")
    vocab_size: int = _f(1024, "vocabulary of the trained tokenizer")
    seq_len: int = _f(128, "tokens per sequence")
    global_batch: int = _f(8, "sequences per step over all ranks (a multiple of the world size)")
    steps: int = _f(150, "optimizer steps")
    lr: float = _f(3e-3, "peak learning rate (AdamW)")
    warmup_steps: int = _f(10, "linear warmup steps, then cosine decay to min_lr_ratio * lr")
    min_lr_ratio: float = _f(0.1, "final learning rate as a fraction of lr")
    weight_decay: float = _f(0.1, "AdamW weight decay")
    grad_clip: float = _f(1.0, "clip the gradient norm to this")
    parallel: str = _f("fsdp", "data parallelism: fsdp (FSDP2, sharded) or ddp (replicated)")
    dtype: str = _f("auto", "compute dtype: auto (bf16 on GPU, fp32 on CPU), bf16 or fp32")
    compile: str = _f("off", "on: torch.compile each decoder layer (the first steps pay for compiling)")
    activation_checkpointing: str = _f("off", "on: recompute each decoder layer's activations in the backward "
                                              "pass: less memory for about a third more compute")
    checkpoint_every: int = _f(50, "save a checkpoint every N steps (and at the end)")
    keep_checkpoints: int = _f(2, "how many checkpoints to keep")
    hold_until: str | None = _f(None, "after each checkpoint, wait until this file exists (a relative path is "
                                      "from where the job runs: its job folder under `gtc recipe run`, the "
                                      "folder it was submitted from otherwise): a test preempts a run at a known step "
                                      "this way")
    hold_at_step: int | None = _f(None, "with hold_until: hold after this step (its metrics written), not after "
                                        "each checkpoint: a test faults a run between two checkpoints this way")
    init_from: str | None = _f(None, "continued pretraining: start from these weights (a model folder, "
                                     "a checkpoint folder or one step-N checkpoint)")
    seed: int = _f(0, "seed of the weights and of the batch order")
    log_every: int = _f(10, "print a line every N steps")
    output_dir: str | None = _f(None, "where model/, checkpoints/ and logs/ go when AIP_* are not set")

    @property
    def model_dir(self) -> Path:
        return self._aip("AIP_MODEL_DIR", "model")

    @property
    def checkpoint_dir(self) -> Path:
        return self._aip("AIP_CHECKPOINT_DIR", "checkpoints")

    @property
    def log_dir(self) -> Path:
        return self._aip("AIP_TENSORBOARD_LOG_DIR", "logs")

    def _aip(self, variable: str, sub: str) -> Path:
        if os.environ.get(variable):
            return output_path(os.environ[variable])
        return Path(self.output_dir or "recipe-output") / sub

    def validate(self) -> "PretrainConfig":
        check_model(self.model, self.size)
        problems = []
        for name in ("vocab_size", "seq_len", "global_batch", "steps", "checkpoint_every", "keep_checkpoints",
                     "log_every"):
            if getattr(self, name) < 1:
                problems.append(SpecError(name, getattr(self, name), "a whole number of at least 1"))
        if self.hold_at_step is not None and not (1 <= self.hold_at_step <= self.steps and self.hold_until):
            problems.append(SpecError("hold_at_step", self.hold_at_step, f"a step from 1 to steps ({self.steps}), "
                                      "with hold_until set"))
        if self.lr <= 0:
            problems.append(SpecError("lr", self.lr, "a positive learning rate such as 3e-4"))
        if self.parallel not in PARALLEL_MODES:
            problems.append(SpecError("parallel", self.parallel, f"one of {', '.join(PARALLEL_MODES)}"))
        if self.dtype not in ("auto", "bf16", "fp32"):
            problems.append(SpecError("dtype", self.dtype, "one of auto, bf16, fp32"))
        for name in ("compile", "activation_checkpointing"):
            if getattr(self, name) not in ("on", "off"):
                problems.append(SpecError(name, getattr(self, name), "on or off"))
        if self.init_from and not Path(self.init_from).exists():
            problems.append(SpecError("init_from", self.init_from, "an existing folder: a pretraining job's "
                                      "model/ or checkpoints/ folder"))
        if problems:
            raise SpecErrors(problems, what="recipe config")
        return self


# What a size changes besides the architecture. 1b and up are for GPUs: the sequence
# length and batch of published pretraining runs, scaled to a few nodes.
SIZE_PRESETS: dict[str, dict[str, object]] = {
    "tiny": {},
    "1b": dict(vocab_size=32768, seq_len=2048, global_batch=64, steps=2000, lr=3e-4, warmup_steps=200,
               checkpoint_every=500),
    "4b": dict(vocab_size=32768, seq_len=2048, global_batch=128, steps=2000, lr=3e-4, warmup_steps=200,
               checkpoint_every=500),
    "8b": dict(vocab_size=32768, seq_len=4096, global_batch=128, steps=2000, lr=3e-4, warmup_steps=200,
               checkpoint_every=250),
}


def parse_args(argv: list[str] | None = None, description: str = "") -> PretrainConfig:
    """Flags named after the fields (``--global-batch``); unset ones take the size's preset."""
    parser = argparse.ArgumentParser(prog="python -m jupyter_gtc.recipes.pretrain", description=description)
    for f in dataclasses.fields(PretrainConfig):
        kind = {"int": int, "int | None": int, "float": float}.get(str(f.type), str)
        parser.add_argument("--" + f.name.replace("_", "-"), type=kind, default=None, help=f.metadata["help"])
    given = {k: v for k, v in vars(parser.parse_args(argv)).items() if v is not None}
    preset = SIZE_PRESETS.get(given.get("size", "tiny"), {})
    return PretrainConfig(**{**preset, **given}).validate()

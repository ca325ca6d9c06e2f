"""Resumable checkpoints with torch.distributed.checkpoint, and the final model export.

Layout under the checkpoint folder (``AIP_CHECKPOINT_DIR``):

    hf/                 the model's config and the tokenizer, written once
    step-00000050/      one DCP checkpoint: every rank's shards + trainer.json
    step-00000100.partial/   being written; never read

A checkpoint is complete once renamed from ``.partial``: a job killed mid-save leaves only
a partial folder, which the next start removes. Model, optimizer, LR schedule and step are
saved together and each batch depends only on (seed, step), so a resumed run repeats the
uninterrupted run's losses exactly.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import (
    StateDictOptions, get_model_state_dict, get_state_dict, set_model_state_dict, set_state_dict)

from .distributed import World, unwrap

TRAINER_STATE = "trainer.json"


class Checkpointer:
    def __init__(self, folder: Path, world: World, keep: int = 2):
        self.folder, self.world, self.keep = Path(folder), world, keep

    @property
    def hf_folder(self) -> Path:
        return self.folder / "hf"

    def latest(self) -> Path | None:
        return latest_checkpoint(self.folder)

    def clean_partial(self) -> None:
        if self.world.is_main:
            for stale in self.folder.glob("step-*.partial"):
                shutil.rmtree(stale, ignore_errors=True)
        self.world.barrier()

    def save(self, step: int, model, optimizer, trainer_state: dict[str, Any]) -> Path:
        final = self.folder / f"step-{step:08d}"
        partial = final.with_name(final.name + ".partial")
        model_sd, optim_sd = get_state_dict(model, optimizer)
        dcp.save({"model": model_sd, "optim": optim_sd}, checkpoint_id=str(partial))
        if self.world.is_main:
            (partial / TRAINER_STATE).write_text(json.dumps({"step": step, **trainer_state}))
            os.replace(partial, final)
            for old in sorted(self.folder.glob("step-*[0-9]"))[:-self.keep]:
                shutil.rmtree(old, ignore_errors=True)
        self.world.barrier()
        return final

    def load(self, path: Path, model, optimizer) -> dict[str, Any]:
        """Restore model and optimizer from ``path``; returns its trainer state (step...)."""
        model_sd, optim_sd = get_state_dict(model, optimizer)
        state = {"model": model_sd, "optim": optim_sd}
        dcp.load(state, checkpoint_id=str(path))
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        return json.loads((Path(path) / TRAINER_STATE).read_text())


def latest_checkpoint(folder: Path) -> Path | None:
    """The newest complete ``step-N`` checkpoint in ``folder``, or None."""
    done = sorted(p for p in Path(folder).glob("step-*[0-9]") if (p / TRAINER_STATE).exists())
    return done[-1] if done else None


def load_weights(model, source: Path) -> dict[str, Any]:
    """Only the weights, for continued pretraining: from a DCP checkpoint (a ``step-N``
    folder, or a checkpoint folder whose newest one is taken) or a transformers folder."""
    source = Path(source)
    if (source / "hf").is_dir() and not (source / TRAINER_STATE).exists():
        found = latest_checkpoint(source)
        if found is None:
            raise FileNotFoundError(f"{source} holds no complete checkpoint (step-N/ with {TRAINER_STATE})")
        source = found
    if (source / TRAINER_STATE).exists():
        state = {"model": get_model_state_dict(model)}
        dcp.load(state, checkpoint_id=str(source))
        set_model_state_dict(model, state["model"])
        return json.loads((source / TRAINER_STATE).read_text())
    from safetensors.torch import load_file
    weights = {}
    for f in sorted(source.glob("*.safetensors")):
        weights.update(load_file(f))
    set_model_state_dict(model, weights, options=StateDictOptions(full_state_dict=True, strict=False))
    recipe = source / "recipe.json"
    return json.loads(recipe.read_text()) if recipe.exists() else {}


def export_model(model, tokenizer, folder: Path, world: World, recipe: dict[str, Any]) -> None:
    """Write the model where ``from_pretrained`` loads it (safetensors + config + tokenizer),
    gathered onto rank 0. ``recipe.json`` is written last: its presence means complete."""
    full = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    if world.is_main:
        folder.mkdir(parents=True, exist_ok=True)
        unwrap(model).save_pretrained(folder, state_dict=full)
        tokenizer.save_pretrained(folder)
        (folder / "recipe.json").write_text(json.dumps(recipe, indent=1))
    world.barrier()


def hf_source(source: Path) -> Path:
    """The folder with config.json and the tokenizer for a ``--init-from`` source."""
    source = Path(source)
    for candidate in (source, source / "hf", source.parent / "hf"):
        if (candidate / "config.json").exists():
            return candidate
    raise FileNotFoundError(f"no config.json in {source}, {source / 'hf'} or {source.parent / 'hf'}")


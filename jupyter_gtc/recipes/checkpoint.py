"""Resumable checkpoints with torch.distributed.checkpoint, and the final model export.

Layout under the checkpoint folder (``AIP_CHECKPOINT_DIR``):

    hf/                 the model's config and the tokenizer, written once
    step-00000050/      one DCP checkpoint: every rank's shards + trainer.json
    step-00000100.partial/   being written; never read

A checkpoint is complete once renamed from ``.partial``: a job killed mid-save leaves only
a partial folder, which the next start removes. Model, optimizer, LR schedule and step are
saved together and each batch depends only on (seed, step), so a resumed run repeats the
uninterrupted run's losses exactly.

Nothing is unpickled as it stands: DCP's reader loads a checkpoint's ``.metadata`` with plain
``pickle.load`` and its non-tensor items with ``torch.load(weights_only=False)``, so whoever
could write a checkpoint folder (a shared file system, a storage emulator, a ``--init-from``
folder of someone else's) would run code in the job. Here the metadata is unpickled with only
DCP's own metadata classes and torch's sizes, dtypes and layouts allowed, and every other item
must pass ``weights_only=True`` first (``SafeReader``, ``SafeLoadPlanner``).
"""

from __future__ import annotations

import io
import json
import os
import pickle
import shutil
from pathlib import Path
from typing import Any

import torch
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import DefaultLoadPlanner, FileSystemReader
from torch.distributed.checkpoint.metadata import StorageMeta
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
        _safe_load(state, path)
        set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])
        return json.loads((Path(path) / TRAINER_STATE).read_text())


# What a DCP checkpoint's .metadata pickle may name: DCP's own metadata classes, and torch's
# sizes, dtypes and layouts (pathlib for the checkpoint_id DCP records). Nothing callable else.
_METADATA_MODULES = ("torch.distributed.checkpoint.metadata", "torch.distributed.checkpoint.filesystem",
                     "torch.distributed.checkpoint.planner")
_METADATA_GLOBALS = {("torch", "Size"), ("torch", "device"), ("torch.serialization", "_get_layout"),
                     ("pathlib", "PosixPath"), ("pathlib", "PurePosixPath"), ("collections", "OrderedDict")}


class _MetadataUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str):
        found = super().find_class(module, name) if module in _METADATA_MODULES else None
        if isinstance(found, type) or (module, name) in _METADATA_GLOBALS:
            return found or super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        raise pickle.UnpicklingError(f"a checkpoint's metadata may not name {module}.{name}: it is not DCP's "
                                     f"metadata, and unpickling it could run code")


class SafeReader(FileSystemReader):
    """DCP's file reader, whose metadata unpickler takes DCP's metadata classes only."""

    def read_metadata(self, *args: Any, **kwargs: Any):
        with open(self._get_metadata_path(kwargs.get("rank")), "rb") as f:
            metadata = _MetadataUnpickler(f).load()
        if getattr(metadata, "storage_meta", None) is None:
            metadata.storage_meta = StorageMeta()
        metadata.storage_meta.load_id = self.load_id
        return metadata


class SafeLoadPlanner(DefaultLoadPlanner):
    """DCP's planner, except that a non-tensor item must load with ``weights_only=True``
    (tensors and plain data) before it is loaded as DCP does (the same bytes, so the same objects)."""

    def load_bytes(self, read_item, value: io.BytesIO) -> None:
        torch.load(value, weights_only=True)  # raises on anything a pickle could run
        value.seek(0)
        super().load_bytes(read_item, value)


def _safe_load(state: dict[str, Any], path: Path) -> None:
    """``dcp.load`` through ``SafeReader`` and ``SafeLoadPlanner``. A refused pickle is an
    ``UnpicklingError`` naming the checkpoint (DCP wraps every failure in a ``BaseException``)."""
    from torch.distributed.checkpoint.api import CheckpointException

    try:
        dcp.load(state, storage_reader=SafeReader(str(path)), planner=SafeLoadPlanner())
    except CheckpointException as e:
        said = str(e)
        for refusal in ("may not name", "Unsupported global"):
            if refusal in said:
                line = next(x for x in said.splitlines() if refusal in x)
                raise pickle.UnpicklingError(f"{path} is not loaded: it holds a pickle that could run code, "
                                             f"which is never unpickled ({line.strip()[:300]})") from None
        raise


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
        _safe_load(state, source)
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


"""The pretraining program run as a user runs it by hand (no Slurm): it trains, exports a
model transformers loads, resumes exactly from a checkpoint, and refuses bad flags clearly."""

from __future__ import annotations

import json
import re
import subprocess

import numpy as np
import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.recipes import data
from jupyter_gtc.recipes.config import parse_args
from tests.recipes.conftest import RUN20_FLAGS, losses, pretrain  # run20, the fixture, lives there too


def test_loss_falls_and_the_model_loads_with_from_pretrained(run20):
    out, loss = run20
    assert sorted(loss) == list(range(1, 21))
    assert loss[1] == pytest.approx(np.log(1024), abs=0.1)  # random initialisation over 1,024 tokens
    assert loss[20] < loss[1] - 0.5
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(out / "model")
    tokenizer = AutoTokenizer.from_pretrained(out / "model")
    ids = tokenizer("The with statement", return_tensors="pt").input_ids
    assert model(input_ids=ids, labels=ids).loss.item() < loss[1]
    assert json.loads((out / "model" / "recipe.json").read_text())["step"] == 20
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["hf", "step-00000010", "step-00000020"]


def test_a_resumed_run_repeats_the_uninterrupted_losses(run20, tmp_path):
    out, uninterrupted = run20
    resumed = tmp_path / "resumed"
    (resumed / "checkpoints").mkdir(parents=True)
    for name in ("hf", "step-00000010"):  # as if killed after the checkpoint at step 10
        subprocess.run(["cp", "-r", str(out / "checkpoints" / name), str(resumed / "checkpoints")], check=True)
    (resumed / "checkpoints" / "step-00000015.partial").mkdir()  # a save the kill interrupted
    done = pretrain(resumed, *RUN20_FLAGS)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stdout and "(step 10," in done.stdout
    again = losses(done.stdout)
    assert sorted(again) == list(range(11, 21))
    assert again == {s: uninterrupted[s] for s in range(11, 21)}
    assert not (resumed / "checkpoints" / "step-00000015.partial").exists()
    # The restart mapped the tokens its first start kept (no tokenizer load, no encoding), and
    # still exports a model with its tokenizer, as the uninterrupted run's.
    assert re.search(r"^startup [\d.]+ s to step 11: imports .*, data [\d.]+, model .*, checkpoint ", done.stdout, re.M)
    from transformers import AutoTokenizer
    assert AutoTokenizer.from_pretrained(resumed / "model").get_vocab() == \
        AutoTokenizer.from_pretrained(out / "model").get_vocab()


def test_a_restarted_continued_pretraining_reads_its_own_checkpoint_not_its_init_from(run20, tmp_path):
    """A restart used to load --init-from's weights (and its config) only to overwrite them with
    its checkpoint's: a whole extra model read per restart (issue 29). Its base model's weights
    gone bad since the first start, the restart still resumes and repeats the uninterrupted losses."""
    import shutil

    out, _ = run20
    base = tmp_path / "base"
    shutil.copytree(out / "model", base)
    flags = ("--init-from", str(base), "--steps", "4", "--checkpoint-every", "2")
    whole = pretrain(tmp_path / "whole", *flags)
    assert whole.returncode == 0, whole.stderr[-3000:]
    cut = tmp_path / "cut"
    (cut / "checkpoints").mkdir(parents=True)
    for name in ("hf", "step-00000002"):
        shutil.copytree(tmp_path / "whole" / "checkpoints" / name, cut / "checkpoints" / name)
    for weights in base.glob("*.safetensors"):
        weights.write_bytes(b"not safetensors")
    done = pretrain(cut, *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "resuming from" in done.stdout and "(step 2," in done.stdout
    assert losses(done.stdout) == {s: losses(whole.stdout)[s] for s in (3, 4)}


def test_bad_flags_name_the_field_the_value_and_what_is_valid(tmp_path):
    with pytest.raises(SpecErrors, match="size: '70b' is not valid; for llama: one of tiny, 1b, 8b"):
        parse_args(["--size", "70b"])
    with pytest.raises(SpecErrors) as raised:
        parse_args(["--init-from", str(tmp_path / "nowhere"), "--lr", "0", "--parallel", "tp"])
    assert [e.field for e in raised.value.errors] == ["lr", "parallel", "init_from"]
    assert "parallel: 'tp' is not valid; one of fsdp, ddp" in str(raised.value)
    done = pretrain(tmp_path, "--global-batch", "0")  # as a user sees it: one line, exit status 1
    assert done.returncode == 1 and "global_batch: 0 is not valid; a whole number of at least 1" in done.stderr
    assert not (tmp_path / "checkpoints").exists()  # nothing half-made


def test_each_rank_gets_its_slice_of_the_same_global_batch():
    batches = data.TokenBatches(np.arange(10_000), seq_len=16, global_batch=8, seed=3)
    whole = batches.batch(7)
    halves = np.concatenate([batches.batch(7, rank, 2) for rank in range(2)])
    assert (whole == halves).all() and whole.shape == (8, 16)
    assert not (batches.batch(8) == whole).all()
    with pytest.raises(Exception, match="global_batch: 8 is not valid; a multiple of the world size 3"):
        batches.batch(7, 0, 3)


def test_corpora_load_from_files_and_jsonl(tmp_path):
    (tmp_path / "a.txt").write_text("plain text")
    (tmp_path / "b.jsonl").write_text('{"text": "one"}\n{"text": "two"}\n')
    assert data.load_texts(str(tmp_path)) == ["plain text", "one", "two"]
    assert len(data.load_texts("stdlib-docstrings")) > 500
    with pytest.raises(Exception, match="data: 'nowhere.txt' is not valid"):
        data.load_texts("nowhere.txt")

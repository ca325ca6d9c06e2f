"""The pretraining recipe's speed switches (--compile, --activation-checkpointing): off by
default, refused when misspelt, and the same training when on (bench/gpu.py measures which is
faster on a GPU)."""

from __future__ import annotations

import pytest

from jupyter_gtc.exceptions import SpecErrors
from jupyter_gtc.recipes.config import parse_args

from .conftest import losses, pretrain


def test_the_switches_are_off_unless_asked_and_a_bad_value_is_refused_naming_it():
    config = parse_args(["--size", "1b"])
    assert (config.compile, config.activation_checkpointing) == ("off", "off")
    with pytest.raises(SpecErrors) as e:
        parse_args(["--compile", "yes", "--activation-checkpointing", "1"])
    text = str(e.value)
    assert "compile" in text and "'yes'" in text and "activation_checkpointing" in text and "on or off" in text


def test_activation_checkpointing_trains_the_same_model(tmp_path, run20):
    # the first 5 steps of the 20-step reference run: same batches and learning rates (warm-up)
    _, reference = run20
    done = pretrain(tmp_path, "--steps", "5", "--activation-checkpointing", "on")
    assert done.returncode == 0, done.stderr[-3000:]
    assert losses(done.stdout) == pytest.approx({s: reference[s] for s in range(1, 6)}, rel=1e-5)

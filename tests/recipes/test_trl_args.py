"""The TrainingArguments the TRL recipes (sft, rl) build must exist in the transformers that
runs them, which on a GPU machine is its image's, not ours."""

from __future__ import annotations

from jupyter_gtc.recipes.trl_job import checkpointing_field


def test_the_trl_recipes_name_activation_checkpointing_as_the_installed_transformers_does():
    assert checkpointing_field() == "activation_checkpointing"  # transformers 5.24+, as here
    # transformers 5.17, as GPU machines' images carry it: TrainingArguments has only the old name
    older = {"output_dir", "bf16", "gradient_checkpointing", "gradient_checkpointing_kwargs", "use_cpu"}
    assert checkpointing_field(older) == "gradient_checkpointing"

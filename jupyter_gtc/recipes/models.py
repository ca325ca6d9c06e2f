"""Model architectures by family and size: transformers' own Llama and Gemma classes,
built from a config with random weights (nothing is downloaded).

The sizes above ``tiny`` follow the published shapes (Llama 3.2 1B, Llama 3.1 8B, Gemma 3
1B and 4B) except the vocabulary, which is our tokenizer's: a model trained here has the
vocabulary it was trained with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..exceptions import SpecError, SpecErrors

# transformers' config fields, per family and size. ``tiny`` trains in seconds on 2 CPU cores.
_LLAMA: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=512, max_position_embeddings=512),
    "1b": dict(hidden_size=2048, num_hidden_layers=16, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=8192, max_position_embeddings=8192, rope_theta=500000.0),
    "8b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
               intermediate_size=14336, max_position_embeddings=8192, rope_theta=500000.0, tie_word_embeddings=False),
}
_GEMMA: dict[str, dict[str, Any]] = {
    "tiny": dict(hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                 intermediate_size=512, max_position_embeddings=512, sliding_window=64),
    "1b": dict(hidden_size=1152, num_hidden_layers=26, num_attention_heads=4, num_key_value_heads=1, head_dim=256,
               intermediate_size=6912, max_position_embeddings=32768, sliding_window=512),
    "4b": dict(hidden_size=2560, num_hidden_layers=34, num_attention_heads=8, num_key_value_heads=4, head_dim=256,
               intermediate_size=10240, max_position_embeddings=32768, sliding_window=1024),
}
FAMILIES: dict[str, dict[str, dict[str, Any]]] = {"llama": _LLAMA, "gemma": _GEMMA}


@dataclass(frozen=True)
class ModelShape:
    """What the throughput and MFU estimates need to know of a model."""
    parameters: int
    layers: int
    hidden: int
    seq_len: int

    def flops_per_token(self) -> float:
        """Training FLOPs per token: 6 per parameter (forward and backward) plus attention's
        12 * layers * hidden * seq_len (the PaLM paper's estimate)."""
        return 6 * self.parameters + 12 * self.layers * self.hidden * self.seq_len


def check_model(family: str, size: str) -> None:
    if family not in FAMILIES:
        raise SpecErrors([SpecError("model", family, f"one of {', '.join(FAMILIES)}")], what="recipe config")
    if size not in FAMILIES[family]:
        raise SpecErrors([SpecError("size", size, f"for {family}: one of {', '.join(FAMILIES[family])}")],
                         what="recipe config")


def model_config(family: str, size: str, vocab_size: int, *, bos_token_id: int | None = None,
                 eos_token_id: int | None = None, pad_token_id: int | None = None):
    """The transformers config of ``family``/``size`` with our tokenizer's vocabulary."""
    check_model(family, size)
    tokens = dict(vocab_size=vocab_size, bos_token_id=bos_token_id, eos_token_id=eos_token_id,
                  pad_token_id=pad_token_id)
    if family == "llama":
        from transformers import LlamaConfig
        return LlamaConfig(**{"tie_word_embeddings": True, **FAMILIES[family][size], **tokens})
    from transformers import Gemma3TextConfig
    return Gemma3TextConfig(**FAMILIES[family][size], **tokens)


def build_model(config):
    """A causal LM with random weights. Gemma's eager attention: transformers refuses sdpa
    for some Gemma versions, and eager is what Google's own recipes use for training."""
    from transformers import AutoModelForCausalLM
    attn = "eager" if config.model_type.startswith("gemma") else "sdpa"
    return AutoModelForCausalLM.from_config(config, attn_implementation=attn)


def apply_speedups(model, *, compile: bool, checkpointing: bool) -> None:
    """Activation checkpointing and torch.compile of each decoder layer, in place and before
    any sharding (torchtitan's order). Per layer, not the whole model: the layers are alike, so
    one compiled graph serves them all, and transformers' code around them stays eager."""
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if compile:
        for layer in model.model.layers:
            layer.compile()


def shape_of(model, seq_len: int) -> ModelShape:
    config = model.config
    return ModelShape(parameters=sum(p.numel() for p in model.parameters()), layers=config.num_hidden_layers,
                      hidden=config.hidden_size, seq_len=seq_len)

"""A tiny causal LM saved as a recipe's model folder is (``save_pretrained``: config,
safetensors, tokenizer), built from a small Llama config in about a second: what the serving
tests deploy. Random weights, fixed seed: generation is greedy, so answers are repeatable."""

from __future__ import annotations

from pathlib import Path

TEXT = ["The try statement specifies exception handlers and cleanup code for a group of statements. " * 4,
        "A function definition defines a user-defined function object. " * 4]


def save_tiny_llama(folder: Path) -> Path:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from jupyter_gtc.recipes.data import train_tokenizer

    torch.manual_seed(0)
    tokenizer = train_tokenizer(TEXT, 300)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def generate_here(folder: Path, prompts: list[str], max_tokens: int) -> list[str]:
    """The same greedy generation in this process, one prompt at a time: what an endpoint must answer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    found = []
    for prompt in prompts:
        batch = tok([prompt], return_tensors="pt")
        with torch.inference_mode():
            out = model.generate(**batch, max_new_tokens=max_tokens, do_sample=False,
                                 pad_token_id=tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id)
        found.append(tok.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True))
    return found

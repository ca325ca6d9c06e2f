"""Text, tokenizer and batches, all without a download.

Corpora are named by a source string:
- ``pydoc-topics``: the Python language reference's topics that ship with Python
  (``pydoc_data.topics``, about 465k characters of technical English);
- ``stdlib-docstrings``: the docstrings of the standard library's modules, read with ``ast``
  (different text, for continued pretraining on "new data");
- a path: a ``.txt``/``.md`` file, a ``.jsonl`` file whose lines have a ``text`` field, or a
  folder of those; or a folder written by ``datasets``' ``save_to_disk`` with a ``text`` column.

The tokenizer is byte-level BPE trained with ``tokenizers`` on the corpus (2 s for 5 MB), so
every byte sequence encodes and no Llama or Gemma tokenizer is needed; it carries the chat
special tokens and template that SFT and RL use. Point ``--tokenizer`` at a local folder to
use another (e.g. a real Llama tokenizer you have on disk).
"""

from __future__ import annotations

import ast
import json
import os
import sysconfig
from pathlib import Path

import numpy as np

from ..exceptions import SpecError, SpecErrors

BUILTIN_CORPORA = ("pydoc-topics", "stdlib-docstrings")
SPECIAL_TOKENS = ["<|pad|>", "<|bos|>", "<|eos|>", "<|system|>", "<|user|>", "<|assistant|>"]
# Each message is <|role|>content<|eos|>; the {% generation %} markers let TRL train on the
# assistant's tokens only.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{% if message['role'] == 'assistant' %}<|assistant|>{% generation %}{{ message['content'] }}<|eos|>{% endgeneration %}"
    "{% else %}<|{{ message['role'] }}|>{{ message['content'] }}<|eos|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def load_texts(source: str) -> list[str]:
    """The documents of a corpus source (see the module's docstring)."""
    if source == "pydoc-topics":
        from pydoc_data.topics import topics
        return [topics[k] for k in sorted(topics)]
    if source == "stdlib-docstrings":
        return _stdlib_docstrings()
    path = Path(source).expanduser()
    if not path.exists():
        raise SpecErrors([SpecError("data", source, f"one of {', '.join(BUILTIN_CORPORA)}, or a path to a .txt, "
                                    ".md or .jsonl file or a folder of them (or a datasets folder)")],
                         what="recipe config")
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "state.json").exists()):
        from datasets import load_from_disk
        return [row["text"] for row in load_from_disk(str(path))]
    files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".md", ".jsonl")) if path.is_dir() else [path]
    texts = []
    for f in files:
        if f.suffix == ".jsonl":
            texts += [json.loads(line)["text"] for line in f.read_text().splitlines() if line.strip()]
        else:
            texts.append(f.read_text())
    if not texts:
        raise SpecErrors([SpecError("data", source, "a folder with at least one .txt, .md or .jsonl file")],
                         what="recipe config")
    return texts


def _stdlib_docstrings() -> list[str]:
    texts = []
    for path in sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc and len(doc) > 200:
                    texts.append(doc)
    return texts


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer trained on ``texts``, as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|bos|>", eos_token="<|eos|>",
                                   pad_token="<|pad|>", chat_template=CHAT_TEMPLATE)


def load_tokenizer(folder: str | Path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(folder))


def encode_corpus(texts: list[str], tokenizer) -> np.ndarray:
    """All documents as one stream of token ids, each document ended by EOS."""
    eos = tokenizer.eos_token_id
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    return np.fromiter((t for doc in ids for t in (*doc, eos)), dtype=np.int64)


class TokenBatches:
    """Batches drawn at random offsets of the token stream, decided by (seed, step) alone.

    The global batch of a step is the same whatever the world size, and each rank takes its
    slice of it: two nodes train on exactly what one node would, and a job resumed from a
    checkpoint at step N sees the batches an uninterrupted run would have seen after N."""

    def __init__(self, tokens: np.ndarray, seq_len: int, global_batch: int, seed: int = 0):
        if len(tokens) <= seq_len + 1:
            raise SpecErrors([SpecError("seq_len", seq_len, f"less than the corpus's {len(tokens)} tokens")],
                             what="recipe config")
        self.tokens, self.seq_len, self.global_batch, self.seed = tokens, seq_len, global_batch, seed

    def batch(self, step: int, rank: int = 0, world_size: int = 1) -> np.ndarray:
        """Rank ``rank``'s rows of step ``step``'s batch: (global_batch / world_size, seq_len)."""
        if self.global_batch % world_size:
            raise SpecErrors([SpecError("global_batch", self.global_batch,
                                        f"a multiple of the world size {world_size}")], what="recipe config")
        rng = np.random.default_rng((self.seed, step))
        starts = rng.integers(0, len(self.tokens) - self.seq_len, size=self.global_batch)
        per_rank = self.global_batch // world_size
        mine = starts[rank * per_rank:(rank + 1) * per_rank]
        return np.stack([self.tokens[s:s + self.seq_len] for s in mine])


def _tokens_file(folder: Path, source: str) -> Path:
    import hashlib
    return Path(folder) / f"tokens-{hashlib.sha256(source.encode()).hexdigest()[:16]}.npy"


def save_tokens(folder: Path, source: str, tokens: np.ndarray) -> None:
    """Keep a run's token stream beside its tokenizer (named by the corpus source), so a restart
    maps it instead of loading the tokenizer and encoding the corpus again: the largest part of
    a restart's ``data`` seconds (issue 29). Written whole, then renamed: never read half-made.
    Created 0600 from the start."""
    final = _tokens_file(folder, source)
    partial = final.with_name(final.name + ".partial")
    with os.fdopen(os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        np.save(f, tokens)
    os.replace(partial, final)


def cached_tokens(folder: Path, source: str) -> np.ndarray | None:
    """The token stream ``save_tokens`` kept for ``source``, memory-mapped; None if there is none."""
    path = _tokens_file(folder, source)
    return np.load(path, mmap_mode="r") if path.exists() else None

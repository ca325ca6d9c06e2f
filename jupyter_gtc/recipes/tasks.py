"""Generated tasks for SFT and RL, deterministic from a seed, with nothing to download.

- `instructions`: conversations ``{"messages": [user, assistant]}`` for SFT: arithmetic
  ("What is 17 + 25?" -> "42"), reversing a word, upper-casing a word;
- `preferences`: ``{"prompt", "chosen", "rejected"}`` pairs for DPO, the chosen answer right
  and the rejected one wrong;
- `arithmetic_prompts`: ``{"prompt", "answer"}`` rows for GRPO, scored by `arithmetic_reward`.

Each is also what a user's own ``--data`` must hold: a ``.jsonl`` file of such rows or a
folder written by ``datasets``' ``save_to_disk`` (see `load_rows`).

The numbers are small (0 to ``max_operand``) on purpose: a tiny model can learn them in a
few hundred steps, so a CI run shows the loss fall and the reward rise.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path
from typing import Any

from ..exceptions import SpecError, SpecErrors

# Short, common words: most are a single BPE token before reversal and a few after, so the
# reversal task is learnable but not free.
WORDS = ("apple", "river", "stone", "cloud", "green", "house", "light", "music", "paper", "table",
         "water", "bread", "chair", "dream", "earth", "flame", "grape", "heart", "lemon", "mouse",
         "night", "ocean", "piano", "queen", "smile", "tiger", "train", "voice", "whale", "zebra",
         "cat", "dog", "sun", "moon", "tree", "fish", "bird", "book", "door", "king")

# The columns a user's --data must have, per kind of recipe.
COLUMNS = {"sft": ("messages",), "dpo": ("prompt", "chosen", "rejected"), "grpo": ("prompt", "answer")}
_EXAMPLES = {"sft": '{"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}',
             "dpo": '{"prompt": "...", "chosen": "...", "rejected": "..."}',
             "grpo": '{"prompt": "What is 2 + 3?", "answer": "5"}'}


def _user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _arithmetic(rng: random.Random, max_operand: int) -> tuple[str, str]:
    a, b = rng.randint(0, max_operand), rng.randint(0, max_operand)
    if rng.random() < 0.5:
        return f"What is {a} + {b}?", str(a + b)
    a, b = max(a, b), min(a, b)  # no negative answers: one less thing for a tiny model to learn
    return f"What is {a} - {b}?", str(a - b)


def _question(rng: random.Random, max_operand: int) -> tuple[str, str, str]:
    """(task, question, answer) of a random task."""
    task = rng.choice(("arithmetic", "arithmetic", "reverse", "upper"))
    if task == "arithmetic":
        return (task, *_arithmetic(rng, max_operand))
    word = rng.choice(WORDS)
    if task == "reverse":
        return task, f"Reverse the word {word}.", word[::-1]
    return task, f"Write {word} in capital letters.", word.upper()


def _wrong(rng: random.Random, task: str, answer: str) -> str:
    """A plausible wrong answer: near miss for numbers, the untransformed word otherwise."""
    if task == "arithmetic":
        return str(int(answer) + rng.choice((-3, -2, -1, 1, 2, 3)))
    if task == "reverse":
        return answer[::-1]  # the word itself
    return answer.lower()


def instructions(n: int, seed: int = 0, max_operand: int = 20) -> list[dict[str, Any]]:
    """``n`` SFT conversations: a user question and the assistant's answer."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        _, question, answer = _question(rng, max_operand)
        rows.append({"messages": _user(question) + _assistant(answer)})
    return rows


def preferences(n: int, seed: int = 0, max_operand: int = 20) -> list[dict[str, Any]]:
    """``n`` DPO pairs in TRL's conversational form: the chosen answer is right, the rejected wrong."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        task, question, answer = _question(rng, max_operand)
        rows.append({"prompt": _user(question), "chosen": _assistant(answer),
                     "rejected": _assistant(_wrong(rng, task, answer))})
    return rows


def arithmetic_prompts(n: int, seed: int = 0, max_operand: int = 20) -> list[dict[str, Any]]:
    """``n`` GRPO prompts with their answers (the reward function's ``answer`` column)."""
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        question, answer = _arithmetic(rng, max_operand)
        rows.append({"prompt": _user(question), "answer": answer})
    return rows


_NUMBER = re.compile(r"-?\d+")
# A number, even a wrong one, earns this much: the shaping that gets a model which answers in
# words onto the format whose correctness the main reward then judges.
FORMAT_CREDIT = 0.1


def _text(completion: Any) -> str:
    """A completion's text: TRL passes a string, or a list of messages for a chat prompt."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content", "") for m in completion)


def score(text: str, answer: str) -> float:
    """1.0 when ``text``'s first number is ``answer``, `FORMAT_CREDIT` for another number,
    0.0 without one. A non-numeric answer must match the stripped text exactly."""
    answer = str(answer).strip()
    if not _NUMBER.fullmatch(answer):
        return 1.0 if text.strip() == answer else 0.0
    found = _NUMBER.search(text)
    if found is None:
        return 0.0
    return 1.0 if int(found.group()) == int(answer) else FORMAT_CREDIT


def arithmetic_reward(completions: list[Any], answer: list[str], **_: Any) -> list[float]:
    """GRPO reward function (TRL's signature: the dataset's other columns arrive as keyword lists)."""
    return [score(_text(c), a) for c, a in zip(completions, answer)]


def generated(kind: str, n: int, seed: int = 0, max_operand: int = 20) -> list[dict[str, Any]]:
    """The generated rows for a recipe kind: ``sft``, ``dpo`` or ``grpo``."""
    return {"sft": instructions, "dpo": preferences, "grpo": arithmetic_prompts}[kind](n, seed, max_operand)


def load_rows(path: str | Path, kind: str, flag: str = "--data") -> list[dict[str, Any]]:
    """A user's rows for ``kind``, from a ``.jsonl`` file or a ``save_to_disk`` folder.

    Plain-string prompts and answers become one user or assistant message, so that they go
    through the model's chat template as the generated tasks do: a chat model fed a raw
    string without its role tokens answers poorly."""
    source = Path(path).expanduser()
    expected = f"a .jsonl file of {_EXAMPLES[kind]} lines, or a datasets save_to_disk folder"
    if source.is_dir() and any((source / f).exists() for f in ("dataset_info.json", "state.json",
                                                                "dataset_dict.json")):
        from datasets import load_from_disk
        loaded = load_from_disk(str(source))
        if "dataset_dict.json" in os.listdir(source):  # several splits: train on "train"
            if "train" not in loaded:
                raise SpecErrors([SpecError(flag, str(path), f"{expected}; this one has no train split, only "
                                            f"{', '.join(loaded)}")], what="recipe arguments")
            loaded = loaded["train"]
        rows = [dict(r) for r in loaded]
    elif source.is_file() and source.suffix == ".jsonl":
        rows = []
        for number, line in enumerate(source.read_text().splitlines(), 1):
            try:
                rows += [json.loads(line)] if line.strip() else []
            except json.JSONDecodeError as e:
                raise SpecErrors([SpecError(flag, str(path), f"{expected}; line {number} is not JSON ({e.msg})")],
                                 what="recipe arguments") from None
    else:
        raise SpecErrors([SpecError(flag, str(path), expected)], what="recipe arguments")
    missing = [c for c in COLUMNS[kind] if not rows or c not in rows[0]]
    if missing:
        raise SpecErrors([SpecError(flag, str(path), f"{expected}; missing column(s) {', '.join(missing)}"
                                    + (" (the file is empty)" if not rows else ""))], what="recipe arguments")
    return [_as_chat(row) for row in rows]


def _as_chat(row: dict[str, Any]) -> dict[str, Any]:
    row = dict(row)
    if isinstance(row.get("prompt"), str):
        row["prompt"] = _user(row["prompt"])
    for key in ("chosen", "rejected"):
        if isinstance(row.get(key), str):
            row[key] = _assistant(row[key])
    if "answer" in row:
        row["answer"] = str(row["answer"])
    return row

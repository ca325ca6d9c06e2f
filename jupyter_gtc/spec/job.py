"""A job as an sbatch script: its ``#SBATCH`` lines are its spec, and options given with it
(a magic's or the CLI's) win over them, exactly as on sbatch's own command line.

We read only the few options we record (name, array); everything else goes to sbatch
untouched, so an option sbatch does not know gets sbatch's own error message.
"""

from __future__ import annotations

import re
import shlex

from ..exceptions import SpecError

# Short options whose long name we need to recognise.
_SHORT = {"-J": "job-name", "-a": "array", "-D": "chdir", "-o": "output", "-p": "partition",
          "-N": "nodes", "-G": "gpus", "-d": "dependency", "-t": "time", "-e": "error", "-n": "ntasks"}
_SAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def sbatch_directives(script: str) -> list[str]:
    """The options in a script's ``#SBATCH`` lines, read as sbatch reads them: from the top,
    skipping blank lines and comments, up to the first command."""
    options: list[str] = []
    for number, line in enumerate(script.splitlines(), 1):
        stripped = line.strip()
        if stripped.startswith("#SBATCH"):
            text = stripped[len("#SBATCH"):].split(" #", 1)[0]
            try:
                options += shlex.split(text)
            except ValueError as e:
                raise SpecError(f"script line {number}", line, f"an #SBATCH line must be valid options ({e})") from None
        elif stripped and not stripped.startswith("#"):
            break
    return options


# What a requeued job writes first, below the earlier attempts' output (shell text: the
# restart count is Slurm's SLURM_RESTART_COUNT, set from the second attempt on).
ATTEMPT_NOTE = ("--- jupyter_gtc: attempt $((SLURM_RESTART_COUNT + 1)) (requeued); "
                "the earlier attempts' output is above ---")
# Set to 1 in the environment of a job we submitted whose output a requeued attempt appends to
# (--open-mode=append): only such a job gets ATTEMPT_NOTE. Slurm truncates any other job's
# output, where the note would be false. The TaskProlog drops it from the task's environment,
# so an sbatch run inside the job does not hand it on.
APPENDED_OUTPUT_ENV = "GTC_OUTPUT_APPENDED"
# A job's hang timeout travels in its Slurm comment, where the cluster's supervisor reads it.
HANG_COMMENT = "gtc-hang-timeout="


def hang_timeout(comment: str) -> float | None:
    """The hang timeout (seconds) a job's comment carries, or None."""
    for word in comment.split():
        if word.startswith(HANG_COMMENT):
            try:
                return float(word[len(HANG_COMMENT):])
            except ValueError:
                return None
    return None


_SHELL = re.compile(r"#!\s*\S*?(?:/env\s+)?\S*?\b(?:ba|da|k|z)?sh\b")


def is_shell_script(script: str) -> bool:
    """Whether ``script`` runs in a POSIX shell (its ``#!`` names sh, bash, ...), so that shell
    lines may be added to it; a Python or other script is left as it is."""
    return bool(_SHELL.match(script.split("\n", 1)[0]))


def insert_after_header(script: str, lines: list[str]) -> str:
    """``script`` with ``lines`` inserted after its shebang and leading comments (where
    sbatch reads ``#SBATCH`` lines), before its first command."""
    body = script.splitlines(keepends=True)
    at = 0
    while at < len(body) and (not body[at].strip() or body[at].lstrip().startswith("#")):
        at += 1
    if at and not body[at - 1].endswith("\n"):
        body[at - 1] += "\n"
    return "".join(body[:at] + [line + "\n" for line in lines] + body[at:])


def parse_options(tokens: list[str]) -> list[tuple[str, str | None]]:
    """``["--nodes", "2", "-J", "x", "--requeue"]`` -> [("nodes", "2"), ("job-name", "x"), ("requeue", None)].

    An option's value is the next token unless that starts with '-' (sbatch's options with
    an optional value always take it after '=')."""
    pairs: list[tuple[str, str | None]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not token.startswith("-") or token == "-":
            raise SpecError("options", token, "each sbatch option starts with '-' or '--' (e.g. --nodes=2)")
        if token.startswith("--"):
            key, eq, value = token[2:].partition("=")
        elif len(token) > 2:  # -J name written as -Jname
            key, eq, value = _SHORT.get(token[:2], token[1:2]), "=", token[2:]
        else:
            key, eq, value = _SHORT.get(token, token[1:]), "", ""
        if not eq and i + 1 < len(tokens) and not tokens[i + 1].startswith("-"):
            value, eq = tokens[i + 1], "="
            i += 1
        pairs.append((key, value if eq else None))
        i += 1
    return pairs


def option(pairs: list[tuple[str, str | None]], key: str) -> str | None:
    """The value of the last ``key`` among ``pairs`` (the last one wins, as in sbatch)."""
    found = None
    for k, v in pairs:
        if k == key:
            found = v
    return found


def safe_name(name: str) -> str:
    """A job name made fit for a folder name (the job keeps its real name in Slurm)."""
    return _SAFE_NAME.sub("_", name).strip("._")[:60] or "job"

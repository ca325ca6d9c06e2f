"""pyxis's ``--container-*`` flags, as GPU-cluster users write them to sbatch and srun
(``--container-image IMAGE --container-mounts SRC:DST[:ro],.. --container-workdir D
--container-env NAME,..``), read from a job's options and its ``#SBATCH`` lines. Pure.

A cluster whose srun has pyxis gets them as they are. Elsewhere they are taken out of what
sbatch sees (sbatch would refuse them) and the job's backend runs its steps in the image."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from ..exceptions import SpecError
from .argv import Mount, parse_mounts

# The flags run here (each takes a value); pyxis's others are refused by name, not dropped.
TAKEN = ("container-image", "container-mounts", "container-workdir", "container-env")
NOT_RUN = ("container-name", "container-save", "container-mount-home", "no-container-mount-home",
           "container-remap-root", "no-container-remap-root", "container-entrypoint", "no-container-entrypoint",
           "container-writable", "container-readonly", "container-entrypoint-log")
_BOOLEAN = frozenset(n for n in NOT_RUN if n not in ("container-name", "container-save"))
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class ContainerRequest:
    image: str                        # as given (a registry's name, docker-archive:, oci:, a .tar path made absolute)
    mounts: tuple[Mount, ...] = ()
    workdir: str | None = None
    env_names: tuple[str, ...] = ()   # variables whose job value wins over the image's (pyxis's --container-env)
    flags: tuple[str, ...] = field(default=(), compare=False)  # the words as given, for a cluster with pyxis


def _flag(word: str) -> tuple[str, str | None] | None:
    """``--container-x=V`` -> (container-x, V); ``--container-x`` -> (container-x, None)."""
    if not word.startswith("--") or "container-" not in word:
        return None
    name, eq, value = word[2:].partition("=")
    if name in TAKEN or name in NOT_RUN:
        return name, value if eq else None
    return None


def split(words: list[str]) -> tuple[dict[str, str], list[str], list[str]]:
    """``words`` (options) -> (the container flags' last values, the words without them, the
    container words as given). A flag without its value is an error naming it."""
    values: dict[str, str] = {}
    rest: list[str] = []
    taken: list[str] = []
    i = 0
    while i < len(words):
        found = _flag(words[i])
        if found is None:
            rest.append(words[i])
            i += 1
            continue
        name, value = found
        if name in _BOOLEAN:
            values[name] = ""
            taken.append(words[i])
            i += 1
            continue
        if value is None:
            if i + 1 >= len(words):
                raise SpecError(f"--{name}", "", "a value after it")
            value = words[i + 1]
            taken += words[i:i + 2]
            i += 2
        else:
            taken.append(words[i])
            i += 1
        values[name] = value
    return values, rest, taken


def request(script_words: list[str], options: list[str], submit_dir: str | None = None) -> ContainerRequest | None:
    """The job's container, from its ``#SBATCH`` lines' words and then its options (the last
    value wins, as in sbatch), or None when it asks for none. Mounts and env names are checked
    here, with the field named; a relative image path is the submit folder's."""
    values, _, taken_script = split(script_words)
    more, _, taken_options = split(options)
    values.update(more)
    if not values:
        return None
    if "container-image" not in values:
        given = ", ".join(f"--{n}" for n in values)
        raise SpecError(given.split(",")[0], values[next(iter(values))],
                        "--container-image IMAGE with it (the other --container-* flags need an image)")
    image = values["container-image"].strip()
    if not image:
        raise SpecError("--container-image", image, "an image: a registry's name (docker://python:3.11), "
                                                    "docker-archive:PATH, oci:DIR[:TAG] or a .tar archive")
    image = image.removeprefix("docker://")
    if image.startswith(("./", "../")) and submit_dir:
        image = os.path.normpath(os.path.join(submit_dir, image))
    mounts = tuple(parse_mounts(values.get("container-mounts", "")))
    workdir = values.get("container-workdir")
    if workdir is not None and not workdir.startswith("/"):
        raise SpecError("--container-workdir", workdir, "an absolute folder inside the container")
    names = tuple(n.strip() for n in values.get("container-env", "").split(",") if n.strip())
    for name in names:
        if not _ENV_NAME.match(name):
            raise SpecError("--container-env", name, "environment variable names, comma separated")
    return ContainerRequest(image, mounts, workdir, names, tuple(taken_script + taken_options))


def not_run(req_words: list[str]) -> list[str]:
    """pyxis flags among ``req_words`` that a cluster without pyxis does not run."""
    return [f"--{n}" for n in split(req_words)[0] if n in NOT_RUN]


def strip_script(script: str) -> str:
    """``script`` without the container flags of its ``#SBATCH`` lines (sbatch without pyxis
    refuses them); a line left with no option goes, so the lines' numbering shifts only there."""
    out = []
    in_header = True
    for line in script.splitlines(keepends=True):
        stripped = line.strip()
        if in_header and stripped.startswith("#SBATCH"):
            text, hash_, comment = stripped[len("#SBATCH"):].partition(" #")
            words = shlex.split(text)
            _, rest, taken = split(words)
            if taken:
                if not rest:
                    continue
                line = "#SBATCH " + " ".join(shlex.quote(w) for w in rest) + (f" #{comment}" if hash_ else "") + "\n"
        elif in_header and stripped and not stripped.startswith("#"):
            in_header = False
        out.append(line)
    return "".join(out)

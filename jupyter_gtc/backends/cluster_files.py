"""What a local cluster writes into its folder, each file its user's alone from its creation:
the folder itself, munge's key, the nodes' startup scripts and the prolog/epilog chains, and
where a node's set-up writes its log and its exit code. A file is made with its final mode
(``os.open`` with the mode, ``O_EXCL``), never chmod'ed afterwards: a chmod leaves a moment when
others may read it (another user read a munge key ~100,000 times in 5 s that way)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..exceptions import ClusterStartError
from ..slurm.render import render_script_chain
from ..spec.cluster import ClusterSpec, NodePool


def startup_script(etc: Path, pool: NodePool) -> Path:
    return etc / "startup" / f"{pool.id}.sh"

def startup_log(root: Path, node: str) -> Path:
    return root / "log" / f"startup-{node}.log"

def init_status(root: Path, node: str) -> Path:
    """Where node_init.sh writes how the node's set-up ended (its startup script's exit code)."""
    return root / "run" / f"init-{node}.status"

def exit_code(status: Path) -> int:
    try:
        return int(status.read_text().strip())
    except (OSError, ValueError):
        return 1

def write_startup_scripts(etc: Path, spec: ClusterSpec) -> None:
    """Each compute pool's startup script as ``etc/startup/<pool>.sh`` (none where it has none).
    Replaced, never rewritten in place: a node may be running the previous one."""
    folder = etc / "startup"
    folder.mkdir(exist_ok=True)
    wanted = {}
    for pool in spec.compute_pools():
        if pool.startup_script:
            body = pool.startup_script
            wanted[startup_script(etc, pool)] = body if body.startswith("#!") else "#!/bin/bash\n" + body
    for path in folder.glob("*.sh"):
        if path not in wanted:
            path.unlink()
    for path, body in wanted.items():
        write_script(path, body)

def write_chain(etc: Path, kind: str, scripts: list[str]) -> bool:
    """Write the spec's prolog (or epilog) scripts and the chain that runs them; False if none."""
    folder = etc / f"{kind}.d"
    shutil.rmtree(folder, ignore_errors=True)
    if not scripts:
        (etc / f"{kind}.sh").unlink(missing_ok=True)
        return False
    folder.mkdir(parents=True)
    paths = []
    for i, body in enumerate(scripts):
        path = folder / f"{i:02d}.sh"
        write_script(path, body if body.startswith("#!") else "#!/bin/bash\n" + body)
        paths.append(path)
    write_script(etc / f"{kind}.sh", render_script_chain(paths))
    return True

def make_private_dir(root: Path) -> None:
    """The cluster's folder, for its user alone from the moment it exists (0700: never a
    chmod afterwards, which would leave a moment when others may enter). Every daemon runs as
    that user; a normal user's munged accepts private folders above its socket (--force)."""
    root.parent.mkdir(parents=True, exist_ok=True)
    try:
        root.mkdir(mode=0o700)
    except FileExistsError:
        raise ClusterStartError(f"{root} is still there after removing what an earlier create left; "
                                "remove it and create the cluster again") from None

def write_munge_key(root: Path) -> None:
    """128 random bytes, readable by the cluster's user alone from the file's creation on: with
    the key anyone forges munge credentials for any uid (root's, on a root cluster).
    ``O_EXCL``: never a file that was there (a link someone put in the way); mode 0400, which no
    umask widens."""
    folder = root / "munge"
    folder.mkdir(mode=0o700)
    fd = os.open(folder / "munge.key", os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o400)
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(128))

def write_script(path: Path, text: str) -> None:
    """An executable for the cluster's user alone (0700 from its creation: the spec's scripts
    may hold secrets), replaced whole, never rewritten in place: a node may be running the
    previous one."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.unlink(missing_ok=True)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o700)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)

def atomic_write(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)

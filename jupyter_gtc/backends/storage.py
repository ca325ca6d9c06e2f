"""Shared storage of a local cluster: the spec's Filestore and Lustre instances and its home
directory storage, as folders under the cluster's folder mounted on every node.

Each instance (by its name: ``projects/P/locations/Z/instances/I``) is one folder,
``<root>/storage/<I>-<hash>``; node_init.sh bind-mounts it at its mount path in the node's
private mount namespace, the way it mounts the node's /etc/hosts. Every node of a pool sees
the same folder, so a file one node writes is there for the others, as on a real shared file
system. The machine's own mount table is never touched, in either network mode: each slurmd
has a mount namespace of its own with ``host`` too (a normal user's inside a user namespace;
where the kernel allows none, the local backend refuses storage to a normal user).

A bind mount needs a folder to mount on. One that does not exist on this machine (``/mnt/data``)
is made, recorded in the cluster's runtime, and removed again when the cluster is deleted if
it is empty and no process on the machine still has something mounted there.

The folders are the cluster's: deleting the cluster deletes them (a real Filestore outlives
its cluster; copy out what you keep).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..exceptions import ClusterStartError, SpecError
from ..spec.cluster import ClusterSpec, NodePool
from . import owned

HOME_FIELD = "orchestrator_spec.slurm_spec.home_directory_storage"
# Folders no mount may cover (or sit in, for the kernel's own): the nodes' programs, libraries,
# configuration, devices and Slurm's runtime files live there.
SYSTEM_FOLDERS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run", "/sbin",
                  "/sys", "/tmp", "/usr", "/var")
VIRTUAL_FOLDERS = ("/dev", "/proc", "/run", "/sys")


@dataclass(frozen=True)
class Mount:
    """One storage instance mounted on a node."""

    instance: str  # the spec's name for it
    folder: Path   # where its files are on this machine
    path: str      # where a node sees them
    field: str     # the spec field that asked for it (node_pools[0].filestores[1], ...)


def pool_mounts(spec: ClusterSpec, pool: NodePool, root: Path) -> list[Mount]:
    """What each node of ``pool`` mounts: the home storage at /home, then the pool's
    filestores and lustres (at ``/mnt/filestore/<I>`` and ``/mnt/lustre/<I>`` when the spec
    gives no mount path)."""
    i = spec.node_pools.index(pool)
    mounts = []
    home = spec.slurm.home_directory_storage
    if home:
        mounts.append(Mount(home, folder(root, home), "/home", HOME_FIELD))
    for kind, items in (("filestore", pool.filestores), ("lustre", pool.lustres)):
        for j, item in enumerate(items):
            name = getattr(item, kind)
            mounts.append(Mount(name, folder(root, name), item.mount_path or f"/mnt/{kind}/{_short_name(name)}",
                                f"node_pools[{i}].{kind}s[{j}]"))
    return mounts


def folder(root: Path, instance: str) -> Path:
    return root / "storage" / f"{_short_name(instance)}-{hashlib.sha1(instance.encode()).hexdigest()[:6]}"


def check(spec: ClusterSpec, protected: list[Path]) -> list[SpecError]:
    """Mount paths the local backend cannot honour without breaking its nodes: over a system
    folder, GTC_HOME or this Python, or inside another mount of the same node."""
    errors = []
    for pool in spec.compute_pools():
        mounts = pool_mounts(spec, pool, Path("/"))
        for m in mounts:
            where = f"{m.field}.mount_path" if m.field != HOME_FIELD else m.field
            hidden = next((str(p) for p in [*map(Path, SYSTEM_FOLDERS), *protected] if _covers(m.path, p)), None)
            inside = next((str(p) for p in protected if _covers(str(p), Path(m.path))), None)
            if hidden or inside or any(_covers(v, Path(m.path)) for v in VIRTUAL_FOLDERS):
                what = (f"it would hide {hidden} on the nodes" if hidden else
                        f"it is inside {inside}, which the nodes need as it is" if inside else
                        "that is a kernel file system")
                errors.append(SpecError(where, m.path, f"{what}; choose another mount path (e.g. /mnt/data)"))
                continue
            for other in mounts:
                if other is m:
                    continue
                if other.path == m.path and mounts.index(other) < mounts.index(m):
                    errors.append(SpecError(where, m.path, f"{other.field} is mounted there already on pool "
                                                           f"{pool.id}; give it a mount path of its own"))
                elif other.path != m.path and _covers(other.path, Path(m.path)):
                    errors.append(SpecError(where, m.path, f"it is inside {other.path}, where {other.field} is "
                                                           "mounted; mount paths of a node must not nest"))
    unique = {(e.field, str(e)): e for e in errors}  # the home storage is checked once per pool
    return list(unique.values())


def check_makeable(spec: ClusterSpec) -> list[SpecError]:
    """Mount paths missing on this machine that this process cannot make (a normal user's
    cluster: ``/mnt`` is root's). Checked before anything starts, not found out by ``prepare``."""
    errors = []
    for pool in spec.compute_pools():
        for m in pool_mounts(spec, pool, Path("/")):
            path = Path(m.path)
            while not path.exists() and not path.is_symlink():
                path = path.parent
            if path != Path(m.path) and not os.access(path, os.W_OK | os.X_OK):
                where = f"{m.field}.mount_path" if m.field != HOME_FIELD else m.field
                errors.append(SpecError(where, m.path, f"the folder does not exist and this user cannot make it "
                                        f"({path} is not writable by uid {os.geteuid()}); make it once as root "
                                        f"(mkdir -p {m.path}), or choose a mount path under a folder you own"))
    return list({(e.field, str(e)): e for e in errors}.values())


def prepare(spec: ClusterSpec, root: Path, runtime: dict[str, Any]) -> None:
    """Make every storage folder, and every mount path missing on this machine (recorded in
    ``runtime["made_dirs"]`` first, so a delete removes them even after a crash)."""
    made = runtime.setdefault("made_dirs", [])
    for pool in spec.compute_pools():
        for m in pool_mounts(spec, pool, root):
            m.folder.mkdir(parents=True, exist_ok=True)
            missing = []
            path = Path(m.path)
            while not path.exists() and not path.is_symlink():
                missing.append(path)
                path = path.parent
            try:
                for path in reversed(missing):
                    if str(path) not in made:
                        made.append(str(path))
                    path.mkdir()
            except OSError as e:
                raise ClusterStartError(f"cannot make the mount path {path} of {m.field} on this machine: "
                                        f"{e.strerror}") from None
            if not Path(m.path).is_dir():
                raise ClusterStartError(f"the mount path {m.path} of {m.field} is not a folder on this machine; "
                                        "choose another mount path")


def remove_made_dirs(runtime: dict[str, Any], uid: int, settle: float = 2.0) -> None:
    """Remove the mount paths ``prepare`` made, deepest first, where each is empty and no
    mount namespace on the machine (another cluster's node) has something mounted there.
    A namespace of the cluster's own nodes may outlive their daemons by a moment: a path
    still mounted somewhere is looked at again for up to ``settle`` seconds. Only folders of
    ``uid``, the cluster's user, who made them: root deleting a normal user's cluster reads
    the list from that user's record (and each is removed through a dir fd of its parent,
    reached through no link that user made: owned.py)."""
    made = [p for p in runtime.get("made_dirs") or [] if _dir_of(p, uid)]
    deadline = time.monotonic() + settle
    in_use = mount_points() & set(made)
    while in_use and time.monotonic() < deadline:
        time.sleep(0.1)
        in_use = mount_points() & set(made)
    for path in sorted(made, key=lambda p: p.count("/"), reverse=True):
        if path not in in_use:
            _rmdir_of(path, uid)


def _dir_of(path: str, uid: int) -> bool:
    """Whether ``path`` is a folder (not a link to one) that ``uid`` owns."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == uid


def _rmdir_of(path: str, uid: int) -> None:
    """Remove the empty folder ``path`` where ``uid`` owns it, through a dir fd of its parent
    (no link of another user's followed on the way, owned.py), looked at through an fd of its
    own (``O_NOFOLLOW``): a check by path, then a removal by path, let the user swap a parent
    for a link between the two."""
    parent_path, name = os.path.split(os.path.abspath(path))
    try:
        parent = owned.open_folder(parent_path)
    except OSError:
        return
    try:
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent)
        try:
            if os.fstat(fd).st_uid != uid:
                return
        finally:
            os.close(fd)
        os.rmdir(name, dir_fd=parent)
    except OSError:
        pass  # not empty, or gone, or not a folder: what is left there is not ours to remove
    finally:
        os.close(parent)


def mount_points() -> set[str]:
    """Every mount point of every mount namespace on this machine."""
    found: set[str] = set()
    seen: set[str] = set()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ns = os.readlink(f"/proc/{pid}/ns/mnt")
            if ns in seen:
                continue
            seen.add(ns)
            with open(f"/proc/{pid}/mountinfo") as f:
                for line in f:
                    found.add(_unescape(line.split()[4]))
        except (OSError, IndexError):
            continue  # the process ended meanwhile
    return found


def describe(spec: ClusterSpec, root: Path) -> str | None:
    """``PATH <- FOLDER`` for each mount, as `gtc cluster describe` shows it; None if none."""
    pairs = dict.fromkeys(f"{m.path} <- {m.folder}" for pool in spec.compute_pools()
                          for m in pool_mounts(spec, pool, root))
    return "; ".join(pairs) or None


def protected_paths(home: Path) -> list[Path]:
    """What no mount may hide besides the system folders: GTC_HOME, this Python and this package."""
    return [Path(home).resolve(), Path(sys.prefix).resolve(), Path(__file__).resolve().parent.parent]


def _covers(mount_path: str, path: Path) -> bool:
    """Whether a mount at ``mount_path`` is ``path`` or one of its parents."""
    mount = Path(mount_path)
    return path == mount or mount in path.parents


def _short_name(instance: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", instance.rstrip("/").rsplit("/", 1)[-1]).strip(".") or "storage"


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)

"""Where the accounting database (accounting.py) keeps its files: in RAM, a private folder in
``/dev/shm``, where the machine has room for it; on disk beside the rest of the accounting
otherwise.

Why RAM: MariaDB makes Slurm's tables (31 for a cluster) one DDL at a time, and each DDL
syncs its files to disk: strace counted ~790 fdatasync calls in one create with accounting
(424 of the DDL recovery log, 182 of the tables' files, 80 of the redo log), most of that
create's time on this machine's disk (bench/bringup_defaults.py). Nothing is lost by keeping
the files in RAM: a cluster's database is dropped when the cluster is deleted, and a local
cluster does not outlive a restart of the machine (README, Limits). It costs ~25 MB of RAM
while a cluster of the GTC_HOME keeps accounting, given back when the last one is deleted.

    <accounting>/db-template/   a new database, made once by mariadb-install-db (~1 s); each
                                start copies it (tens of ms) instead of installing again
    <accounting>/db             the database MariaDB runs on: a link to
                                /dev/shm/gtc-accounting-XXXXXXXX (mkdtemp: 0700 from the start,
                                a name nobody can take first), or a folder on disk

A link is followed only to a folder of this user's, 0700, directly in /dev/shm: the names show
in /dev/shm's listing, so after a restart of the machine another user could have made one of
that name for us to run a database of theirs on.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path

RAM = Path("/dev/shm")
PREFIX = "gtc-accounting-"
# What a database of a few clusters needs (~25 MB) and then some: a /dev/shm smaller than
# this (a container's default is 64 MB) is left to the programs that count on it.
RAM_NEEDED = 256 << 20


def prepare(folder: Path, install: Callable[[Path], None]) -> str:
    """Make ``folder``/db a database MariaDB can start on, where none is: copied from the
    template (made first with ``install(path)`` where there is none), into RAM where there is
    room. Returns where the database's files are: "memory" or "disk"."""
    db = folder / "db"
    if db.is_symlink():
        target = _ram_folder_of(db)
        if target is not None and (target / "mysql").is_dir():
            return "memory"  # MariaDB stopped (or died) with the machine up: its files are there
        release(folder)  # the machine restarted (gone), or a folder we must not use (left alone)
    elif (db / "mysql").is_dir():
        return "disk"
    shutil.rmtree(db, ignore_errors=True)  # a half-made one, from a start that died
    template = folder / "db-template"
    if not (template / "mysql").is_dir():
        shutil.rmtree(template, ignore_errors=True)
        template.mkdir(mode=0o700)
        install(template)
    ram = _new_ram_folder()
    if ram is None:
        db.mkdir(mode=0o700)
        shutil.copytree(template, db, symlinks=True, dirs_exist_ok=True)
        return "disk"
    try:
        shutil.copytree(template, ram, symlinks=True, dirs_exist_ok=True)
        db.symlink_to(ram)
    except BaseException:
        shutil.rmtree(ram, ignore_errors=True)
        raise
    return "memory"


def release(folder: Path) -> None:
    """Give back what the (stopped) database's files take: its folder in RAM and the link to
    it, or its folder on disk (the next start copies the template again). A link to a folder
    that is not ours goes alone."""
    db = folder / "db"
    if db.is_symlink():
        target = _ram_folder_of(db)
        db.unlink()
        if target is not None:
            shutil.rmtree(target, ignore_errors=True)
    else:
        shutil.rmtree(db, ignore_errors=True)


def _ram_folder_of(link: Path) -> Path | None:
    """The folder ``link`` points to, where it is one we made (module doc); else None."""
    target = Path(os.readlink(link))
    if target.parent != RAM or not target.name.startswith(PREFIX):
        return None
    try:
        found = os.lstat(target)
    except OSError:
        return None
    ours = stat.S_ISDIR(found.st_mode) and found.st_uid == os.geteuid() and stat.S_IMODE(found.st_mode) == 0o700
    return target if ours else None


def _new_ram_folder() -> Path | None:
    """A new private folder in RAM, or None where there is no room (or no /dev/shm)."""
    try:
        if shutil.disk_usage(RAM).free < RAM_NEEDED:
            return None
        return Path(tempfile.mkdtemp(prefix=PREFIX, dir=RAM))
    except OSError:
        return None

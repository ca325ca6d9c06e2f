"""Folders reached without following a link another user could have made.

Root deletes a normal user's cluster from that user's GTC_HOME, where that user may put a
link anywhere (``run/`` -> ``/root/.ssh``), and swap a folder for a link between a check
and its use. So root opens each folder one name at a time from ``/``, each relative to the
folder above (a dir fd), with ``O_NOFOLLOW``, and works through the fd it ends with: what
the fd names stays the folder it checked whatever is renamed afterwards. A link is followed
only where it is root's own in a folder of root's that nobody else may change (``/var/run``,
or a ``clusters/`` root linked elsewhere itself).

A normal user's process goes through any link: it can harm only what that user may change.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

FOLDER = os.O_RDONLY | os.O_DIRECTORY


def open_folder(path: Path | str) -> int:
    """An fd of the folder ``path`` (close it), reached as the module's doc says. Raises
    OSError: ELOOP for a link refused, ENOENT, ENOTDIR..."""
    if os.geteuid() != 0:
        return os.open(path, FOLDER)
    fd = os.open("/", FOLDER)
    try:
        for name in Path(os.path.abspath(path)).parts[1:]:
            try:
                step = os.open(name, FOLDER | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as e:
                if e.errno not in (errno.ELOOP, errno.ENOTDIR) or not _trusted_link(fd, name):
                    raise
                step = os.open(name, FOLDER, dir_fd=fd)
            os.close(fd)
            fd = step
    except BaseException:
        os.close(fd)
        raise
    return fd


def owner(path: Path | str) -> int | None:
    """Who owns the folder ``path``, reached as the module's doc says; None where there is
    no such folder (or only through a link refused)."""
    try:
        fd = open_folder(path)
    except OSError:
        return None
    try:
        return os.fstat(fd).st_uid
    finally:
        os.close(fd)


def mine(path: Path | str) -> bool:
    """Whether ``path`` is a folder of this process's user, reached as the module's doc says."""
    return owner(path) == os.geteuid()


def _trusted_link(folder: int, name: str) -> bool:
    """Whether the link ``name`` in ``folder`` (an fd) is this process's user's (or root's),
    in a folder of the same user that nobody else may change: where others may write, only a
    sticky bit keeps them from replacing an entry they do not own."""
    try:
        link, parent = os.stat(name, dir_fd=folder, follow_symlinks=False), os.fstat(folder)
    except OSError:
        return False
    ours = (0, os.geteuid())
    shared = parent.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not parent.st_mode & stat.S_ISVTX
    return stat.S_ISLNK(link.st_mode) and link.st_uid in ours and parent.st_uid in ours and not shared

"""The host contract, served on another machine: ``SSHHost`` starts ``python3 -c SOURCE``
(this file's source) over its shared connection once, and sends it requests on stdin for
as long as the connection lives, so a remote host needs only a Python 3 (3.6 or newer) and
nothing installed, and a command or file operation costs one round trip, not a new ssh
session. Same semantics as ``LocalHost``; commands are argument lists run without a shell.

A request is one JSON line ``[op, path, arg, input_length]`` and then ``input_length``
bytes (a file to write, a command's stdin); the answer is one JSON line ``[status,
length]`` and then ``length`` bytes: JSON for stat and list, file contents for read, a
JSON line ``[returncode, stderr, timed_out]`` and the command's stdout for run, a message
for an error. (This file runs on the far machine: it is the one module that starts
processes other than ``_process.py``, there.)
Status 0 done; ENOENT no such file (read); EEXIST the folder exists (make_dirs without
exist_ok); EACCES a file that must not be read (``open_log``); FAILED anything else (the
message says). Standard library only."""

import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile

OK, ENOENT, EEXIST, EACCES, FAILED = 0, 2, 17, 13, 1
# Where no job's output is: the kernel's views of processes and devices. A job may name any
# path as its --output; a file there (the server's own /proc/self/environ) is never served.
UNREADABLE_ROOTS = ("/proc", "/dev", "/sys")


def open_log(path, owner=None):
    """A read-only descriptor of the regular file ``path``, opened without blocking (a FIFO
    named as a job's output would hold the reader until someone writes to it), and, with
    ``owner`` (a user name), only where that user owns it: a job's output is served to whoever
    may see the job, so the path it names must not reach a file its user could not read.
    ``PermissionError`` says why not; ``FileNotFoundError`` where nothing is."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0))
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise PermissionError(errno.EACCES, "not a regular file", str(path))
        # The file opened, whatever links led there (Linux names it in /proc/self/fd).
        real = os.readlink("/proc/self/fd/%d" % fd) if os.path.isdir("/proc/self/fd") else os.path.realpath(path)
        for root in UNREADABLE_ROOTS:
            if real == root or real.startswith(root + "/"):
                raise PermissionError(errno.EACCES, "under " + root, str(path))
        if owner is not None:
            try:
                uid = pwd.getpwnam(owner).pw_uid
            except KeyError:
                raise PermissionError(errno.EACCES, "no user " + owner + " here", str(path)) from None
            if st.st_uid != uid:
                raise PermissionError(errno.EACCES, "not owned by " + owner, str(path))
        return fd
    except BaseException:
        os.close(fd)
        raise


def read_log(path, offset, size, owner=None):
    with os.fdopen(open_log(path, owner), "rb") as f:
        f.seek(offset)
        return f.read(size)


def run(argv, env, timeout, data):
    try:
        done = subprocess.run(argv, input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, **env) if env else None, timeout=timeout)
        answer, out = [done.returncode, done.stderr.decode(errors="replace"), False], done.stdout
    except subprocess.TimeoutExpired as e:
        answer, out = [None, (e.stderr or b"").decode(errors="replace"), True], e.stdout or b""
    except FileNotFoundError:
        answer, out = [127, argv[0] + ": command not found", False], b""
    return OK, json.dumps(answer).encode() + b"\n" + out


def do(op, path, arg, data):
    if op == "run":
        return run(arg[0], arg[1], arg[2], data)
    if op == "stat":
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return OK, b"null"
        return OK, json.dumps([st.st_size, st.st_mtime_ns, st.st_ino, stat.S_ISDIR(st.st_mode)]).encode()
    if op == "list":
        entries = []
        try:
            with os.scandir(path) as found:
                for entry in found:
                    try:
                        is_dir = entry.is_dir(follow_symlinks=False)
                        entries.append([entry.name, is_dir, not is_dir and entry.is_file()])
                    except OSError:
                        continue
        except (NotADirectoryError, FileNotFoundError):
            entries = None
        return OK, json.dumps(entries).encode()
    if op == "read":
        offset, size = arg[:2]
        try:
            return OK, read_log(path, offset, size, arg[2] if len(arg) > 2 else None)
        except FileNotFoundError:
            return ENOENT, b""
        except PermissionError as e:
            return EACCES, (e.strerror or "refused").encode()
    if op == "write":
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".partial-")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.chmod(partial, 0o666 & ~UMASK)
            os.replace(partial, path)
        except BaseException:
            os.unlink(partial)
            raise
        return OK, b""
    if op == "mkdirs":  # arg: [exist_ok, mode]
        try:
            os.makedirs(path, mode=int(arg[1]), exist_ok=bool(arg[0]))
        except FileExistsError:
            return EEXIST, b""
        return OK, b""
    if op == "rmtree":
        shutil.rmtree(path, ignore_errors=True)
        return OK, b""
    return FAILED, ("unknown operation " + op).encode()


def serve(requests, answers):
    while True:
        line = requests.readline()
        if not line:
            return  # the connection closed
        op, path, arg, length = json.loads(line)
        data = requests.read(length) if length else b""
        try:
            status, payload = do(op, path, arg, data)
        except Exception as e:  # noqa: BLE001 - the caller gets every failure as a message
            status, payload = FAILED, (type(e).__name__ + ": " + str(e)).encode(errors="replace")
        answers.write(json.dumps([status, len(payload)]).encode() + b"\n" + payload)
        answers.flush()


UMASK = 0o022  # the server's own, read as it starts (never in a process that imports this)

if __name__ == "__main__":
    UMASK = os.umask(UMASK)
    os.umask(UMASK)
    serve(sys.stdin.buffer, sys.stdout.buffer)

"""The host contract's file operations, as a script another machine runs: ``SSHHost`` sends
this file's source as ``python3 -c SOURCE OP PATH [ARG]`` over its connection, so a remote
host needs only a Python 3 (any since 3.6) and nothing installed. Same semantics as
``LocalHost``: metadata as one JSON line, file contents raw on stdout, a file to write on
stdin, written whole (a temporary file, then a rename).

Exit codes: 0 done; ENOENT_EXIT no such file (read); EEXIST_EXIT the folder exists
(make_dirs without exist_ok). Standard library only, and nothing from jupyter_gtc."""

import json
import os
import shutil
import stat
import sys
import tempfile

ENOENT_EXIT, EEXIST_EXIT = 44, 45


def main(op, path, arg=""):
    if op == "stat":
        try:
            st = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            print("null")
            return
        print(json.dumps([st.st_size, st.st_mtime_ns, st.st_ino, stat.S_ISDIR(st.st_mode)]))
    elif op == "list":
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
        print(json.dumps(entries))
    elif op == "read":
        offset, size = (int(n) for n in arg.split(","))
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            sys.exit(ENOENT_EXIT)
        with f:
            f.seek(offset)
            sys.stdout.buffer.write(f.read(size))
    elif op == "write":
        fd, partial = tempfile.mkstemp(dir=os.path.dirname(path) or ".", prefix=".partial-")
        try:
            with os.fdopen(fd, "wb") as f:
                shutil.copyfileobj(sys.stdin.buffer, f)
            mask = os.umask(0o022)
            os.umask(mask)
            os.chmod(partial, 0o666 & ~mask)
            os.replace(partial, path)
        except BaseException:
            os.unlink(partial)
            raise
    elif op == "mkdirs":
        try:
            os.makedirs(path, exist_ok=arg == "exist_ok")
        except FileExistsError:
            sys.exit(EEXIST_EXIT)
    elif op == "rmtree":
        shutil.rmtree(path, ignore_errors=True)
    else:
        sys.exit("unknown operation " + op)


if __name__ == "__main__":
    main(*sys.argv[1:])

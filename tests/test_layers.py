"""Imports point one way: front ends -> api -> services -> core -> edge (ARCHITECTURE.md).
Checked on the source, so a wrong import fails here before it tangles the code."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "jupyter_gtc"
LAYERS = {  # module prefix -> rank; a module may import only ranks <= its own
    "exceptions": 0, "_process": 0, "_ports": 0, "hosts": 0, "metrics": 1,
    "spec": 1, "failure": 1, "state": 1, "slurm": 1, "recipes": 1, "registry": 1, "serving": 1, "examples": 1, "resume": 1, "injob": 1, "lighthouse": 1, "health": 1,
    "backends": 2,
    "services": 3, "api": 4, "namespaces": 4,
    "vertex": 1, "vertex_clusters": 1, "containers": 1, "cli": 5, "cli_models": 5, "cli_endpoints": 5, "cli_tables": 5, "cli_capacity": 5, "magics": 5, "widgets": 5, "server": 5, "vertex_endpoint": 5,
}
FRONT_END_LIBRARIES = {"IPython", "ipywidgets", "bokeh", "tornado", "jupyter_server"}


def imports_of(path: Path) -> list[tuple[str, int]]:
    """(absolute module inside jupyter_gtc, line) for each import of the package."""
    module = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = module[: len(module) - node.level] if path.name != "__init__.py" else module[: len(module) - node.level + 1]
            target = ".".join(base + ((node.module,) if node.module else ()))
            found.append((target, node.lineno))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            found += [(n, node.lineno) for n in names]
    return found


def rank(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if parts[0] == "jupyter_gtc" and len(parts) > 1 else None


def test_imports_point_down_only():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        own = rank(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if own is None:
            continue
        for target, line in imports_of(path):
            theirs = rank(target)
            if theirs is not None and theirs > own:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not wrong, "imports that point up a layer:\n" + "\n".join(wrong)


def test_services_and_core_never_import_front_end_libraries():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        own = rank(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts))
        if own is None or own >= 5:
            continue
        for target, line in imports_of(path):
            if target.split(".")[0] in FRONT_END_LIBRARIES:
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not wrong, "\n".join(wrong)


PROCESS_MODULES = {"subprocess", "pty", "multiprocessing", "asyncio.subprocess"}
OS_PROCESS_CALLS = ("system", "popen", "spawn", "exec", "fork", "posix_spawn")  # os.<name>, os.<name>*


def process_starts_in(source: str) -> list[tuple[str, int]]:
    """(what, line) for each way ``source`` could start a process: importing a module that
    does, or naming one of ``os``'s process functions (``os.system(...)``, ``from os import
    popen``), which no import of a module ever shows."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names if a.name in PROCESS_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module in PROCESS_MODULES:
            found.append((node.module, node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module == "os":
            found += [(f"os.{a.name}", node.lineno) for a in node.names if a.name.startswith(OS_PROCESS_CALLS)]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os"
              and node.attr.startswith(OS_PROCESS_CALLS)):
            found.append((f"os.{node.attr}", node.lineno))
    return found


def test_the_process_check_sees_each_way_to_start_one():
    assert process_starts_in("import os\n\nos.system('ls')\n") == [("os.system", 3)]
    assert process_starts_in("from os import system, path\nsystem('ls')\n") == [("os.system", 1)]
    assert process_starts_in("import os\nos.popen('ls'); os.execvp('ls', ['ls'])\n") == [
        ("os.popen", 2), ("os.execvp", 2)]
    assert process_starts_in("import subprocess\nfrom pty import spawn\n") == [("subprocess", 1), ("pty", 2)]
    assert process_starts_in("import os\nos.path.join(os.getcwd(), 'x')\nos.environ['A'] = '1'\n") == []


def test_only_the_edge_starts_processes():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_process.py" or path == PACKAGE / "hosts" / "remote_ops.py":  # runs on the far host
            continue
        for what, line in process_starts_in(path.read_text()):
            wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} uses {what}")
    assert not wrong, "only jupyter_gtc/_process.py may start processes:\n" + "\n".join(wrong)


# Modules that read or write a cluster's files (job folders, logs, event files, the
# completion file): only through the cluster's host (jupyter_gtc/hosts), so the same code
# reads a login node's files over SSH. (ARCHITECTURE.md, "Hosts".)
THROUGH_THE_HOST = ("services/jobs.py", "services/submit.py", "services/logs.py", "services/metrics.py",
                    "metrics/reader.py", "metrics/bulk.py", "metrics/hypertune.py", "failure.py",
                    "slurm/commands.py", "server/handlers_jobs.py")
FILE_FUNCTIONS = {"open", "io.open", "os.open", "os.stat", "os.lstat", "os.scandir", "os.listdir", "os.walk",
                  "os.makedirs", "os.mkdir", "os.remove", "os.unlink", "os.replace", "os.rename",
                  "shutil.rmtree", "shutil.copytree", "shutil.copy", "shutil.copyfile", "glob.glob"}
PATH_METHODS = {"open", "read_text", "read_bytes", "write_text", "write_bytes", "mkdir", "touch", "unlink", "rmdir",
                "glob", "rglob", "iterdir", "exists", "is_dir", "is_file", "stat", "lstat", "rename", "replace"}


def direct_file_access_in(source: str) -> list[tuple[str, int]]:
    """(call, line) for each call that touches a file other than through a host: a file
    function of the standard library, or a ``Path`` method on anything not named ``*host``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name in FILE_FUNCTIONS:
            found.append((name, node.lineno))
        elif (isinstance(node.func, ast.Attribute) and node.func.attr in PATH_METHODS
              and not ast.unparse(node.func.value).endswith("host")):
            found.append((name, node.lineno))
    return found


def test_the_file_check_sees_each_way_to_touch_a_file():
    assert direct_file_access_in("open(p)\nos.stat(p)\nshutil.rmtree(d)\n") == [
        ("open", 1), ("os.stat", 2), ("shutil.rmtree", 3)]
    assert direct_file_access_in("(job_dir / 'x').write_text(s)\nd.glob('*.out')\np.stat().st_mtime\n") == [
        ("(job_dir / 'x').write_text", 1), ("d.glob", 2), ("p.stat", 3)]
    assert direct_file_access_in("self.host.stat(p)\nhost.read(p, 0)\njob.host.list_dir(d)\nos.path.join(a, b)\n") == []


def test_cluster_files_are_touched_only_through_the_host():
    wrong = [f"{module}:{line} calls {call}" for module in THROUGH_THE_HOST
             for call, line in direct_file_access_in((PACKAGE / module).read_text())]
    assert not wrong, "read a cluster's files through its host (Backend.host):\n" + "\n".join(wrong)

"""Imports point one way: front ends -> api -> services -> core -> edge (DESIGN.md).
Checked on the source, so a wrong import fails here before it tangles the code."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).parent.parent / "jupyter_gtc"
LAYERS = {  # module prefix -> rank; a module may import only ranks <= its own
    "exceptions": 0, "_process": 0, "_ports": 0, "metrics": 1,
    "spec": 1, "state": 1, "slurm": 1, "recipes": 1, "backends": 2,
    "services": 3, "api": 4, "namespaces": 4,
    "cli": 5, "magics": 5, "widgets": 5, "server": 5,
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


def test_only_the_edge_starts_processes():
    wrong = []
    for path in PACKAGE.rglob("*.py"):
        if path.name == "_process.py":
            continue
        for target, line in imports_of(path):
            if target in ("subprocess", "os.system", "pty"):
                wrong.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target}")
    assert not wrong, "only jupyter_gtc/_process.py may start processes:\n" + "\n".join(wrong)

"""The packages import one way, and any of them can be imported first.

Layers, lowest first: `isa`, `simulator.framework`, `models`, `simulator.runner`,
`workloads`, then the `simulator` front door (its `__init__`) and `reports`, then the app
layer `simulator.app`. Every import statement of the five code packages is walked (module
level, inside functions and under `TYPE_CHECKING` alike) and each one that crosses layers
must point to a lower one, so no cycle between layers can exist. Inside a layer, modules
may import each other. Function-level imports of project modules are counted (at most 20,
each would need a reason: an optional heavy dependency or a plugin), and no package
`__init__.py` resolves names lazily through `__getattr__`.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("isa", "models", "simulator", "workloads", "reports")
LAYERS = {
    "isa": 0,
    "simulator.framework": 1,
    "models": 2,
    "simulator.runner": 3,
    "workloads": 4,
    "simulator": 5,        # the front door: simulator/__init__.py alone
    "reports": 5,
    "simulator.app": 6,
}
MAX_FUNCTION_LEVEL_IMPORTS = 20


def _layer(module: str) -> str:
    parts = module.split(".")
    if parts[0] == "simulator":
        return "simulator" if len(parts) == 1 else f"simulator.{parts[1]}"
    return parts[0]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports():
    """(importing module, imported module, file:line, inside a function?) for every import
    of a project module."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            module = _module_name(path)
            tree = ast.parse(path.read_text(), filename=str(path))
            in_function = {id(node) for fn in ast.walk(tree)
                           if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
                           for node in ast.walk(fn)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    targets = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    if node.level:
                        base = module.split(".")
                        if path.name != "__init__.py":
                            base = base[:-1]
                        base = base[:len(base) - node.level + 1]
                        targets = [".".join(base + ([node.module] if node.module else []))]
                    else:
                        targets = [node.module]
                else:
                    continue
                for target in targets:
                    if target.split(".")[0] in PACKAGES:
                        where = f"{path.relative_to(ROOT)}:{node.lineno}"
                        yield module, target, where, id(node) in in_function


IMPORTS = list(_imports())


def test_the_walk_sees_the_packages():
    importers = {_layer(src) for src, *_ in IMPORTS}
    assert set(LAYERS) <= importers | {"isa"}
    assert len(IMPORTS) > 500


def test_every_import_across_layers_points_down():
    upward = [f"{where}: {src} ({_layer(src)}) imports {dst} ({_layer(dst)})"
              for src, dst, where, _ in IMPORTS
              if _layer(src) != _layer(dst) and LAYERS[_layer(dst)] >= LAYERS[_layer(src)]]
    assert not upward, "imports against the layer order:\n" + "\n".join(upward)


def test_project_code_never_imports_the_front_door():
    """`simulator/__init__.py` re-exports for users; below the app layer, code imports a
    name from the layer that defines it (the front door imports `workloads`)."""
    front = [where for src, dst, where, _ in IMPORTS
             if dst == "simulator" and LAYERS[_layer(src)] < LAYERS["simulator.app"]]
    assert not front


def test_few_function_level_imports():
    inside = [f"{where}: {dst}" for _, dst, where, in_function in IMPORTS if in_function]
    assert len(inside) <= MAX_FUNCTION_LEVEL_IMPORTS, "\n".join(inside)


def test_no_package_init_resolves_names_lazily():
    inits = [path for package in PACKAGES for path in (ROOT / package).rglob("__init__.py")]
    lazy = [str(path.relative_to(ROOT)) for path in inits
            if any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__"
                   for node in ast.parse(path.read_text()).body)]
    assert inits and not lazy


@pytest.mark.parametrize("first", ["isa", "models", "models.sm", "simulator",
                                   "simulator.framework.engine", "simulator.runner.simulate",
                                   "workloads", "workloads.ops.gemm", "reports",
                                   "simulator.app.cli"])
def test_any_package_can_be_imported_first(first):
    """Python runs `simulator/__init__.py` before any `simulator.*` module, so the front
    door must load whole whichever module a user (or a worker process) imports first."""
    code = (f"import {first}\n"
            "import isa, models, simulator, workloads, reports\n"
            "assert callable(simulator.simulate_kernel) and callable(simulator.simulate_workload)\n"
            "assert callable(models.load_preset) and callable(workloads.layer)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]

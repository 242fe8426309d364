"""Layering of the package: no import circle, no oversized module, one shared analysis."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "torchmemlint"
# The layers from the bottom up: a module may import only from its own layer or below.
LAYERS = [
    {"torchmemlint.findings", "torchmemlint.tree", "torchmemlint.analysis", "torchmemlint.names",
     "torchmemlint.project", "torchmemlint.project_ast", "torchmemlint.project_files",
     "torchmemlint.project_importers"},
    {"torchmemlint.context"},
    {"torchmemlint.rules"},
]  # above them: the engine, the CLI and the other surfaces


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _layer(module: str) -> int:
    for index, layer in enumerate(LAYERS):
        if any(module == top or module.startswith(top + ".") for top in layer):
            return index
    return len(LAYERS)


def _imports(path: Path):
    """Every torchmemlint module a file imports, at run time or under TYPE_CHECKING."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


LAYERED = [
    path
    for path in sorted(PACKAGE.rglob("*.py"))
    if _layer(_module_name(path)) < len(LAYERS)
]


@pytest.mark.parametrize("path", LAYERED, ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_import_only_from_their_layer_or_below(path):
    own = _layer(_module_name(path))
    above = [
        module
        for module in _imports(path)
        if module.startswith("torchmemlint") and _layer(module) > own
    ]
    assert above == [], f"{_module_name(path)} imports from a higher layer: {above}"


def _all_imports(path: Path, module: str):
    """Every module of the package ``path`` imports, anywhere in the file: at the top, under
    TYPE_CHECKING, inside a function; absolute or relative; ``from pkg import submodule``
    counts as importing the submodule."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base_parts = package[: len(package) - (node.level - 1)]
                base = ".".join(base_parts + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            yield base
            for alias in node.names:
                yield f"{base}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name


def _import_graph():
    modules = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    return {
        module: {other for other in _all_imports(path, module) if other in modules and other != module}
        for module, path in modules.items()
    }


def _cycles(graph):
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, on_stack, stack, found = {}, {}, set(), [], []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            advanced = False
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = counter
                    counter += 1
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    advanced = True
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


PACKAGES = sorted(
    _module_name(path.parent) for path in PACKAGE.rglob("__init__.py")
)
@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_cycle_in_package(package):
    """No circle of imports through a module of ``package`` (function-local and TYPE_CHECKING
    imports count: they are circles a refactoring has to untie all the same)."""
    members = [
        cycle for cycle in _cycles(_import_graph())
        if any(module.rpartition(".")[0] == package or module == package for module in cycle)
    ]
    assert members == []


def test_cycle_finder_finds_a_cycle():
    """The finder itself: a circle of three, a self-contained pair, a chain without one."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"e"}, "e": {"d"}, "f": {"a"}, "g": set()}
    assert sorted(_cycles(graph)) == [["a", "b", "c"], ["d", "e"]]
    assert "torchmemlint.dynamic" in PACKAGES and "torchmemlint.analysis" in PACKAGES
    assert "torchmemlint" in PACKAGES


@pytest.mark.slow
@pytest.mark.parametrize(
    "first", ["torchmemlint.rules", "torchmemlint.rules.base", "torchmemlint.context",
              "torchmemlint.analysis", "torchmemlint.engine", "torchmemlint.cli"]
)
def test_each_entry_module_imports_first_in_a_fresh_interpreter(first):
    """An import circle shows when the modules are imported in an unusual order."""
    code = (
        "import sys, importlib\n"
        f"importlib.import_module({first!r})\n"
        "from torchmemlint.rules import all_rules\n"
        "assert all_rules()\n"
        f"print('torchmemlint.engine' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if first != "torchmemlint.engine" and first != "torchmemlint.cli":
        # The rules and the analysis stand without the engine.
        assert result.stdout.strip() == "False"


def test_no_module_over_800_lines():
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in PACKAGE.rglob("*.py")
    }
    assert {path: size for path, size in sizes.items() if size > 800} == {}


def test_rules_build_no_model_of_their_own():
    """Class, flow and scope models live in torchmemlint/analysis; a rule module defines
    rules and the wording of their findings (helpers for fixes included), nothing that walks
    a class's methods or a function's statements on its own."""
    models = {"ClassModel", "InitModel", "Flow", "FileModel", "FileModels", "CallableModel",
              "ScopeWalk", "ScopeFacts", "Resolver", "Producers", "InplaceAnalysis", "StackFinder"}
    for path in sorted((PACKAGE / "rules").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        defined = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
        assert not defined & models, f"{path.name} defines {defined & models}"
    assert not [p.name for p in (PACKAGE / "rules").glob("_*.py") if p.name != "__init__.py"]


@pytest.mark.slow
def test_exact_type_tests_name_only_classes_without_subclasses():
    """``type(x) is cst.Name`` stands for ``isinstance`` (several times cheaper on libcst's
    ABCs) only while libcst has no subclass of the class tested."""
    import libcst as cst

    tested = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Compare) and isinstance(node.left, ast.Call)):
                continue
            call = node.left
            if not (isinstance(call.func, ast.Name) and call.func.id == "type"):
                continue
            for operator, right in zip(node.ops, node.comparators):
                if not isinstance(operator, (ast.Is, ast.IsNot, ast.In, ast.NotIn)):
                    continue
                for element in right.elts if isinstance(right, ast.Tuple) else [right]:
                    if (
                        isinstance(element, ast.Attribute)
                        and isinstance(element.value, ast.Name)
                        and element.value.id == "cst"
                    ):
                        tested.add((element.attr, f"{path.relative_to(ROOT)}:{node.lineno}"))
    assert len(tested) > 500
    with_subclasses = [
        (name, where) for name, where in sorted(tested) if getattr(cst, name).__subclasses__()
    ]
    assert with_subclasses == []


# Rule modules whose rules only ask the shared analysis (docs/contributing.md, "A rule as a graph
# question"): they meet no expression node in the traversal and resolve no name themselves.
# Their fixes may still lay out edits on the call the analysis found. Every module of
# torchmemlint/rules/ but those still being converted, named here:
PENDING: tuple = ()
ASKING = tuple(sorted(
    path.name for path in (PACKAGE / "rules").glob("*.py")
    if path.name not in PENDING and path.name != "base.py"  # base.py: the rule API (``Rule.qualify``)
))
# The nodes a rule that asks may still be visited at: the file, a class, a function (where a
# question starts). A hook for any other node (a call, an attribute, an assignment, a name, a
# statement line, ...) means the rule meets the expressions of the file itself.
SCOPE_NODES = {"Module", "ClassDef", "FunctionDef"}


def _reads_syntax(path: Path, classes=None):
    """What in a rule module (or only in its ``classes``, given by name) reads expressions
    itself: a ``visit_``/``leave_`` method for a node other than the file, a class or a
    function, a call of ``qualify``
    (resolving a name in the traversal's scope), an import of ``libcst.matchers``."""
    found = []
    roots = [ast.parse(path.read_text(encoding="utf-8"))]
    if classes is not None:
        roots = [node for node in ast.walk(roots[0]) if isinstance(node, ast.ClassDef) and node.name in classes]
        assert sorted(node.name for node in roots) == sorted(classes), "a class named here is gone"
    for node in (found_node for root in roots for found_node in ast.walk(root)):
        if isinstance(node, ast.FunctionDef):
            kind, _, node_type = node.name.partition("_")
            if kind in ("visit", "leave") and node_type and node_type not in SCOPE_NODES:
                found.append(f"{node.name} (line {node.lineno})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "qualify":
            found.append(f"qualify() (line {node.lineno})")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [alias.name for alias in node.names]
            if any(name == "libcst.matchers" or name.startswith("libcst.matchers.") for name in names):
                found.append(f"libcst.matchers (line {node.lineno})")
    return found


@pytest.mark.parametrize("name", ASKING)
def test_rules_that_ask_the_analysis_read_no_expressions(name):
    assert _reads_syntax(PACKAGE / "rules" / name) == []


def test_every_rule_module_asks_but_those_pending():
    """The rule modules checked are all of them but the pending ones, and each pending module
    still reads syntax (once it does not, it leaves the list and is checked like the others)."""
    assert {"checkpoint.py", "distributed.py", "downsampling.py", "stateless.py", "loops.py"} <= set(ASKING)
    for name in PENDING:
        assert (PACKAGE / "rules" / name).exists(), f"{name} is gone: take it off PENDING"
        assert _reads_syntax(PACKAGE / "rules" / name) != [], f"{name} asks the analysis now: take it off PENDING"


def test_the_syntax_reading_check_finds_a_call_visitor(tmp_path):
    """The check itself: a rule module with a visit_Call and a qualify call is caught."""
    path = tmp_path / "rule.py"
    path.write_text(
        "import libcst.matchers as m\n\n\nclass R:\n    def visit_Call(self, node):\n"
        "        return self.qualify(node.func)\n\n    def visit_Assign(self, node):\n        pass\n\n"
        "    def leave_Attribute(self, node):\n        pass\n\n    def visit_Module(self, node):\n        pass\n\n"
        "    def leave_ClassDef(self, node):\n        pass\n\n    def visit_(self, node):\n        pass\n"
    )
    assert _reads_syntax(path) == [
        "libcst.matchers (line 1)", "visit_Call (line 5)", "visit_Assign (line 8)",
        "leave_Attribute (line 11)", "qualify() (line 6)",
    ]
    # only the classes named: another class's visit_Call is not theirs to answer for
    path.write_text(
        "class R:\n    def visit_Call(self, node):\n        return self.qualify(node.func)\n\n\n"
        "class Q:\n    def visit_Module(self, node):\n        return ask(self.context)\n"
    )
    assert _reads_syntax(path, ("Q",)) == []
    assert _reads_syntax(path, ("R", "Q")) == ["visit_Call (line 2)", "qualify() (line 3)"]

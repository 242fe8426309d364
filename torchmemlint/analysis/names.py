"""Qualified names without libcst's scope providers.

libcst's ScopeProvider and QualifiedNameProvider cost more than the parse itself on large
corpora, so the engine keeps a small binding table per scope instead: imports give a name its
qualified name (``from torch.nn import ReLU as R`` makes ``R`` mean ``torch.nn.ReLU``), any
other binding (class, def, assignment) makes it local. Later bindings win, as at run time.
An assignment from a call that says it imports, given the dotted name as a literal
(``torch = importlib.import_module("torch")``, sktime's ``F = _safe_import("torch.nn.functional")``),
binds the name as the import would.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterable, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.tree import walk

# Private module paths that torch re-exports under a public name.
_CANONICAL_PREFIXES = (
    ("torch.nn.modules.", "torch.nn."),
    ("torch.utils.checkpoint.", "torch.utils.checkpoint."),
)


def dotted_name(node: cst.BaseExpression) -> Optional[str]:
    """``a.b.c`` for Name/Attribute chains, else None."""
    # Exact type tests: libcst's node classes are ABCs, whose isinstance is several times
    # slower when it fails, and this runs for most expressions of a file.
    node_type = type(node)
    if node_type is _NAME:
        return node.value  # type: ignore[attr-defined]
    if node_type is not _ATTRIBUTE:
        return None
    parts: List[str] = []
    while type(node) is _ATTRIBUTE:
        parts.append(node.attr.value)  # type: ignore[attr-defined]
        node = node.value  # type: ignore[attr-defined]
    if type(node) is not _NAME:
        return None
    parts.append(node.value)  # type: ignore[attr-defined]
    return ".".join(reversed(parts))


_NAME, _ATTRIBUTE = cst.Name, cst.Attribute


def canonical(qualified: str) -> str:
    """Map ``torch.nn.modules.activation.ReLU`` to ``torch.nn.ReLU``."""
    if qualified.startswith("torch.nn.modules."):
        return "torch.nn." + qualified.rsplit(".", 1)[-1]
    return qualified


def _module_name(node: cst.BaseExpression) -> str:
    name = dotted_name(node)
    assert name is not None  # import targets are always dotted names
    return name


class Bindings:
    """Local name -> qualified name (``None``: bound locally, not an import)."""

    def __init__(self, parent: Optional["Bindings"] = None) -> None:
        self.parent = parent
        self.names: Dict[str, Optional[str]] = {}
        self.star_modules: List[str] = []
        # names the file binds in a function, a loop, a ``with`` or a comprehension: a star
        # import does not give them (``keep_locals_from_star``)
        self.star_locals: FrozenSet[str] = frozenset()
        # functions that import and return modules (``def _require_torch(): import torch; import
        # torch.nn as nn; return torch, nn``): what each returns, element by element
        self.providers: Dict[str, Tuple[Optional[str], ...]] = {}

    def lookup(self, name: str) -> Optional[str]:
        scope: Optional[Bindings] = self
        while scope is not None:
            if name in scope.names:
                return scope.names[name]
            scope = scope.parent
        return None

    def is_bound(self, name: str) -> bool:
        scope: Optional[Bindings] = self
        while scope is not None:
            if name in scope.names:
                return True
            scope = scope.parent
        return False

    def star_lookup(self, name: str) -> Optional[str]:
        scope: Optional[Bindings] = self
        while scope is not None:
            if scope.star_modules:
                return None if name in scope.star_locals else f"{scope.star_modules[0]}.{name}"
            scope = scope.parent
        return None

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        """Qualified name of a Name/Attribute expression, or None if it is not imported."""
        dotted = dotted_name(node)
        if dotted is None:
            return None
        head, _, rest = dotted.partition(".")
        if self.is_bound(head):
            base = self.lookup(head)
        else:
            base = self.star_lookup(head)
        if base is None:
            return None
        return canonical(f"{base}.{rest}" if rest else base)

    def keep_locals_from_star(self, module: cst.Module) -> None:
        """With a star import (``from typing import *``), the names the file binds itself below
        its top level (parameters, ``self``, assignment, loop, ``with`` and comprehension
        targets: ``q``, ``k``, ``wei``) are its own, not the star module's: a function's
        ``k.transpose(-2, -1)`` is no ``typing.k.transpose``. Walked only in a file with one."""
        if not self.star_modules:
            return
        found: Set[str] = set()
        for node in walk(module):
            kind = type(node)
            if kind is cst.Param:
                found.add(node.name.value)  # type: ignore[attr-defined]
            elif kind in (cst.AssignTarget, cst.For, cst.CompFor, cst.AsName, cst.NamedExpr, cst.AnnAssign):
                target = node.name if kind is cst.AsName else node.target  # type: ignore[attr-defined]
                found.update(_assigned_names(target))
        self.star_locals = frozenset(found)

    def bind_statements(self, statements: Iterable[cst.CSTNode]) -> None:
        """Record the bindings made directly by a block of statements (no descent into defs)."""
        for statement in statements:
            self._bind_statement(statement)

    def hoist_function_imports(self, module: cst.Module, text: Optional[str]) -> None:
        """Names a function imports from torch (``from torch.nn import LeakyReLU`` inside
        ``__init__``), bound in the file's own table where the file binds nothing of that name and
        no two functions import it differently: the analyses that qualify a name at file level
        (a layer built in ``__init__``, read in ``forward``) then know it as the function does."""
        if text is None or _LOCAL_TORCH_IMPORT.search(text) is None:
            return
        found: Dict[str, Optional[str]] = {}
        known = Bindings(self)  # what the functions imported so far: `import torch; nn = torch.nn`
        for statement in _function_statements(module.body, False):
            scope = Bindings(known)
            scope._bind_statement(statement)
            for name, qualified in scope.names.items():
                if type(statement.body[0]) is not cst.Assign or qualified in _TORCH_MODULES:  # type: ignore[attr-defined]
                    if not self.is_bound(name):  # (a relative import binds None: another meaning)
                        found[name] = qualified if found.get(name, qualified) == qualified else None
                    if _torch(qualified):
                        known.names[name] = qualified
        for name, qualified in found.items():
            if _torch(qualified):
                self.names[name] = qualified

    def bind_parameters(self, params: cst.Parameters) -> None:
        every = [*params.posonly_params, *params.params, *params.kwonly_params]
        for extra in (params.star_arg, params.star_kwarg):
            if type(extra) is cst.Param:
                every.append(extra)
        for param in every:
            self.names[param.name.value] = None

    def _bind_statement(self, statement: cst.CSTNode) -> None:
        if type(statement) is cst.SimpleStatementLine:
            for small in statement.body:
                self._bind_small(small)
        elif type(statement) in (cst.ClassDef, cst.FunctionDef):
            self.names[statement.name.value] = None
            self.providers.pop(statement.name.value, None)
            provided = _provided(statement) if type(statement) is cst.FunctionDef else None
            if provided is not None:
                self.providers[statement.name.value] = provided
        elif type(statement) in (cst.If, cst.Try, cst.With):
            # Imports guarded by `if TYPE_CHECKING:` / `try: ... except ImportError:` count.
            self.bind_statements(statement.body.body)
            if type(statement) is cst.If and statement.orelse is not None:
                orelse = statement.orelse
                self.bind_statements(orelse.body.body if type(orelse) is cst.Else else [orelse])
            if type(statement) is cst.Try:
                kept = {name: self.names[name] for name in _bound_by(statement.body.body) if _torch(self.names.get(name))}
                for handler in statement.handlers:
                    self.bind_statements(s for s in handler.body.body if not self._unavailable(s))
                # torch's name in the body, another torch path as the fallback (an older torch's,
                # or misspelt): the body's, which runs where it can; another fallback (a project's
                # own function) leaves the name the fallback's, as later bindings win
                self.names.update({name: value for name, value in kept.items() if _torch(self.names.get(name))})

    def _unavailable(self, statement: cst.CSTNode) -> bool:
        """``f = None`` in ``except ImportError:`` after ``from m import f`` in the ``try``: the
        optional import's fallback (also ``nn = object``, a base class for the file's classes to
        still be defined); where ``f`` is called, it is ``m.f``. So is a mock standing in
        for it (``nn = MagicMock()`` from ``unittest.mock``): code that runs has the import."""
        if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
            return False
        small = statement.body[0]
        if type(small) is not cst.Assign:
            return False
        value = small.value
        placeholder = (type(value) is cst.Name and value.value in ("None", "False", "object")) or (
            type(value) is cst.Call and (self.qualify(value.func) or "").startswith("unittest.mock.")
        )
        return placeholder and all(type(t.target) is cst.Name and self.names.get(t.target.value) for t in small.targets)

    def _bind_small(self, small: cst.BaseSmallStatement) -> None:
        if type(small) is cst.Import:
            for alias in small.names:
                module = _module_name(alias.name)
                if alias.asname is not None:
                    self.names[_module_name(alias.asname.name)] = module
                else:
                    # `import torch.nn` binds `torch`, which then reaches torch.nn too.
                    head = module.split(".", 1)[0]
                    self.names[head] = head
        elif type(small) is cst.ImportFrom:
            if small.module is None or small.relative:
                names = small.names
                if type(names) is not cst.ImportStar:
                    for alias in names:
                        target = alias.asname.name if alias.asname else alias.name
                        self.names[_module_name(target)] = None
                return
            module = _module_name(small.module)
            if type(small.names) is cst.ImportStar:
                self.star_modules.insert(0, module)
                return
            for alias in small.names:
                imported = _module_name(alias.name)
                local = _module_name(alias.asname.name) if alias.asname else imported
                self.names[local] = f"{module}.{imported}"
        elif type(small) in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            targets = (
                [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
            )
            imported = self._assigned_module(targets, small.value) if type(small) is cst.Assign and len(targets) == 1 else None
            if type(small.value) is cst.Name and small.value.value == "None" and all(
                type(t) is cst.Name and _torch(self.names.get(t.value)) for t in targets
            ):
                return  # `nn = None`, an optional import's fallback (`if torch is not None: import torch.nn as nn; else: nn = None`)
            for target in targets:
                for name in _assigned_names(target):
                    if imported is not None and name in self.names and self.names[name] != imported:
                        self.names[name] = None  # `Act = nn.ELU` then `Act = nn.GELU`: not one of them
                    else:
                        self.names[name] = imported if type(target) is cst.Name else None
            if type(small) is cst.Assign and len(targets) == 1:
                self._bind_provided(targets[0], small.value)

    def _assigned_module(self, targets: Sequence[cst.BaseExpression], value: cst.BaseExpression) -> Optional[str]:
        """What one name assigned a torch path is: an import by call (``_imported_by_call``), an
        alias of a torch module the file already knows (``nn = torch.nn``, ``F =
        torch.nn.functional``), or ``torch = _require_torch()`` (a
        function the project defines elsewhere that imports torch lazily: the target is named
        ``torch`` and the called function names torch)."""
        imported = _imported_by_call(value)
        if imported is not None:
            return imported
        target = targets[0]
        if type(value) in (cst.Name, cst.Attribute):
            qualified = self.qualify(value)  # (a function's alias, ``ckpt = checkpoint``, is the value graph's: a loop may rebind it)
            return qualified if qualified in _TORCH_MODULES else None
        if type(target) is cst.Name and target.value == "torch" and type(value) is cst.Call and not value.args:
            called = dotted_name(value.func)
            return "torch" if called is not None and "torch" in called.rpartition(".")[2].lower() else None
        return None

    def _bind_provided(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        """``torch, nn, F = _require_torch()``: the modules a provider function of the file
        imports and returns (``providers``), bound to the targets by position."""
        if type(value) is not cst.Call or value.args or type(value.func) is not cst.Name:
            return
        scope: Optional[Bindings] = self
        while scope is not None and value.func.value not in scope.names:
            scope = scope.parent
        provided = scope.providers.get(value.func.value) if scope is not None else None
        if provided is None:
            return
        names = [target] if type(target) is cst.Name else [e.value for e in target.elements] if type(target) in (cst.Tuple, cst.List) else []
        if len(names) == len(provided) and all(type(name) is cst.Name for name in names):
            for name, qualified in zip(names, provided):
                self.names[name.value] = qualified  # type: ignore[attr-defined]


def _imported_by_call(value: cst.BaseExpression) -> Optional[str]:
    """``importlib.import_module("torch.nn.functional")``, ``_safe_import("torch")``,
    ``lazy_import("einops.rearrange")``: a call of a function whose name says it imports,
    given the dotted name as a literal string first: that name."""
    if type(value) is not cst.Call or not value.args or value.args[0].keyword is not None or value.args[0].star:
        return None
    func = value.func
    called = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else ""
    text = value.args[0].value
    if "import" not in called.lower() or type(text) is not cst.SimpleString or any(a.keyword is None for a in value.args[1:]):
        return None
    dotted = text.evaluated_value
    if not isinstance(dotted, str) or not _DOTTED.fullmatch(dotted):
        return None
    return dotted


def _provided(function: cst.FunctionDef) -> Optional[Tuple[Optional[str], ...]]:
    """What a function made only of imports (also in ``try``) and a last ``return`` of the names
    they bind (maybe all inside one ``try``) returns, element by element (``return torch, nn,
    F``); None for any other function."""
    body = function.body
    statements = list(body.body) if type(body) is cst.IndentedBlock else []
    if len(statements) == 1 and type(statements[0]) is cst.Try:  # `try: import torch ... return torch, nn`
        statements = list(statements[0].body.body)  # type: ignore[attr-defined]
    if not statements or function.decorators:
        return None
    last = statements[-1]
    returned = last.body[0] if type(last) is cst.SimpleStatementLine and len(last.body) == 1 else None
    if type(returned) is not cst.Return or returned.value is None:
        return None
    local = Bindings()
    for statement in statements[:-1]:
        if type(statement) is cst.SimpleStatementLine and all(
            type(small) in (cst.Import, cst.ImportFrom) or (type(small) is cst.Expr and type(small.value) is cst.SimpleString)
            for small in statement.body
        ):
            local._bind_statement(statement)
        elif type(statement) is cst.Try:
            local._bind_statement(statement)
        else:
            return None
    value = returned.value
    elements = [e.value for e in value.elements] if type(value) is cst.Tuple else [value]
    if not all(type(element) is cst.Name for element in elements):
        return None
    found = tuple(local.names.get(element.value) for element in elements)  # type: ignore[attr-defined]
    return found if any(found) else None


def _torch(qualified: Optional[str]) -> bool:
    return qualified is not None and (qualified == "torch" or qualified.startswith("torch."))


def _bound_by(statements: Iterable[cst.CSTNode]) -> List[str]:
    """The names the import lines among ``statements`` bind (a try body's imports)."""
    scope = Bindings()
    for statement in statements:
        if type(statement) is cst.SimpleStatementLine and any(type(s) in (cst.Import, cst.ImportFrom) for s in statement.body):
            scope._bind_statement(statement)
    return list(scope.names)


_DOTTED = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_LOCAL_TORCH_IMPORT = re.compile(r"\n[ \t]+(?:from[ \t]+torch[\w.]*[ \t]+import|import[ \t]+torch|torch[ \t]*=)")
# the torch modules a function's alias (``nn = torch.nn``) may give the file's own table
_TORCH_MODULES = frozenset((
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.distributed", "torch.optim",
    "torch.utils.checkpoint", "torch.cuda", "torch.amp", "torch.autograd",
))


def _function_statements(statements: Iterable[cst.CSTNode], inside: bool) -> Iterable[cst.CSTNode]:
    """The import lines in function bodies (``inside``: the statements are a function's), through
    classes, nested functions and blocks; no expression is visited."""
    for statement in statements:
        kind = type(statement)
        if kind is cst.SimpleStatementLine:
            if inside and (
                any(type(small) in (cst.Import, cst.ImportFrom) for small in statement.body)  # type: ignore[attr-defined]
                or _module_alias(statement)  # type: ignore[arg-type]
            ):
                yield statement
        elif kind in (cst.FunctionDef, cst.ClassDef):
            body = statement.body  # type: ignore[attr-defined]
            if type(body) is cst.IndentedBlock:
                yield from _function_statements(body.body, inside or kind is cst.FunctionDef)
        else:
            for block in _child_blocks(statement):
                yield from _function_statements(block, inside)


def _module_alias(line: cst.SimpleStatementLine) -> bool:
    """``nn = torch.nn``, ``torch = _require_torch()``: a line assigning one name a dotted name
    or a call without arguments (what it binds is ``Bindings._assigned_module``'s question)."""
    if len(line.body) != 1 or type(line.body[0]) is not cst.Assign:
        return False
    assign = line.body[0]
    value = assign.value
    return len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name and (
        type(value) in (cst.Name, cst.Attribute) or (type(value) is cst.Call and not value.args)
    )


def _body_statements(block: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return block.body if type(block) is cst.IndentedBlock else ()


def _child_blocks(statement: cst.CSTNode) -> Iterator[Sequence[cst.CSTNode]]:
    """The statement lists directly inside an if/for/while/with/try statement."""
    if type(statement) not in (cst.If, cst.For, cst.While, cst.With, cst.Try):
        return
    yield _body_statements(statement.body)
    orelse = getattr(statement, "orelse", None)
    while orelse is not None:  # else / elif chain
        yield _body_statements(orelse.body)
        orelse = getattr(orelse, "orelse", None)
    for handler in getattr(statement, "handlers", ()):
        yield _body_statements(handler.body)
    final = getattr(statement, "finalbody", None)
    if final is not None:
        yield _body_statements(final.body)


def _assigned_names(target: cst.BaseExpression) -> Iterable[str]:
    if type(target) is cst.Name:
        yield target.value
    elif type(target) in (cst.Tuple, cst.List):
        for element in target.elements:
            yield from _assigned_names(element.value)
    elif type(target) is cst.StarredElement:
        yield from _assigned_names(target.value)

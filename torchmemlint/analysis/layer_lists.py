"""Layers collected in a local list and spliced into ``nn.Sequential(*layers)``, and dropout
probabilities the file pins to 0.

A list is followed only where its order is certain: straight-line statements of one function
(``layers = [a, b]``, ``layers.append(c)``, ``layers += [d]``, ``layers.extend([e])``, or
``layers = helper(...)`` where ``helper`` is a function or method of this file that builds and
returns such a list). A list touched inside a loop, a branch or a ``with``, copied, sliced,
indexed or passed elsewhere before the splice stays unknown, as today."""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.syntax import block_statements, literal_number, walk
from torchmemlint.tree import children


def _mentions_name(node: cst.CSTNode, name: str) -> bool:
    return any(isinstance(n, cst.Name) and n.value == name for n in walk(node))


def literal_elements(node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    if isinstance(node, (cst.List, cst.Tuple)):
        values = []
        for element in node.elements:
            if not isinstance(element, cst.Element):
                return None  # `*more`
            values.append(element.value)
        return values
    return None


class LayerLists:
    """Per file: what a local list holds at a given statement, and which functions return one."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._functions: Optional[Dict[str, List[cst.FunctionDef]]] = None
        self._returns: Dict[int, Optional[List[cst.BaseExpression]]] = {}

    # -- functions of the file by name (module-level functions and methods) -----------------------
    def _by_name(self) -> Dict[str, List[cst.FunctionDef]]:
        if self._functions is None:
            found: Dict[str, List[cst.FunctionDef]] = {}
            for node in walk(self.module):
                if isinstance(node, cst.FunctionDef):
                    found.setdefault(node.name.value, []).append(node)
            self._functions = found
        return self._functions

    def helper_list(self, call: cst.Call, depth: int = 0) -> Optional[List[cst.BaseExpression]]:
        """The list a same-file helper returns (``self._make_layers(...)`` / ``make_layers(...)``)."""
        func = call.func
        if isinstance(func, cst.Name):
            name = func.value
        elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
            name = func.attr.value
        else:
            return None
        candidates = self._by_name().get(name, [])
        if len(candidates) != 1 or depth > 3:
            return None  # unknown, or defined twice: which one runs is not certain
        function = candidates[0]
        key = id(function)
        if key not in self._returns:
            self._returns[key] = None  # recursion guard
            self._returns[key] = self._returned(function, depth + 1)
        return self._returns[key]

    def _returned(self, function: cst.FunctionDef, depth: int) -> Optional[List[cst.BaseExpression]]:
        statements = list(block_statements(function.body))
        if not statements:
            return None
        last = statements[-1]
        if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1):
            return None
        small = last.body[0]
        if not isinstance(small, cst.Return) or small.value is None:
            return None
        # every other return of the function would make the answer uncertain
        returns = [n for n in walk(function) if isinstance(n, cst.Return)]
        if len(returns) != 1:
            return None
        value = small.value
        literal = literal_elements(value)
        if literal is not None:
            return literal
        if isinstance(value, cst.Name):
            return self.contents(function, value.value, last, depth)
        return None

    # -- the list a name holds just before ``statement`` --------------------------------------------
    def contents(
        self, function: cst.FunctionDef, name: str, statement: cst.CSTNode, depth: int = 0
    ) -> Optional[List[cst.BaseExpression]]:
        """The layer expressions ``name`` holds when ``statement`` (a top-level statement of
        ``function``, or one inside it) runs; None when the order is not certain."""
        if any(
            isinstance(p, cst.Param) and p.name.value == name
            for p in walk(function.params)
        ):
            return None
        held: Optional[List[cst.BaseExpression]] = None
        for top in block_statements(function.body):
            contains = top is statement or any(n is statement for n in walk(top))
            if contains:
                if top is not statement and not isinstance(statement, cst.SimpleStatementLine):
                    return None
                if top is not statement and _mentions_in_other_statements(top, statement, name):
                    return None
                return held
            if not _mentions_name(top, name):
                continue
            if not isinstance(top, cst.SimpleStatementLine) or len(top.body) != 1:
                return None  # in a loop, a branch, a `with`: order not certain
            held = self._step(top.body[0], name, held, depth)
            if held is None:
                return None
        return None

    def _step(
        self, small: cst.BaseSmallStatement, name: str, held: Optional[List[cst.BaseExpression]], depth: int
    ) -> Optional[List[cst.BaseExpression]]:
        if isinstance(small, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in small.targets] if isinstance(small, cst.Assign) else [small.target]
            value = small.value
            if len(targets) != 1 or not isinstance(targets[0], cst.Name) or targets[0].value != name:
                return None
            if value is None or _mentions_name(value, name):
                return None
            literal = literal_elements(value)
            if literal is not None:
                return literal
            if isinstance(value, cst.Call):
                found = self.helper_list(value, depth)
                return list(found) if found is not None else None
            return None
        if held is None:
            return None
        if isinstance(small, cst.AugAssign):
            if not (isinstance(small.target, cst.Name) and small.target.value == name):
                return None
            if not isinstance(small.operator, cst.AddAssign):
                return None
            literal = literal_elements(small.value)
            if literal is None or any(_mentions_name(v, name) for v in literal):
                return None
            return held + literal
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            call = small.value
            func = call.func
            if not (isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == name):
                return None
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                return None
            value = call.args[0].value
            if _mentions_name(value, name):
                return None
            if func.attr.value == "append":
                return held + [value]
            if func.attr.value == "extend":
                literal = literal_elements(value)
                return held + literal if literal is not None else None
        return None


def _mentions_in_other_statements(top: cst.CSTNode, statement: cst.CSTNode, name: str) -> bool:
    """Whether ``name`` appears in ``top`` outside ``statement`` (the splice nested in a block)."""
    for node in walk(top):
        if node is statement:
            continue
        if isinstance(node, cst.SimpleStatementLine) and node is not statement and _mentions_name(node, name):
            return True
    return False


# -- dropout probabilities ----------------------------------------------------------------------------------
def zero_probability(
    module: cst.Module,
    function: Optional[cst.FunctionDef],
    owner: Optional[cst.ClassDef],
    value: cst.BaseExpression,
) -> bool:
    """Whether the dropout probability ``value`` is 0 here: a literal 0, or a parameter of
    ``function`` whose default is 0 and that every call of it in this file (at least one)
    leaves out or passes as 0. For ``__init__`` the calls are those of the class's name."""
    number = literal_number(value)
    if number is not None:
        return number == 0
    if function is None or not isinstance(value, cst.Name):
        return False
    params = function.params
    positional = [*params.posonly_params, *params.params]
    param = next((p for p in [*positional, *params.kwonly_params] if p.name.value == value.value), None)
    if param is None or param.default is None or literal_number(param.default) != 0:
        return False
    if _rebound(function, value.value):
        return False
    method = owner is not None and any(s is function for s in block_statements(owner.body))
    if method:
        if function.name.value != "__init__":
            return False
        callee = owner.name.value
        positional = positional[1:]
    else:
        callee = function.name.value
    index = next((i for i, p in enumerate(positional) if p is param), None)
    calls = [
        n for n in walk(module)
        if isinstance(n, cst.Call)
        and (
            (isinstance(n.func, cst.Name) and n.func.value == callee)
            or (isinstance(n.func, cst.Attribute) and n.func.attr.value == callee)
        )
    ]
    if not calls:
        return False  # called from elsewhere: the probability is not known here
    for call in calls:
        if any(arg.star for arg in call.args):
            return False
        passed = None
        position = 0
        for arg in call.args:
            if arg.keyword is not None:
                if arg.keyword.value == param.name.value:
                    passed = arg
            else:
                if index is not None and position == index:
                    passed = arg
                position += 1
        if passed is not None and literal_number(passed.value) != 0:
            return False
    return True


def _rebound(function: cst.FunctionDef, name: str) -> bool:
    for node in walk(function.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = (
                [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
            )
            if any(isinstance(t, cst.Name) and t.value == name for t in targets):
                return True
    return False



def splices(module: cst.Module):
    """Every call with a ``*arg`` in the file, with the function and statement it is in."""
    found = []

    def visit(node: cst.CSTNode, function: Optional[cst.FunctionDef], statement: Optional[cst.CSTNode]) -> None:
        if isinstance(node, cst.FunctionDef):
            function, statement = node, None
        elif isinstance(node, cst.SimpleStatementLine):
            statement = node
        elif isinstance(node, cst.Call) and statement is not None:
            if any(arg.star == "*" for arg in node.args):
                found.append((node, function, statement))
        for child in children(node):  # the code-carrying fields: a cheap walk
            visit(child, function, statement)

    visit(module, None, None)
    return found


def enclosing_definitions(
    module: cst.Module, target: cst.CSTNode
) -> "tuple[Optional[cst.FunctionDef], Optional[cst.ClassDef]]":
    """The innermost function containing ``target`` and the class that function is directly in."""
    path: List[cst.CSTNode] = []

    def find(node: cst.CSTNode) -> bool:
        path.append(node)
        if node is target:
            return True
        for child in children(node):  # the code-carrying fields: a cheap walk
            if find(child):
                return True
        path.pop()
        return False

    if not find(module):
        return None, None
    for index in range(len(path) - 1, -1, -1):
        node = path[index]
        if isinstance(node, cst.FunctionDef):
            owner = next(
                (p for p in reversed(path[:index]) if isinstance(p, (cst.ClassDef, cst.FunctionDef))), None
            )
            return node, owner if isinstance(owner, cst.ClassDef) else None
    return None, None

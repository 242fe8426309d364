"""Small questions about libcst nodes: fast walks, call arguments, literals, the statements
around the node being visited."""

from __future__ import annotations

from typing import FrozenSet, Iterator, List, Optional, Tuple

import libcst as cst

from typing import Sequence, Union
from torchmemlint.analysis.names import Bindings, canonical, dotted_name
from torchmemlint.analysis.names import _body_statements, _child_blocks  # noqa: F401  (re-exported)
from torchmemlint.analysis.vocabulary import MODULE_METHODS_RETURNING_SELF

from typing import Iterable


from bisect import bisect_left

from torchmemlint.tree import children, indexed, nodes_of, path_to, walk  # noqa: F401  (re-exported)

# -- fast traversal: `walk` and `path_to` answer from the file's shared index (tree.NodeIndex)
# when the node is indexed, else they walk --------------------------------------------------


def mentions(expression: cst.CSTNode, word: str) -> bool:
    """Whether a name or attribute in ``expression`` contains ``word`` (``self.inplace``)."""
    for node in walk(expression):
        if type(node) is cst.Name and word in node.value:
            return True
    return False


# -- call arguments ----------------------------------------------------------------------------
def argument(call: cst.Call, position: Optional[int], keyword: str) -> Optional[cst.Arg]:
    """The argument bound to a parameter given by its position (None: keyword only) and name."""
    index = 0
    for arg in call.args:
        if arg.keyword is not None:
            if arg.keyword.value == keyword:
                return arg
            continue
        if arg.star:
            return None
        if position is not None and index == position:
            return arg
        index += 1
    return None


def has_star_args(call: cst.Call) -> bool:
    return any(arg.star for arg in call.args)


def literal_bool(node: Optional[cst.BaseExpression]) -> Optional[bool]:
    if type(node) is cst.Name and node.value in ("True", "False"):
        return node.value == "True"
    return None


def literal_number(node: cst.BaseExpression) -> Optional[float]:
    sign = 1.0
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        sign, node = -1.0, node.expression
    if type(node) in (cst.Integer, cst.Float):
        return sign * float(node.evaluated_value)
    return None


def is_literal(node: cst.BaseExpression) -> bool:
    """A constant that can move from ``__init__`` to ``forward`` unchanged."""
    if type(node) in (cst.Integer, cst.Float, cst.SimpleString, cst.ConcatenatedString):
        return True
    if type(node) is cst.Name:
        return node.value in ("True", "False", "None")
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        return literal_number(node) is not None
    if type(node) in (cst.Tuple, cst.List):
        return all(
            type(e) is cst.Element and is_literal(e.value) for e in node.elements
        )
    return False



def module_itself(node: cst.BaseExpression) -> cst.BaseExpression:
    """The construction a chain of ``nn.Module`` methods that return the module itself is
    called on (``nn.LeakyReLU(0.05).to(device=d)``, ``nn.Linear(a, b).cuda().float()``,
    ``block.apply(init)``): that call builds the module the chain gives. Anything else is
    itself (``.parameters()``, ``.state_dict()``: not the module). An optional module,
    ``nn.BatchNorm2d(c) if batchnorm else None`` (either arm None), is the one it may be: where
    the value runs as a module, that one runs (None cannot be called)."""
    node = optional_module(node)
    while (
        type(node) is cst.Call and type(node.func) is cst.Attribute
        and node.func.attr.value in MODULE_METHODS_RETURNING_SELF and type(node.func.value) is cst.Call
    ):
        node = node.func.value
    return node


def optional_module(node: cst.BaseExpression) -> cst.BaseExpression:
    """``X`` of ``X if c else None`` or ``None if c else X`` (anything else: itself)."""
    if type(node) is cst.IfExp:
        if _is_none(node.orelse) and not _is_none(node.body):
            return node.body
        if _is_none(node.body) and not _is_none(node.orelse):
            return node.orelse
    return node


def presence_test(index, node: cst.BaseExpression) -> bool:
    """Whether ``node`` (a node of the file's ``index``) is read only to test whether it is set:
    the test of an ``if``, ``while``, ``assert`` or ``a if c else b`` (also under ``not``, ``and``,
    ``or``), or compared there to None with ``is`` / ``is not``. The value is neither run nor
    kept there."""
    here = index.find(node)
    while here is not None and here >= 0 and index.parent[here] >= 0:
        above = index.order[index.parent[here]]
        kind = type(above)
        if kind in (cst.If, cst.While, cst.IfExp, cst.Assert):
            return above.test is node  # type: ignore[attr-defined]
        if kind is cst.Comparison:
            if above.left is not node or len(above.comparisons) != 1:  # type: ignore[attr-defined]
                return False
            comparison = above.comparisons[0]  # type: ignore[attr-defined]
            if type(comparison.operator) not in (cst.Is, cst.IsNot) or not _is_none(comparison.comparator):
                return False
        elif kind is cst.UnaryOperation:
            if type(above.operator) is not cst.Not:  # type: ignore[attr-defined]
                return False
        elif kind is not cst.BooleanOperation:
            return False
        node, here = above, index.parent[here]
    return False


def _is_none(node: cst.BaseExpression) -> bool:
    return type(node) is cst.Name and node.value == "None"


def terminal_name(func: cst.BaseExpression) -> Optional[str]:
    if type(func) is cst.Attribute:
        return func.attr.value
    if type(func) is cst.Name:
        return func.value
    return None


def watched_names(context, qualified_names: FrozenSet[str], endings: Tuple[str, ...] = ()) -> FrozenSet[str]:
    """Last components of ``qualified_names`` plus the file's import aliases for them (and for
    any name whose qualified name ends with one of ``endings``).

    A cheap first test for ``visit_Call``: a call whose function does not end in one of these
    names cannot be one of ``qualified_names``.
    """
    names = {q.rsplit(".", 1)[-1] for q in qualified_names}
    root = context.bindings
    while root.parent is not None:
        root = root.parent
    for local, qualified in root.names.items():
        if qualified is not None and (canonical(qualified) in qualified_names or qualified.endswith(endings)):
            names.add(local)
    return frozenset(names)


def enclosing(context, node_type: type) -> Optional[cst.CSTNode]:
    """The innermost statement of ``node_type`` around the node being visited."""
    for statement in reversed(context.statement_stack):
        if isinstance(statement, node_type):
            return statement
    return None




def block_statements(suite: cst.BaseSuite) -> Iterable[cst.CSTNode]:
    return suite.body if type(suite) is cst.IndentedBlock else [suite]


def block_indent(suite: cst.BaseSuite, module: cst.Module) -> str:
    if type(suite) is cst.IndentedBlock:
        return suite.indent if suite.indent is not None else module.default_indent
    return ""


def is_staticmethod(method: cst.FunctionDef) -> bool:
    """A ``@staticmethod``: its first parameter is an argument like the others."""
    return any(type(d.decorator) is cst.Name and d.decorator.value == "staticmethod" for d in method.decorators)


def is_static(method: cst.FunctionDef) -> bool:
    return any(
        type(d.decorator) is cst.Name and d.decorator.value in ("staticmethod", "classmethod")
        for d in method.decorators
    )


_PROPERTIES = frozenset({"property", "cached_property", "functools.cached_property"})


def property_returns(methods, name: str) -> Optional[List[cst.BaseExpression]]:
    """What reading ``self.<name>`` gives when the class (``methods``: its ``Scope``s) makes
    ``name`` a ``@property`` (or ``cached_property``): the values its getter's ``return``
    statements return; None when ``name`` is not a property of the class (a plain method, or
    absent)."""
    found: Optional[List[cst.BaseExpression]] = None
    for method in methods:
        function = method.function
        if method.name != name or function is None:
            continue
        decorators = {
            dotted_name(d.decorator) for d in function.decorators if type(d.decorator) in (cst.Name, cst.Attribute)
        }
        if {f"{name}.setter", f"{name}.deleter"} & decorators:
            continue
        if not decorators & _PROPERTIES:
            return None  # a method called as such
        found = (found or []) + [
            statement.value for statement in _small_statements(_body_statements(function.body))
            if type(statement) is cst.Return and statement.value is not None
        ]
    return found


# -- statements, scopes and `self` paths (used by the checkpoint model) ----------------
def _walk(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """Every node below ``node``, not entering nested classes."""
    stack = list(node.children)
    while stack:
        child = stack.pop()
        yield child
        if type(child) is not cst.ClassDef:
            stack.extend(child.children)


# Node types whose code-carrying children (tree.children) come in another order than libcst's
# ``children`` (which ``_walk`` follows): a dataclass field order that is not the source order.
_REORDERED = (cst.IfExp, cst.Slice, cst.ExceptHandler, cst.ImportFrom)


def _walk_types(node: cst.CSTNode, node_types: Tuple[type, ...]) -> List[cst.CSTNode]:
    """``[n for n in _walk(node) if type(n) in node_types]``, in the same order, from the
    file's shared index when it can: the nodes below ``node`` (nested classes not entered)
    sorted as ``_walk`` meets them, last subtree first (its stack pops the last child first).
    Layout fields hold none of the node types asked here (calls, returns); where a node of
    ``_REORDERED`` has them in two of its children, the order could differ: then ``_walk``'s
    stack is replayed over the index (``_replayed``)."""
    found = indexed(node)
    if found is not None:
        index, here = found
        end, order = index.end, index.order
        picked = _index_scan(index, here, node_types)
        if picked and not _reordered_between(index, here, picked):
            picked.sort(key=lambda at: (-end[at], at))
            return [order[at] for at in picked]
        if not picked:
            return []
        return [order[at] for at in _replayed(index, here, picked)]
    return [n for n in _walk(node) if type(n) in node_types]


def _replayed(index, here: int, picked: List[int]) -> List[int]:
    """``picked`` (ascending positions strictly below ``here``) in the order ``_walk(order[here])``
    meets them: its stack, over the index's children in libcst's order (a ``_REORDERED`` node's
    ranked by libcst's ``children``), entering only the children whose subtree holds a picked
    position, without the cost of libcst's ``children`` on every node."""
    order, kids, end = index.order, index.kids, index.end
    wanted = set(picked)
    count = len(picked)

    def below(at: int) -> List[int]:
        holding = []
        child = at + 1
        for _ in kids[at]:
            first = bisect_left(picked, child)
            if first < count and picked[first] < end[child]:
                holding.append(child)
            child = end[child]
        node = order[at]
        if len(holding) > 1 and type(node) in _REORDERED:
            rank = {id(inner): number for number, inner in enumerate(node.children)}
            holding.sort(key=lambda position: rank[id(order[position])])
        return holding

    met: List[int] = []
    stack = below(here)
    while stack:
        at = stack.pop()
        if at in wanted:
            met.append(at)
        if type(order[at]) is not cst.ClassDef:
            stack.extend(below(at))
    return met


def _index_scan(index, here: int, node_types: Tuple[type, ...]) -> List[int]:
    """Positions of ``node_types`` strictly below ``here``, nested classes not entered."""
    end = index.end
    picked, skip = [], -1
    for at in index.positions_in(here, (*node_types, cst.ClassDef)):
        if at < skip or at == here:
            continue
        if type(index.order[at]) is cst.ClassDef:
            skip = end[at]
            if cst.ClassDef not in node_types:
                continue
        picked.append(at)
    return picked


def _reordered_between(index, here: int, picked: List[int]) -> bool:
    """Whether a ``_REORDERED`` node below ``here`` holds picked nodes in two of its children."""
    end, position = index.end, index.position
    for at in index.positions_in(here, _REORDERED):
        holding = 0
        for child in index.kids[at]:
            start = position[id(child)]
            first = bisect_left(picked, start)
            if first < len(picked) and picked[first] < end[start]:
                holding += 1
        if holding > 1:
            return True
    return False


def _flat_statements(statements: Sequence[cst.CSTNode]) -> Iterator[cst.CSTNode]:
    """Statements of a block and of the if/for/with/try blocks inside it (not of defs)."""
    for statement in statements:
        yield statement
        for block in _child_blocks(statement):
            yield from _flat_statements(block)


def _small_statements(statements: Sequence[cst.CSTNode]) -> Iterator[cst.BaseSmallStatement]:
    for statement in _flat_statements(statements):
        if type(statement) is cst.SimpleStatementLine:
            yield from statement.body


def sole_return(function: cst.FunctionDef) -> Optional[cst.BaseExpression]:
    """``value`` when the body of ``function``, its docstring aside, is one ``return value``."""
    body = [
        s for s in function.body.body
        if not (type(s) is cst.SimpleStatementLine and len(s.body) == 1 and type(s.body[0]) is cst.Expr
                and type(s.body[0].value) in (cst.SimpleString, cst.ConcatenatedString))
    ]
    line = body[0] if len(body) == 1 else None
    small = line.body[0] if type(line) is cst.SimpleStatementLine and len(line.body) == 1 else None
    return small.value if type(small) is cst.Return else None


def _first_param(function: cst.FunctionDef) -> Optional[str]:
    params = [*function.params.posonly_params, *function.params.params]
    return params[0].name.value if params else None


def _scope_of(function: Union[cst.FunctionDef, cst.Lambda], parent: Bindings) -> Bindings:
    """The names a function body sees, as the engine binds them during its traversal."""
    scope = Bindings(parent)
    scope.bind_parameters(function.params)
    if type(function) is cst.FunctionDef:
        scope.bind_statements(_body_statements(function.body))
    return scope


def _root(scope: Bindings) -> Bindings:
    while scope.parent is not None:
        scope = scope.parent
    return scope


def self_path(node: cst.BaseExpression, self_name: Optional[str]) -> Optional[List[str]]:
    """``["a", "b"]`` for ``self.a.b``; None for anything else."""
    parts: List[str] = []
    while type(node) is cst.Attribute:
        parts.append(node.attr.value)
        node = node.value
    if (
        self_name is None
        or not parts
        or not (type(node) is cst.Name and node.value == self_name)
    ):
        return None
    return list(reversed(parts))


def loop_item(loop: cst.For) -> Tuple[cst.BaseAssignTargetExpression, cst.BaseExpression]:
    """``(target, iterable)`` of a ``for``, seen through ``enumerate``: ``for i, block in
    enumerate(self.blocks)`` gives ``(block, self.blocks)``."""
    target, iterable = loop.target, loop.iter
    if (
        type(iterable) is cst.Call
        and type(iterable.func) is cst.Name
        and iterable.func.value == "enumerate"
        and iterable.args
        and type(target) is cst.Tuple
        and len(target.elements) == 2
    ):
        return target.elements[1].value, iterable.args[0].value
    return target, iterable


def arms(value: cst.BaseExpression) -> Iterator[cst.BaseExpression]:
    """The values an expression may be: both arms of ``a if c else b`` and of ``a or b``."""
    if type(value) is cst.IfExp:
        yield from arms(value.body)
        yield from arms(value.orelse)
    elif type(value) is cst.BooleanOperation:
        yield from arms(value.left)
        yield from arms(value.right)
    else:
        yield value


def unpacked(target: cst.BaseExpression, value: cst.BaseExpression) -> list:
    """``(target, value)`` pairs of ``a, b = x, y`` (no starred element); [] otherwise."""
    targets, values = target.elements, value.elements  # type: ignore[attr-defined]
    if len(targets) != len(values) or any(type(e) is cst.StarredElement for e in (*targets, *values)):
        return []
    return [(t.value, v.value) for t, v in zip(targets, values)]


def slice_of(value: Optional[cst.BaseExpression], name: str) -> bool:
    """``value`` is ``name[a:b]`` (``recent = recent[-k:]``): a part of ``name`` kept."""
    return (
        type(value) is cst.Subscript and dotted_name(value.value) == name  # type: ignore[union-attr]
        and all(type(element.slice) is cst.Slice for element in value.slice)  # type: ignore[union-attr]
    )


def unquoted(description: str) -> str:
    """A message's description without its code quotes when it is one code span (```nn.Conv1d```
    -> ``nn.Conv1d``), to be set inside another; one holding spans of its own is kept whole
    (```get_norm``, which returns ... or ``nn.Identity```)."""
    if description.count("`") == 2 and description.startswith("`") and description.endswith("`"):
        return description[1:-1]
    return description

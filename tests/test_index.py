"""The shared pre-order index of a file (tree.NodeIndex) and the walks that answer from it:
each must give what the walk it replaced gave, node for node and in the same order, for
indexed nodes and for nodes no index holds (built by a fix)."""

from __future__ import annotations

import textwrap
from typing import List

import libcst as cst
import pytest

from torchmemlint.analysis.layer_lists import enclosing_definitions, splices
from torchmemlint.analysis.syntax import _walk, _walk_types
from torchmemlint.tree import NodeIndex, children, contains, node_index, nodes_of, path_to, scan, walk

SOURCE = textwrap.dedent(
    '''
    import functools
    import torch.nn as nn
    from torch.nn import functional as F

    Act = functools.partial(nn.LeakyReLU, 0.1)


    @register(make_name("block"))
    class Block(nn.Module, metaclass=pick(lambda x: x)):
        def __init__(self, dim, act_layer=nn.ReLU, drop=0.0):
            super().__init__()
            layers = [nn.Linear(dim, dim), act_layer()]
            if drop:
                layers.append(nn.Dropout(drop))
            self.body = nn.Sequential(*layers)
            self.gate = (lambda t: t.sigmoid())

            class Inner(nn.Module):
                def run(self, x):
                    return F.relu(x)

        def forward(self, x, mask=None):
            y = self.body(x) if mask is None else self.body(x * mask)
            z = x[self.lo(): self.hi()]
            try:
                out = self.helper(y)
            except make_error() as error:
                out = self.fallback(z)
            return [F.gelu(v) for v in (out, y)]

        def helper(self, y):
            def inner(v):
                return v.relu_()
            return inner(y)


    def make_layers(n):
        return [nn.Linear(n, n), Act()]
    '''
)


def _old_walk(node: cst.CSTNode) -> List[cst.CSTNode]:
    """The walk the index replaced: pre-order over ``children``."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(reversed(children(current)))
    return found


def _old_path_to(root, target):
    stack, path = [(root, 0)], []
    while stack:
        node, depth = stack.pop()
        del path[depth:]
        path.append(node)
        if node is target:
            return path
        stack.extend((child, depth + 1) for child in reversed(children(node)))
    return None


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


@pytest.fixture()
def module():
    module = cst.parse_module(SOURCE)
    index = node_index(module)  # kept alive for the test, as the engine's walker keeps it
    yield module
    del index


def _all(module, node_type):
    return [n for n in _old_walk(module) if type(n) is node_type]


def test_order_parents_ranges_and_scopes_match_a_walk(module):
    index: NodeIndex = node_index(module)
    order = _old_walk(module)
    assert _same(index.order, order)
    for here, node in enumerate(order):
        assert index.find(node) == here
        assert _same(index.kids[here], children(node))
        assert _same(index.order[here:index.end[here]], _old_walk(node))
        for child in children(node):
            assert index.parent[index.find(child)] == here
    methods = {n.name.value: n for n in _all(module, cst.FunctionDef)}
    forward = index.find(methods["forward"])
    assert index.order[index.scope[forward]].name.value == "Block"  # a method: its class
    inner = index.find(methods["inner"])
    assert index.order[index.function_of(inner)] is methods["helper"]
    assert index.function_of(index.find(_all(module, cst.ClassDef)[0])) == -1


def test_walk_and_nodes_of_answer_from_the_index_and_fall_back_for_new_nodes(module):
    for node in _old_walk(module)[::7]:
        assert _same(walk(node), _old_walk(node))
    calls = nodes_of(module, cst.Call)
    assert _same(calls, _all(module, cst.Call))
    mixed = nodes_of(module, cst.Call, cst.Lambda, cst.ListComp)
    assert _same(mixed, [n for n in _old_walk(module) if type(n) in (cst.Call, cst.Lambda, cst.ListComp)])
    # a node built by a fix is in no index: walked, with the file's own nodes under it
    built = calls[0].with_changes(args=[*calls[0].args, cst.Arg(cst.Name("extra"))])
    assert node_index(module).find(built) is None
    assert _same(walk(built), _old_walk(built))
    assert [n.value for n in nodes_of(built, cst.Name)][-1] == "extra"


def test_path_to_and_contains(module):
    order = _old_walk(module)
    statements = _all(module, cst.SimpleStatementLine)
    for target in order[::5]:
        for root in (module, statements[3], target):
            expected = _old_path_to(root, target)
            found = path_to(root, target)
            assert (found is None) == (expected is None)
            if expected is not None:
                assert _same(found, expected)
            assert contains(root, target) == (expected is not None)
    outside = order[-1]
    assert path_to(statements[3], outside) is None and not contains(statements[3], outside)
    built = statements[3].with_changes()  # a copy: not indexed, same children
    inner = children(statements[3])[0]
    assert _same(path_to(built, inner), [built, inner])


def test_scan_does_not_enter_nested_scopes(module):
    nested = (cst.FunctionDef, cst.ClassDef, cst.Lambda)
    init = next(n for n in _all(module, cst.FunctionDef) if n.name.value == "__init__")

    def old_own(node, types, strict):
        found, stack = [], [node]
        while stack:
            current = stack.pop()
            if type(current) in types and not (strict and current is node):
                found.append(current)
            stack.extend(c for c in reversed(children(current)) if type(c) not in nested)
        return found

    for types in ((cst.Call,), (cst.Name, cst.Assign), (cst.Return,)):
        for strict in (False, True):
            assert _same(scan(init.body, types, nested, strict), old_own(init.body, types, strict))
    names = {n.value for n in scan(init.body, (cst.Name,), nested)}
    assert "t" not in names  # the lambda's parameter
    assert "relu" not in names  # in the nested class's method
    assert "sigmoid" not in names


def test_walk_types_keeps_the_order_of_libcsts_children(module):
    """``_walk`` follows libcst's children, last first; an IfExp, a slice and an except clause
    list theirs in another order than the dataclass fields (the fallback must keep that)."""
    for function in _all(module, cst.FunctionDef) + _all(module, cst.ClassDef):
        for types in ((cst.Call,), (cst.Return,), (cst.Call, cst.Return)):
            expected = [n for n in _walk(function.body) if type(n) in types]
            assert _same(_walk_types(function.body, types), expected)
    forward = next(n for n in _all(module, cst.FunctionDef) if n.name.value == "forward")
    order = [cst.Module([]).code_for_node(c.func) for c in _walk_types(forward.body, (cst.Call,))]
    # libcst lists an except clause's type before its body (the dataclass: body first); seen
    # last first, the body's calls come before the type's
    assert order.index("self.fallback") < order.index("make_error")


def test_enclosing_definitions_and_splices(module):
    functions = {n.name.value: n for n in _all(module, cst.FunctionDef)}
    block = _all(module, cst.ClassDef)[0]
    relu = next(c for c in _all(module, cst.Call) if cst.Module([]).code_for_node(c.func) == "v.relu_")
    assert enclosing_definitions(module, relu) == (functions["inner"], None)
    sigmoid = next(c for c in _all(module, cst.Call) if cst.Module([]).code_for_node(c.func) == "t.sigmoid")
    assert enclosing_definitions(module, sigmoid) == (functions["__init__"], block)
    assert enclosing_definitions(module, functions["forward"]) == (functions["forward"], block)
    assert enclosing_definitions(module, cst.Name("elsewhere")) == (None, None)
    found = splices(module)
    assert [(cst.Module([]).code_for_node(c.func), f.name.value) for c, f, _ in found] == [
        ("nn.Sequential", "__init__")
    ]
    assert isinstance(found[0][2], cst.SimpleStatementLine)


def test_the_factories_index_reads_a_class_through_its_body_only(module):
    """Calls in a class's decorators, bases and keywords were never collected: still not."""
    from torchmemlint.analysis.factories import Factories
    from torchmemlint.analysis.names import Bindings

    bindings = Bindings(None)
    bindings.bind_statements(module.body)
    factories = Factories(module, bindings.qualify)
    factories._index()
    assert "register" not in factories._calls and "make_name" not in factories._calls
    assert "pick" not in factories._calls
    assert [f.name.value for _, f in factories._calls["Dropout"]] == ["__init__"]
    assert [f.name.value for _, f in factories._calls["relu"]] == ["run"]  # the inner class's
    assert "act_layer" in factories.names() and "Act" in factories.names()
    owners = {f.name.value: factories._owner[id(f)] for f in _all(module, cst.FunctionDef)}
    assert owners["forward"] is not None and owners["run"] is not None
    assert owners["inner"] is None and owners["make_layers"] is None


@pytest.mark.slow
def test_typed_readers_give_the_children_the_generic_reading_gives():
    """``children`` reads each node type with code written from libcst's field types;
    ``generic_children`` checks every value. Same nodes, same order, for every node of every
    fixture (match statements, f-strings, decorators, star-args, walrus ... included)."""
    from pathlib import Path

    from torchmemlint.tree import generic_children, parse_module

    root = Path(__file__).resolve().parent.parent / "fixtures"
    extra = textwrap.dedent(
        '''
        match command:
            case [x, *rest] if (y := x):
                pass
            case {"k": v, **others}:
                pass
        f"{value!r:>{width}}" "tail"
        try:
            pass
        except* ValueError as error:
            raise Other() from error
        lambda *a, b=1, **k: (yield)
        '''
    )
    texts = [path.read_text(encoding="utf-8") for path in sorted(root.rglob("*.py"))]
    seen = set()
    for text in texts + [SOURCE, extra]:
        stack: List[cst.CSTNode] = [parse_module(text)]
        while stack:
            node = stack.pop()
            seen.add(type(node))
            fast, reference = children(node), generic_children(node)
            assert [id(child) for child in fast] == [id(child) for child in reference], node
            stack.extend(reference)
    assert len(seen) > 60  # most of libcst's node types were read

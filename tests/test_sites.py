"""``analysis/sites.py`` answers, at any node of the index, what the engine's traversal holds
there: the statements around the node and the qualified name of an expression."""

from __future__ import annotations

import textwrap

import libcst as cst

from torchmemlint.analysis.sites import Sites
from torchmemlint.context import FileContext
from torchmemlint.engine import _BatchedWalker
from torchmemlint.tree import parse_module

from traversal_reference import ReferenceWalk

SOURCE = textwrap.dedent(
    """
    import torch
    import torch.nn as nn
    from torch import nn as tnn


    def build(nn=None):
        from torchvision.models import resnet18 as nn2
        layer = nn.ReLU()  # the parameter, not the module
        model = nn2()
        model.maxpool = tnn.Identity()
        if "resnet" in name:
            for block in model.layer1:
                block.relu = torch.nn.ReLU(inplace=True)
        fn = lambda torch: torch.relu(layer)
        return model


    class Net(nn.Module):
        act = nn.ReLU()

        def __init__(self):
            super().__init__()
            import torch.nn.functional as nn
            self.pool = nn.relu

        def forward(self, x):
            def inner(nn):
                return nn.Identity()

            return self.pool(x)


    y = [nn.Identity() for nn in range(3)]
    """
)


class _Probe:
    """Records, at every node of the types it visits, the engine's statement stack and what
    ``FileContext.qualify`` answers there."""

    def __init__(self, context: FileContext) -> None:
        self.context = context
        self.seen = {}

    def _record(self, node: cst.CSTNode) -> None:
        qualified = self.context.qualify(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
        self.seen[id(node)] = (node, list(self.context.statement_stack), qualified)

    visit_Name = visit_Attribute = visit_Call = visit_Assign = visit_ClassDef = visit_If = _record


def _reference(module: cst.Module, context: FileContext) -> dict:
    """What a recursive walk (tests/traversal_reference.py) holds at each node ``_Probe`` visits
    that the file's index holds (not a keyword argument's name, which no rule is shown)."""
    seen = {}
    index = context.analysis.index

    def record(node, statements, bindings):
        if isinstance(node, (cst.Name, cst.Attribute, cst.Call, cst.Assign, cst.ClassDef, cst.If)) and index.find(node) is not None:
            qualified = bindings.qualify(node) if isinstance(node, (cst.Name, cst.Attribute)) else None
            seen[id(node)] = (node, statements, qualified)

    module.visit(ReferenceWalk(context.module_bindings, record))
    return seen


def test_the_engine_walk_holds_what_a_recursive_walk_holds():
    """The engine meets only the hooked nodes and sets the context at each from ``Sites``:
    what its rules see there is what a recursive walk holds."""
    module = parse_module(SOURCE)
    context = FileContext(module, "probe.py", {}, SOURCE)
    probe = _Probe(context)
    _BatchedWalker(context, [probe]).walk(module)
    reference = _reference(module, context)
    assert len(reference) > 100
    assert {key: (node, [id(s) for s in stack], q) for key, (node, stack, q) in probe.seen.items()} == {
        key: (node, [id(s) for s in stack], q) for key, (node, stack, q) in reference.items()
    }
    assert context.statement_stack == [] and context.bindings is context.module_bindings


def test_sites_answer_as_the_traversal_does():
    module = parse_module(SOURCE)
    context = FileContext(module, "probe.py", {}, SOURCE)
    reference = _reference(module, context)
    sites = Sites(context.analysis.index, context.module_bindings)
    index = context.analysis.index
    assert len(reference) > 100
    qualified_somewhere = set()
    for node, stack, qualified in reference.values():
        here = index.find(node)
        assert sites.statements(here) == stack, context.module.code_for_node(node)
        if isinstance(node, (cst.Name, cst.Attribute)):
            assert sites.qualify(here)(node) == qualified, context.module.code_for_node(node)
            qualified_somewhere.add((context.module.code_for_node(node), qualified))
        for node_type in (cst.ClassDef, cst.FunctionDef, cst.If):
            expected = next((s for s in reversed(stack) if isinstance(s, node_type)), None)
            assert sites.enclosing(here, node_type) is expected
    # the scopes differ: a parameter, a function's own import and a lambda's parameter shadow
    # the module's names, a class body does not
    assert ("nn.ReLU", "torch.nn.ReLU") in qualified_somewhere  # the class attribute
    assert ("nn.ReLU", None) in qualified_somewhere  # `build`'s parameter `nn`
    assert ("nn2", "torchvision.models.resnet18") in qualified_somewhere
    assert ("nn.relu", "torch.nn.functional.relu") in qualified_somewhere
    assert ("torch.relu", None) in qualified_somewhere  # the lambda's parameter
    assert ("torch.nn.ReLU", "torch.nn.ReLU") in qualified_somewhere

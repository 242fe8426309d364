"""The ``Cursor`` (``analysis/sites.py``) says at every call what the engine's traversal says
there: the same calls in the same order, the same statements around each, and the same
qualified name for its callee (functions, lambdas, comprehensions, nested classes, decorators,
defaults, one-line bodies, shadowed imports). The TML2xx rules ask their analysis from
``visit_Module`` and rely on it."""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.sites import Cursor
from torchmemlint.context import FileContext
from torchmemlint.engine import _BatchedWalker
from torchmemlint.tree import node_index

from traversal_reference import ReferenceWalk

SOURCE = '''
import torch
import torch.nn as nn
from torch.nn import functional as F


@torch.no_grad()
def top(x, relu=F.relu):
    y = relu(x)
    if y.sum() > 0: return F.relu(y, inplace=True)
    f = lambda t, F=nn: F.ReLU()(t)
    return [torch.sigmoid(v) for v in (x, y)], f(x)


class Block(nn.Module):
    act = nn.ReLU(inplace=True)

    def __init__(self, nn=None):
        super().__init__()
        self.seq = nn.Sequential(torch.nn.ReLU(), nn.Conv2d(1, 1, 1))  # `nn` is the parameter here

        class Inner:
            def go(self, t):
                import torch.nn.functional as F
                return F.silu(t, inplace=True)

    def forward(self, x):
        try:
            x = self.seq(x)
        except RuntimeError:
            x = torch.relu_(x)
        else:
            x = x.relu_()
        with torch.no_grad():
            for i in range(2):
                x = F.leaky_relu(x, 0.1) if i else nn.functional.elu(x)
        return x
'''


class _Recorder:
    """Stands in for a rule: records what the traversal says at each call."""

    def __init__(self, context):
        self.context = context
        self.seen = []

    def visit_Call(self, node):
        self.seen.append((id(node), [id(s) for s in self.context.statement_stack], self.context.qualify(node.func)))


def test_the_cursor_agrees_with_the_traversal_at_every_call():
    module = cst.parse_module(SOURCE)
    context = FileContext(module, "block.py", {}, text=SOURCE)
    seen = []

    def record(node, statements, bindings):
        if isinstance(node, cst.Call):
            seen.append((id(node), [id(s) for s in statements], bindings.qualify(node.func)))

    module.visit(ReferenceWalk(context.module_bindings, record))
    assert len(seen) > 15
    recorder = _Recorder(context)  # the engine's walk says the same
    _BatchedWalker(context, [recorder]).walk(module)  # type: ignore[list-item]
    assert recorder.seen == seen

    cursor = Cursor(node_index(module), context.module_bindings)
    walked = [
        (id(node), [id(s) for s in cursor.statement_stack], cursor.qualify(node.func))  # type: ignore[attr-defined]
        for node in cursor.walk(cst.Call)
    ]
    assert walked == seen
    # the shadowing is real: some calls qualify differently from the module's own names
    qualified = {name for _, _, name in walked}
    assert "torch.nn.functional.silu" in qualified and "torch.nn.Sequential" not in qualified


def test_the_cursor_skips_what_keep_refuses():
    module = cst.parse_module(SOURCE)
    context = FileContext(module, "block.py", {}, text=SOURCE)
    cursor = Cursor(node_index(module), context.module_bindings)
    kept = list(cursor.walk(cst.Call, lambda call: type(call.func) is cst.Attribute and call.func.attr.value == "relu_"))
    assert [cst.Module([]).code_for_node(call) for call in kept] == ["torch.relu_(x)", "x.relu_()"]
    assert cursor.statement_stack == []

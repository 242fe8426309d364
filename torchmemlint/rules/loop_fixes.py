"""The fixes TML501 offers (``rules/loops.py``): ``torch.no_grad()`` around the evaluation."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchmemlint.analysis.autograd import Frame
from torchmemlint.analysis.rendering import render
from torchmemlint.analysis.training import ScopeFacts
from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixSpec, NodeEdit


def no_grad_fix(facts: ScopeFacts, target: Optional[Frame]) -> Optional[FixSpec]:
    """TML501's fix: the statement ``target`` wrapped in ``with torch.no_grad():`` (a loop or a
    statement), or, where None, the function decorated with ``@torch.no_grad()``; None where the
    file does not name ``torch`` or the function is a coroutine."""
    if not facts.torch_named:
        return None
    module = facts.walk.module
    if target is None:
        function = facts.scope.function
        assert function is not None
        if function.asynchronous is not None:
            return None
        decorator = cst.Decorator(decorator=cst.parse_expression("torch.no_grad()"))
        new = function.with_changes(decorators=[*function.decorators, decorator])
        text = render(module, new, facts.scope.indents)
        return FixSpec(
            Applicability.UNSAFE,
            "Decorate the function with `@torch.no_grad()`",
            (NodeEdit(function, text),),
        )
    statement = target.statement
    wrapped = cst.With(
        items=[cst.WithItem(item=cst.parse_expression("torch.no_grad()"))],
        body=cst.IndentedBlock(body=[statement.with_changes(leading_lines=[])]),
        leading_lines=statement.leading_lines,
    )
    what = "loop" if type(statement) in (cst.For, cst.While) else "statement"
    return FixSpec(
        Applicability.UNSAFE,
        f"Wrap the {what} in `with torch.no_grad():`",
        (NodeEdit(statement, render(module, wrapped, target.indents)),),
    )

"""Module classes of the project whose ``forward`` returns its input unchanged (Deeplodocus's
``class EmptyLayer(nn.Module): def forward(self, x): return x``), built in an arm where another
arm builds a layer (``self.norm_layer = nn.BatchNorm2d(c)`` / ``else: self.norm_layer =
EmptyLayer()``): an ``nn.Identity`` by another name (``producers.Producers._passed_through``)."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.names import dotted_name


def defined_class(file: Any, func: cst.BaseExpression) -> Tuple[Any, Optional[cst.ClassDef]]:
    """The class ``func`` names: this file's (a plain name), else the one another file of the
    project defines (also imported by absolute name from the file's own package), with the
    analysis of the file that defines it; ``(file, None)`` when neither."""
    classdef = file.callables.classes.get(func.value) if type(func) is cst.Name else None
    name = dotted_name(func)
    if classdef is None and file.links is not None and name is not None:
        found = file.links.definition(name, "class", package=True)
        if found is not None:
            return found
    return file, classdef


def identity_class(file: Any, func: cst.BaseExpression) -> bool:
    """``func`` names a class of this file or of another file of the project whose ``forward``
    is only ``return <its first argument>`` (a docstring or ``pass`` aside)."""
    classdef = defined_class(file, func)[1]
    body = classdef.body.body if classdef is not None and type(classdef.body) is cst.IndentedBlock else ()
    forward = next((s for s in body if type(s) is cst.FunctionDef and s.name.value == "forward"), None)
    if forward is None or forward.decorators or type(forward.body) is not cst.IndentedBlock:
        return False
    params = forward.params.params
    if len(params) != 2 or type(forward.params.star_arg) is cst.Param:
        return False
    statements = [s for s in forward.body.body if not _docstring_or_pass(s)]
    if len(statements) != 1 or type(statements[0]) is not cst.SimpleStatementLine or len(statements[0].body) != 1:
        return False
    returned = statements[0].body[0]
    return type(returned) is cst.Return and type(returned.value) is cst.Name and returned.value.value == params[1].name.value


def _docstring_or_pass(statement: cst.CSTNode) -> bool:
    return type(statement) is cst.SimpleStatementLine and all(
        (type(small) is cst.Expr and type(small.value) is cst.SimpleString) or type(small) is cst.Pass for small in statement.body
    )

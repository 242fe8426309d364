"""Attributes of ``self`` named at run time by a template: ``setattr(self, f"act_{layer}",
nn.LeakyReLU(0.2))`` in a loop of ``__init__`` and ``getattr(self, f"act_{layer}")(ptr)`` in a
loop of ``forward`` (scGLUE's encoders). Every attribute one template names is taken as one
attribute, named by the template with each expression replaced by ``{}`` (``act_{}``): the
same construction in every round, called in every round. A literal name (``getattr(self,
"act")``) is that attribute. Read by ``ClassModel`` (assignments and references) and by the
value graph (``self.<name>(x)`` calls)."""

from __future__ import annotations

import re
from typing import Optional, Tuple

import libcst as cst


def attribute_template(node: cst.BaseExpression) -> Optional[str]:
    """``"act_{}"`` for ``f"act_{layer}"``, ``"act"`` for ``"act"``; None for anything else."""
    if type(node) is cst.SimpleString:
        value = node.evaluated_value
        return value if isinstance(value, str) and value.isidentifier() else None
    if type(node) is not cst.FormattedString or node.prefix.lower() != "f":
        return None
    parts = []
    for part in node.parts:
        if type(part) is cst.FormattedStringText:
            parts.append(part.value)
        elif part.conversion is None and part.format_spec is None:  # type: ignore[union-attr]
            parts.append("{}")
        else:
            return None
    name = "".join(parts)
    return name if name.replace("{}", "x").isidentifier() else None


def _named(call: cst.CSTNode, function: str, count: int, self_name: Optional[str]) -> Optional[Tuple[str, cst.Call]]:
    if (
        type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != function
        or len(call.args) != count or any(a.keyword is not None or a.star for a in call.args)
        or type(call.args[0].value) is not cst.Name or call.args[0].value.value != self_name
    ):
        return None
    name = attribute_template(call.args[1].value)
    return None if name is None else (name, call)


def set_attribute(small: cst.CSTNode, self_name: Optional[str]) -> Optional[Tuple[str, cst.BaseExpression]]:
    """``setattr(self, <template>, value)`` as a statement: (the attribute's name, value)."""
    found = _named(small.value, "setattr", 3, self_name) if type(small) is cst.Expr else None
    return None if found is None else (found[0], found[1].args[2].value)


def got_attribute(call: cst.CSTNode, self_name: Optional[str]) -> Optional[str]:
    """The attribute's name of ``getattr(self, <template>)`` (no default)."""
    found = _named(call, "getattr", 2, self_name)
    return None if found is None else found[0]


def spelled_elsewhere(model: object, name: str) -> bool:
    """Is an attribute the template ``name`` stands for also read or assigned by its own name
    in the class (``self.act_0``)? Then the template's uses are not all of that module's."""
    if "{}" not in name:
        return False
    pattern = re.compile("^" + "[A-Za-z0-9_]+".join(map(re.escape, name.split("{}"))) + "$")
    return any(pattern.match(other) for other in (*model.references, *model.assignments) if other != name)  # type: ignore[attr-defined]

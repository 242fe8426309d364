"""Parameter-free layers kept as module attributes and only ever called (TML101's question).

``called_only_attributes(analysis, constructors)`` finds every ``self.x = nn.ReLU(...)`` (any
of ``constructors``, as the file spells or aliases them, resolved in the scope of the call)
in a module class whose methods only call ``self.x`` and that no other code of the file can
reach (``FileAnalysis.private_attribute``). Whether another file of the project reaches it is
the project index's question (``ProjectIndex.attribute_reached``), asked by the rule for its fix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import FrozenSet, List, Optional

import libcst as cst

from torchmemlint.analysis.classes import Assignment, ClassModel
from torchmemlint.analysis.sites import Sites
from torchmemlint.analysis.syntax import terminal_name, watched_names


@dataclass(frozen=True)
class CalledOnlyAttribute:
    """``self.<assignment.name> = <node>``: a constructor of ``qualified``, only called."""

    node: cst.Call  # the constructor call
    qualified: str
    classdef: cst.ClassDef
    model: ClassModel
    assignment: Assignment
    functional: Optional[str]  # how the file spells ``torch.nn.functional`` there (None: it cannot)


def called_only_attributes(analysis, constructors: FrozenSet[str]) -> List[CalledOnlyAttribute]:
    """The constructor calls of ``constructors`` kept as only-called attributes, in source order."""
    found: List[CalledOnlyAttribute] = []
    watched = watched_names(analysis, constructors)
    index = analysis.index
    order = index.order
    sites: Optional[Sites] = None
    for here in index.positions(cst.Call):
        node = order[here]
        if terminal_name(node.func) not in watched:  # type: ignore[attr-defined]
            continue
        sites = sites or Sites(index, analysis.bindings)
        qualify = sites.qualify(here)
        qualified = qualify(node.func)  # type: ignore[attr-defined]
        if qualified not in constructors:
            continue
        classdef = sites.enclosing(here, cst.ClassDef)
        if type(classdef) is not cst.ClassDef:
            continue
        model = sites.class_model(analysis, classdef, qualify)  # type: ignore[arg-type]
        assignment = _attribute_assignment(model, sites.statements(here)[-1], node)  # type: ignore[arg-type]
        if assignment is None or not model.is_module():
            continue
        name = assignment.name
        if not model.only_called(name) or not analysis.private_attribute(classdef, name):
            continue
        found.append(
            CalledOnlyAttribute(
                node, qualified, classdef, model, assignment, analysis.functional_prefix(qualify)  # type: ignore[arg-type]
            )
        )
    return found


def _attribute_assignment(model: ClassModel, statement: cst.CSTNode, value: cst.Call) -> Optional[Assignment]:
    for assignments in model.assignments.values():
        for assignment in assignments:
            if assignment.statement is statement and assignment.value is value:
                single = model.single_assignment(assignment.name)
                return assignment if single is assignment and assignment.single_target else None
    return None

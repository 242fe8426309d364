"""torch's ``apply_activation_checkpointing(model, checkpoint_wrapper_fn=..., check_fn=...)``
read as what it checkpoints: it wraps every submodule of ``model`` that ``check_fn`` accepts
with ``checkpoint_wrapper_fn`` (torch's ``checkpoint_wrapper`` by default, non-reentrant), so
each module of the classes ``check_fn`` selects is a checkpointed segment of its own. The
classes: ``lambda m: isinstance(m, Block)``, ``isinstance(m, (A, B))``, ``type(m) is A``,
``type(m) in (A, B)``, their ``or``, also a ``def`` or a lambda bound to a name of the
function or of the module (``check_fn = lambda submodule: isinstance(submodule, T5Block)``);
anything else selects classes not known here. The wrapper: ``checkpoint_wrapper`` itself, or a
``functools.partial`` of it (``partial(checkpoint_wrapper, checkpoint_impl=
CheckpointImpl.REENTRANT, preserve_rng_state=False)``), also bound to a name: its keywords are
the ones torch's checkpoint gets (``wrapper_call``) and its ``checkpoint_impl`` the variant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional

import libcst as cst

from torchmemlint.analysis.checkpoints import (
    checkpoint_wrapper, keyword, MODULE, partial_wrapper, _positional, reentrant,
)
from torchmemlint.analysis.factories import assigned_values
from torchmemlint.analysis.syntax import _body_statements



@dataclass(frozen=True)
class Applied:
    check_fn: Optional[cst.BaseExpression]  # as the call passes it
    classes: Optional[List[cst.BaseExpression]]  # the classes it selects; None: not known
    wrapper_call: Optional[cst.Call]  # the `partial(checkpoint_wrapper, ...)` whose keywords torch's checkpoint gets
    reentrant: Optional[bool]  # None: another wrapper function, or a variant not written


def read_applied(call: cst.Call, qualify, models, function: Optional[cst.FunctionDef]) -> Applied:
    positional = _positional(call)

    def argument(name: str, position: int) -> Optional[cst.BaseExpression]:
        found = keyword(call, name)
        if found is not None:
            return found.value
        if any(arg.star for arg in positional[: position + 1]) or len(positional) <= position:
            return None
        return positional[position].value

    check_fn = argument("check_fn", 2)
    classes = _selected(_bound(check_fn, function, models.module)) if check_fn is not None else None
    wrapper_fn = argument("checkpoint_wrapper_fn", 1)
    if wrapper_fn is None:
        return Applied(check_fn, classes, None, False)  # torch's default: `checkpoint_wrapper`, NO_REENTRANT
    value = _bound(wrapper_fn, function, models.module)
    if type(value) in (cst.Name, cst.Attribute):
        wrapper = checkpoint_wrapper(value, qualify, models)
        return Applied(check_fn, classes, None, wrapper.reentrant if wrapper is not None and wrapper.form == MODULE else None)
    wrapper = partial_wrapper(value, qualify, models) if type(value) is cst.Call else None
    if wrapper is None or wrapper.form != MODULE:
        return Applied(check_fn, classes, None, None)
    return Applied(check_fn, classes, value, reentrant(wrapper, value))  # type: ignore[arg-type]


def _bound(value: Optional[cst.BaseExpression], function: Optional[cst.FunctionDef], module: cst.Module):
    """The one value a name is bound to in ``function`` or, failing that, at module level (a
    ``def`` of that name: the function itself); else the expression as it is."""
    if type(value) is not cst.Name:
        return value
    name = value.value
    found: List[cst.CSTNode] = list(assigned_values(function, name)) if function is not None else []
    if function is not None and not found:
        found = [s for s in _body_statements(function.body) if type(s) is cst.FunctionDef and s.name.value == name]
    if not found:
        for statement in module.body:
            if type(statement) is cst.FunctionDef and statement.name.value == name:
                found.append(statement)
            elif type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.Assign and any(
                        type(t.target) is cst.Name and t.target.value == name for t in small.targets
                    ):
                        found.append(small.value)
    return found[0] if len(found) == 1 else value


def _selected(check: cst.CSTNode) -> Optional[List[cst.BaseExpression]]:
    """The classes a ``check_fn`` accepts (see the module doc); None when not known."""
    if type(check) is cst.Lambda:
        params, body = check.params.params, check.body
    elif type(check) is cst.FunctionDef:
        statements = _body_statements(check.body)
        small = statements[0].body[0] if len(statements) == 1 and type(statements[0]) is cst.SimpleStatementLine else None
        if type(small) is not cst.Return or small.value is None:
            return None
        params, body = check.params.params, small.value
    else:
        return None
    if len(params) != 1:
        return None
    return _accepted(body, params[0].name.value)


def _accepted(test: cst.BaseExpression, name: str) -> Optional[List[cst.BaseExpression]]:
    if type(test) is cst.BooleanOperation and type(test.operator) is cst.Or:
        left, right = _accepted(test.left, name), _accepted(test.right, name)
        return None if left is None or right is None else left + right
    if type(test) is cst.Call and type(test.func) is cst.Name and test.func.value == "isinstance" and len(test.args) == 2:
        subject, kinds = test.args[0].value, test.args[1].value
        return _kinds(kinds) if type(subject) is cst.Name and subject.value == name else None
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        subject, target = test.left, test.comparisons[0]
        is_type = (
            type(subject) is cst.Call and type(subject.func) is cst.Name and subject.func.value == "type"
            and len(subject.args) == 1 and type(subject.args[0].value) is cst.Name and subject.args[0].value.value == name
        )
        if not is_type:
            return None
        if type(target.operator) in (cst.Is, cst.Equal):
            return _kinds(target.comparator)
        if type(target.operator) is cst.In and type(target.comparator) in (cst.Tuple, cst.List, cst.Set):
            return _kinds(target.comparator)
    return None


def _kinds(node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
    if type(node) in (cst.Name, cst.Attribute):
        return [node]
    if type(node) in (cst.Tuple, cst.List, cst.Set):
        found = []
        for element in node.elements:  # type: ignore[attr-defined]
            if type(element) is not cst.Element or type(element.value) not in (cst.Name, cst.Attribute):
                return None
            found.append(element.value)
        return found
    return None

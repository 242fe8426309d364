"""Checkpoint calls and their segments: where a call is (``ScopeTracker``: the class and
method around the node being visited) and what it recomputes (``callable_contents``, following
``CallableModel``; for ``checkpoint_sequential``, the segments it checkpoints)."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import libcst as cst

from torchmemlint.analysis.callables import CallableModel
from torchmemlint.analysis.checkpoints import Found, keyword, _positional, SEQ, SEQUENTIAL, Wrapper
from torchmemlint.analysis.classes import Env
from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.syntax import _body_statements, _first_param, loop_item



def file_models(rule) -> CallableModel:
    return rule.context.analysis.callables


class ScopeTracker:
    """Mixin for a rule (``class R(ScopeTracker, Rule)``): knows the class and method the node
    being visited is in, to resolve ``self.x`` and what a checkpoint call there recomputes."""

    context: Any  # the rule's FileContext (set by Rule.__init__)

    def __init__(self, context) -> None:
        super().__init__(context)
        self._classes: List[Tuple[cst.ClassDef, Bindings]] = []
        self._functions: List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._classes.append((node, self.context.bindings))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._classes.pop()

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        owner = None
        if self._classes:
            candidate = self._classes[-1][0]
            if any(statement is node for statement in _body_statements(candidate.body)):
                owner = candidate
        self._functions.append((node, owner))

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._functions.pop()

    def call_env(self) -> Env:
        """The environment of the node being visited: its scope and `self`'s class."""
        for function, owner in reversed(self._functions):
            if owner is not None:
                scope = next(scope for node, scope in self._classes if node is owner)
                model = file_models(self).model(owner, scope)
                innermost = self._functions[-1][0]  # where a nested `def` is looked up
                return Env(self.context.bindings, model, _first_param(function), innermost)
        innermost = self._functions[-1][0] if self._functions else None
        return Env(self.context.bindings, None, None, innermost)

    def loop_container(self, name: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """``self.blocks`` when ``name`` is the variable of an enclosing ``for`` over it."""
        if type(name) is not cst.Name:
            return None
        function = self._functions[-1][0] if self._functions else None
        for statement in reversed(self.context.statement_stack):
            if statement is function:
                break
            if type(statement) is not cst.For:
                continue
            target, iterable = loop_item(statement)
            if type(target) is cst.Name and target.value == name.value:
                return iterable
        return None

    def callable_contents(self, call: cst.Call, wrapper: Wrapper) -> Tuple[Dict[str, Found], str]:
        """Traits of what a checkpoint call recomputes, and how to name its callable.

        ``checkpoint(f, ...)`` and ``checkpoint_wrapper(module)``: what ``f``/``module`` runs;
        torch's ``checkpoint_sequential``: all segments but the last; timm's ``checkpoint_seq``:
        every element (a container or a list of them), but the last with ``skip_last=True``.
        """
        positional = _positional(call)
        if not positional or positional[0].star:
            return {}, ""
        target = positional[0].value
        models = file_models(self)
        env = self.call_env()
        label = f"`{self.context.module.code_for_node(target)}`" if type(target) is not cst.Lambda else "the lambda"
        container = self.loop_container(target)
        if container is not None:
            label += f" (an element of `{self.context.module.code_for_node(container)}`)"
            return models.contents(container, env, label), label
        segments: Optional[List[Tuple[cst.BaseExpression, Env, str]]] = None
        if wrapper.form == SEQUENTIAL:
            segments = _recomputed_segments(models.elements(target, env, label), positional)
        elif wrapper.form == SEQ:
            segments = _seq_elements(models, target, env, label)
            skip_last = keyword(call, "skip_last")
            if skip_last is not None and not (
                type(skip_last.value) is cst.Name and skip_last.value.value == "False"
            ):
                flatten = keyword(call, "flatten")
                known = segments is not None and flatten is None and not any(
                    where.endswith("[...]") for _, _, where in segments
                )
                segments = segments[:-1] if known else []  # type: ignore[index]
        if segments is not None:
            found: Dict[str, Found] = {}
            for element, element_env, where in segments:
                for trait, item in models.contents(element, element_env, where).items():
                    found.setdefault(trait, item)
            return found, label
        return models.contents(target, env, label), label


def _seq_elements(
    models: CallableModel, target: cst.BaseExpression, env: Env, label: str
) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
    """What timm's ``checkpoint_seq`` runs one by one: a list literal's items or a container's."""
    if type(target) in (cst.List, cst.Tuple):
        if any(type(element) is cst.StarredElement for element in target.elements):
            return None
        return [(element.value, env, label) for element in target.elements]
    return models.elements(target, env, label)


def _recomputed_segments(
    elements: Optional[List[Tuple[cst.BaseExpression, Env, str]]], positional: Sequence[cst.Arg]
) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
    """The modules `checkpoint_sequential` checkpoints: all but its last segment, which runs
    normally. None unless the module list and the segment count are both known."""
    if elements is None or any(where.endswith("[...]") for _, _, where in elements):
        return None  # built by a comprehension or appends: the length is not known here
    segments = positional[1].value if len(positional) > 1 else None
    if type(segments) is not cst.Integer or int(segments.evaluated_value) < 1:
        return None
    count = int(segments.evaluated_value)
    return elements[: len(elements) // count * (count - 1)]



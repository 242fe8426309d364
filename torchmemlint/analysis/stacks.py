"""Deep stacks of blocks in a ``forward``: a loop over a container of blocks that feeds
itself, a call of such a container, or a chain of block attributes; with the number of
blocks where the file says it (literals, ``range``, constructor defaults)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.analysis.callables import CallableModel
from torchmemlint.analysis.checkpoints import (
    _BLOCK_MIN_LAYERS, _BLOCK_NAME_SUFFIXES, _CONTAINERS, _NN, _TRANSFORMER_LAYERS,
)
from torchmemlint.analysis.classes import Env, InitModel
from torchmemlint.analysis.names import Bindings
from torchmemlint.analysis.syntax import (
    loop_item,
    _body_statements, _flat_statements, _scope_of, self_path, _small_statements, _walk, _walk_types,
)


@dataclass(frozen=True)
class Stack:
    node: cst.CSTNode  # where to report
    description: str  # "the 12 blocks of `self.blocks`"
    count: int
    statement: cst.CSTNode  # the statement of `forward` (or a helper) that runs it
    via: Tuple[str, ...] = ()  # the helper methods `forward` reaches it through




def class_stacks(
    models: "CallableModel", module: cst.Module, node: cst.ClassDef, scope: Bindings, minimum: int
) -> List[Stack]:
    """The stacks of at least ``minimum`` blocks that the ``forward`` of class ``node`` runs
    (``scope``: the names where the class is defined); none when the class has no ``forward``
    or mentions checkpointing anywhere (it handles checkpointing itself)."""
    forward = next(
        (
            statement
            for statement in _body_statements(node.body)
            if type(statement) is cst.FunctionDef and statement.name.value == "forward"
        ),
        None,
    )
    if forward is None:
        return []
    model = models.model(node, scope)
    stacks = [stack for stack in StackFinder(models, module).stacks(model, forward) if stack.count >= minimum]
    if stacks and models.mentions_checkpoint(node):
        return []
    return stacks


class StackFinder:
    """The stacks of one file's classes, asked through ``CallableModel``."""

    def __init__(self, models: "CallableModel", module: cst.Module) -> None:
        self.models = models
        self.module = module

    MAX_HELPERS = 3  # forward -> forward_features -> forward_encoder -> ...

    def stacks(self, model: InitModel, forward: cst.FunctionDef) -> Iterator[Stack]:
        """The stacks ``forward`` runs, itself or in the methods of its class it calls
        (``self.forward_features(x)``, ``self.forward_encoder(x)``), each method once."""
        seen: Set[int] = {id(forward)}
        pending: List[Tuple[cst.FunctionDef, Tuple[str, ...]]] = [(forward, ())]
        while pending:
            method, via = pending.pop(0)
            for stack in self._method_stacks(model, method):
                yield Stack(stack.node, stack.description, stack.count, stack.statement, via)
            if len(via) >= self.MAX_HELPERS:
                continue
            for name, helper in _called_methods(model, method):
                if id(helper) not in seen:
                    seen.add(id(helper))
                    pending.append((helper, (*via, name)))

    def _method_stacks(self, model: InitModel, forward: cst.FunctionDef) -> Iterator[Stack]:
        models = self.models
        env = model.method_env(forward)
        statements = _body_statements(forward.body)
        for statement in _flat_statements(statements):
            stack = None
            if type(statement) is cst.For:
                stack = self._loop_stack(statement, env)
            elif type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    value = getattr(small, "value", None)
                    if type(value) is cst.Call and models.follow(value.func, env):
                        stack = self._container_stack(statement, value, value.func, env)
            if stack is not None:
                yield stack
        chain = self._chain(statements, env)
        if chain:
            line, first, names = chain
            described = ", ".join(f"`{name}`" for name in names)
            yield Stack(first, f"a chain of {len(names)} blocks ({described})", len(names), line)

    def _loop_stack(self, loop: cst.For, env: Env) -> Optional[Stack]:
        target, iterable = loop_item(loop)
        if type(target) is not cst.Name:
            return None
        chained = any(
            _feeds_itself(small, target.value)
            for small in _small_statements(_body_statements(loop.body))
        )
        return self._container_stack(loop, iterable, iterable, env) if chained else None

    def _container_stack(
        self, statement: cst.CSTNode, node: cst.CSTNode, container: cst.BaseExpression, env: Env
    ) -> Optional[Stack]:
        counted = self._container_count(container, env)
        if counted is None:
            return None
        count, notes = counted
        note = f" ({'; '.join(notes)})" if notes else ""
        return Stack(
            node, f"the {count} blocks of `{self.module.code_for_node(container)}`{note}", count, statement
        )

    def _container_count(
        self, expr: cst.BaseExpression, env: Env
    ) -> Optional[Tuple[int, List[str]]]:
        """Known number of block-like elements of a self container, and notes on defaults."""
        models = self.models
        followed = models.follow(expr, env)
        if not followed or len(followed) != 1:
            return None
        value, value_env, _ = followed[0]
        if not (type(value) is cst.Call and value_env.qualify(value.func) in _CONTAINERS):
            return None
        counted = self._count_elements(value, value_env)
        if counted is not None and env.owner is not None:
            counted = self._count_appends(models.appended(expr, env), env.owner, *counted)
        return counted if counted is not None and counted[0] else None

    def _count_elements(self, container: cst.Call, env: Env) -> Optional[Tuple[int, List[str]]]:
        total, notes = 0, []
        for arg in container.args:
            if arg.keyword is not None or arg.star == "**":
                continue
            value = arg.value
            if arg.star or (
                len(container.args) == 1
                and type(value) in (cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp, cst.Name)
            ):
                counted = self._count_listed(value, env, 0)
                if counted is None:
                    return None
                total += counted[0]
                notes.extend(counted[1])
            elif self._is_block(value, env):
                total += 1
        return total, notes

    def _count_listed(
        self, expr: cst.BaseExpression, env: Env, depth: int
    ) -> Optional[Tuple[int, List[str]]]:
        if depth > CallableModel.MAX_DEPTH:
            return None
        owner = env.owner
        if type(expr) in (cst.List, cst.Tuple):
            if any(type(e) is cst.StarredElement for e in expr.elements):
                return None
            return sum(1 for e in expr.elements if self._is_block(e.value, env)), []
        if type(expr) in (cst.ListComp, cst.GeneratorExp):
            loop = expr.for_in
            if loop.inner_for_in is not None or loop.ifs or not self._is_block(expr.elt, env):
                return None
            return self._range_count(loop.iter, env)
        if type(expr) is cst.Name and owner is not None and env.scope is owner.init_scope:
            values = owner.locals.get(expr.value, [])
            if len(values) != 1:
                return None
            base = self._count_listed(values[0], env, depth + 1)
            if base is None:
                return None
            total, notes = base
            return self._count_appends(owner.appends.get(expr.value, ()), owner, total, notes)
        return None

    def _count_appends(
        self,
        appends: Sequence[Tuple[Optional[cst.For], cst.BaseExpression]],
        owner: InitModel,
        total: int,
        notes: List[str],
    ) -> Optional[Tuple[int, List[str]]]:
        """Add the blocks appended in ``__init__``: once, or once per `range` loop turn."""
        env = owner.init_env()
        for loop, element in appends:
            if not self._is_block(element, env):
                continue
            if loop is None:
                total += 1
                continue
            counted = self._range_count(loop.iter, env)
            if counted is None or _encloses_loop(owner, loop):
                return None
            total += counted[0]
            notes = notes + counted[1]
        return total, notes

    def _range_count(self, expr: cst.BaseExpression, env: Env) -> Optional[Tuple[int, List[str]]]:
        if not (
            type(expr) is cst.Call
            and type(expr.func) is cst.Name
            and expr.func.value == "range"
        ):
            return None
        if env.scope.lookup("range") is not None or len(expr.args) not in (1, 2):
            return None
        bounds = [self._int(arg.value, env) for arg in expr.args]
        if any(bound is None for bound in bounds):
            return None
        values = [bound[0] for bound in bounds]
        notes = [note for bound in bounds for note in bound[1]]
        count = values[0] if len(values) == 1 else values[1] - values[0]
        return max(count, 0), notes

    def _int(self, expr: cst.BaseExpression, env: Env) -> Optional[Tuple[int, List[str]]]:
        if type(expr) is cst.Integer:
            return int(expr.evaluated_value), []
        owner = env.owner
        if type(expr) is not cst.Name or owner is None or env.scope is not owner.init_scope:
            return None
        values = owner.locals.get(expr.value, [])
        if len(values) == 1 and type(values[0]) is cst.Integer:
            return int(values[0].evaluated_value), []
        default = owner.defaults.get(expr.value)
        if not values and type(default) is cst.Integer:
            return int(default.evaluated_value), [f"`{expr.value}` defaults to {default.value}"]
        return None

    def _is_block(self, expr: cst.BaseExpression, env: Env) -> bool:
        """Whether ``expr`` builds a block worth checkpointing on its own.

        That is a class of this file or an `nn.Sequential` holding at least
        `_BLOCK_MIN_LAYERS` torch layers, a torch transformer layer, a method returning an
        `nn.Sequential` (a `_make_layer` stage), or an imported class named like a block.
        Unknown callables (`norm_layer(...)`, `create_conv2d(...)`) are not blocks.
        """
        if type(expr) is not cst.Call:
            return False
        models = self.models
        local = models.local_class(expr.func, env)
        if local is not None:
            return (  # (the count first: whether a class mentions checkpointing may cost a codegen)
                models.layer_count(expr, env) >= _BLOCK_MIN_LAYERS
                and not models.mentions_checkpoint(local.node)
            )
        qualified = env.qualify(expr.func)
        if qualified is not None and qualified.startswith("torch."):
            if qualified == _NN + "Sequential":
                return models.layer_count(expr, env) >= _BLOCK_MIN_LAYERS
            return qualified in _TRANSFORMER_LAYERS
        path = self_path(expr.func, env.self_name)
        if path is not None:
            method = (
                env.owner.methods.get(path[0]) if env.owner is not None and len(path) == 1 else None
            )
            return method is not None and _returns_sequential(method, env.owner.scope)
        function = models.local_function(expr.func, env)
        if function is not None:
            return _returns_sequential(function, models.root) and any(
                models.layer_count(ret, Env(_scope_of(function, models.root), None, None))
                >= _BLOCK_MIN_LAYERS
                for ret in _returned(function)
            )
        # Only a plain or dotted name says what it builds: `_POOLERS[kind]()`,
        # `Conv["conv", dims](...)` or `make()()` name nothing (their `.value` is a node).
        if type(expr.func) is cst.Attribute:
            name = expr.func.attr.value
        elif type(expr.func) is cst.Name:
            name = expr.func.value
        else:
            return False
        return name.endswith(_BLOCK_NAME_SUFFIXES)

    def _chain(
        self, statements: Sequence[cst.CSTNode], env: Env
    ) -> Optional[Tuple[cst.CSTNode, cst.Call, List[str]]]:
        """The longest `v = self.a(v)` chain of block-like attributes in the forward body:
        the statement and call of its first block, and the blocks' names."""
        best: Optional[Tuple[cst.CSTNode, cst.Call, List[str]]] = None
        variable: Optional[str] = None
        first: Optional[Tuple[cst.CSTNode, cst.Call]] = None
        names: List[str] = []
        for statement in statements:
            link = _chain_link(statement, env.self_name)
            if link is None:
                # A compound statement may run the chain conditionally: start over after it.
                if type(statement) is not cst.SimpleStatementLine or (
                    variable is not None and variable in _simple_targets(statement)
                ):
                    variable, first, names = None, None, []
                continue
            target, argument, call, attribute = link
            if argument != variable:
                first, names = None, []
            variable = target
            if self._is_block_attribute(attribute, env):
                first = first or (statement, call)
                names.append(f"self.{attribute}")
                if best is None or len(names) > len(best[2]):
                    best = (*first, list(names))
        return best if best is not None and len(best[2]) > 1 else None

    def _is_block_attribute(self, attribute: str, env: Env) -> bool:
        owner = env.owner
        values = owner.attributes.get(attribute, []) if owner is not None else []
        return len(values) == 1 and self._is_block(values[0], owner.init_env())


def _called_methods(model: InitModel, method: cst.FunctionDef) -> List[Tuple[str, cst.FunctionDef]]:
    """The methods of the class that ``method`` calls as ``self.name(...)``, in order."""
    self_name = model.method_env(method).self_name
    found: List[Tuple[str, cst.FunctionDef]] = []
    for node in _walk_types(method.body, (cst.Call,)):
        path = self_path(node.func, self_name)  # type: ignore[attr-defined]
        if path is None or len(path) != 1:
            continue
        helper = model.methods.get(path[0])
        if helper is not None and helper is not method and all(helper is not h for _, h in found):
            found.append((path[0], helper))
    return found


def _simple_targets(statement: cst.SimpleStatementLine) -> Set[str]:
    """Names a simple statement line assigns to directly."""
    names: Set[str] = set()
    for small in statement.body:
        if type(small) is cst.Assign:
            targets = [target.target for target in small.targets]
        elif type(small) in (cst.AnnAssign, cst.AugAssign):
            targets = [small.target]
        else:
            continue
        for target in targets:
            elements = target.elements if type(target) in (cst.Tuple, cst.List) else [target]
            names.update(e.value for e in elements if type(e) is cst.Name)
            names.update(
                e.value.value
                for e in elements
                if isinstance(e, cst.BaseElement) and type(e.value) is cst.Name
            )
    return names


def _chain_link(
    statement: cst.CSTNode, self_name: Optional[str]
) -> Optional[Tuple[str, str, cst.Call, str]]:
    """(target, argument, call, attribute) for a statement `target = self.attribute(argument)`."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if not (
        type(small) is cst.Assign
        and len(small.targets) == 1
        and type(small.targets[0].target) is cst.Name
    ):
        return None
    call = small.value
    if (
        type(call) is not cst.Call
        or not call.args
        or type(call.args[0].value) is not cst.Name
    ):
        return None
    path = self_path(call.func, self_name)
    if path is None or len(path) != 1:
        return None
    return small.targets[0].target.value, call.args[0].value.value, call, path[0]


def _returned(function: cst.FunctionDef) -> List[cst.BaseExpression]:
    return [
        node.value
        for node in _walk_types(function.body, (cst.Return,))
        if node.value is not None  # type: ignore[attr-defined]
    ]


def _returns_sequential(function: cst.FunctionDef, parent: Bindings) -> bool:
    scope = _scope_of(function, parent)
    returns = _returned(function)
    return bool(returns) and all(
        type(value) is cst.Call and scope.qualify(value.func) == _NN + "Sequential"
        for value in returns
    )


def _feeds_itself(small: cst.BaseSmallStatement, function: str) -> bool:
    """Whether a statement is `x = ...function(x, ...)...`: each call takes the last output."""
    if type(small) is cst.Assign and len(small.targets) == 1:
        target = small.targets[0].target
    elif type(small) is cst.AugAssign:
        target = small.target
    else:
        return False
    if type(target) is not cst.Name:
        return False
    return any(
        type(node) is cst.Call
        and type(node.func) is cst.Name
        and node.func.value == function
        and node.args
        and type(node.args[0].value) is cst.Name
        and node.args[0].value.value == target.value
        for node in [small.value, *_walk(small.value)]
    )


def _encloses_loop(owner: InitModel, loop: cst.For) -> bool:
    """Whether an `append` loop sits inside another loop (its count then multiplies)."""
    init = owner.methods.get("__init__")
    if init is None:
        return True
    for statement in _flat_statements(_body_statements(init.body)):
        if type(statement) in (cst.For, cst.While) and statement is not loop:
            if any(node is loop for node in _walk(statement)):
                return True
    return False

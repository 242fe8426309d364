"""The checkpoint calls of a file (``checkpoint_calls``), found once from the file's index:
each call of a checkpointing function (torch's ``checkpoint``/``checkpoint_sequential``,
timm's ``checkpoint``/``checkpoint_seq``, deepspeed's ``checkpoint``, ``checkpoint_wrapper``)
as a ``CheckpointCall`` that says which function it is, which variant it runs, the arguments
torch's checkpoint consumes, the callable it checkpoints and what that recomputes
(``contents``, following ``CallableModel``; for ``checkpoint_sequential`` and
``checkpoint_seq`` the segments they checkpoint), whether it is a single cheap op, and how the
call reads without the checkpoint. Where a call is (its scope, the class of ``self``, the
``for`` loops around it) is read off the index, not off a traversal."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.analysis.callables import CallableModel, _nested_function
from torchmemlint.analysis.applied import Applied, read_applied
from torchmemlint.analysis.built_layers import either
from torchmemlint.analysis.checkpoints import (
    agreed, APPLY, _CHECKPOINT_KEYWORDS, has_star_kwargs, IDENTITY, CALL, checkpoint_wrapper, Found, HF_CHECKPOINT, HF_CHECKPOINT_ATTRIBUTE,
    _lambda_call, _literal_false, MODULE, partial_wrapper, _PARTIAL,
    _positional, reentrant, SEQ, SEQUENTIAL, SingleOp, Wrapper, _WRAPPER_ATTRIBUTES,
)
from torchmemlint.analysis.autograd import grad_effect
from torchmemlint.analysis.classes import Env
from torchmemlint.analysis.local_checkpoints import local_alias
from torchmemlint.analysis.helpers import attribute_wrapper, helper_wrapper, method_wrapper, passes_callable
from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.sites import Sites
from torchmemlint.analysis.syntax import arms, _body_statements, _first_param, loop_item, _walk, _walk_types
from torchmemlint.tree import NodeIndex, nodes_of

_NOT_YET = object()
# methods of torch's `nn.Module` that take a module or callable and never checkpoint it: a
# call of one (`self.add_module(name, layer)`) needs no look at the class
_MODULE_METHODS = frozenset({
    "add_module", "register_module", "register_buffer", "register_parameter", "apply",
    "register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook",
    "register_full_backward_pre_hook", "register_backward_hook", "get_submodule",
})


@dataclass(frozen=True)
class DirectCall:
    """How a checkpoint call reads without the checkpoint: ``function`` called on the call's
    arguments but ``removed`` (indices into ``call.args``: the checkpointed callable and torch's
    checkpoint keywords), followed by ``extra`` (a lambda's own trailing arguments)."""

    function: cst.BaseExpression
    removed: Set[int]
    extra: Sequence[cst.Arg] = ()


class CheckpointCall:
    """One call of a checkpointing function, and what it checkpoints."""

    def __init__(self, calls: "CheckpointCalls", node: cst.Call, wrapper: Wrapper, here: int) -> None:
        self._calls = calls
        self._here = here
        self.node = node
        self.wrapper = wrapper
        self.form = wrapper.form
        positional = _positional(node)
        at = wrapper.position
        first = positional[at] if len(positional) > at and not any(arg.star for arg in positional[:at]) else None
        # The callable (or module) checkpointed; None when not passed plainly by position.
        self.target: Optional[cst.BaseExpression] = first.value if first is not None and not first.star else None
        self.inputs: List[cst.Arg] = positional[at + 1 :]  # what it is called on (CALL form)
        self.keywords: Dict[str, cst.Arg] = {}
        for arg in node.args:
            if arg.keyword is not None:
                self.keywords.setdefault(arg.keyword.value, arg)
        self.star_kwargs = any(arg.star == "**" for arg in node.args)
        # True/False: the reentrant variant or not; None: the file does not say.
        self.reentrant: Optional[bool] = reentrant(wrapper, node)
        self._env: Optional[Env] = None
        self._container = _NOT_YET
        self._exact = True  # the callable runs only the loop's element (not a closure around it)
        self.member: Optional[int] = None
        self._contents: Optional[Tuple[Dict[str, Found], str]] = None
        self._single_op = _NOT_YET
        self.applied: Optional[Applied] = None  # `apply_activation_checkpointing`: what `check_fn` selects
        self.keywords_node = node  # the call whose arguments hold torch's checkpoint keywords
        if self.form == APPLY:
            env = self.env
            applied = self.applied = read_applied(node, env.qualify, calls.models, env.function)
            self.target, self.inputs, self._container = applied.check_fn, [], None
            self.reentrant = applied.reentrant
            wrapped = applied.wrapper_call
            self.keywords = {arg.keyword.value: arg for arg in (wrapped.args if wrapped else ()) if arg.keyword is not None}
            self.star_kwargs = wrapped is not None and has_star_kwargs(wrapped)
            self.keywords_node = wrapped or node

    # -- the call's own arguments --------------------------------------------------------------
    @property
    def omits_use_reentrant(self) -> bool:
        """The call takes `use_reentrant`, does not pass it, and runs the reentrant variant."""
        return (
            self.wrapper.omitted_use_reentrant_is_reentrant
            and "use_reentrant" not in self.keywords
            and (not self.star_kwargs or self._star_kwargs_are_the_callables())
            and not self.checkpoints_nothing
        )

    @property
    def checkpoints_nothing(self) -> bool:
        """``checkpoint_sequential(layers, 1, x)``: one segment, the last, which torch runs
        without a checkpoint (it checkpoints all but the last)."""
        if self.form != SEQUENTIAL:
            return False
        given = self.keywords.get("segments")
        positional = _positional(self.node)
        segments = given.value if given is not None else (positional[1].value if len(positional) > 1 and not positional[1].star else None)
        return type(segments) is cst.Integer and segments.evaluated_value == 1

    def _star_kwargs_are_the_callables(self) -> bool:
        """Every ``**name`` the call passes is also passed, in the same function, to a plain call
        of the very callable it checkpoints (``self.inner_attn(qkv, **kwargs)`` in one arm,
        ``checkpoint(self.inner_attn, qkv, **kwargs)`` in the other): the callable's keywords,
        not checkpoint's (``partial(checkpoint, **ckpt_kwargs)`` is no plain call of it)."""
        if self.form != CALL or self.target is None or self.keywords_node is not self.node:
            return False
        target = dotted_name(self.target)
        names = [dotted_name(arg.value) for arg in self.node.args if arg.star == "**"]
        function = self.env.function
        if target is None or function is None or None in names:
            return False
        passed: Set[str] = set()
        for call in nodes_of(function, cst.Call):
            if call is not self.node and dotted_name(call.func) == target:  # type: ignore[attr-defined]
                passed.update(dotted_name(arg.value) or "" for arg in call.args if arg.star == "**")  # type: ignore[attr-defined]
        return all(name in passed for name in names)

    @property
    def rng_state_off(self) -> Optional[cst.Arg]:
        """The `preserve_rng_state=False` argument, when the function passes it to torch's."""
        argument = self.keywords.get("preserve_rng_state")
        if argument is None or not self.wrapper.torch_keywords or not _literal_false(argument.value):
            return None
        return argument

    @property
    def runs(self) -> bool:
        """The call runs its callable now: ``checkpoint(f, x)`` with inputs, or a wrapper."""
        return self.target is not None and (self.form in (MODULE, APPLY) or (self.form == CALL and bool(self.inputs)))

    def index_of(self, argument: cst.Arg) -> int:
        """Where ``argument`` is among the arguments of ``keywords_node``."""
        return next(index for index, arg in enumerate(self.keywords_node.args) if arg is argument)

    def _selected(self) -> List[cst.Call]:
        """``apply_activation_checkpointing``: a construction of each class ``check_fn`` selects."""
        classes = self.applied.classes if self.applied is not None else None
        return [cst.Call(func=kind) for kind in classes or ()]

    # -- where it is -----------------------------------------------------------------------
    @property
    def env(self) -> Env:
        """The call's environment: its scope, and the class of `self` in the method it is in."""
        if self._env is None:
            self._env = self._calls.env_at(self._here)
        return self._env

    @property
    def container(self) -> Optional[cst.BaseExpression]:
        """``self.blocks`` when what is checkpointed is the variable of a ``for`` over it
        (``blk``, ``blk.__call__``, ``lambda t: blk(t)``, ``create_custom_forward(blk)``, also
        ``for i, blk in enumerate(...)``, ``for a, b in zip(self.a, self.b)``); ``member``: its
        position where the loop unpacks each element (``for norm, attn, ff in self.layers``)."""
        if self._container is _NOT_YET:
            name, self._exact = looped_name(self.target, self._calls.models, self.env)
            found = self._calls.loop_container(self._here, name)
            self._container, self.member = found if found is not None else (None, None)
        return self._container  # type: ignore[return-value]

    @property
    def callable_label(self) -> str:
        """How a message names what is checkpointed."""
        target = self.target
        if target is None:
            return ""
        if self.applied is not None:
            names = ", ".join(f"`{self._calls.code_for(kind)}`" for kind in self.applied.classes or ())
            return f"each module `check_fn` selects ({names})"
        label = f"`{self._calls.code_for(target)}`" if type(target) is not cst.Lambda else "the lambda"
        if self.container is not None:
            whole = "" if self.member is None else f"item {self.member} of "
            label += f" ({whole}an element of `{self._calls.code_for(self.container)}`)"
        return label

    # -- what it recomputes ------------------------------------------------------------------
    def contents(self) -> Tuple[Dict[str, Found], str]:
        """Traits (BATCH_NORM, RANDOM) of what the call recomputes, and how to name its callable.

        ``checkpoint(f, ...)`` and ``checkpoint_wrapper(module)``: what ``f``/``module`` runs;
        torch's ``checkpoint_sequential``: all segments but the last; timm's ``checkpoint_seq``:
        every element (a container or a list of them), but the last with ``skip_last=True``.
        """
        if self._contents is None:
            self._contents = self._find_contents()
        return self._contents

    def _find_contents(self) -> Tuple[Dict[str, Found], str]:
        target = self.target
        if target is None:
            return {}, ""
        models, env, label = self._calls.models, self.env, self.callable_label
        if self.applied is not None:
            found = {}
            for built in self._selected():
                for trait, item in models.contents(built, env, label).items():
                    found.setdefault(trait, item)
            return found, label
        container = self.container
        if container is not None:
            found = {}
            for element, element_env, where in self._elements(container, env, label):
                for trait, item in models.contents(element, element_env, where).items():
                    found.setdefault(trait, item)
            if not self._exact:  # a closure around the element: what it runs besides
                for trait, item in models.contents(target, env, label).items():
                    found.setdefault(trait, item)
            return found, label
        segments: Optional[List[Tuple[cst.BaseExpression, Env, str]]] = None
        if self.form == SEQUENTIAL:
            segments = _recomputed_segments(models.elements(target, env, label), _positional(self.node))
        elif self.form == SEQ:
            segments = _seq_elements(models, target, env, label)
            skip_last = self.keywords.get("skip_last")
            if skip_last is not None and not _literal_false(skip_last.value):
                known = segments is not None and "flatten" not in self.keywords and not any(
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

    def single_op(self) -> Optional[SingleOp]:
        """The one cheap layer or op the call checkpoints, if that is all it runs (``CALL`` and
        ``MODULE`` forms; the elements of a container a ``for`` iterates all the same op)."""
        if self._single_op is _NOT_YET:
            op = None
            if self.applied is not None:  # each selected module wrapped alone
                built = self._selected()
                op = either([self._calls.models.single_op(call, self.env) for call in built]) if built else None
                op = None if op == IDENTITY or (op is not None and IDENTITY.name in op.name.split(" or ")) else op
            elif self.form in (CALL, MODULE) and self.runs:
                models, env = self._calls.models, self.env
                container = self.container
                if container is not None and self._exact:
                    if self.member is None:
                        op = models.element_op(container, env)
                    else:
                        op = agreed([models.single_op(item, item_env) for item, item_env, _ in self._elements(container, env, "")])
                    op = None if op == IDENTITY else op
                elif container is None:
                    op = models.single_op(self.target, env)  # type: ignore[arg-type]
                    op = None if op == IDENTITY else op
            self._single_op = op
        return self._single_op  # type: ignore[return-value]

    def _elements(self, container: cst.BaseExpression, env: Env, label: str) -> List[Tuple[cst.BaseExpression, Env, str]]:
        """What the loop variable is bound to: the container itself (its contents are every
        element's), or the ``member``-th item of each of its elements (none where unknown)."""
        if self.member is None:
            return [(container, env, label)]
        models = self._calls.models
        found = []
        for element, element_env, where in models.elements(container, env, label) or ():
            items = models.elements(element, element_env, where)
            if items is None or len(items) <= self.member:
                return []
            found.append(items[self.member])
        return found

    @property
    def called(self) -> Optional[cst.BaseExpression]:
        """What the checkpointed callable calls: the body call's function of a lambda that only
        forwards to one, else the callable itself."""
        target = self.target
        body = _lambda_call(target) if type(target) is cst.Lambda else None
        return body.func if body is not None else target

    def input_origin(self) -> Optional[Tuple[str, str]]:
        """``("x", "forward")`` when the first input is an argument of the enclosing function
        that no statement before the call rebinds."""
        value = self.inputs[0].value if self.inputs else None
        if type(value) is not cst.Name:
            return None
        return self._calls.untouched_argument(self._here, value.value)

    def direct_call(self) -> Optional[DirectCall]:
        """The call without the checkpoint (``CALL`` form); None where it cannot be written:
        ``context_fn`` or ``**kwargs`` passed, or a lambda that does not only forward its
        parameters, in order, to one call."""
        if self.star_kwargs or "context_fn" in self.keywords or self.target is None or self.wrapper.position or self.applied:
            return None
        removed = {0} | {
            index
            for index, arg in enumerate(self.node.args)
            if arg.keyword is not None and arg.keyword.value in _CHECKPOINT_KEYWORDS
        }
        target = self.target
        if type(target) is not cst.Lambda:
            return DirectCall(target, removed)
        body = _lambda_call(target)
        kept = [arg for index, arg in enumerate(self.node.args) if index not in removed]
        params = len(target.params.params)
        if body is None or len(kept) != params or any(arg.keyword or arg.star for arg in kept):
            return None
        return DirectCall(body.func, removed, body.args[params:])


class CheckpointCalls:
    """The checkpoint calls of one file, in source order, built once from its index."""

    def __init__(self, module: cst.Module, index: NodeIndex, root: Bindings, models: CallableModel) -> None:
        self.module = module
        self.index = index
        self.root = root
        self.models = models
        self._sites = Sites(index, root)
        self._aliases: Optional[Dict[str, Optional[Wrapper]]] = None
        self.calls: List[CheckpointCall] = []
        order = index.order
        names = _wrapper_names(index)
        factories: Dict[str, bool] = {}  # each function of the file read once

        def factory(name: str) -> bool:
            if name not in factories:
                factories[name] = _returns_wrapper(models, name, names)
            return factories[name]

        aliases = _aliased_attributes(index, names, factory)
        selves = _method_selves(index)
        links = models.links
        for here in index.positions(cst.Call):
            node = order[here]
            func = node.func  # type: ignore[attr-defined]
            if (func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else None) == "partial":
                bound = self._bound_partial(here, node)  # type: ignore[arg-type]
                if bound is not None:  # `partial(checkpoint, summarize_chunk)`: its calls checkpoint that
                    self.calls.append(CheckpointCall(self, node, bound, here))  # type: ignore[arg-type]
                continue
            if type(func) is cst.Attribute:
                if func.attr.value in aliases and type(func.value) is cst.Name:
                    wrapper = self._attribute_wrapper(here, func)
                    if wrapper is not None:
                        self.calls.append(CheckpointCall(self, node, wrapper, here))  # type: ignore[arg-type]
                        continue
                if (
                    type(func.value) is cst.Name and func.value.value in selves
                    and func.attr.value not in _MODULE_METHODS and passes_callable(node)  # type: ignore[arg-type]
                ):
                    wrapper = self._method_wrapper(here, func)  # `self._apply_checkpoint(f, x)`
                    if wrapper is not None:
                        self.calls.append(CheckpointCall(self, node, wrapper, here))  # type: ignore[arg-type]
                        continue
                if func.attr.value == HF_CHECKPOINT_ATTRIBUTE and type(func.value) is cst.Name and func.value.value in selves:
                    env = self.env_at(here)  # transformers' `self._gradient_checkpointing_func(layer.__call__, x)`
                    if env.owner is not None and func.value.value == env.self_name:
                        self.calls.append(CheckpointCall(self, node, HF_CHECKPOINT, here))  # type: ignore[arg-type]
                    continue
                if func.attr.value not in _WRAPPER_ATTRIBUTES:
                    continue
            elif type(func) is not cst.Name:
                continue
            elif func.value not in names:
                # a project's own checkpointing helper: a function or class of this file, or
                # a name imported from another file of the project
                if not (func.value in models.functions or func.value in models.classes or (
                    links is not None and links.may_come_from_package(func.value)
                )) or not passes_callable(node):  # type: ignore[arg-type]
                    continue
            scope = self.bindings_at(here)
            wrapper = checkpoint_wrapper(func, scope.qualify, models)
            if wrapper is None and type(func) is cst.Name and _binding_scope(scope, func.value) is self.root:
                wrapper = self._module_alias(func.value)  # `ckpt = partial(checkpoint, ...)`
            if wrapper is None and type(func) is cst.Name and _binding_scope(scope, func.value) not in (None, self.root):
                wrapper = self._local_alias(here, func.value)  # `checkpoint = torch.utils.checkpoint.checkpoint` in one arm
            if wrapper is None:
                wrapper = helper_wrapper(models, node, Env(scope, None, None))  # type: ignore[arg-type]
            if wrapper is not None:
                self.calls.append(CheckpointCall(self, node, wrapper, here))  # type: ignore[arg-type]
        self.calls = [call for call in self.calls if not self._grad_off(call._here)]

    def _grad_off(self, here: int) -> bool:
        """Autograd is off where the call runs: inside ``with torch.no_grad():`` (or
        ``inference_mode``, ``set_grad_enabled(False)``) of its function, or in a function
        decorated so; nothing is recomputed, as no backward runs."""
        order = self.index.order
        for at in reversed(self.index.ancestors(here)[:-1]):
            node = order[at]
            if type(node) is cst.With:
                effects = {grad_effect(item.item, self.bindings_at(at)) for item in node.items}
                if effects & {"on", "unknown"}:
                    return False
                if "off" in effects:
                    return True
            elif type(node) in (cst.FunctionDef, cst.Lambda):
                decorators = node.decorators if type(node) is cst.FunctionDef else ()
                return any(grad_effect(item.decorator, self.bindings_at(at)) == "off" for item in decorators)
        return False

    def _bound_partial(self, here: int, node: cst.Call) -> Optional[Wrapper]:
        """``functools.partial(checkpoint, fn, ...)``: a function whose every call runs
        ``checkpoint(fn, ...)``, with the keywords the partial gives (and no others, as far as
        this file says). Read as that checkpoint call, written at the partial: the callable is
        the positional argument after the checkpointing function."""
        scope = self.bindings_at(here)
        if scope.qualify(node.func) != _PARTIAL:
            return None
        positional = _positional(node)
        if not positional or positional[0].star:
            return None
        wrapper = checkpoint_wrapper(positional[0].value, scope.qualify, self.models)
        if wrapper is None or wrapper.form != CALL or len(positional) < wrapper.position + 2:
            return None  # (`partial(checkpoint, use_reentrant=False)`: a checkpointing function, `_module_alias`)
        if any(arg.star for arg in positional[: wrapper.position + 2]):
            return None
        return replace(wrapper, position=wrapper.position + 1)

    def _module_alias(self, name: str) -> Optional[Wrapper]:
        """The checkpointing function a module-level ``name = partial(checkpoint, ...)`` (or
        ``name = torch.utils.checkpoint.checkpoint``) binds, when that is its one binding."""
        if self._aliases is None:
            self._aliases = {}
            for statement in self.module.body:
                small = statement.body[0] if type(statement) is cst.SimpleStatementLine else None
                if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                    target = small.targets[0].target.value
                    value = small.value
                    found = (
                        checkpoint_wrapper(value, self.root.qualify, self.models) if type(value) in (cst.Name, cst.Attribute)
                        else partial_wrapper(value, self.root.qualify, self.models)
                    )
                    self._aliases[target] = found if target not in self._aliases else None
        return self._aliases.get(name)

    def _local_alias(self, here: int, name: str) -> Optional[Wrapper]:
        """The checkpointing function a local ``name`` of the function around ``here`` holds
        when some assignment of it binds one (transkun's ``if self.training: checkpoint =
        torch.utils.checkpoint.checkpoint`` / ``else: checkpoint = checkpointByPass``), the
        others binding something else (then not ``sole``: the fix's keywords may not suit
        them; ``local_checkpoints.py``)."""
        function = self.env_at(here).function
        if function is None:
            return None
        cache = self.__dict__.setdefault("_local_aliases", {})
        key = (id(function), name)
        if key not in cache:
            cache[key] = local_alias(function, name, self.root.qualify, self.models)
        return cache[key]

    def _attribute_wrapper(self, here: int, func: cst.Attribute) -> Optional[Wrapper]:
        """``self.maybe_ckpt(...)`` in a method of a class whose ``__init__`` binds
        ``self.maybe_ckpt`` to a checkpointing function (in some arm)."""
        env = self.env_at(here)
        if env.owner is None or env.self_name is None or func.value.value != env.self_name:  # type: ignore[attr-defined]
            return None
        return attribute_wrapper(self.models, env.owner, func.attr.value)

    def _method_wrapper(self, here: int, func: cst.Attribute) -> Optional[Wrapper]:
        """``self.<method>(f, x)`` in a method of a class whose own or inherited ``<method>``
        is a checkpoint helper (``helpers.method_wrapper``)."""
        order = self.index.order
        for at, owner in reversed(self._functions(here)):  # (``env_at``'s owner, without the bindings at ``here``)
            if owner is not None:
                if func.value.value != _first_param(order[at]):  # type: ignore[attr-defined]
                    return None
                model = self.models.model(order[owner], self.bindings_at(owner))  # type: ignore[arg-type]
                return method_wrapper(self.models, model, func.attr.value)
        return None

    def __iter__(self):
        return iter(self.calls)

    def close(self) -> None:
        self.__dict__.clear()

    def code_for(self, node: cst.CSTNode) -> str:
        return self.module.code_for_node(node)

    # -- where a node is ---------------------------------------------------------------------
    def bindings_at(self, here: int) -> Bindings:
        """The names the node at ``here`` sees, as the engine binds them in its traversal."""
        return self._sites.bindings(here)

    def _functions(self, here: int) -> List[Tuple[int, Optional[int]]]:
        """The functions (not lambdas) around ``here``, outermost first, each with the class it
        is a method of (a ``def`` directly in the innermost class around it), or None."""
        order = self.index.order
        found: List[Tuple[int, Optional[int]]] = []
        innermost_class: Optional[int] = None
        for at in self.index.ancestors(here)[:-1]:
            node = order[at]
            if type(node) is cst.ClassDef:
                innermost_class = at
            elif type(node) is cst.FunctionDef:
                owner = None
                if innermost_class is not None:
                    body = _body_statements(order[innermost_class].body)  # type: ignore[attr-defined]
                    if any(statement is node for statement in body):
                        owner = innermost_class
                found.append((at, owner))
        return found

    def env_at(self, here: int) -> Env:
        order = self.index.order
        functions = self._functions(here)
        innermost = order[functions[-1][0]] if functions else None
        for at, owner in reversed(functions):
            if owner is not None:
                model = self.models.model(order[owner], self.bindings_at(owner))  # type: ignore[arg-type]
                return Env(self.bindings_at(here), model, _first_param(order[at]), innermost)  # type: ignore[arg-type]
        return Env(self.bindings_at(here), None, None, innermost)  # type: ignore[arg-type]

    def loop_container(
        self, here: int, name: Optional[cst.BaseExpression]
    ) -> Optional[Tuple[cst.BaseExpression, Optional[int]]]:
        """``(self.blocks, None)`` when ``name`` is the variable of a ``for`` over it around
        ``here`` (inside the innermost function); ``(self.layers, 1)`` for ``attn`` in ``for
        norm, attn in self.layers``; ``(self.b, None)`` for ``b`` in ``for a, b in zip(self.a,
        self.b)``."""
        if type(name) is not cst.Name:
            return None
        order = self.index.order
        for at in reversed(self.index.ancestors(here)[:-1]):
            statement = order[at]
            if type(statement) is cst.FunctionDef:
                break
            if type(statement) is not cst.For:
                continue
            target, iterable = loop_item(statement)
            if type(target) is cst.Name:
                if target.value == name.value:
                    return iterable, None
                continue
            names = [element.value for element in target.elements] if type(target) in (cst.Tuple, cst.List) else []
            position = next((at for at, item in enumerate(names) if type(item) is cst.Name and item.value == name.value), None)
            if position is None or any(type(item) is not cst.Name for item in names):
                continue
            if type(iterable) is cst.Call and type(iterable.func) is cst.Name and iterable.func.value == "zip":
                args = iterable.args
                if len(args) == len(names) and not any(arg.star or arg.keyword for arg in args):
                    return args[position].value, None
                return None
            return (iterable, position) if type(iterable) is not cst.Call else None
        return None

    def untouched_argument(self, here: int, name: str) -> Optional[Tuple[str, str]]:
        """``(name, function)`` when ``name`` is a parameter of the innermost function around
        ``here`` (not `self` of a method) that no statement before the one holding ``here``
        rebinds."""
        functions = self._functions(here)
        if not functions:
            return None
        at, owner = functions[-1]
        function: cst.FunctionDef = self.index.order[at]  # type: ignore[assignment]
        params = [param.name.value for param in (*function.params.posonly_params, *function.params.params)]
        if name not in params[1 if owner is not None else 0 :]:
            return None
        around = {id(self.index.order[above]) for above in self.index.ancestors(here)}
        for statement in _body_statements(function.body):
            if id(statement) in around:
                break
            if _assigns(statement, name):
                return None
        return name, function.name.value


_CALL_METHODS = ("__call__", "forward")


def looped_name(
    target: Optional[cst.BaseExpression], models: CallableModel, env: Env
) -> Tuple[Optional[cst.BaseExpression], bool]:
    """The name a checkpointed callable runs, and whether that is all it runs: ``blk``,
    ``blk.__call__``, ``blk.forward`` and ``lambda t: blk(t)`` run ``blk``; a closure factory
    (``create_custom_forward(blk)``, a function that returns a function it defines) runs ``blk``
    and what its closure adds."""
    if type(target) is cst.Lambda:
        body = _lambda_call(target)
        target = body.func if body is not None else None
    if type(target) is cst.Attribute and target.attr.value in _CALL_METHODS and type(target.value) is cst.Name:
        target = target.value
    if type(target) is not cst.Call:
        return target, True
    args = _positional(target)  # `create_custom_forward(attn, return_dict=False)`
    if len(args) != 1 or args[0].star or type(args[0].value) is not cst.Name:
        return None, True
    factory = models.local_function(target.func, env) or _nested_function(env.function, target.func)
    if factory is None or not _returns_own_function(factory):
        return None, True
    return args[0].value, False


def _returns_own_function(function: cst.FunctionDef) -> bool:
    """``def f(module): def inner(*a): ...; return inner``."""
    inner = {statement.name.value for statement in _body_statements(function.body) if type(statement) is cst.FunctionDef}
    last = _body_statements(function.body)[-1:]
    small = last[0].body[0] if last and type(last[0]) is cst.SimpleStatementLine else None
    return type(small) is cst.Return and type(small.value) is cst.Name and small.value.value in inner


def _binding_scope(scope: Bindings, name: str) -> Optional[Bindings]:
    """The scope (of ``scope`` and its parents) that binds ``name``."""
    while scope is not None and name not in scope.names:
        scope = scope.parent  # type: ignore[assignment]
    return scope


def _wrapper_names(index: NodeIndex) -> Set[str]:
    """The only names a call can name a checkpointing function by: the functions' own names
    (imported as they are, by a star import or relatively) and the aliases imports give them
    (``from torch.utils.checkpoint import checkpoint as cp``). A name bound otherwise does not
    qualify to one of them, so its calls need no scope."""
    names = set(_WRAPPER_ATTRIBUTES)
    order = index.order
    for at in index.positions(cst.ImportAlias):
        alias: cst.ImportAlias = order[at]  # type: ignore[assignment]
        if alias.asname is None or type(alias.asname.name) is not cst.Name:
            continue
        imported = dotted_name(alias.name) or ""
        if imported.rsplit(".", 1)[-1] in _WRAPPER_ATTRIBUTES:
            names.add(alias.asname.name.value)
    for at in index.positions(cst.Assign):  # `ckpt = partial(checkpoint, use_reentrant=False)`
        assign: cst.Assign = order[at]  # type: ignore[assignment]
        if len(assign.targets) == 1 and type(assign.targets[0].target) is cst.Name and _names_wrapper(assign.value, names):
            names.add(assign.targets[0].target.value)
    return names


def _method_selves(index: NodeIndex) -> Set[str]:
    """The names the methods of the file's classes give their first parameter (``self``):
    only a call on one of them can be ``self.<method>(...)``."""
    found: Set[str] = set()
    order = index.order
    for at in index.positions(cst.ClassDef):
        for statement in _body_statements(order[at].body):  # type: ignore[attr-defined]
            if type(statement) is cst.FunctionDef:
                first = _first_param(statement)
                if first is not None:
                    found.add(first)
    return found


def _aliased_attributes(index: NodeIndex, names: Set[str], factory) -> Set[str]:
    """The attributes an assignment may bind to a checkpointing function: ``x.attr = value``
    where an arm of ``value`` is one of ``names`` or ends in one (``cp.checkpoint``), or calls
    a function of the file that ``factory`` says may return one; the class model then says whether it is one, where ``x`` is
    ``self`` in a method of the class or of a base."""
    found: Set[str] = set()
    order = index.order
    for at in index.positions(cst.Assign):
        assign: cst.Assign = order[at]  # type: ignore[assignment]
        targets = [target.target for target in assign.targets if type(target.target) is cst.Attribute]
        if targets and any(
            _names_wrapper(arm, names) or (type(arm) is cst.Call and type(arm.func) is cst.Name and factory(arm.func.value))
            for arm in arms(assign.value)
        ):
            found.update(target.attr.value for target in targets)  # type: ignore[attr-defined]
    return found


def _returns_wrapper(models: CallableModel, name: str, names: Set[str]) -> bool:
    """Whether the file's function ``name`` may return a checkpointing function: a ``return``
    of one of ``names`` or of a ``partial`` of one (``helpers.factory_wrapper`` says which)."""
    function = models.functions.get(name)
    return function is not None and models.mentions_text and any(
        node.value is not None and _names_wrapper(node.value, names)  # type: ignore[attr-defined]
        for node in _walk_types(function.body, (cst.Return,))
    )


def _names_wrapper(value: cst.BaseExpression, names: Set[str]) -> bool:
    """``value`` may be a checkpointing function: one of ``names``, ``<x>.checkpoint``, or a
    ``partial`` of one (``functools.partial(checkpoint, use_reentrant=False)``)."""
    if type(value) is cst.Call and value.args and value.args[0].keyword is None:
        value = value.args[0].value
    return (type(value) is cst.Name and value.value in names) or (
        type(value) is cst.Attribute and value.attr.value in _WRAPPER_ATTRIBUTES
    )


def checkpoint_calls(context) -> CheckpointCalls:
    """The file's checkpoint calls, built once per file and shared by the rules that ask."""
    analysis = context.analysis
    return context.shared(
        "checkpoint-calls",
        lambda: CheckpointCalls(context.module, analysis.index, context.module_bindings, analysis.callables),
    )


def _assigns(statement: cst.CSTNode, name: str) -> bool:
    """Whether a statement (re)binds ``name`` (assignment, for target, with-as, walrus)."""
    for node in [statement, *_walk(statement)]:
        targets: List[cst.BaseExpression] = []
        if type(node) is cst.Assign:
            targets = [target.target for target in node.targets]
        elif type(node) in (cst.AnnAssign, cst.AugAssign, cst.For):
            targets = [node.target]
        elif type(node) is cst.NamedExpr:
            targets = [node.target]
        elif type(node) is cst.AsName:
            targets = [node.name]
        for target in targets:
            if any(type(n) is cst.Name and n.value == name for n in [target, *_walk(target)]):
                return True
    return False


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


CHECKPOINT_MODULE = "torch.utils.checkpoint"


def checkpoint_module_calls(context) -> List[cst.Call]:
    """Calls of the module ``torch.utils.checkpoint`` itself (``checkpoint(f, x)`` after ``from
    torch.utils import checkpoint``), which raise TypeError, in source order; names resolved as
    the engine binds them at each call."""
    return context.shared("checkpoint-module-calls", lambda: _module_calls(context))


def _module_calls(context) -> List[cst.Call]:
    index: NodeIndex = context.analysis.index
    order = index.order
    names = _module_names(index)
    calls = checkpoint_calls(context)
    found: List[cst.Call] = []
    for here in index.positions(cst.Call):
        func = order[here].func  # type: ignore[attr-defined]
        if type(func) is cst.Attribute:
            if func.attr.value != "checkpoint":
                continue  # `a.b.x` resolves to a name that ends in `x`
        elif type(func) is not cst.Name or func.value not in names:
            continue
        if calls.bindings_at(here).qualify(func) == CHECKPOINT_MODULE:
            found.append(order[here])  # type: ignore[arg-type]
    return found


def _module_names(index: NodeIndex) -> Set[str]:
    """The only bare names that can resolve to the checkpoint module (``Bindings`` resolves a
    name through an import or a star import only): those an import of a ``...checkpoint``
    binds, and ``checkpoint`` itself where a star import may bring it."""
    names: Set[str] = set()
    order = index.order
    for at in index.positions(cst.ImportFrom):
        statement: cst.ImportFrom = order[at]  # type: ignore[assignment]
        if type(statement.names) is cst.ImportStar:
            names.add("checkpoint")
    for at in index.positions(cst.ImportAlias):
        alias: cst.ImportAlias = order[at]  # type: ignore[assignment]
        imported = dotted_name(alias.name) or ""
        if imported.rsplit(".", 1)[-1] != "checkpoint":
            continue
        local = alias.asname.name if alias.asname is not None else alias.name
        names.add((dotted_name(local) or "").partition(".")[0])  # type: ignore[arg-type]
    return names

"""Checkpointing functions a project writes itself, read as what they run: a function that
hands one of its parameters to torch's checkpoint (``def ckpt(f, *a): return checkpoint(f,
*a, use_reentrant=False)``, also ``def wrap(self, fn, *args)``) checkpoints what its caller
passes there, and a module whose ``forward`` checkpoints the module its ``__init__`` was
given (``self.module = module``; ``checkpoint(self.module, *args)``) checkpoints every call
of that module, as ``checkpoint_wrapper`` does; an attribute ``__init__`` binds to a
checkpointing function in any arm (``self.maybe_ckpt = checkpoint if "ffn" in opts else
lambda f, x: f(x)``) is that function where it is called (``self.maybe_ckpt(self.w_1, x)``), and
a method of the class or of a base that is such a helper (``def _apply_checkpoint(self, func,
*args)``) is one where ``self.<method>(f, x)`` calls it. Each is a ``Wrapper`` of the form, variant and
keywords the inner call gives it; the helper may be defined in this file or followed into
another file of the project (``CallableModel.foreign``)."""

from __future__ import annotations

from dataclasses import replace
from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.checkpoints import (
    CALL, checkpoint_wrapper, keyword, MODULE, partial_wrapper, _positional, reentrant, Wrapper, WRAPPERS,
)
from torchmemlint.analysis.classes import Env
from torchmemlint.analysis.inheritance import bases, method_definition
from torchmemlint.analysis.syntax import arms, _first_param, _scope_of, _walk_types, is_staticmethod, self_path
from torchmemlint.project import REGISTRY
from torchmemlint.tree import walk


_CALLABLE = (cst.Name, cst.Attribute, cst.Lambda, cst.Call, cst.Subscript)


def passes_callable(call: cst.Call) -> bool:
    """Whether ``call`` passes by position anything that could be a callable or a module
    (``self.block``, ``fn``, a lambda, ``nn.Linear(...)``); not ``Block(dim=64)``, ``Stage(3, 64)``."""
    return any(type(arg.value) in _CALLABLE for arg in _positional(call))


def helper_wrapper(models, call: cst.Call, env: Env) -> Optional[Wrapper]:
    """The checkpointing ``call`` does when it calls a project's helper function or
    checkpointing module class (None: it is neither, or cannot be followed)."""
    func = call.func
    local = models.local_function(func, env)
    if local is not None:
        return _cached(models, local, lambda: _function_wrapper(models, local))
    model = models.local_class(func, env)
    if model is not None:
        return _cached(models, model.node, lambda: _class_wrapper(models, model.node))
    dotted = models._module_level_name(func, env)
    if dotted is None or not passes_callable(call):
        return None
    names: Dict[str, Optional[Wrapper]] = models.helper_names
    if dotted not in names:
        names[dotted] = None
        located = models.links.locate(dotted, package=True)
        if located is not None and located.module is not None and _may_checkpoint(located.module, located.name):
            found = models.foreign(func, env, located.kind, package=True)
            if found is not None:
                other, node = found
                read = _function_wrapper if located.kind == "function" else _class_wrapper
                names[dotted] = _cached(other, node, lambda: read(other, node))
    return names[dotted]


def method_wrapper(models, owner, name: str) -> Optional[Wrapper]:
    """The checkpointing ``self.<name>(f, *args)`` does when ``name`` is a method of the class
    (``InitModel`` ``owner``) or of a base class, in this file or another one of the project,
    that hands its parameter to torch's checkpoint as a helper function does (lerobot's
    ``def _apply_checkpoint(self, func, *args, **kwargs)``, which checkpoints ``func`` when
    gradient checkpointing is on and else calls it): the ``Wrapper`` of that function, at the
    position the bound call passes it (``self`` is not passed; a ``@staticmethod``'s is)."""
    found = method_definition(models, owner, name)
    if found is None:
        return None
    other, _, method = found
    wrapper = _cached(other, method, lambda: _function_wrapper(other, method))
    bound = 0 if is_staticmethod(method) else 1
    if wrapper is None or wrapper.position < bound:
        return None  # (it checkpoints `self`)
    return replace(wrapper, position=wrapper.position - bound)


def attribute_wrapper(models, owner, name: str) -> Optional[Wrapper]:
    """The checkpointing function ``self.<name>`` holds when a method of ``owner``
    (``InitModel``) or of a base class binds it to one in some arm: ``self.maybe_ckpt =
    checkpoint if "mha" in use_ckpting else lambda f, x: f(x)`` in ``__init__``, OLMo's
    ``self._activation_checkpoint_fn = checkpoint_func or activation_checkpoint_function(cfg)``
    in ``set_activation_checkpointing`` (a function of the file that returns ``partial(checkpoint,
    ...)``: ``factory_wrapper``). ``sole`` is False when another value it may hold is not that
    function (its keywords would break the other arm). None: no arm is one, or the arms are
    different checkpointing functions."""
    cache = owner.__dict__.setdefault("_checkpoint_attributes", {})
    if name not in cache:
        cache[name] = _attribute_wrapper(models, owner, name)
    return cache[name]


def _attribute_wrapper(models, owner, name: str) -> Optional[Wrapper]:
    found = set()
    other = False
    for value, env, model in _attribute_values(models, owner, name, 0):
        for arm in arms(value):
            if type(arm) is cst.Name and arm.value == "None":  # not callable: at a call it holds another value
                continue
            wrapper = (
                checkpoint_wrapper(arm, env.qualify, model) if type(arm) in (cst.Name, cst.Attribute)
                else partial_wrapper(arm, env.qualify, model)  # `partial(checkpoint, use_reentrant=False)`
            )
            if wrapper is None and type(arm) is cst.Call:
                wrapper = factory_wrapper(model, arm, env)
            if wrapper is None:
                other = True
            else:
                found.add(wrapper)
    if len(found) != 1:
        return None
    wrapper = next(iter(found))
    return replace(wrapper, sole=False) if other else wrapper


def _attribute_values(models, owner, name: str, depth: int) -> List[Tuple[cst.BaseExpression, Env, object]]:
    """Every value a method of ``owner`` or of a base class assigns to ``self.<name>``, with
    the method's environment and the ``CallableModel`` of its file."""
    found = []
    for method in owner.methods.values():
        self_name = _first_param(method)
        env = None
        for node in _walk_types(method.body, (cst.Assign, cst.AnnAssign)):
            targets = [t.target for t in node.targets] if type(node) is cst.Assign else [node.target]  # type: ignore[attr-defined]
            if node.value is None or not any(self_path(t, self_name) == [name] for t in targets):  # type: ignore[attr-defined]
                continue
            env = env or Env(_scope_of(method, owner.scope), owner, self_name, method)
            found.append((node.value, env, models))  # type: ignore[attr-defined]
    if depth < 4:
        for other, base in bases(models, owner):
            found.extend(_attribute_values(other, base, name, depth + 1))
    return found


def factory_wrapper(models, call: cst.Call, env: Env) -> Optional[Wrapper]:
    """The checkpointing function a call of a function of this file returns, when its every
    ``return`` is one (OLMo's ``def activation_checkpoint_function(cfg): ...; return
    partial(checkpoint, preserve_rng_state=..., use_reentrant=False)``)."""
    function = models.local_function(call.func, env)
    if function is None or not models.mentions_text:
        return None
    cache: Dict[int, Optional[Wrapper]] = models.__dict__.setdefault("factory_wrappers", {})
    key = id(function)
    if key not in cache:
        inner = Env(_scope_of(function, models.root), None, None, function)
        found = set()
        for node in _walk_types(function.body, (cst.Return,)):
            value = node.value  # type: ignore[attr-defined]
            found.add(
                None if value is None
                else checkpoint_wrapper(value, inner.qualify, models) if type(value) in (cst.Name, cst.Attribute)
                else partial_wrapper(value, inner.qualify, models)
            )
        cache[key] = found.pop() if len(found) == 1 else None
    return cache[key]


def _may_checkpoint(summary, name: str) -> bool:
    """Whether the definition of ``name`` in a project file can call a checkpoint function at
    all, read off the file's summary and text before it is parsed: its lines (from ``def
    name``/``class name`` to the next top-level line) call a name the file imports as one, or
    ``.checkpoint(`` of a module it imports on the way to one (``cp.checkpoint(``,
    ``torch.utils.checkpoint.checkpoint(``, ``deepspeed.checkpointing.checkpoint(``)."""
    calls = [full for full, wrapper in WRAPPERS.items() if wrapper.form == CALL]  # what a helper hands on to
    spelled = {".checkpoint("}
    for local, imported in summary.imports.items():
        if imported in calls:
            spelled.add(local + "(")
    text = REGISTRY.text_of(summary.path) or ""
    if not any(word in text for word in spelled):
        return False  # (the file spells no checkpoint call anywhere)
    lines = text.splitlines()
    starts = (f"def {name}(", f"class {name}(", f"class {name}:", f"async def {name}(")
    inside = False
    for line in lines:
        if line.startswith(starts):
            inside = True
        elif inside and line[:1] not in ("", " ", "\t", "#", ")"):
            inside = False
        if inside and any(word in line for word in spelled):
            return True
    return False


def _cached(models, node: cst.CSTNode, read) -> Optional[Wrapper]:
    cache: Dict[int, Optional[Wrapper]] = models.helper_wrappers
    key = id(node)
    if key not in cache:
        cache[key] = None  # a helper that calls itself is not one
        cache[key] = read() if models.mentions_text else None
    return cache[key]


def _inner_calls(models, body: cst.CSTNode, env: Env) -> List[Tuple[cst.Call, Wrapper]]:
    """The calls of torch's (timm's, deepspeed's) ``checkpoint`` in ``body``."""
    found = []
    for call in _walk_types(body, (cst.Call,)):
        wrapper = checkpoint_wrapper(call.func, env.qualify, models)  # type: ignore[attr-defined]
        if wrapper is not None and wrapper.form == CALL:
            found.append((call, wrapper))
    return found


def _function_wrapper(models, function: cst.FunctionDef) -> Optional[Wrapper]:
    params = function.params
    names = [param.name.value for param in (*params.posonly_params, *params.params)]
    star = params.star_arg.name.value if type(params.star_arg) is cst.Param else None
    kwargs = params.star_kwarg.name.value if params.star_kwarg is not None else None
    env = Env(_scope_of(function, models.root), None, None, function)
    for call, inner in _inner_calls(models, function.body, env):
        positional = _positional(call)
        first = positional[0] if positional else None
        if first is None or first.star or type(first.value) is not cst.Name or first.value.value not in names:
            continue
        position = names.index(first.value.value)
        rest = positional[1:]
        if not rest or not all(
            type(arg.value) is cst.Name
            and (arg.value.value == star if arg.star == "*" else arg.value.value in names[position + 1 :])
            for arg in rest
        ):
            continue  # not the caller's inputs that it checkpoints
        forwards = kwargs is not None and any(
            arg.star == "**" and type(arg.value) is cst.Name and arg.value.value == kwargs for arg in call.args
        )
        # the helper chooses: at its call, or written into the keywords it passes on
        # (`kwargs.setdefault("use_reentrant", False)`: a caller's own keyword still wins)
        chooses = keyword(call, "use_reentrant") is not None or (forwards and _names_keyword(function.body, "use_reentrant"))
        takes = forwards and not chooses and inner.use_reentrant  # the caller's keyword decides
        variant = inner.reentrant if takes else reentrant(inner, call)
        if variant is None and chooses and keyword(call, "use_reentrant") is None:
            variant = _set_keyword(function.body, "use_reentrant")  # `kwargs.setdefault("use_reentrant", False)`
        return Wrapper(
            function.name.value,
            CALL,
            variant,
            use_reentrant=takes,
            torch_keywords=forwards and inner.torch_keywords and keyword(call, "preserve_rng_state") is None,
            position=position,
        )
    return None


def _names_keyword(body: cst.CSTNode, name: str) -> bool:
    """``body`` names the keyword ``name``: a string of it (``kwargs["use_reentrant"] = ...``,
    ``kwargs.setdefault("use_reentrant", False)``) or a keyword argument (``kwargs.update(...)``)."""
    for node in walk(body):
        kind = type(node)
        if kind is cst.SimpleString and node.value[-len(name) - 1 : -1] == name and node.value.lstrip("rbuRBU")[1:-1] == name:
            return True
        if kind is cst.Arg and node.keyword is not None and node.keyword.value == name:
            return True
    return False


def _set_keyword(body: cst.CSTNode, name: str) -> Optional[bool]:
    """The literal ``True``/``False`` a body writes into the keywords it passes on, when it
    writes one value only: ``kwargs.setdefault("use_reentrant", False)``, ``kwargs["use_reentrant"]
    = False``; None otherwise."""
    values = set()
    for node in walk(body):
        value = None
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "setdefault" and len(node.args) == 2:
            key, value = node.args[0].value, node.args[1].value
        elif type(node) is cst.Assign and type(node.targets[0].target) is cst.Subscript:
            target = node.targets[0].target
            index = target.slice[0].slice if len(target.slice) == 1 else None
            key, value = getattr(index, "value", None), node.value
        else:
            continue
        if type(key) is cst.SimpleString and key.evaluated_value == name:
            values.add(value.value if type(value) is cst.Name and value.value in ("True", "False") else None)
    return values.pop() == "True" if len(values) == 1 and None not in values else None


def _class_wrapper(models, node: cst.ClassDef) -> Optional[Wrapper]:
    model = models.model(node, models.root)
    forward, init = model.methods.get("forward"), model.methods.get("__init__")
    if forward is None or init is None:
        return None
    params = [param.name.value for param in (*init.params.posonly_params, *init.params.params)][1:]
    env = model.method_env(forward)
    for call, inner in _inner_calls(models, forward.body, env):
        positional = _positional(call)
        first = positional[0] if positional else None
        path = self_path(first.value, env.self_name) if first is not None and not first.star else None
        values = model.attributes.get(path[0], []) if path is not None and len(path) == 1 else []
        given = {value.value for value in values if type(value) is cst.Name}
        if len(values) != 1 or len(given) != 1 or next(iter(given)) not in params:
            continue  # not the module `__init__` was given
        return Wrapper(node.name.value, MODULE, reentrant(inner, call), False, False, params.index(next(iter(given))))
    return None

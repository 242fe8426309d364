"""Layer factories: what a call such as ``act_layer()``, ``partial(nn.LeakyReLU, 0.1)()`` or
``Act()`` (``Act = partial(nn.Dropout, inplace=True)``) constructs.

A callee is followed to a ``torch.nn`` layer class through:

- ``nn.X`` itself, and ``functools.partial(nn.X, *args, **kwargs)`` (its arguments preset);
- a name assigned once, in the same function or at module level (``Act = partial(...)``);
- a parameter with a default (``def __init__(self, act_layer=nn.LeakyReLU)``): the values every
  call of the function (of the class, for ``__init__``) in this file passes for it, or its
  default where a call leaves it out; a value passed down from the calling function's own
  parameter (``Block(dim, act_layer=act_layer)``) is followed the same way. When the calls
  disagree or one is not followed, the layer is unknown. When the file never calls the
  function, the default is taken, and the result is marked not ``certain`` (a caller elsewhere
  may pass another layer): fixes through it are unsafe.

A parameter rebound in its function (``act_layer = get_act_layer(act_layer)``), a function or
class defined twice, a class subclassed in the file (``super().__init__(act_layer=...)``) or a
call with ``*args``/``**kwargs`` leaves the layer unknown."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.activation_configs import CONFIG_BUILDERS, config_argument, literal_config
from torchmemlint.analysis.local_values import _assigned, _local_values, _param, _rebound, assigned_values
from torchmemlint.analysis.local_values import parameter, single_local_value  # noqa: F401  (re-exported)
from torchmemlint.analysis.named_layers import by_name, by_name_text, name_parameter
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import walk
from torchmemlint.analysis.vocabulary import FUNCTIONAL, KIND_BY_MODULE, NN, Saves, short_name
from torchmemlint.tree import node_index, scan

PARTIAL = "functools.partial"

# timm's layer lookups: a class passed in is returned as it is (timm documents a string or
# None as what they look up). Written from timm's documentation; timm is never imported.
PASSTHROUGH = frozenset(
    f"timm.{package}{module}{name}"
    for package in ("layers.", "models.layers.")
    for module, name in (
        ("", "get_norm_layer"), ("create_norm.", "get_norm_layer"),
        ("", "get_act_layer"), ("create_act.", "get_act_layer"),
    )
)
_MAX_DEPTH = 6
_DIMENSIONS = re.compile(r"[123]d$")  # ``nn.Conv2d`` / ``nn.Conv3d``: the same layer in another dimension
_BUILDER_NAMES = {qualified.rsplit(".", 1)[-1]: True for qualified in CONFIG_BUILDERS}


def one_activation(factory: "Factory") -> Optional[str]:
    """Of a factory whose calls disagree (``activ()``: nn.ReLU from one call, nn.LeakyReLU from
    another), the activation to judge it as: the alternative whose out-of-place form keeps an
    extra tensor (its input) where one does, else the first. None unless every alternative is an
    activation taking ``inplace`` (not a dropout, a norm or an identity) with no preset arguments."""
    options = factory.options()
    kinds = [KIND_BY_MODULE.get(option.qualified) for option in options]
    if any(kind is None or "inplace" not in kind.module_params or kind.saves is Saves.MASK for kind in kinds):
        return None
    if any(option.preset for option in options):
        return None  # arguments are not read across classes
    return next((o.qualified for o, kind in zip(options, kinds) if kind.saves is Saves.INPUT), options[0].qualified)  # type: ignore[union-attr]


@dataclass(frozen=True)
class Factory:
    """A callee that constructs ``qualified`` with ``preset`` arguments before the call's own."""

    qualified: str
    preset: Tuple[cst.Arg, ...] = ()
    via: Optional[str] = None  # how it was found, for messages: "`act_layer`'s default"
    certain: bool = True  # False: taken from a default that callers elsewhere may override
    configured: bool = False  # built by a config builder: ``preset`` is all it receives
    # Calls of the function disagree (``Conv2DBNActiv(activ=activ)`` from an encoder whose default
    # is ``nn.LeakyReLU``, from a decoder ``nn.ReLU``): every layer some call builds, this one first
    # (``Factories.layer(..., alternatives=True)`` only; ``activation_sites.one_of`` reads them)
    alternatives: Tuple["Factory", ...] = ()

    def options(self) -> Tuple["Factory", ...]:
        """Each layer this callee may build: itself, or its alternatives."""
        return self.alternatives or (self,)

    def key(self) -> Tuple[str, Tuple[str, ...]]:
        module = cst.Module([])
        return self.qualified, tuple(module.code_for_node(arg) for arg in self.preset)


def effective_call(call: cst.Call, preset: Tuple[cst.Arg, ...]) -> cst.Call:
    """``call`` with the partial's arguments in front (positional first, keywords after).
    The arguments are the file's own nodes, so edits found through it apply to the file."""
    if not preset:
        return call
    positional = [a for a in preset if a.keyword is None and not a.star]
    keywords = [a for a in preset if a.keyword is not None or a.star]
    own_positional = [a for a in call.args if a.keyword is None and not a.star]
    own_rest = [a for a in call.args if a.keyword is not None or a.star]
    overridden = {a.keyword.value for a in own_rest if a.keyword is not None}
    keywords = [a for a in keywords if a.keyword is None or a.keyword.value not in overridden]
    return call.with_changes(args=[*positional, *own_positional, *keywords, *own_rest])


class Factories:
    """Per file: callees resolved to ``torch.nn`` layer classes (cached)."""

    def __init__(self, module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> None:
        self.module = module
        self.qualify = qualify
        self._index_built = False
        self._calls: Dict[str, List[Tuple[cst.Call, Optional[cst.FunctionDef]]]] = {}
        self._definitions: Dict[str, List[cst.CSTNode]] = {}
        self._owner: Dict[int, Optional[cst.ClassDef]] = {}  # id(function) -> class it is a method of
        self._forwarding = 0  # calls followed through a caller's ``**kwargs`` (``_forwarded``)
        self._subclassed: set = set()
        self._module_assignments: Dict[str, List[cst.BaseExpression]] = {}
        self.links: Optional[Callable[[], Any]] = None  # the file's ``ProjectLinks``, when asked (``constants.py``)
        self.choices: Optional[Callable[[], Any]] = None  # the file's ``ChosenFunctions`` (``_chosen``)
        self._names: Optional[FrozenSet[str]] = None
        self._cache: Dict[Tuple[int, int], Optional[Factory]] = {}
        # (id(class), attribute) -> every value a method of the class gives ``<self>.<attribute>``
        self._held: Dict[Tuple[int, str], List[Tuple[cst.BaseExpression, cst.FunctionDef]]] = {}
        # top-level by-name builders (``named_layers.name_parameter``): name -> (function, parameter)
        self._name_builders: Dict[str, Tuple[cst.FunctionDef, str]] = {}

    # -- one walk of the file -----------------------------------------------------------------
    def _index(self) -> None:
        if self._index_built:
            return
        self._index_built = True
        found: Set[str] = set()  # names()
        # From the file's shared index. A class is read through its body only: what its
        # decorators, bases and keywords hold is not collected (nor was it by the walk before).
        index = node_index(self.module)
        order, scope = index.order, index.scope
        bodies: Dict[int, int] = {}  # class position -> position of its body

        def outside_body(here: int) -> bool:
            inside = scope[here]
            if inside < 0 or type(order[inside]) is not cst.ClassDef:
                return False
            body = bodies.get(inside)
            if body is None:
                body = bodies[inside] = index.find(order[inside].body)  # type: ignore[attr-defined]
            return body is None or here < body

        for here in index.positions(cst.Param):
            node = order[here]
            if node.default is not None and _layer_like(node.default) and not outside_body(here):  # type: ignore[attr-defined]
                found.add(node.name.value)  # type: ignore[attr-defined]
        for here in [*index.positions(cst.Assign), *index.positions(cst.AnnAssign)]:
            node = order[here]
            if node.value is not None and _layer_like(node.value):  # type: ignore[attr-defined]
                found.update(name for name, _ in _assigned(node))
            if type(node) is cst.Assign and node.value is not None:  # ``self.conv = nn.Conv2d`` (``_held_class``)
                for target in node.targets:  # type: ignore[attr-defined]
                    attribute = target.target
                    if type(attribute) is cst.Attribute and type(attribute.value) is cst.Name:
                        function = index.function_of(here)
                        owner = scope[function] if function >= 0 else -1
                        if owner >= 0 and type(order[owner]) is cst.ClassDef:
                            self._held.setdefault((id(order[owner]), attribute.attr.value), []).append(
                                (node.value, order[function])  # type: ignore[arg-type,attr-defined]
                            )
                            if _layer_like(node.value):  # ``self.act_layer = nn.ELU`` ... ``self.act_layer()``
                                found.add(attribute.attr.value)
        for node in index.of_types(0, (cst.ClassDef, cst.FunctionDef)):
            self._definitions.setdefault(node.name.value, []).append(node)  # type: ignore[attr-defined]
            if type(node) is cst.ClassDef:
                for base in node.bases:  # type: ignore[attr-defined]
                    dotted = dotted_name(base.value)
                    if dotted is not None:
                        self._subclassed.add(dotted.rsplit(".", 1)[-1])
        for here in index.positions(cst.FunctionDef):
            inside = scope[here]
            owner = order[inside] if inside >= 0 and type(order[inside]) is cst.ClassDef else None
            self._owner[id(order[here])] = owner  # type: ignore[assignment]
        for here in index.positions(cst.Call):
            node = order[here]
            func = node.func  # type: ignore[attr-defined]
            func_type = type(func)
            name = func.value if func_type is cst.Name else (
                func.attr.value if func_type is cst.Attribute else None
            )
            if name is not None and not outside_body(here):
                function = index.function_of(here)
                self._calls.setdefault(name, []).append(
                    (node, order[function] if function >= 0 else None)  # type: ignore[arg-type]
                )
        builders = {id(function): function for _, function in self._calls.get("getattr", ()) if function is not None}
        for function in builders.values():
            name = function.name.value
            param = name_parameter(self.qualify, function) if function in self.module.body else None
            if param is not None and len(self._definitions.get(name, ())) == 1:
                self._name_builders[name] = (function, param)
                found.add(name)
        self._names = frozenset(found)
        for statement in self.module.body:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    for name, value in _assigned(small):
                        self._module_assignments.setdefault(name, []).append(value)

    def names(self) -> FrozenSet[str]:
        """Callee names that may stand for a layer factory in this file (a cheap first test)."""
        self._index()  # the same walk collects them
        assert self._names is not None
        return self._names

    # -- resolution ---------------------------------------------------------------------------
    def layer(
        self, call: cst.Call, function: Optional[cst.FunctionDef], alternatives: bool = False
    ) -> Optional[Factory]:
        """The layer ``call`` constructs through a factory (None: not one, or not known). Where
        the calls of the function disagree on it, None unless ``alternatives`` is asked for."""
        found = self._layer(call, function)
        return None if found is not None and found.alternatives and not alternatives else found

    def _layer(self, call: cst.Call, function: Optional[cst.FunctionDef]) -> Optional[Factory]:
        func = call.func
        if _BUILDER_NAMES.get(func.value if type(func) is cst.Name else func.attr.value if type(func) is cst.Attribute else ""):
            qualified = self.qualify(func)  # `build_activation_layer(act_cfg)`
            config = config_argument(call, qualified) if qualified in CONFIG_BUILDERS else None
            return self._configured(config, function, 0) if config is not None else None
        if type(func) is cst.Name and func.value not in self.names():
            return None
        if type(func) is cst.Name and func.value in self._name_builders:
            return self._built_by_name(call, function)
        if type(func) is cst.Attribute and type(func.value) is cst.Name and function is not None:
            return self._held_class(func, function)
        if type(func) not in (cst.Name, cst.Call, cst.Subscript):
            return None
        return self.resolve(func, function)

    def resolve(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int = 0) -> Optional[Factory]:
        key = (id(expr), id(function))
        if key in self._cache:
            return self._cache[key]
        self._cache[key] = None  # recursion guard
        found = self._resolve(expr, function, depth) if depth <= _MAX_DEPTH else None
        self._cache[key] = found
        return found

    def _resolve(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[Factory]:
        if type(expr) is cst.Subscript or (type(expr) is cst.Call and self.qualify(expr.func) != PARTIAL):
            return self._named(expr, function, depth) or self._chosen(expr, function, depth)
        if type(expr) is cst.Call:
            if self.qualify(expr.func) != PARTIAL or not expr.args or expr.args[0].keyword is not None:
                return None
            if expr.args[0].star:
                return None
            inner = self.resolve(expr.args[0].value, function, depth + 1)
            if inner is None or inner.alternatives:
                return None
            return Factory(inner.qualified, inner.preset + tuple(expr.args[1:]), inner.via, inner.certain)
        if type(expr) is cst.Attribute:
            return self._class(expr)
        if type(expr) is not cst.Name:
            return None
        self._index()
        name = expr.value
        if function is not None:
            param = _param(function, name)
            if param is not None:
                return self._parameter(function, param, depth) or self._chosen(expr, function, depth)
            values = _local_values(function, name)
            if len(values) > 1 and all(type(v) in (cst.Name, cst.Attribute) for v in values):
                return self._by_dimension([self.resolve(v, function, depth + 1) for v in values])
            if values:
                return self.resolve(values[0], function, depth + 1) if len(values) == 1 else None
        direct = self._class(expr)
        if direct is not None:
            return direct
        values = self._module_assignments.get(name, [])
        if len(values) == 1 and name not in self._definitions:
            return self.resolve(values[0], None, depth + 1)
        return None

    def _configured(self, config: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[Factory]:
        """The layer a config builder makes of ``config`` (``analysis/activation_configs.py``): a
        literal dict, or a parameter whose default is one, followed as ``_parameter`` follows a
        layer class (every call of the function in this file passes an equal one, or none)."""
        if depth > _MAX_DEPTH:
            return None
        literal = literal_config(config, self._is_dict)
        if literal is not None:
            return Factory(literal[0], literal[1], configured=True)
        if type(config) is not cst.Name or function is None:
            return None
        param = _param(function, config.value)
        if param is None or param.default is None or _rebound(function, config.value):
            return None
        default = self._configured(param.default, None, depth + 1)
        if default is None:
            return None
        return self._as_passed(function, param, default, self._configured, depth, configured=True)

    def _is_dict(self, func: cst.BaseExpression) -> bool:
        return type(func) is cst.Name and func.value == "dict" and self.qualify(func) in (None, "builtins.dict")

    def _named(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[Factory]:
        """``getattr(torch.nn, name)`` / ``ACTS[name]`` (``analysis/named_layers.py``)."""
        named = by_name(self, expr, function)
        if named is None:
            return None
        target, via, certain = named
        inner = Factory(target) if isinstance(target, str) else self.resolve(target, None, depth + 1)
        if inner is None or inner.alternatives:
            return None
        return Factory(inner.qualified, inner.preset, via or inner.via, certain and inner.certain)

    def _chosen(self, expr: cst.BaseExpression, function: Optional[cst.FunctionDef], depth: int) -> Optional[Factory]:
        """The layer class a choice by constant keys ends at (``ChosenFunctions.leaves``): ``act
        = get_activation(activation)`` with ``def get_activation(name): return {"lrelu":
        nn.LeakyReLU, ...}[name]`` (also another project file's), a parameter rebound from itself
        (``activation = get_activation(activation)``), a local dict of classes by a key; by a
        key not known, classes that differ only by dimension (``{1: nn.Conv1d, 2:
        nn.Conv2d}[dim]``, ``_by_dimension``)."""
        if self.choices is None or depth > _MAX_DEPTH:
            return None
        found = self.choices().leaves(expr, function, {}, 0)
        if not found or any(leaf[0] is expr or type(leaf[0]) not in (cst.Name, cst.Attribute, cst.Call) for leaf in found):
            return None
        options = [file.factories.resolve(leaf, where, depth + 1) for leaf, where, _, _, file in found]
        factory = options[0] if len(options) == 1 else self._by_dimension(options)
        if factory is None or factory.alternatives:
            return None
        how = found[0][3] if len(found) == 1 else None
        return Factory(factory.qualified, factory.preset, factory.via or how, False, factory.configured or how is not None)

    def _built_by_name(self, call: cst.Call, function: Optional[cst.FunctionDef]) -> Optional[Factory]:
        """``get_activation(activation)`` of a by-name builder of the file: the ``torch.nn``
        class its name argument names (a literal, or a parameter whose default is one, as
        ``getattr(torch.nn, name)`` reads it), built with no arguments of the call's."""
        builder, param = self._name_builders[call.func.value]  # type: ignore[attr-defined]
        if builder is function or any(arg.star for arg in call.args):
            return None
        positional = [p.name.value for p in (*builder.params.posonly_params, *builder.params.params)]
        given = next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == param), None)
        place = positional.index(param)
        if given is None and place < len(call.args) and call.args[place].keyword is None:
            given = call.args[place].value
        text = by_name_text(self, given, function) if given is not None else None
        if text is None:
            return None
        via = text[1] or f"`{call.func.value}({text[0]!r})`"  # type: ignore[attr-defined]
        return Factory(f"torch.nn.{text[0]}", (), via, text[2], configured=True)

    @staticmethod
    def _by_dimension(found: List[Optional[Factory]]) -> Optional[Factory]:
        """``conv = nn.Conv2d`` in one arm, ``conv = nn.Conv3d`` in another (by ``spatial_dim``):
        layer classes that differ only by dimension, the first standing for all; else None."""
        if not found or any(f is None or f.alternatives or f.preset for f in found):
            return None
        if len({_DIMENSIONS.sub("", f.qualified) for f in found}) != 1:  # type: ignore[union-attr]
            return None
        return found[0]

    def _held_class(self, func: cst.Attribute, function: cst.FunctionDef) -> Optional[Factory]:
        """``self.conv(...)`` in a method, where every value the class gives ``self.conv`` is a
        layer class (aydin's JINet: ``nn.Conv2d`` or ``nn.Conv3d`` by dimension, each a
        convolution: the first stands for both); classes that differ otherwise are alternatives.
        An instance (``self.conv = nn.Conv2d(...)``) is a module, whose call runs it: None."""
        self._index()
        owner = self._owner.get(id(function))
        params = function.params.params
        if owner is None or not params or params[0].name.value != func.value.value:  # type: ignore[attr-defined]
            return None
        values = self._held.get((id(owner), func.attr.value), [])
        options: Dict[str, Factory] = {}
        for value, method in values:
            if type(value) not in (cst.Name, cst.Attribute) and not (type(value) is cst.Call and self.qualify(value.func) == PARTIAL):
                return None
            found = self.resolve(value, method)
            if found is None or found.alternatives:
                return None
            options.setdefault(found.qualified, found)
        if not options:
            return None
        first = next(iter(options.values()))
        via = f"`self.{func.attr.value}`"
        if len({_DIMENSIONS.sub("", qualified) for qualified in options}) == 1:
            return Factory(first.qualified, first.preset, via, first.certain)
        return Factory(first.qualified, first.preset, via, False, alternatives=tuple(options.values()))

    def _class(self, expr: cst.BaseExpression) -> Optional[Factory]:
        qualified = self.qualify(expr)
        if qualified is None or not qualified.startswith(NN) or qualified.startswith(FUNCTIONAL):
            return None
        last = qualified.rsplit(".", 1)[-1]
        if not last[:1].isupper():
            return None  # torch.nn.init, torch.nn.utils: not layer classes
        return Factory(qualified)

    def _parameter(self, function: cst.FunctionDef, param: cst.Param, depth: int) -> Optional[Factory]:
        default_value = param.default
        if _is_none(default_value):  # ``activation=None`` then ``if activation is None: activation = nn.ELU``
            default_value = _none_filled(function, param.name.value)
        elif default_value is not None and self._changed(function, param.name.value):
            return None
        if default_value is None:  # required: what every call passes (``activation=activation`` from ``__init__``)
            passed = self._passed(function, param)
            if not passed or any(value is None for value, _ in passed):
                return None
            default = self.resolve(passed[0][0], passed[0][1], depth + 1)
        else:
            default = self.resolve(default_value, None, depth + 1)
        if default is None:
            return None
        return self._as_passed(function, param, default, self.resolve, depth)

    def _as_passed(
        self, function: cst.FunctionDef, param: cst.Param, default: Factory,
        follow: Callable[..., Optional[Factory]], depth: int, configured: bool = False,
    ) -> Optional[Factory]:
        """``default`` (what ``param``'s default makes) when every call of ``function`` in this
        file passes an equal layer (``follow(value, caller, depth)``) or leaves the default;
        None otherwise."""
        passed = self._passed(function, param)
        if passed is None:
            return None
        label = f"`{param.name.value}`"
        if not passed:
            return Factory(default.qualified, default.preset, f"{label}'s default", False, configured)
        certain = True
        options: Dict[Tuple[str, Tuple[str, ...]], Factory] = {option.key(): option for option in default.options()}
        left, given = False, set()  # (a call leaving the default: also another file's, ``_imported``)
        for value, caller in passed:
            if value is None or (_is_none(value) and _is_none(param.default)):
                left = True
                continue  # left out, or ``None`` where ``None`` means the filled-in default
            other = follow(value, caller, depth + 1)
            if other is None:
                return None
            certain = certain and other.certain
            for option in other.options():
                options.setdefault(option.key(), option)
                given.add(option.key())
        if not left and not self._imported(function):  # every call passes its own: the default is never built
            options = {key: option for key, option in options.items() if key in given}
            default = next(iter(options.values()))
        if len(options) > 1:  # the calls disagree: each layer one of them builds
            if configured:
                return None
            names = " or ".join(f"`{short_name(option.qualified)}`" for option in options.values())
            return Factory(default.qualified, default.preset, f"{label}, which the calls in this file pass as {names}",
                           False, alternatives=tuple(options.values()))
        return Factory(default.qualified, default.preset, f"{label}, as every call in this file passes it", certain, configured)

    def _imported(self, function: cst.FunctionDef) -> bool:
        """Whether another file may call ``function`` (or its class), or that is not known."""
        owner = self._owner.get(id(function))
        links = self.links() if self.links is not None else None
        return links is None or bool(links.index.importers(links.path, (owner or function).name.value))

    def _passed(
        self, function: cst.FunctionDef, param: cst.Param
    ) -> Optional[List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
        """What each call of ``function`` in this file passes for ``param`` (None: left at the
        default); None when a call cannot be read or the callee is ambiguous."""
        owner = self._owner.get(id(function))
        params = function.params
        positional = [*params.posonly_params, *params.params]
        if owner is not None:
            if function.name.value != "__init__":
                callee = function.name.value
            else:
                callee = owner.name.value
                if callee in self._subclassed:
                    return None
                if any(self._owner.get(id(caller)) is owner for _, caller in self._calls.get("cls", [])):
                    return None  # `cls(act_layer=...)` in a classmethod: not read here
            if len(self._definitions.get(callee, [])) != 1:
                return None
            positional = positional[1:]
        else:
            callee = function.name.value
            if len(self._definitions.get(callee, [])) != 1:
                return None
        return self._read_calls(callee, positional, param, owner is not None and function.name.value != "__init__", own=True)

    def passed_to(
        self, name: str, init: cst.FunctionDef, param: cst.Param
    ) -> Optional[List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
        """What each call of ``name`` in this file, a class of another file this file imports
        (``init`` its ``__init__``), passes for ``param`` (None: left at the default); None when a
        call cannot be read, or the file defines or subclasses a class of that name."""
        self._index()
        if self._definitions.get(name) or name in self._subclassed:
            return None
        return self._read_calls(name, [*init.params.posonly_params, *init.params.params][1:], param, False)

    def _read_calls(
        self, callee: str, positional: List[cst.Param], param: cst.Param, method: bool, own: bool = False
    ) -> Optional[List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
        """``_passed`` for the calls of ``callee`` (``method``: only ``x.callee(...)``; ``own``:
        a top-level class or function of this file, which ``layers.Conv(...)`` or
        ``nn.Linear(...)`` does not call, whatever its name)."""
        index = next((i for i, p in enumerate(positional) if p is param), None)
        found: List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]] = []
        for call, caller in self._calls.get(callee, []):
            if own and not method and type(call.func) is cst.Attribute:
                continue  # another module's (or object's) callable of the same name
            call = spelled_out(call, caller)
            if method and type(call.func) is not cst.Attribute:
                continue  # a function of the same name, not the method
            forwarded = None
            if any(arg.star for arg in call.args):
                forwarded = self._forwarded(call, caller, param.name.value)
                if forwarded is None:
                    return None
            value: Optional[cst.BaseExpression] = None
            position = 0
            for arg in call.args:
                if arg.keyword is not None:
                    if arg.keyword.value == param.name.value:
                        value = arg.value
                    continue
                if arg.star:  # ``**kwargs`` holds no position; after ``*args`` none is known
                    position = -1 if arg.star == "*" else position
                    continue
                if index is not None and position == index:
                    value = arg.value
                position += 1 if position >= 0 else 0
            if value is not None and caller is not None and param.default is not None and _in_defaults(value, caller):
                if value.deep_equals(param.default):
                    continue  # ``**params`` copied from the caller's default dict: the default, as uncertain
            if value is None and forwarded is not None:
                found.extend(forwarded)  # what the caller's own callers give it for the keyword
                continue
            found.append((value, caller))
        return found

    def _forwarded(
        self, call: cst.Call, caller: Optional[cst.FunctionDef], keyword: str
    ) -> Optional[List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
        """For a call whose only spread argument is the calling function's own ``**kwargs``
        (``D(filters, n_fft=n, **kwargs)``, the parameter not rebound): what each call of that
        function in this file passes it under ``keyword`` (an empty list: none does, the
        callee's default stands); None when it cannot be read."""
        stars = [arg for arg in call.args if arg.star]
        if caller is None or len(stars) != 1 or stars[0].star != "**" or type(stars[0].value) is not cst.Name:
            return None
        spread = caller.params.star_kwarg
        name = stars[0].value.value
        if not isinstance(spread, cst.Param) or spread.name.value != name or _rebound(caller, name):
            return None
        if self._forwarding >= 3:
            return None
        self._forwarding += 1
        try:
            found = self._passed(caller, cst.Param(name=cst.Name(keyword)))
        finally:
            self._forwarding -= 1
        if found == [] and caller in self.module.body:  # none here: the files importing it may pass it
            return self._passed_elsewhere(caller, keyword)
        return found

    def _passed_elsewhere(self, function: cst.FunctionDef, keyword: str) -> Optional[List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]]:
        """What the calls of the top-level ``function`` in the project's other files pass under
        ``keyword`` (``iresnet50(dropout_keep_prob=0.5)`` in an importer of ``def
        iresnet50(**kwargs)``), each without its calling function (read as a value only); []
        when no file imports it, None when an importer cannot be read."""
        links = self.links() if self.links is not None else None
        importing = links.importing(function.name.value) if links is not None else []
        if importing is None:
            return None
        found: List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]] = []
        for theirs, names in importing:
            for name in names:
                theirs.factories._index()
                passed = theirs.factories._read_calls(name, [], cst.Param(name=cst.Name(keyword)), False)
                if passed is None:
                    return None
                found.extend((value, None) for value, _ in passed)
        return found

    def _changed(self, function: cst.FunctionDef, name: str) -> bool:
        """Whether ``function`` rebinds its parameter ``name`` to another layer: not where it
        only passes it through one of timm's lookups (``norm_layer = get_norm_layer(norm_layer)``
        gives a layer class back unchanged; only a string or None is looked up)."""
        for value in _local_values(function, name):
            if not (
                type(value) is cst.Call
                and self.qualify(value.func) in PASSTHROUGH
                and len(value.args) == 1
                and not value.args[0].star
                and type(value.args[0].value) is cst.Name
                and value.args[0].value.value == name
            ):
                return True
        return False

    def passed(self, function: cst.FunctionDef, param: cst.Param):
        """Public form of ``_passed`` (used for dropout probabilities)."""
        self._index()
        return self._passed(function, param)


def _layer_like(node: cst.BaseExpression) -> bool:
    """A quick syntactic test: ``nn.X``/``X`` (capitalised), ``partial(...)``, ``getattr(nn, name)``
    or ``TABLE[name]`` (``act_fn = ACTIVATION_FN[activation]``: ``named_layers.by_name`` reads it)."""
    if type(node) is cst.Subscript:
        return type(node.value) is cst.Name
    if type(node) is cst.Call:
        if type(node.func) is cst.Name and node.func.value == "getattr" and len(node.args) >= 2:
            return True  # (``act = getattr(nn, activation)``: ``named_layers.by_name`` reads it)
        if type(node.func) is cst.Name and len(node.args) == 1 and type(node.args[0].value) in (cst.Name, cst.SimpleString):
            return True  # (``act = get_activation(activation)``: a choice, ``Factories._chosen``)
        return bool(node.args) and _layer_like(node.args[0].value)
    dotted = dotted_name(node)
    return dotted is not None and dotted.rsplit(".", 1)[-1][:1].isupper()


def _is_none(node: Optional[cst.BaseExpression]) -> bool:
    return type(node) is cst.Name and node.value == "None"


def _none_filled(function: cst.FunctionDef, name: str) -> Optional[cst.BaseExpression]:
    """``value`` of ``if name is None: name = value`` among the top-level statements of ``function``,
    where that is the only binding of ``name`` in it (deeptime's and zuko's MLPs: a parameter
    that defaults to None and stands for a layer class chosen there)."""
    body = function.body
    if type(body) is not cst.IndentedBlock or len(_local_values(function, name)) != 1:
        return None
    for statement in body.body:
        if type(statement) is not cst.If or statement.orelse is not None:
            continue
        test = statement.test
        if not (type(test) is cst.Comparison and type(test.left) is cst.Name and test.left.value == name
                and len(test.comparisons) == 1 and type(test.comparisons[0].operator) is cst.Is
                and _is_none(test.comparisons[0].comparator)):
            continue
        inner = statement.body.body if type(statement.body) is cst.IndentedBlock else []
        if len(inner) == 1 and type(inner[0]) is cst.SimpleStatementLine and len(inner[0].body) == 1:
            small = inner[0].body[0]
            if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name \
                    and small.targets[0].target.value == name:
                return small.value
    return None


def spelled_out(call: cst.Call, function: Optional[cst.FunctionDef]) -> cst.Call:
    """``call`` with each ``**name`` whose value is a literal dict of ``function``
    (``dd = {'device': device, 'dtype': dtype}``, ``dict(device=device)``), never changed
    there, written as its keywords, so that what the call chooses is known (an unknown
    ``**kwargs`` may choose anything)."""
    if function is None or not any(arg.star == "**" and type(arg.value) is cst.Name for arg in call.args):
        return call
    args: List[cst.Arg] = []
    for arg in call.args:
        keywords = _literal_keywords(arg.value, function) if arg.star == "**" else None
        args.extend([arg] if keywords is None else keywords)
    return call.with_changes(args=args)


_DICT_COPIES = frozenset({"copy.deepcopy", "deepcopy", "copy.copy", "dict"})


def _literal_keywords(value: cst.BaseExpression, function: cst.FunctionDef, depth: int = 0) -> Optional[List[cst.Arg]]:
    """The keywords ``**value`` passes: a dict literal or ``dict(k=v)`` bound once in
    ``function``, or a copy of one (``copy.deepcopy(x)``, ``dict(x)``, ``x.copy()``; ``x`` a
    local or a parameter whose default is a dict literal), with ``value["k"] = v`` by literal
    keys applied; None when not known (``value.update(...)``, a computed key)."""
    if type(value) is not cst.Name or depth > 3:
        return None
    param = _param(function, value.value)
    values = assigned_values(function, value.value)
    if param is not None:
        if values or param.default is None:
            return None
        values = [param.default]  # what a call that does not pass it gets
    if len(values) != 1:
        return None
    overrides: Dict[str, cst.BaseExpression] = {}
    keyed = False
    for node in scan(function.body, (cst.Attribute, cst.Subscript)):
        if type(node.value) is cst.Name and node.value.value == value.value:  # type: ignore[attr-defined]
            if type(node) is cst.Attribute and node.attr.value not in ("get", "keys", "items", "values", "copy"):  # type: ignore[attr-defined]
                return None  # ``dd.update(...)``, ``dd.pop(...)``
            if type(node) is cst.Subscript:
                if _literal_key(node, value.value) is None:  # type: ignore[arg-type]
                    return None  # ``dd[name] = ...`` with a computed key
                keyed = True
    for node in scan(function.body, (cst.Assign, cst.AugAssign, cst.Del)) if keyed else ():
        if type(node) is cst.Assign:  # ``params["period"] = period``
            for target in node.targets:  # type: ignore[attr-defined]
                key = _literal_key(target.target, value.value)
                if key is not None:
                    overrides[key] = node.value  # type: ignore[attr-defined]
        elif any(_literal_key(n, value.value) for n in walk(node.target)):  # type: ignore[attr-defined]
            return None  # ``del dd["k"]``, ``dd["k"] += 1``
    found = values[0]
    keywords: Optional[List[cst.Arg]] = None
    if type(found) is cst.Dict:
        keywords = []
        for element in found.elements:
            key = element.key if type(element) is cst.DictElement else None
            if type(key) is not cst.SimpleString or not str(key.evaluated_value).isidentifier():
                return None
            keywords.append(cst.Arg(element.value, keyword=cst.Name(str(key.evaluated_value))))
    elif type(found) is cst.Call and dotted_name(found.func) in _DICT_COPIES and len(found.args) == 1 and not found.args[0].keyword and not found.args[0].star:
        keywords = _literal_keywords(found.args[0].value, function, depth + 1)
    elif type(found) is cst.Call and type(found.func) is cst.Attribute and found.func.attr.value == "copy" and not found.args:
        keywords = _literal_keywords(found.func.value, function, depth + 1)
    elif type(found) is cst.Call and type(found.func) is cst.Name and found.func.value == "dict":
        if any(arg.keyword is None for arg in found.args):
            return None
        keywords = [cst.Arg(arg.value, keyword=arg.keyword) for arg in found.args]
    if keywords is None:
        return None
    if overrides:
        keywords = [k for k in keywords if k.keyword is None or k.keyword.value not in overrides]
        keywords += [cst.Arg(v, keyword=cst.Name(k)) for k, v in overrides.items() if k.isidentifier()]
    return keywords


def _in_defaults(node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """``node`` is (inside) the default of one of ``function``'s parameters."""
    params = function.params
    return any(
        param.default is not None and any(inner is node for inner in walk(param.default))
        for param in (*params.posonly_params, *params.params, *params.kwonly_params)
    )


def _literal_key(node: cst.BaseExpression, name: str) -> Optional[str]:
    """``"k"`` for ``name["k"]``."""
    if type(node) is not cst.Subscript or type(node.value) is not cst.Name or node.value.value != name:
        return None
    if len(node.slice) != 1 or type(node.slice[0].slice) is not cst.Index:
        return None
    key = node.slice[0].slice.value  # type: ignore[attr-defined]
    return str(key.evaluated_value) if type(key) is cst.SimpleString else None

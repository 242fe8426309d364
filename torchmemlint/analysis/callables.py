"""What calling an expression runs: ``checkpoint(self.block, x)`` is followed to
``self.block = Block(...)`` in ``__init__``, through ``nn.Sequential(...)`` contents and
partials, to ``class Block`` in the same file and its ``__init__``/``forward``; its traits
(BatchNorm, randomness), its layer count, the single op it is. Built per file, cached."""

from __future__ import annotations

from typing import Dict, List, Optional, Set, Tuple, Union

import libcst as cst

from torchmemlint.analysis.checkpoints import (
    agreed, BATCH_NORM, IDENTITY, _CONTAINERS, _F, Found, instantiated, _is_none, _function_op, _function_traits, _lambda_call,
    _argument, _last_part, _module_traits, _NN, norm_config_traits, NORM_CONFIG_BUILDERS, relative_wrappers,
    _PARAMETERLESS_MODULES, _PARAMETRIC_MODULES, _PARTIAL, RANDOM, _RANDOM_METHODS, _single_return_call, SingleOp, timm_layer_traits, Wrapper,
)
from torchmemlint.analysis.built_layers import built_op, either
from torchmemlint.analysis.classes import Env, InitModel
from torchmemlint.analysis.configs import config_type
from torchmemlint.analysis.inheritance import inherited_init, inherited_method
from torchmemlint.analysis.factories import assigned_values, effective_call, Factories, parameter, spelled_out
from torchmemlint.analysis.local_layers import bound_call as _bound_call, local_layer_classes
from torchmemlint.analysis.library_parts import held_op
from torchmemlint.analysis.names import Bindings, dotted_name as _dotted
from torchmemlint.analysis.syntax import _first_param, _flat_statements, _scope_of, _walk_types, nodes_of, self_path
from torchmemlint.tree import scan


# methods that put their last argument into a local list or container: name -> argument count
_ADDERS = {"append": 1, "extend": 1, "add_module": 2, "register_module": 2}


class CallableModel:
    """Classes and functions of one file, followed on demand (results cached)."""

    MAX_DEPTH = 8

    def __init__(
        self, module: cst.Module, root: Bindings, factories: Optional[Factories] = None,
        text: Optional[str] = None,
    ) -> None:
        self.module = module
        # the parsed source, when known: a class cannot say "checkpoint" if the file does not
        lower = text.lower() if text is not None else None
        self._file_mentions = lower is None or "checkpoint" in lower
        # ... nor in a comment if no line says it after a `#` (a `#` in a string: maybe)
        self._comment_mentions = lower is None or self._file_mentions and any(
            "checkpoint" in line.partition("#")[2] for line in lower.splitlines() if "#" in line
        )
        self.root = root
        self.factories = factories
        self.classes: Dict[str, cst.ClassDef] = {}
        self.functions: Dict[str, cst.FunctionDef] = {}
        for statement in _flat_statements(module.body):
            if type(statement) is cst.ClassDef:
                self.classes[statement.name.value] = statement
            elif type(statement) is cst.FunctionDef:
                self.functions[statement.name.value] = statement
        self._models: Dict[int, InitModel] = {}
        self._class_contents: Dict[int, Dict[str, Found]] = {}
        self._in_progress: Set[int] = set()
        # function_contents by (function, where it is evaluated, depth): a checkpointed
        # block's methods are met again from every call that reaches them
        self._function_contents: Dict[Tuple[int, int, int, Optional[str], int, int], Dict[str, Found]] = {}
        self._mentions: Dict[int, bool] = {}
        self._layer_counts: Dict[int, int] = {}
        self._relative_wrappers: Optional[Dict[str, Wrapper]] = None
        self.helper_wrappers: Dict[int, Optional[Wrapper]] = {}  # ``analysis/helpers.py``, by definition
        self.helper_names: Dict[str, Optional[Wrapper]] = {}  # ... and by the name this file calls
        self.mentions_text = self._file_mentions  # the file says "checkpoint" (or is not known)
        self.cut = False  # ``contents`` stopped at ``MAX_DEPTH`` since ``class_contents`` began
        # ``analysis/links.py``: classes and functions of other project files (set by
        # ``FileAnalysis``; None: this file alone)
        self.links = None

    @property
    def relative_wrappers(self) -> Dict[str, Wrapper]:
        """Checkpoint functions this file imports relatively (timm's own model files)."""
        if self._relative_wrappers is None:
            self._relative_wrappers = relative_wrappers(self.module)
        return self._relative_wrappers

    # -- lookups ---------------------------------------------------------------------------
    def model(self, node: cst.ClassDef, scope: Bindings) -> InitModel:
        key = id(node)
        if key not in self._models:
            self._models[key] = InitModel(node, scope)
        return self._models[key]

    def local_class(self, func: cst.BaseExpression, env: Env) -> Optional[InitModel]:
        """The model of a class of this file named by ``func`` (not shadowed by an import)."""
        if type(func) is not cst.Name or func.value not in self.classes:
            return None
        if env.scope.lookup(func.value) is not None:  # imported under that name
            return None
        return self.model(self.classes[func.value], self.root)

    def local_function(self, func: cst.BaseExpression, env: Env) -> Optional[cst.FunctionDef]:
        if type(func) is not cst.Name or func.value not in self.functions:
            return None
        if env.scope.lookup(func.value) is not None:
            return None
        return self.functions[func.value]

    def foreign(
        self, func: cst.BaseExpression, env: Env, kind: str, package: bool = False
    ) -> Optional[Tuple["CallableModel", cst.CSTNode]]:
        """A class or function (``kind``) that another file of the project defines, named by
        ``func`` at module level here: that file's model and its definition (``package``: also
        imported by absolute name from the file's own package, ``ProjectLinks.locate``)."""
        dotted = self._module_level_name(func, env)
        found = self.links.definition(dotted, kind, package) if dotted is not None else None
        return None if found is None else (found[0].callables, found[1])

    def _module_level_name(self, func: cst.BaseExpression, env: Env) -> Optional[str]:
        """``func`` as a dotted name of the module's scope (None: not a name, or a local or
        parameter of the function shadows it, or the file has no project)."""
        if self.links is None or type(func) not in (cst.Name, cst.Attribute):
            return None
        head = func
        while type(head) is cst.Attribute:
            head = head.value
        if type(head) is not cst.Name:
            return None
        scope: Optional[Bindings] = env.scope
        while scope is not None and scope is not self.root:
            if head.value in scope.names:
                return None
            scope = scope.parent
        return _dotted(func)

    def outside_name(self, func: cst.BaseExpression, env: Env) -> Optional[str]:
        """The absolute name of a torchvision/timm/torch name that a project module re-exports
        to this file (``from .encoders import Bottleneck``), which the file's own imports do
        not say."""
        dotted = self._module_level_name(func, env)
        if dotted is None or env.qualify(func) is not None:
            return None
        if self.local_class(func, env) is not None or self.local_function(func, env) is not None:
            return None
        located = self.links.locate(dotted)
        return located.name if located is not None and located.kind == "external" else None

    def _foreign_class_contents(self, func: cst.BaseExpression, env: Env, depth: int) -> Optional[Dict[str, Found]]:
        found = self.foreign(func, env, "class")
        if found is None:
            return None
        other, node = found
        return other.class_contents(other.model(node, other.root), depth + 1)

    def _foreign_function_contents(self, func: cst.BaseExpression, env: Env, depth: int) -> Optional[Dict[str, Found]]:
        found = self.foreign(func, env, "function")
        if found is None:
            return None
        other, node = found
        return other.function_contents(node, Env(_scope_of(node, other.root), None, None), depth + 1)

    def follow(
        self, expr: cst.BaseExpression, env: Env
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """The ``__init__`` values of ``self.a`` / ``self.a.b``; None when not a self attribute."""
        path = self_path(expr, env.self_name)
        if path is None or env.owner is None:
            return None
        values = self._attribute(env.owner, path[0])
        for name in path[1:]:
            deeper = []
            for value, value_env, _ in values:
                inner = (
                    self.local_class(value.func, value_env) if type(value) is cst.Call else None
                )
                if inner is not None:
                    deeper.extend(self._attribute(inner, name))
            values = deeper
        return values

    def _attribute(
        self, model: InitModel, name: str, depth: int = 0
    ) -> List[Tuple[cst.BaseExpression, Env, str]]:
        """``self.<name>`` as ``__init__`` sets it, or else a base class of this file does."""
        values = model.attributes.get(name)
        if values:
            return [(value, model.init_env(), f"{model.name}.{name}") for value in values]
        found: List[Tuple[cst.BaseExpression, Env, str]] = []
        if depth < self.MAX_DEPTH:
            for base in model.node.bases:
                parent = self.local_class(base.value, Env(model.scope, None, None))
                if parent is not None and parent is not model:
                    found.extend(self._attribute(parent, name, depth + 1))
        return found

    @staticmethod
    def appended(
        expr: cst.BaseExpression, env: Env
    ) -> List[Tuple[Optional[cst.For], cst.BaseExpression]]:
        """What ``__init__`` appends to ``self.x`` (``self.x.append(Block())``)."""
        path = self_path(expr, env.self_name)
        if path is None or len(path) != 1 or env.owner is None:
            return []
        return env.owner.attribute_appends.get(path[0], [])

    def _appended_elements(
        self, expr: cst.BaseExpression, env: Env
    ) -> List[Tuple[cst.BaseExpression, Env, str]]:
        appended = self.appended(expr, env)
        if not appended or env.owner is None:
            return []
        where = f"{env.owner.name}.{self_path(expr, env.self_name)[0]}[...]"
        return [(value, env.owner.init_env(), where) for _, value in appended]

    def mentions_checkpoint(self, node: cst.ClassDef) -> bool:
        """Whether a class says "checkpoint" anywhere: it handles checkpointing itself."""
        key = id(node)
        if key not in self._mentions:
            if not self._file_mentions:
                self._mentions[key] = False  # without generating the class's code
            elif not self._comment_mentions:  # then only a name or a string can say it
                self._mentions[key] = any(
                    "checkpoint" in text.lower()
                    for text in (
                        n.value for n in nodes_of(node, cst.Name, cst.SimpleString, cst.FormattedStringText)
                    )
                )
            else:
                self._mentions[key] = "checkpoint" in self.module.code_for_node(node).lower()
        return self._mentions[key]

    # -- elements of containers ------------------------------------------------------------
    def elements(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int = 0
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """The modules a container expression holds; None when it is not a known container."""
        if depth > self.MAX_DEPTH:
            return None
        followed = self.follow(expr, env)
        if followed is not None:
            found: List[Tuple[cst.BaseExpression, Env, str]] = []
            for value, value_env, value_where in followed:
                inner = self.elements(value, value_env, value_where, depth + 1)
                if inner is None:
                    return None
                found.extend(inner)
            found.extend(self._appended_elements(expr, env))
            return found if followed else None
        if type(expr) is cst.Call and env.qualify(expr.func) in _CONTAINERS:
            found = []
            for arg in expr.args:
                if arg.keyword is not None or arg.star == "**":
                    continue
                inner = (
                    self._listed(arg.value, env, where, depth + 1)
                    if arg.star or len(expr.args) == 1
                    else None
                )
                if inner is None and arg.star:
                    return None
                found.extend(
                    inner if inner is not None else [(arg.value, env, f"{where}[{len(found)}]")]
                )
            return found
        return None

    def _listed(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """Elements of a list literal, comprehension or OrderedDict passed to a container."""
        if depth > self.MAX_DEPTH:
            return None
        if type(expr) in (cst.List, cst.Tuple):
            if any(type(e) is cst.StarredElement for e in expr.elements):
                return None
            return [(e.value, env, f"{where}[{i}]") for i, e in enumerate(expr.elements)]
        if type(expr) in (cst.ListComp, cst.GeneratorExp):
            return [(expr.elt, env, f"{where}[...]")]
        if type(expr) is cst.Call and env.qualify(expr.func) == "collections.OrderedDict":
            pairs = self._listed(expr.args[0].value, env, where, depth + 1) if expr.args else None
            if pairs is None:
                return None
            values = []
            for pair, pair_env, _ in pairs:
                if not (type(pair) is cst.Tuple and len(pair.elements) == 2):
                    return None
                values.append((pair.elements[1].value, pair_env, f"{where}.{self._label(pair)}"))
            return values
        if (
            type(expr) is cst.Name
            and env.owner is not None
            and env.scope is env.owner.init_scope
        ):
            owner = env.owner
            values = owner.locals.get(expr.value, [])
            listed = [self._listed(value, env, where, depth + 1) for value in values]
            appended = [
                (value, env, f"{where}[...]") for _, value in owner.appends.get(expr.value, ())
            ]
            if not values or any(item is None for item in listed):
                return None
            return [element for item in listed for element in item] + appended
        return None

    @staticmethod
    def _label(pair: cst.Tuple) -> str:
        key = pair.elements[0].value
        return key.evaluated_value if type(key) is cst.SimpleString else "..."

    # -- contents: traits reachable from a callable -----------------------------------------
    def contents(
        self, expr: cst.BaseExpression, env: Env, where: str, depth: int = 0
    ) -> Dict[str, Found]:
        """Traits (BATCH_NORM, RANDOM) of what calling ``expr`` may run, first found each."""
        found: Dict[str, Found] = {}
        if depth > self.MAX_DEPTH:
            self.cut = True  # (a class whose contents were cut here is not cached)
            return found

        def merge(more: Dict[str, Found]) -> None:
            for trait, item in more.items():
                found.setdefault(trait, item)

        if _bound_call(expr, env):  # `self.block.forward`, `blk.__call__`: what `self.block` runs
            return self.contents(expr.value, env, where, depth + 1)  # type: ignore[attr-defined]
        followed = self.follow(expr, env)
        if followed is not None:
            for value, value_env, value_where in followed:
                merge(self.contents(value, value_env, value_where, depth + 1))
            for value, value_env, value_where in self._appended_elements(expr, env):
                merge(self.contents(value, value_env, value_where, depth + 1))
            path = self_path(expr, env.self_name)
            if not followed and env.owner is not None and path is not None and len(path) == 1:
                method = env.owner.methods.get(path[0])
                if method is not None:
                    merge(self.function_contents(method, env.owner.method_env(method), depth + 1))
                for other, base in inherited_init(self, env.owner) if method is None else ():
                    for value in base.attributes.get(path[0], ()):  # set by the constructor it inherits
                        merge(other.contents(value, base.init_env(), f"{base.name}.{path[0]}", depth + 1))
            return found
        if type(expr) in (cst.List, cst.Tuple):  # a list of modules, a builder's `return blocks, info`
            for element in expr.elements:
                merge(self.contents(element.value, env, where, depth + 1))
        elif type(expr) is cst.IfExp:
            merge(self.contents(expr.body, env, where, depth + 1))
            merge(self.contents(expr.orelse, env, where, depth + 1))
        elif type(expr) is cst.Subscript:
            sliced = self._sliced(expr, env, where, depth)
            if sliced is None:
                merge(self.contents(expr.value, env, where, depth + 1))
            for element, element_env, element_where in sliced or ():
                merge(self.contents(element, element_env, element_where, depth + 1))
        elif type(expr) is cst.Lambda:
            merge(
                self.function_contents(
                    expr, Env(_scope_of(expr, env.scope), env.owner, env.self_name), depth + 1
                )
            )
        elif type(expr) is cst.Call:
            merge(self._call_contents(expr, env, where, depth))
        elif type(expr) in (cst.Name, cst.Attribute):
            function = self.local_function(expr, env)
            values = self._init_values(expr, env) if function is None else []
            nested = _nested_function(env.function, expr) if function is None and not values else None
            if nested is not None:  # `def _inner_forward(x): ...` in the calling method
                scope = _scope_of(nested, _scope_of(env.function, env.scope) if env.function else env.scope)
                merge(self.function_contents(nested, Env(scope, env.owner, env.self_name, nested), depth + 1))
            elif values:  # `norm = build(...)` in `__init__`, registered by `add_module`
                for value in values:
                    merge(self.contents(value, env, where, depth + 1))
            elif function is not None:
                merge(
                    self.function_contents(
                        function, Env(_scope_of(function, self.root), None, None), depth + 1
                    )
                )
            else:
                traits = _function_traits(env.qualify(expr), None, where)
                merge(traits if traits else self._foreign_function_contents(expr, env, depth) or {})
        return found

    def _call_contents(self, call: cst.Call, env: Env, where: str, depth: int) -> Dict[str, Found]:
        found: Dict[str, Found] = {}
        call = spelled_out(call, env.function)
        qualified = env.qualify(call.func)
        if qualified in _CONTAINERS:
            elements = self.elements(call, env, where, depth + 1)
            if elements is None:  # `nn.Sequential(*features)`, a list the order of which is not known
                elements = [(arg.value, env, where) for arg in call.args if arg.keyword is None and arg.star != "**"]
            for element, element_env, element_where in elements:
                for trait, item in self.contents(
                    element, element_env, element_where, depth + 1
                ).items():
                    found.setdefault(trait, item)
            return found
        if qualified == _PARTIAL and call.args:
            return self.contents(call.args[0].value, env, where, depth + 1)
        if qualified is not None and qualified.startswith(_NN) and not qualified.startswith(_F):
            return _module_traits(qualified, call, where)
        if qualified in NORM_CONFIG_BUILDERS:
            position, name = NORM_CONFIG_BUILDERS[qualified]
            config = _argument(call, position, name)
            kind = self.config_type(config, env, depth) if config is not None else None
            return norm_config_traits(qualified, kind, where)
        if qualified is not None:
            known = timm_layer_traits(qualified, call, where)
            if known or self.links is None:
                return known
            return self._foreign_class_contents(call.func, env, depth) or {}
        local = self.local_class(call.func, env)
        if local is not None:
            return self.class_contents(local, depth + 1)
        factory = self._factory(call, env)
        if factory is not None:  # `norm_layer(c)` with `norm_layer=nn.BatchNorm2d`, partials
            return _module_traits(factory.qualified, effective_call(call, factory.preset), where)
        for layer in local_layer_classes(call, env):  # `norm = nn.BatchNorm2d if bn else nn.GroupNorm`
            for trait, item in _module_traits(layer, call, where).items():
                found.setdefault(trait, item)
        if found:
            return found
        builder = self.local_function(call.func, env)
        nested = _nested_function(env.function, call.func) if builder is None else None
        if builder is not None or nested is not None:  # `make_stage(64, 2)`: what the function returns
            found = self.returned_contents(builder, depth) if builder is not None else {}
            for value in _called_arguments(builder or nested, call):  # a closure runs what it was given
                for trait, item in self.contents(value, env, where, depth + 1).items():
                    found.setdefault(trait, item)
            return found
        path = self_path(call.func, env.self_name)
        method = env.owner.methods.get(path[0]) if env.owner is not None and path and len(path) == 1 else None
        if method is not None:  # `self._make_layer(...)`: what the method returns
            return self.returned_contents(method, depth, env.owner.method_env(method))
        foreign = self._foreign_class_contents(call.func, env, depth)
        if foreign is None:
            found = self.foreign(call.func, env, "function")
            if found is not None:
                return found[0].returned_contents(found[1], depth)
            outside = self.outside_name(call.func, env)
            if outside is not None:  # re-exported by a project module: `from .encoders import Bottleneck`
                return timm_layer_traits(outside, call, where)
        return foreign or {}

    def returned_contents(self, function: cst.FunctionDef, depth: int, env: Optional[Env] = None) -> Dict[str, Found]:
        """Traits of the modules a builder function of this file returns (``return
        nn.Sequential(*[Block(c) for _ in range(n)])``)."""
        found: Dict[str, Found] = {}
        if depth > self.MAX_DEPTH:
            return found
        env = env or Env(_scope_of(function, self.root), None, None, function)
        for node in _walk_types(function.body, (cst.Return,)):
            if node.value is not None:
                for trait, item in self.contents(node.value, env, f"{function.name.value}()", depth + 1).items():
                    found.setdefault(trait, item)
        return found

    def _factory(self, call: cst.Call, env: Env):
        """The torch layer a factory call builds (``act_layer()``, ``partial(nn.X, ...)()``)."""
        if self.factories is None or type(call.func) is cst.Attribute:
            return None
        return self.factories.layer(call, env.function)

    def class_contents(self, model: InitModel, depth: int) -> Dict[str, Found]:
        key = id(model.node)
        if key in self._class_contents:
            return self._class_contents[key]
        if key in self._in_progress or depth > self.MAX_DEPTH:
            self.cut = self.cut or depth > self.MAX_DEPTH
            return {}
        self._in_progress.add(key)
        cut, self.cut = self.cut, False
        found: Dict[str, Found] = {}
        parts: List[Dict[str, Found]] = []
        for base in model.node.bases:
            qualified = model.scope.qualify(base.value)
            if qualified is not None and qualified.startswith(_NN):
                parts.append(_module_traits(qualified, None, model.name))
            else:
                parent = self.local_class(base.value, Env(model.scope, None, None))
                if parent is not None:
                    parts.append(self.class_contents(parent, depth + 1))
                elif self.links is not None:  # a base class from another file of the project
                    parts.append(self._foreign_class_contents(base.value, Env(model.scope, None, None), depth) or {})
        init_env = model.init_env()
        for name, values in model.attributes.items():
            for value in values:
                parts.append(self.contents(value, init_env, f"{model.name}.{name}", depth + 1))
        for index, child in enumerate(model.children):
            parts.append(self.contents(child, init_env, f"{model.name}[{index}]", depth + 1))
        forward = model.methods.get("forward")
        if forward is not None:
            parts.append(self.function_contents(forward, model.method_env(forward), depth + 1))
        for part in parts:
            for trait, item in part.items():
                found.setdefault(trait, item)
        self._in_progress.discard(key)
        if not self.cut:  # met again nearer the top, it is read whole then
            self._class_contents[key] = found
        self.cut = self.cut or cut
        return found

    def function_contents(
        self, function: Union[cst.FunctionDef, cst.Lambda], env: Env, depth: int
    ) -> Dict[str, Found]:
        """Traits of the calls in a function body and of the `self` modules it uses."""
        if depth > self.MAX_DEPTH:
            return {}
        key = (id(function), id(env.scope), id(env.owner), env.self_name, id(env.function), depth)
        found = self._function_contents.get(key)
        if found is None:
            found = self._function_contents[key] = self._function_contents_of(function, env, depth)
        return found

    def _function_contents_of(
        self, function: Union[cst.FunctionDef, cst.Lambda], env: Env, depth: int
    ) -> Dict[str, Found]:
        found: Dict[str, Found] = {}
        label = self._function_label(function, env)
        body = function.body if type(function) is cst.FunctionDef else function
        for node in _walk_types(body, (cst.Attribute, cst.Call)):
            more: Dict[str, Found] = {}
            if type(node) is cst.Attribute and type(node.value) is cst.Name:
                path = self_path(node, env.self_name)
                if path is not None and env.owner is not None:
                    method = env.owner.methods.get(path[0])
                    inherited = inherited_method(self, env.owner, path[0]) if method is None else None
                    if inherited is not None:  # run with `self` still this class: its `add_module`s
                        base, method = inherited
                        more = self.function_contents(
                            method, Env(_scope_of(method, base.scope), env.owner, _first_param(method), method), depth + 1
                        )
                    elif method is None:
                        more = self.contents(node, env, label, depth + 1)
                    elif method is not function:
                        more = self.function_contents(
                            method, env.owner.method_env(method), depth + 1
                        )
            elif type(node) is cst.Call:
                func = node.func
                if type(func) is cst.Attribute and func.attr.value in _RANDOM_METHODS:
                    qualified = env.qualify(func)
                    if qualified is None or not qualified.startswith("torch.nn.init."):
                        more = {RANDOM: Found(f".{func.attr.value}()", label)}
                elif _is_builtin(func, "getattr", env) and env.owner is not None:
                    more = self._getattr_contents(node, env, depth)
                else:
                    more = _function_traits(env.qualify(func), node, label)
                    helper = self.local_function(func, env)
                    if not more and helper is not None and helper is not function:
                        more = self.function_contents(
                            helper, Env(_scope_of(helper, self.root), None, None), depth + 1
                        )
                    elif not more and helper is None and self.links is not None:
                        more = self._foreign_function_contents(func, env, depth) or {}
            for trait, item in more.items():
                found.setdefault(trait, item)
        return found

    def _sliced(
        self, expr: cst.Subscript, env: Env, where: str, depth: int
    ) -> Optional[List[Tuple[cst.BaseExpression, Env, str]]]:
        """The elements ``self.body[2:]`` runs, where the container's order is known."""
        if len(expr.slice) != 1 or type(expr.slice[0].slice) is not cst.Slice:
            return None
        part = expr.slice[0].slice
        bounds = []
        for bound in (part.lower, part.upper):
            if bound is not None and type(bound) is not cst.Integer:
                return None
            bounds.append(int(bound.evaluated_value) if bound is not None else None)
        if part.step is not None:
            return None
        elements = self.elements(expr.value, env, where, depth + 1)
        if elements is None or any(element_where.endswith("[...]") for _, _, element_where in elements):
            return None
        return elements[bounds[0]:bounds[1]]

    def _init_values(self, expr: cst.BaseExpression, env: Env) -> List[cst.BaseExpression]:
        """What a local name of the function is assigned there (also unpacked from a call:
        the call) and what is appended to it (``blocks.append(Block())``)."""
        function = env.function
        if type(expr) is not cst.Name or function is None or parameter(function, expr.value) is not None:
            return []
        name = expr.value
        values = [
            value for value in assigned_values(function, name)
            if type(value) in (cst.Call, cst.List, cst.Tuple) and not (type(value) is cst.Call and _is_builtin(value.func, "dict", env))
            or type(value) is cst.Subscript and self_path(value.value, env.self_name)  # `layer = self.layers[i]`
        ]
        for node in scan(function.body, (cst.AugAssign, cst.Call)):  # `features.append(Block(...))`, `layers += [...]`
            if type(node) is cst.AugAssign and type(node.target) is cst.Name and node.target.value == name:
                values.append(node.value)
            elif (
                type(node) is cst.Call
                and type(node.func) is cst.Attribute
                and type(node.func.value) is cst.Name
                and node.func.value.value == name
                and node.func.attr.value in _ADDERS
                and len(node.args) == _ADDERS[node.func.attr.value]
            ):  # `layers.append(Block())`, `nonlinear.add_module("bn", nn.BatchNorm1d(c))`
                values.append(node.args[-1].value)
        return values

    def _getattr_contents(self, call: cst.Call, env: Env, depth: int) -> Dict[str, Found]:
        """``getattr(self, self.norm1_name)``: the module ``__init__`` registered under that
        name (``self.add_module(self.norm1_name, norm1)``), or ``getattr(self, "bn")``."""
        owner = env.owner
        args = call.args
        first = args[0].value if args else None
        if owner is None or len(args) < 2 or not (type(first) is cst.Name and first.value == env.self_name):
            return {}
        found: Dict[str, Found] = {}
        key = args[1].value
        if type(key) is cst.SimpleString:
            for value in owner.attributes.get(str(key.evaluated_value), []):
                found.update(self.contents(value, owner.init_env(), owner.name, depth + 1))
            return found
        path = self_path(key, env.self_name)
        if path is None or len(path) != 1:
            return {}
        return self.registered_contents(owner, path[0], depth)

    def registered_contents(self, owner: InitModel, name: str, depth: int) -> Dict[str, Found]:
        """Traits of what ``owner``'s ``__init__`` registers as ``self.add_module(self.<name>,
        module)``, or else the constructor it inherits, as written there (``inherited_init``)."""
        found: Dict[str, Found] = {}
        init = owner.methods.get("__init__")
        registered = False
        for node in scan(init.body, (cst.Call,)) if init is not None else ():
            if (
                type(node) is cst.Call
                and len(node.args) == 2
                and self_path(node.func, owner.self_name) == ["add_module"]
                and self_path(node.args[0].value, owner.self_name) == [name]
            ):
                registered = True
                for trait, item in self.contents(node.args[1].value, owner.init_env(), f"{owner.name}.{name}", depth + 1).items():
                    found.setdefault(trait, item)
        for other, base in inherited_init(self, owner) if not registered and depth < self.MAX_DEPTH else ():
            for trait, item in other.registered_contents(base, name, depth + 1).items():
                found.setdefault(trait, item)
        return found

    def config_type(self, expr: cst.BaseExpression, env: Env, depth: int = 0) -> Optional[str]:
        """The ``type`` of an mmcv config dict (``analysis/configs.py``)."""
        return config_type(self, expr, env, depth)

    @staticmethod
    def _function_label(function: Union[cst.FunctionDef, cst.Lambda], env: Env) -> str:
        if type(function) is cst.Lambda:
            return ""
        name = function.name.value
        return f"{env.owner.name}.{name}" if env.owner is not None else f"{name}()"

    # -- size of a block ---------------------------------------------------------------------
    def layer_count(self, expr: cst.BaseExpression, env: Env, depth: int = 0) -> int:
        """How many torch layers constructing ``expr`` builds, as far as it can be followed."""
        if depth > self.MAX_DEPTH:
            return 0
        if type(expr) is cst.IfExp:
            return max(
                self.layer_count(expr.body, env, depth + 1),
                self.layer_count(expr.orelse, env, depth + 1),
            )
        if type(expr) is not cst.Call:
            return 0
        qualified = env.qualify(expr.func)
        if qualified in _CONTAINERS:
            elements = self.elements(expr, env, "", depth + 1) or ()
            return sum(
                self.layer_count(element, element_env, depth + 1)
                for element, element_env, _ in elements
            )
        if qualified is not None and qualified.startswith(_NN) and not qualified.startswith(_F):
            return 1
        local = self.local_class(expr.func, env)
        if local is not None:
            return self.class_layer_count(local, depth + 1)
        return 1 if self._factory(expr, env) is not None else 0

    def class_layer_count(self, model: InitModel, depth: int) -> int:
        key = id(model.node)
        if key not in self._layer_counts:
            self._layer_counts[key] = 0  # a class that contains itself counts once
            env = model.init_env()
            total = sum(
                max(self.layer_count(value, env, depth + 1) for value in values)
                for values in model.attributes.values()
            )
            total += sum(self.layer_count(child, env, depth + 1) for child in model.children)
            appended = [value for items in model.attribute_appends.values() for _, value in items]
            total += sum(self.layer_count(value, env, depth + 1) for value in appended)
            self._layer_counts[key] = total
        return self._layer_counts[key]

    # -- single cheap ops ------------------------------------------------------------------
    def single_op(self, expr: cst.BaseExpression, env: Env, depth: int = 0) -> Optional[SingleOp]:
        """The one cheap layer or op that calling ``expr`` runs, if that is all it runs."""
        if depth > self.MAX_DEPTH:
            return None
        if _bound_call(expr, env):
            return self.single_op(expr.value, env, depth + 1)  # type: ignore[attr-defined]
        followed = self.follow(expr, env)
        if followed is not None:
            path = self_path(expr, env.self_name)
            method = env.owner.methods.get(path[0]) if not followed and len(path) == 1 else None  # type: ignore[union-attr,arg-type]
            if method is not None:  # `def _fc(self, h): return self.fc(h)`, checkpointed as `self._fc`
                call = _single_return_call(method, skip=1)
                return self.single_op(call.func, env.owner.method_env(method), depth + 1) if call is not None else None  # type: ignore[union-attr]
            if not followed and env.owner is not None and (op := held_op(self, path, env)) is not None:
                return op  # `self.encoder.avgpool` of a torchvision ResNet (``library_parts``)
            return agreed([self.single_op(value, value_env, depth + 1) for value, value_env, _ in followed if not _is_none(value)])
        if type(expr) is cst.IfExp:  # `nn.Linear(a, b) if a != b else nn.Identity()`
            return agreed([self.single_op(arm, env, depth + 1) for arm in (expr.body, expr.orelse)])
        if type(expr) is cst.Call:
            qualified = env.qualify((expr := instantiated(expr, env.qualify)).func)
            if qualified == _NN + "Identity":
                return IDENTITY
            factory = self._factory(expr, env) if qualified is None else None
            if factory is None and qualified is None:
                chosen = self._chosen_class_op(expr, env, depth)
                if chosen is not None:
                    return chosen
            if factory is not None:  # `norm_layer(dim)` with `norm_layer=nn.LayerNorm` (as for `contents`)
                qualified, expr = factory.qualified, effective_call(expr, factory.preset)
            if qualified in _PARAMETRIC_MODULES or qualified in _PARAMETERLESS_MODULES:
                stateful = BATCH_NORM in _module_traits(qualified, expr, "")
                return SingleOp(_last_part(qualified), qualified in _PARAMETRIC_MODULES, stateful)
            return None if qualified is not None and qualified.startswith("torch.") else self._built_op(expr, env, depth)
        if type(expr) is cst.Subscript and len(expr.slice) == 1 and type(expr.slice[0].slice) is cst.Index:
            return self.element_op(expr.value, env)  # `self.linears[i]`: the op every element is
        if type(expr) is cst.Lambda:
            call = _lambda_call(expr)
            if call is None:
                return None
            return self.single_op(
                call.func, Env(_scope_of(expr, env.scope), env.owner, env.self_name), depth + 1
            )
        if type(expr) in (cst.Name, cst.Attribute):
            function = self.local_function(expr, env)
            if function is not None:
                call = _single_return_call(function)
                inner = Env(_scope_of(function, self.root), None, None)
                return self.single_op(call.func, inner, depth + 1) if call is not None else None
            nested = _nested_function(env.function, expr)
            if nested is not None:  # `def proj(x): return self.proj(x)` in the calling method
                if assigned_values(env.function, expr.value):  # type: ignore[arg-type,attr-defined]
                    return None  # the name is also bound to something else
                call = _single_return_call(nested)
                scope = _scope_of(nested, _scope_of(env.function, env.scope))  # type: ignore[arg-type]
                inner = Env(scope, env.owner, env.self_name, nested)
                return self.single_op(call.func, inner, depth + 1) if call is not None else None
            return _function_op(env.qualify(expr))
        return None

    def _chosen_class_op(self, call: cst.Call, env: Env, depth: int) -> Optional[SingleOp]:
        """``conv_function(...)`` with the local ``conv_function`` bound, in every assignment of
        the function, to a torch layer class (``nn.Conv2d`` in one arm of an ``if``, ``nn.Conv3d``
        in the other; no parameter of that name): one cheap layer whichever is built."""
        func = call.func
        if type(func) is not cst.Name or env.function is None or parameter(env.function, func.value) is not None:
            return None
        values = assigned_values(env.function, func.value)
        arms = [arm for value in values for arm in ((value.body, value.orelse) if type(value) is cst.IfExp else (value,))]
        if not arms or any(type(arm) not in (cst.Name, cst.Attribute) or not (env.qualify(arm) or "").startswith(_NN) for arm in arms):
            return None
        return either([self.single_op(call.with_changes(func=arm), env, depth + 1) for arm in arms])

    def _built_op(self, call: cst.Call, env: Env, depth: int) -> Optional[SingleOp]:
        """The one layer a builder function, a classmethod builder or a class of this or
        another project file makes, whatever its arguments (``analysis/built_layers.py``)."""
        return built_op(self, call, env, depth)

    def element_op(self, container: cst.BaseExpression, env: Env) -> Optional[SingleOp]:
        """The single op every element of a container is, if they all are the same one."""
        elements = self.elements(container, env, "")
        if not elements:
            return None
        return agreed([self.single_op(element, element_env) for element, element_env, _ in elements])


def _nested_function(function: Optional[cst.FunctionDef], name: cst.BaseExpression) -> Optional[cst.FunctionDef]:
    """A function defined once in ``function``'s body under ``name`` (``def _inner_forward``)."""
    found = [] if function is None or type(name) is not cst.Name else [
        node for node in scan(function.body, (cst.FunctionDef,)) if node.name.value == name.value]  # type: ignore[attr-defined]
    return found[0] if len(found) == 1 else None


def _called_arguments(function: cst.FunctionDef, call: cst.Call) -> List[cst.BaseExpression]:
    """What ``call`` passes for the parameters ``function``'s body calls (``norm(x)`` in the
    closure ``_bn_function_factory(norm, relu, conv)`` returns, given ``self.norm1``)."""
    names = [param.name.value for param in (*function.params.posonly_params, *function.params.params)]
    called = {node.func.value for node in _walk_types(function.body, (cst.Call,)) if type(node.func) is cst.Name}
    passed: Dict[str, cst.BaseExpression] = {}
    for index, arg in enumerate(call.args):
        if arg.star:
            break
        name = arg.keyword.value if arg.keyword is not None else names[index] if index < len(names) else None
        if name is not None:
            passed[name] = arg.value
    return [value for name, value in passed.items() if name in called]


def _is_builtin(func: cst.BaseExpression, name: str, env: Env) -> bool:
    return type(func) is cst.Name and func.value == name and env.scope.lookup(name) is None

"""The module/class model: what each class builds in ``__init__`` (``self.x = ...`` values,
``nn.Sequential`` contents flattened) and how its methods use ``self.x`` (direct calls kept
apart from other uses, parts borrowed from other objects such as ``enc.layer1``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple

import libcst as cst

from torchmemlint.analysis.children import Children
from torchmemlint.analysis.container_helpers import ContainerHelpers
from torchmemlint.analysis.factories import effective_call, Factories, Factory
from torchmemlint.analysis.summed_lists import summed_order
from torchmemlint.analysis.layer_lists import either_order, LayerLists, list_index, literal_elements as _literal_list, Order
from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.syntax import (
    argument, block_indent, block_statements, _body_statements, _child_blocks, _first_param,
    has_star_args, is_static, unpacked, literal_bool, module_itself, presence_test, _scope_of, self_path, _small_statements,
)
from torchmemlint.analysis.vocabulary import (
    ActivationKind, Category, FRESH_MODULES, KIND_BY_MODULE, NN, OUTPUT_SAVING_MODULES,
    OUTPUT_SAVING_WHEN_INPLACE, POOL_MODULES, Saves, SENET_STEM,
)
from torchmemlint.analysis.named_attributes import got_attribute, set_attribute
from torchmemlint.analysis.registered_layers import registered_list, sequential_of_init
from torchmemlint.tree import children


@dataclass(frozen=True)
class Layer:
    """A ``torch.nn`` constructor call, written directly (``nn.ReLU()``) or through a factory
    (``act_layer()``, ``partial(nn.LeakyReLU, 0.1)()``: ``preset`` holds the partial's
    arguments, ``via`` says how the factory was followed, ``certain`` is False when it was
    taken from a default that callers elsewhere may override)."""

    qualified: str
    call: cst.Call
    preset: Tuple[cst.Arg, ...] = ()
    via: Optional[str] = None
    certain: bool = True
    configured: bool = False  # built by a config builder (``build_activation_layer(cfg)``)

    @property
    def kind(self) -> Optional[ActivationKind]:
        return KIND_BY_MODULE.get(self.qualified)

    @property
    def effective(self) -> cst.Call:
        """The call with the factory's preset arguments in front (what the layer receives); for
        a config builder, the config's keywords only (the call's own argument is the config)."""
        if self.configured:
            return self.call.with_changes(args=self.preset)
        return effective_call(self.call, self.preset)

    def inplace(self) -> Optional[bool]:
        """True/False when ``inplace`` is literal (absent: False); None when not known."""
        kind = self.kind
        call = self.effective
        if kind is None or has_star_args(call):
            return None
        arg = argument(call, kind.module_params.index("inplace"), "inplace")
        return False if arg is None else literal_bool(arg.value)

    def category(self) -> Category:
        if self.qualified in POOL_MODULES:
            return Category.POOL
        kind = self.kind
        if kind is not None:
            if kind.name == "relu":
                return Category.SAVES_OUTPUT
            inplace = self.inplace()
            if inplace is None or kind.saves is Saves.MASK:
                return Category.UNKNOWN  # dropout returns its input in eval mode
            if inplace:
                return Category.SAVES_OUTPUT if kind.name in OUTPUT_SAVING_WHEN_INPLACE else Category.UNKNOWN
            return Category.FRESH
        if self.qualified in OUTPUT_SAVING_MODULES:
            return Category.SAVES_OUTPUT
        if self.qualified in FRESH_MODULES:
            return Category.FRESH
        return Category.UNKNOWN


# -- values assigned to attributes -----------------------------------------------------------------
@dataclass(frozen=True)
class Part:
    """One module expression: a torch.nn layer, ``self.x``, a borrowed ``enc.part``, or other."""

    node: cst.BaseExpression
    layer: Optional[Layer] = None
    attribute: Optional[str] = None  # ``self.<attribute>``
    borrowed: Optional[Tuple[str, str]] = None  # (``enc``, ``layer1``) for ``enc.layer1``


def _is_self(node: cst.BaseExpression, self_name: Optional[str]) -> bool:
    return self_name is not None and type(node) is cst.Name and node.value == self_name


def _rooted_at(node: cst.BaseExpression, self_name: Optional[str]) -> bool:
    """``self`` or ``self.a.b``."""
    while type(node) is cst.Attribute:
        node = node.value
    return _is_self(node, self_name)


class Resolver:
    """Turns module expressions into ``Part`` / Sequential element lists for one file."""

    def __init__(
        self,
        qualify: Callable[[cst.BaseExpression], Optional[str]],
        lists: Optional[LayerLists] = None,
        factories: Optional[Factories] = None,
        children: Optional[Children] = None,
        helpers: Optional[ContainerHelpers] = None,
    ) -> None:
        self.qualify = qualify
        self.lists = lists
        self.factories = factories
        self.children = children
        self.helpers = helpers  # ``def Sequential(*modules): ... return nn.Sequential(*modules)``

    def constructor(self, node: cst.BaseExpression) -> Optional[str]:
        if type(node) is cst.Call:
            func = node.func
            qualified = self.qualify(func)
            if qualified is not None and qualified.startswith(NN):
                return qualified
            if qualified is not None and qualified.rsplit(".", 1)[-1] == "Sequential" and self._modules_only(node):
                return NN + "Sequential"
            if qualified is None and type(func) is cst.Attribute and func.attr.value in ("__init__", "add_module"):
                return self._super_sequential(node)  # (``self.add_module(f"{i}", layer)`` over a list: ``registered_layers``)
            if qualified is None and type(func) is cst.Name and self.helpers is not None:
                # a function of the file that returns ``nn.Sequential`` of the modules it is given
                if self.helpers.container(func.value) == NN + "Sequential":
                    return NN + "Sequential"
        return None

    def _modules_only(self, call: cst.Call, depth: int = 0) -> bool:
        """``Sequential(RMSNorm(d), nn.Linear(...), nn.LeakyReLU(), ...)`` of another package
        (mmengine's, a ``def Sequential(*modules)`` of a utility package): read as
        ``nn.Sequential`` where it is given modules only, positionally: at least two torch
        layers built in place, every other argument a class built in place (``RMSNorm(d)``)
        or such a Sequential. A string, a list, a keyword, a ``*list`` or a name says it may
        be another kind of container (torch_geometric's ``Sequential("x, edge_index", [...])``)."""
        if depth > 2:
            return False
        torch_layers = 0
        for arg in call.args:
            value = arg.value
            if arg.keyword is not None or arg.star or type(value) is not cst.Call:
                return False
            qualified = self.qualify(value.func)
            if qualified is not None and qualified.startswith(NN):
                torch_layers += 1
                continue
            if qualified is not None and qualified.rsplit(".", 1)[-1] == "Sequential" and self._modules_only(value, depth + 1):
                continue
            name = dotted_name(value.func)
            if name is None or not name.rsplit(".", 1)[-1][:1].isupper():
                return False
        return torch_layers >= 2

    def _super_sequential(self, call: cst.Call) -> Optional[str]:
        """``super().__init__(*layers)`` in ``__init__`` of a class deriving ``nn.Sequential`` (or
        ``self.add_module`` in a loop over a list there): ``registered_layers.sequential_of_init``."""
        return sequential_of_init(self.lists.module, self.qualify, call) if self.lists is not None else None

    def layer(self, node: cst.BaseExpression, function: Optional[cst.FunctionDef] = None) -> Optional[Layer]:
        """The torch layer ``node`` constructs: ``nn.X(...)``, or a factory call
        (``act_layer()`` in ``function``, ``partial(nn.X, ...)()``, an alias of one)."""
        node = module_itself(node)  # ``nn.LeakyReLU(0.05).to(device)``: the layer built
        if type(node) is not cst.Call:
            return None
        qualified = self.constructor(node)
        if qualified is not None:
            return Layer(qualified, node)
        if self.factories is None:
            return None
        factory: Optional[Factory] = self.factories.layer(node, function)
        if factory is None:
            return None
        return Layer(factory.qualified, node, factory.preset, factory.via, factory.certain, factory.configured)

    def part(
        self, node: cst.BaseExpression, self_name: Optional[str], function: Optional[cst.FunctionDef] = None
    ) -> Part:
        layer = self.layer(node, function)
        if layer is not None:
            return Part(node, layer=layer)
        if type(node) is cst.Attribute:
            if _is_self(node.value, self_name):
                return Part(node, attribute=node.attr.value)
            base = dotted_name(node.value)
            if base is not None and self.qualify(node.value) is None:
                return Part(node, borrowed=(base, node.attr.value))
        return Part(node)

    def sequential(
        self,
        call: cst.Call,
        self_name: Optional[str],
        function: Optional[cst.FunctionDef] = None,
        statement: Optional[cst.CSTNode] = None,
    ) -> Optional[List[Part]]:
        """Elements of ``nn.Sequential(...)``, nested Sequentials flattened; None if not one.

        With the ``function`` and ``statement`` the call is in, ``nn.Sequential(*layers)`` is
        read through the local list ``layers`` when its order is certain (``LayerLists``);
        a list that may be built in several orders stands as one unknown element."""
        if self.constructor(call) != NN + "Sequential":
            return None
        order = self._sequential(call, self_name, function, statement, False)
        return order.single() if order is not None else None

    def sequential_order(
        self,
        call: cst.Call,
        self_name: Optional[str],
        function: Optional[cst.FunctionDef] = None,
        statement: Optional[cst.CSTNode] = None,
    ) -> Optional[Order]:
        """Every order the elements (``Part`` values) of ``nn.Sequential(...)`` may run in, as a
        successor relation (lists built in branches and loops); None if not a Sequential."""
        if self.constructor(call) != NN + "Sequential":
            return None
        return self._sequential(call, self_name, function, statement, True)

    def _sequential(
        self, call: cst.Call, self_name: Optional[str], function: Optional[cst.FunctionDef],
        statement: Optional[cst.CSTNode], every: bool, depth: int = 0,
    ) -> Optional[Order]:
        result = Order.empty()
        registered = registered_list(self.lists.module, self.qualify, call) if self.lists is not None else None
        statement = registered[1] if registered is not None else statement  # (the list before the loop registering it)
        for arg in (registered[0],) if registered is not None else call.args:
            if arg.keyword is not None or depth > 8:
                return None
            sliced = self.children.sliced(arg.value, function) if arg.star == "*" and self.children else None
            if sliced is not None:  # `*list(resnet.children())[:3]`
                base_expr = cst.parse_expression(sliced[0])
                options = Order.sequence([cst.Attribute(value=base_expr, attr=cst.Name(name)) for name in sliced[1]])
            elif arg.star:
                spliced = self.spliced_order(arg, function, statement)
                if spliced is None or (not every and spliced.single() is None):
                    result = result.then(Order.of(Part(arg.value)))  # unknown elements
                    continue
                options = spliced
            else:
                ordered = self._ordered_dict_values(arg.value)
                options = Order.sequence(ordered) if ordered is not None else either_order(arg.value)
            parts = options.substitute(lambda value: self._element(value, self_name, function, statement, every, depth))
            if parts is None:
                return None
            result = result.then(parts)
        return result

    def _element(
        self, value: cst.BaseExpression, self_name: Optional[str], function: Optional[cst.FunctionDef],
        statement: Optional[cst.CSTNode], every: bool, depth: int,
    ) -> Order:
        """The parts one element of a Sequential stands for (a nested Sequential flattened)."""
        inner: Optional[Order] = None
        local = (
            self.children.local_sequential(
                function, value.value, statement, lambda call: self.constructor(call) == NN + "Sequential",
            )
            if type(value) is cst.Name and self.children is not None else None
        )
        if local is not None:  # `stem = nn.Sequential(...)` ... `nn.Sequential(stem, body)`
            inner = self._sequential(local[0], self_name, function, None, every, depth + 1)
            if inner is not None and local[1]:  # `stem[0] = conv`: positions need the one order
                elements = inner.single()
                if elements is None or any(i >= len(elements) for i in local[1]):
                    inner = None
                else:
                    inner = Order.sequence([
                        self.part(local[1][i], self_name, function) if i in local[1] else part
                        for i, part in enumerate(elements)
                    ])
        elif type(value) is cst.Call and self.constructor(value) == NN + "Sequential":
            inner = self._sequential(value, self_name, function, statement, every, depth + 1)
        if inner is None or inner.nullable:
            return Order.of(self.part(value, self_name, function))
        return inner

    def spliced_order(
        self, arg: cst.Arg, function: Optional[cst.FunctionDef], statement: Optional[cst.CSTNode]
    ) -> Optional[Order]:
        """Every list ``*layers`` may stand for (a loop or branch that builds it gives several),
        as an ``Order`` of element expressions."""
        if arg.star != "*" or self.lists is None:
            return None
        if (summed := summed_order(self.qualify, arg.value)) is not None:
            return summed  # ``*sum([[nn.Linear(a, b), act()] for ...], [])[:-1]``
        if type(arg.value) is cst.Call:
            return self.lists.helper_order(arg.value)
        if type(arg.value) is cst.Name:
            if function is None or statement is None:
                return None
            return self.lists.order(function, arg.value.value, statement)
        value = arg.value
        if type(value) is cst.Attribute and type(value.value) is cst.Name and function is not None and statement is not None:
            positional = [*function.params.posonly_params, *function.params.params]
            if positional and positional[0].name.value == value.value.value:  # ``*self.proj``, a list kept on self
                return self.lists.order(function, f"{value.value.value}.{value.attr.value}", statement)
        if type(value) is cst.Subscript and type(value.value) is cst.Name and function is not None and statement is not None:
            whole = self.lists.order(function, value.value.value, statement)  # `*layers[:-1]`
            return whole.trimmed(list_index(value, value.value.value)) if whole is not None else None
        literal = _literal_list(arg.value)
        return Order.sequence(literal) if literal is not None else None

    def _ordered_dict_values(self, node: cst.BaseExpression) -> Optional[List[cst.BaseExpression]]:
        if type(node) is not cst.Call or self.qualify(node.func) != "collections.OrderedDict":
            return None
        if len(node.args) != 1 or type(node.args[0].value) not in (cst.List, cst.Tuple):
            return None
        values = []
        for element in node.args[0].value.elements:
            pair = element.value
            if type(pair) is not cst.Tuple or len(pair.elements) != 2:
                return None
            values.append(pair.elements[1].value)
        return values


# -- classes -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Assignment:
    """``self.<name> = value`` in a method."""

    name: str
    value: cst.BaseExpression
    statement: cst.SimpleStatementLine
    method: cst.FunctionDef
    indent: str  # the statement's indentation, for fixes that remove it
    single_target: bool
    alone: bool  # the only statement of its block: removing it would leave the block empty


@dataclass(frozen=True)
class Reference:
    """A ``self.<name>`` read in a method; ``call`` is set when it is called directly."""

    name: str
    node: cst.Attribute
    call: Optional[cst.Call]
    method: cst.FunctionDef
    statement: Optional[cst.CSTNode]


@dataclass(frozen=True)
class BorrowedUse:
    """``base.part`` where ``base`` is not ``self`` (``enc.layer1``, ``self.encoder.conv1``)."""

    base: str
    part: str
    node: cst.Attribute
    call: Optional[cst.Call]
    method: cst.FunctionDef
    statement: Optional[cst.CSTNode]


class FileParts(Protocol):
    """What a ``ClassModel`` asks of the file it is in (``FileAnalysis`` gives it; named here
    so that this module does not import ``file``, which imports it)."""

    module: cst.Module
    resolver: Resolver
    dead: Any  # the arms that cannot run (``analysis/dead_arms.DeadArms``)


STEM_PARTS = frozenset(
    {"conv1", "bn1", "relu", "act1", "maxpool", "layer0", "layer1", "layer2", "layer3", "layer4"}
    | SENET_STEM | {"pool"}
)


class ClassModel:
    """Attributes and their uses for one class (methods directly in its body)."""

    def __init__(self, node: cst.ClassDef, file: FileParts, indent: str) -> None:
        self.node = node
        self.file = file
        self.methods: List[cst.FunctionDef] = []
        self.self_names: Dict[int, str] = {}  # id(method) -> name of its first parameter
        self.assignments: Dict[str, List[Assignment]] = {}
        self.references: Dict[str, List[Reference]] = {}
        self.borrowed: List[BorrowedUse] = []
        self.constructors: List[Tuple[cst.Call, str, cst.FunctionDef, Optional[cst.CSTNode]]] = []
        body_indent = indent + block_indent(node.body, file.module)
        for statement in block_statements(node.body):
            if type(statement) is cst.FunctionDef:
                self.methods.append(statement)
        for method in self.methods:
            params = method.params
            positional = [*params.posonly_params, *params.params]
            if not positional or is_static(method):
                continue
            self.self_names[id(method)] = positional[0].name.value
            method_indent = body_indent + block_indent(method.body, file.module)
            self._scan_block(method, method.body, method_indent)

    # -- scanning ----------------------------------------------------------------------------------
    def _scan_block(self, method: cst.FunctionDef, suite: cst.BaseSuite, indent: str) -> None:
        if self.file.dead.holds(suite):
            return  # (an arm that cannot run builds nothing: ``analysis/dead_arms.py``)
        statements = list(block_statements(suite))
        for statement in statements:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    self._scan_small(method, statement, small, indent, len(statements) == 1)
                continue
            if type(statement) in (cst.FunctionDef, cst.ClassDef):
                # Uses inside a nested function belong to another flow: recorded without one.
                self._scan_expression(method, None, statement)
                continue
            for child in children(statement):
                if isinstance(child, cst.BaseSuite):
                    self._scan_block(method, child, indent + block_indent(child, self.file.module))
                elif type(child) in (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally):
                    for grandchild in children(child):
                        if isinstance(grandchild, cst.BaseSuite):
                            inner = indent + block_indent(grandchild, self.file.module)
                            self._scan_block(method, grandchild, inner)
                        else:
                            self._scan_expression(method, statement, grandchild)
                elif type(child) is cst.If:  # elif
                    self._scan_block_like(method, child, indent)
                else:
                    self._scan_expression(method, statement, child)

    def _scan_block_like(self, method: cst.FunctionDef, statement: cst.If, indent: str) -> None:
        self._scan_expression(method, statement, statement.test)
        self._scan_block(method, statement.body, indent + block_indent(statement.body, self.file.module))
        orelse = statement.orelse
        if type(orelse) is cst.If:
            self._scan_block_like(method, orelse, indent)
        elif type(orelse) is cst.Else:
            self._scan_block(method, orelse.body, indent + block_indent(orelse.body, self.file.module))

    def _scan_small(
        self,
        method: cst.FunctionDef,
        statement: cst.SimpleStatementLine,
        small: cst.CSTNode,
        indent: str,
        alone: bool,
    ) -> None:
        self_name = self.self_names[id(method)]
        if type(small) in (cst.Assign, cst.AnnAssign):
            targets = [t.target for t in small.targets] if type(small) is cst.Assign else [small.target]
            value = small.value
            pairs = [(target, value) for target in targets]
            if len(targets) == 1 and type(targets[0]) in (cst.Tuple, cst.List) and type(value) in (cst.Tuple, cst.List):
                pairs = unpacked(targets[0], value) or pairs  # ``self.a, self.b = nn.ModuleList(), nn.ModuleList()``
            for target, value in pairs:
                if type(target) is cst.Attribute and _is_self(target.value, self_name):
                    if value is not None:
                        assignment = Assignment(
                            target.attr.value, value, statement, method, indent,
                            len(targets) == 1 and len(statement.body) == 1, alone,
                        )
                        self.assignments.setdefault(target.attr.value, []).append(assignment)
                else:
                    self._scan_expression(method, statement, target)
            if small.value is not None:
                self._scan_expression(method, statement, small.value)
            return
        if type(small) is cst.AugAssign and type(small.target) is cst.Attribute:
            target = small.target
            if _is_self(target.value, self_name):
                # `self.x += ...` rebinds the attribute: no single assignment describes it.
                assignment = Assignment(target.attr.value, small.value, statement, method, indent, False, alone)
                self.assignments.setdefault(target.attr.value, []).append(assignment)
        if (named := set_attribute(small, self_name)) is not None:  # ``setattr(self, f"act_{i}", nn.ELU())``
            self.assignments.setdefault(named[0], []).append(Assignment(named[0], named[1], statement, method, indent, True, alone))
        self._scan_expression(method, statement, small)

    def _scan_expression(
        self,
        method: cst.FunctionDef,
        statement: Optional[cst.CSTNode],
        root: cst.CSTNode,
    ) -> None:
        self_name = self.self_names[id(method)]
        resolver = self.file.resolver
        stack: List[Tuple[cst.CSTNode, Optional[cst.Call]]] = [(root, None)]
        while stack:
            node, call = stack.pop()
            node_type = type(node)
            if node_type is cst.Call:
                if (name := got_attribute(node, self_name)) is not None:  # ``getattr(self, f"act_{i}")``
                    self.references.setdefault(name, []).append(Reference(name, node, call, method, statement))  # type: ignore[arg-type]
                    continue
                func = node.func  # type: ignore[attr-defined]
                qualified = resolver.constructor(node)  # type: ignore[arg-type]
                if qualified is not None:
                    self.constructors.append((node, qualified, method, statement))  # type: ignore[arg-type]
                stack.extend((arg, None) for arg in node.args)  # type: ignore[attr-defined]
                stack.append((func, node))  # type: ignore[arg-type]
                continue
            if node_type is cst.Attribute:
                value = node.value  # type: ignore[attr-defined]
                name = node.attr.value  # type: ignore[attr-defined]
                if _is_self(value, self_name):
                    self.references.setdefault(name, []).append(
                        Reference(name, node, call, method, statement)  # type: ignore[arg-type]
                    )
                    continue
                if name in STEM_PARTS:
                    base = dotted_name(value)
                    if base is not None and resolver.qualify(value) is None:
                        use = BorrowedUse(base, name, node, call, method, statement)  # type: ignore[arg-type]
                        self.borrowed.append(use)
                stack.append((value, None))
                continue
            if node_type is cst.Arg:
                stack.append((node.value, None))  # type: ignore[attr-defined]
                continue
            stack.extend((child, None) for child in children(node))

    # -- queries ---------------------------------------------------------------------------------
    @property
    def init(self) -> Optional[cst.FunctionDef]:
        for method in self.methods:
            if method.name.value == "__init__":
                return method
        return None

    def self_name(self, method: cst.FunctionDef) -> Optional[str]:
        return self.self_names.get(id(method))

    def single_assignment(self, name: str) -> Optional[Assignment]:
        """The one assignment of ``self.<name>``, made in ``__init__`` (or a method only it
        calls: ``builds``); None if not so simple."""
        found = self.assignments.get(name, [])
        if len(found) != 1 or not self.builds(found[0].method):
            return None
        return found[0]

    def builds(self, method: cst.FunctionDef) -> bool:
        """``__init__``, or a method of the class that ``__init__`` calls as a statement and
        nothing else reads (``self._build_weights(dim_in, dim_out)``): it runs once, at construction."""
        name = method.name.value
        if name == "__init__":
            return True
        refs = self.references.get(name, [])
        return (
            len(refs) == 1 and refs[0].call is not None and refs[0].method.name.value == "__init__"
            and type(refs[0].statement) is cst.SimpleStatementLine and any(method is m for m in self.methods)
            and sum(1 for m in self.methods if m.name.value == name) == 1 and name not in self.assignments
        )

    def attribute_part(self, name: str) -> Optional[Part]:
        assignment = self.single_assignment(name)
        if assignment is None:
            return None
        return self.file.resolver.part(assignment.value, self.self_name(assignment.method), assignment.method)

    def attribute_sequence(self, name: str) -> Optional[List[Part]]:
        """The modules ``self.<name>(x)`` runs, in order: one layer, or a Sequential's elements."""
        assignment = self.single_assignment(name)
        if assignment is None:
            return None
        self_name = self.self_name(assignment.method)
        value = assignment.value
        if type(value) is cst.Call:
            elements = self.file.resolver.sequential(value, self_name, assignment.method, assignment.statement)
            if elements is not None:
                return elements
        return [self.file.resolver.part(value, self_name, assignment.method)]

    def attribute_order(self, name: str) -> Optional[Order]:
        """Every order of the modules ``self.<name>(x)`` may run (a Sequential built from a
        list that branches and loops fill in several ways), as an ``Order`` of ``Part`` values."""
        assignment = self.single_assignment(name)
        if assignment is None or type(assignment.value) is not cst.Call:
            return None
        return self.file.resolver.sequential_order(
            assignment.value, self.self_name(assignment.method), assignment.method, assignment.statement
        )

    def calls(self, name: str) -> List[Reference]:
        return [r for r in self.references.get(name, []) if r.call is not None and r.call.func is r.node]

    def exclusive_assignments(self, name: str) -> bool:
        """``self.<name>`` assigned only at construction (``builds``), each assignment in its own
        arm of one ``if``/``else`` (``if self.is_amp: self.act = Snake(c)`` / ``else: self.act =
        nn.LeakyReLU()``): one of them holds the attribute, whichever runs."""
        found = self.assignments.get(name, [])
        if len(found) < 2 or not all(self.builds(a.method) for a in found):
            return False
        index = self.file.index  # type: ignore[attr-defined]
        chains = []
        for assignment in found:
            here, chain = index.find(assignment.statement), []
            while here is not None and here >= 0:
                chain.append(here)
                here = index.parent[here]
            chains.append(chain)
        for i, first in enumerate(chains):
            for second in chains[i + 1:]:
                shared = set(second)
                common = next(p for p in first if p in shared)  # the innermost node around both
                arms = index.order[common]
                if type(arms) is not cst.If or first[first.index(common) - 1] == second[second.index(common) - 1]:
                    return False
        return True

    def only_called(self, name: str) -> bool:
        """Every reference to ``self.<name>`` is a direct call (nothing else can see it)."""
        references = self.references.get(name, [])
        return bool(references) and all(r.call is not None and r.call.func is r.node for r in references)

    def runs_only_where_called(self, name: str) -> bool:
        """Every reference to ``self.<name>`` is a direct call, a test of whether it is set (``if
        self.act:``, ``if self.act is not None:``, ``f(x) if self.act is None else ...``), or reads a setting of the module
        (``self.nl.negative_slope``, for an export) without running it, storing into it or handing
        a method of it on: the module runs only where it is called."""
        index = self.file.index  # type: ignore[attr-defined]
        references = self.references.get(name, [])
        for reference in references:
            if reference.call is not None and reference.call.func is reference.node:
                continue
            if presence_test(index, reference.node):
                continue  # ``if self.act is not None:``: tested, not run nor held
            here = index.find(reference.node)
            above = index.order[index.parent[here]] if here is not None and index.parent[here] >= 0 else None
            if type(above) is not cst.Attribute or above.value is not reference.node or above.attr.value in _RUNNING_ATTRIBUTES \
                    or above.attr.value.startswith("register"):
                return False
            outer = index.order[index.parent[index.find(above)]]
            if (type(outer) is cst.Call and outer.func is above) or type(outer) in (cst.AssignTarget, cst.AugAssign, cst.Del):
                return False
        return bool(references)

    def is_module(self) -> bool:
        if any(method.name.value == "forward" for method in self.methods):
            return True
        for base in self.node.bases:
            qualified = self.file.resolver.qualify(base.value)
            if qualified is not None and qualified.startswith(NN):
                return True
        return False


_RUNNING_ATTRIBUTES = frozenset({"forward", "__call__", "apply", "train", "eval", "requires_grad_"})


# -- what __init__ builds (followed by CallableModel) ---------------------------------------------------------
class InitModel:
    """What ``__init__`` of one class builds: ``self.x = ...`` values, children, locals.

    The one place that answers "what does ``self.act`` hold" (``attributes``), with the
    ``nn.Module`` children it registers and what it appends to lists."""

    def __init__(self, node: cst.ClassDef, scope: Bindings) -> None:
        self.node = node
        self.name = node.name.value
        self.scope = scope
        self.methods: Dict[str, cst.FunctionDef] = {
            statement.name.value: statement
            for statement in _body_statements(node.body)
            if type(statement) is cst.FunctionDef
        }
        self.attributes: Dict[str, List[cst.BaseExpression]] = {}
        self.children: List[cst.BaseExpression] = []  # super().__init__(*...), add_module, append
        self.locals: Dict[str, List[cst.BaseExpression]] = {}
        self.defaults: Dict[str, cst.BaseExpression] = {}
        # `blocks.append(x)` / `self.blocks.append(x)` in __init__, with the loop around it.
        self.appends: Dict[str, List[Tuple[Optional[cst.For], cst.BaseExpression]]] = {}
        self.attribute_appends: Dict[str, List[Tuple[Optional[cst.For], cst.BaseExpression]]] = {}
        init = self.methods.get("__init__")
        self.init_scope = _scope_of(init, scope) if init is not None else scope
        self.self_name = _first_param(init) if init is not None else None
        if init is not None:
            self._read_init(init)

    def _read_init(self, init: cst.FunctionDef) -> None:
        for param in [*init.params.params, *init.params.kwonly_params]:
            if param.default is not None:
                self.defaults[param.name.value] = param.default
        statements = _body_statements(init.body)
        for small in _small_statements(statements):
            if type(small) is cst.Assign:
                for target in small.targets:
                    self._assign(target.target, small.value)
            elif type(small) is cst.AnnAssign and small.value is not None:
                self._assign(small.target, small.value)
            elif type(small) is cst.Expr and type(small.value) is cst.Call:
                self._read_call(small.value)
            elif type(small) is cst.Expr and type(small.value) is cst.Tuple and len(small.value.elements) == 1:
                call = small.value.elements[0].value  # `self.add_module('norm1', ...),`: a stray comma
                if type(call) is cst.Call:
                    self._read_call(call)
        self._read_appends(statements, None)

    def _read_appends(self, statements: Sequence[cst.CSTNode], loop: Optional[cst.For]) -> None:
        for statement in statements:
            if type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    call = small.value if type(small) is cst.Expr else None
                    if not (
                        type(call) is cst.Call
                        and type(call.func) is cst.Attribute
                        and call.func.attr.value == "append"
                        and len(call.args) == 1
                    ):
                        continue
                    owner = call.func.value
                    path = self_path(owner, self.self_name)
                    if type(owner) is cst.Name and owner.value != self.self_name:
                        self.appends.setdefault(owner.value, []).append((loop, call.args[0].value))
                    elif path is not None and len(path) == 1:
                        self.attribute_appends.setdefault(path[0], []).append(
                            (loop, call.args[0].value)
                        )
            else:
                for block in _child_blocks(statement):
                    self._read_appends(block, statement if type(statement) is cst.For else loop)

    def _assign(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        path = self_path(target, self.self_name)
        if path is not None and len(path) == 1:
            self.attributes.setdefault(path[0], []).append(value)
        elif type(target) is cst.Name:
            self.locals.setdefault(target.value, []).append(value)

    def _read_call(self, call: cst.Call) -> None:
        func = call.func
        path = self_path(func, self.self_name)
        if path == ["add_module"] and len(call.args) == 2:
            name = call.args[0].value
            if type(name) is cst.SimpleString and name.evaluated_value.isidentifier():  # `self.norm1` from now on
                self.attributes.setdefault(name.evaluated_value, []).append(call.args[1].value)  # type: ignore[arg-type]
            else:
                self.children.append(call.args[1].value)
        elif path == ["append"] and len(call.args) == 1:
            self.children.append(call.args[0].value)
        elif (
            type(func) is cst.Attribute
            and func.attr.value == "__init__"
            and type(func.value) is cst.Call
            and type(func.value.func) is cst.Name
            and func.value.func.value == "super"
        ):
            self.children.extend(arg.value for arg in call.args if arg.star != "**")

    def init_env(self) -> "Env":
        return Env(self.init_scope, self, self.self_name, self.methods.get("__init__"))

    def super_argument(self, base_init: cst.FunctionDef, name: str) -> "Optional[cst.BaseExpression] | bool":
        """What this class's ``__init__`` passes for parameter ``name`` of its base class's
        ``base_init`` through ``super().__init__(...)`` (``super(C, self)``, ``Base.__init__(self,
        ...)``): the expression, None when it passes nothing for it (the default holds; a
        ``**kwargs`` is the caller's), False when a ``*args`` may reach it."""
        init = self.methods.get("__init__")
        for small in _small_statements(_body_statements(init.body)) if init is not None else ():
            call = small.value if type(small) is cst.Expr else None
            func = call.func if type(call) is cst.Call else None
            if type(func) is not cst.Attribute or func.attr.value != "__init__":
                continue
            via_super = type(func.value) is cst.Call and type(func.value.func) is cst.Name and func.value.func.value == "super"
            if not via_super and type(func.value) is not cst.Name:
                continue
            params = [p.name.value for p in base_init.params.params][1:]  # after `self`
            positional = [arg for arg in call.args if arg.keyword is None and arg.star != "**"]
            if not via_super:
                positional = positional[1:]  # `Base.__init__(self, ...)`
            for index, arg in enumerate(positional):
                if arg.star == "*":
                    return False if name in params[index:] else None
                if index < len(params) and params[index] == name:
                    return arg.value
            return next((arg.value for arg in call.args if arg.keyword is not None and arg.keyword.value == name), None)
        return None

    def method_env(self, method: cst.FunctionDef) -> "Env":
        return Env(_scope_of(method, self.scope), self, _first_param(method), method)


@dataclass(frozen=True)
class Env:
    """Where an expression is evaluated: its scope and the class its `self` belongs to."""

    scope: Bindings
    owner: Optional[InitModel]
    self_name: Optional[str]
    function: Optional[cst.FunctionDef] = None  # for factory parameters (`act_layer()`)

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.scope.qualify(node)

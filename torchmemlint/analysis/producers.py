"""What made a tensor: the previous element of a Sequential, or the call that made a
function's local value, classified by what autograd keeps of it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import libcst as cst

if TYPE_CHECKING:
    from torchmemlint.analysis.file import FileAnalysis
    from torchmemlint.analysis.values import Value

from torchmemlint.analysis.checkpoints import CHECKPOINT
from torchmemlint.analysis.classes import ClassModel, Layer, _is_self, Part, _rooted_at
from torchmemlint.analysis.identity_modules import defined_class, identity_class
from torchmemlint.analysis.factories import PARTIAL, _rebound as _rebound_in, single_local_value
from torchmemlint.analysis.fields import SPARSE_CONVS, SPARSE_FIELD
from torchmemlint.analysis.layer_lists import enclosing_definitions
from torchmemlint.analysis.loop_runs import runs_at_least_once
from torchmemlint.analysis.message_passing import aggregates_freshly
from torchmemlint.analysis.named_attributes import got_attribute
from torchmemlint.analysis.listed_modules import listed_attribute, listed_row, nested_listed
from torchmemlint.analysis.module_lists import WRAPPERS, module_lists, wrapped_layer
from torchmemlint.analysis.syntax import argument, arms, has_star_args, literal_bool, unquoted
from torchmemlint.tree import scan
from torchmemlint.analysis.vocabulary import (
    Category, FRESH_FUNCTIONS, GRAPH_CONVOLUTIONS, GRAPH_DENSE_LAYERS, NN, FRESH_METHODS, KIND_BY_FUNCTION, OUTPUT_SAVING_FUNCTIONS,
    FRESH_MODULES, OUTPUT_SAVING_METHODS, OUTPUT_SAVING_WHEN_INPLACE, POOL_FUNCTIONS, POOL_MODULES, Saves, short_name,
    VIEWS,
)



# -- producers --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Producer:
    """What made a tensor: its category and a short description for messages."""

    category: Category
    description: str = "unknown code"
    # For in-place activations: this call (or a previous one) runs on the caller's tensor.
    from_parameter: Optional[str] = None
    # The module may also be an ``nn.Identity`` (a builder's other return): then what made its input.
    passes: bool = False


UNKNOWN_PRODUCER = Producer(Category.UNKNOWN)
# A module whose ``forward`` returns nothing: no tensor it could have made reaches a layer (the
# program would fail there), so a join leaves that way out (``joined``).
RETURNS_NOTHING = Producer(Category.UNKNOWN, "a module whose forward returns None")
IDENTITY = NN + "Identity"


def _dotted(node: cst.BaseExpression) -> Optional[str]:
    if type(node) is cst.Name:
        return node.value
    if type(node) is cst.Attribute:
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr.value}"
    return None
# Functions that return the module they are given, its kind unchanged.
SAME_MODULE = WRAPPERS | frozenset({
    "torch.nn.utils.remove_weight_norm", "torch.nn.utils.remove_spectral_norm",
    "torch.nn.utils.weight_norm.remove_weight_norm", "torch.nn.utils.spectral_norm.remove_spectral_norm",
    "torch.nn.utils.parametrize.remove_parametrizations",
})
# Functions whose result is their first argument's storage or a same-valued copy of it
# (``rearrange(fmap, "1 (b o) ... -> b o ...", b=b)``; not ``einops.repeat``, which may expand).
VIEW_FUNCTIONS = frozenset({"einops.rearrange"} | {
    f"torch.{name}" for name in ("reshape", "flatten", "unflatten", "transpose", "permute", "squeeze", "unsqueeze", "movedim", "swapaxes")
})
_FRESH_OPERATORS = (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.MatrixMultiply)
_FRESH_AUGMENTED = (cst.AddAssign, cst.SubtractAssign)


class Producers:
    """Classifies what produced a tensor, inside one class (or none) of one file."""

    def __init__(self, file: "FileAnalysis", model: Optional[ClassModel]) -> None:
        self.file = file
        self.model = model
        self.nesting = 0  # module classes followed into (``block``)
        # following a value a function returns: a ``return`` of a view's base ends another path
        # (``if t: return wx.transpose(1, -1)`` ... ``return wx``)
        self.returned = False
        # ``self.<x>`` of a class followed into, kept from a module its construction was given
        # (``TimeDistributed(nn.Linear(a, b))``: ``self.module = module``): what that module makes
        self.given: Dict[str, Producer] = {}
        # the construction of the class followed into (``GATConv(c, h, aggr="mean")``), where known
        self.built_by: Optional[cst.Call] = None

    def part(self, part: Part, depth: int = 0) -> Producer:
        if part.layer is not None:
            layer = part.layer
            if layer.qualified in WRAPPERS:  # ``weight_norm(nn.Conv1d(...))``: the layer it wraps
                inner = wrapped_layer(self.file.resolver, layer.call)
                wrapper = short_name(layer.qualified)
                if inner is not None:
                    return Producer(inner.category(), f"`{wrapper}({short_name(inner.qualified)})`")
                first = layer.call.args[0].value if layer.call.args else None  # ``weight_norm(conv)``, ``conv`` a local
                bound = self._bound(first) if type(first) is cst.Name and depth < 4 else None
                if type(first) is cst.Call and depth < 4:  # ``spectral_norm(conv2d(ni, nf, 3))``: what the builder's module makes
                    made = self.block(first)
                    return UNKNOWN_PRODUCER if made.category is Category.UNKNOWN else Producer(made.category, f"`{wrapper}` of {made.description}")
                made = self.part(bound, depth + 1) if bound is not None else UNKNOWN_PRODUCER
                return UNKNOWN_PRODUCER if made.category is Category.UNKNOWN else Producer(made.category, f"`{wrapper}({unquoted(made.description)})`" if "`" not in unquoted(made.description) else f"`{wrapper}` of {made.description}")
            return Producer(layer.category(), f"`{short_name(layer.qualified)}`")
        if part.attribute is not None and part.attribute in self.given:
            return self.given[part.attribute]
        if part.attribute is not None and self.model is not None and depth < 4:
            sequence = self.model.attribute_sequence(part.attribute) or self._rewrapped(part.attribute)
            if not sequence and part.attribute not in self.model.assignments:
                return self._inherited_attribute(part.attribute, depth)
            if sequence:
                inner = self.part(sequence[-1], depth + 1)
                if inner.category is Category.UNKNOWN:
                    return UNKNOWN_PRODUCER
                return Producer(inner.category, f"`self.{part.attribute}` ({unquoted(inner.description)})", passes=inner.passes and len(sequence) == 1)
            if self.model.exclusive_assignments(part.attribute):  # one per arm of an ``if``: what any arm's makes
                made = []
                for assignment in self.model.assignments[part.attribute]:
                    value = self.file.resolver.part(assignment.value, self.model.self_name(assignment.method), assignment.method)
                    made.append(self.part(value, depth + 1))
                return joined(made)
        if type(part.node) is cst.Call:
            return self.block(part.node)
        if type(part.node) is cst.IfExp and depth < 4:  # ``weight_norm(conv(...)) if wn else conv(...)``: what either arm makes
            function, classdef = enclosing_definitions(self.file.module, part.node)
            self_name = self.model.self_name(function) if self.model is not None and classdef is not None and function is not None else None
            return joined([self.part(self.file.resolver.part(arm, self_name, function), depth + 1) for arm in (part.node.body, part.node.orelse)])  # type: ignore[attr-defined]
        if type(part.node) is cst.Name and depth < 4:
            bound = self._bound(part.node)
            if bound is not None:
                return self.part(bound, depth + 1)
        return UNKNOWN_PRODUCER

    def _bound(self, name: cst.Name) -> Optional[Part]:
        """The module a local name of a function holds where its one assignment there gives it
        one (``conv = weight_norm(nn.Conv1d(...))`` ... ``nn.Sequential(conv, act)``); None for a
        parameter, a name also bound by a loop, ``with`` or unpacking, or one assigned twice."""
        function, classdef = enclosing_definitions(self.file.module, name)
        value = single_local_value(function, name.value) if function is not None else None
        if type(value) is not cst.Call:
            return None
        self_name = self.model.self_name(function) if self.model is not None and classdef is not None else None
        part = self.file.resolver.part(value, self_name, function)
        return part if part.layer is not None else None

    def block(self, call: cst.Call) -> Producer:
        """``Conv1d(...)``, a module class of this file or of another file of the project
        (``analysis/links.py``): what its ``forward`` returns (``return self.conv(x)``)."""
        return self._class_made(call.func, call)

    def _class_made(self, func: cst.BaseExpression, call: Optional[cst.Call] = None) -> Producer:
        """What calling the module that ``func(...)`` builds makes (see ``block``); ``call``:
        the call, in the file, whose function may be a local name bound to classes."""
        if type(func) is cst.Call:  # ``getattr(nn, f"Conv{dim}d")(...)``
            return self._dimensioned(func) or UNKNOWN_PRODUCER
        if self.nesting >= 4 or type(func) not in (cst.Name, cst.Attribute):
            return UNKNOWN_PRODUCER
        if call is not None and type(func) is cst.Name:
            chosen = self._chosen(func, call)
            if chosen is not None:  # ``klass = nn.Conv2d if plain else partial(ModConv, k=2)``
                return joined(chosen)
        held = self._held_class(func)
        if held is not None:  # ``self.conv = GATv2Conv`` ... ``self.layer1 = self.conv(c, h)``
            return self._class_made(held, call)
        qualified = self.file.resolver.qualify(func)
        if qualified in GRAPH_CONVOLUTIONS:  # ``GATConv(c, h)``: aggregation and bias, kept by nothing
            return Producer(Category.FRESH, f"PyG's {qualified.rsplit('.', 1)[-1]}, a graph convolution")
        if qualified in GRAPH_DENSE_LAYERS:  # ``pyg_linear.Linear(c, h)``: ``F.linear``
            return Producer(Category.FRESH, f"PyG's {qualified.rsplit('.', 1)[-1]}")
        if qualified is not None and not (
            self.file.links is not None and self.file.links.may_come_from_package(_dotted(func))
        ):  # (``from speechbrain.nnet.CNN import Conv1d`` in speechbrain is qualified, and the project's)
            return UNKNOWN_PRODUCER
        file, classdef = defined_class(self.file, func)
        if classdef is None:
            builder = file.callables.functions.get(func.value) if type(func) is cst.Name else None
            if builder is None and type(func) is cst.Name and call is not None:
                builder = _local_builder(file, call, func.value)
            if builder is None and file.links is not None:  # ``batch_norm_2d(c)`` from ``._defaults``
                found = file.links.definition(_dotted(func), "function", package=True)
                if found is not None:
                    file, builder = found
            return self._built(file, builder, call) if builder is not None else UNKNOWN_PRODUCER
        forward = file.value_graphs.method(classdef, "forward")
        if forward is None:
            return _inherited(file, classdef)
        if not any(r.value is not None for r in scan(forward.body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda))):  # type: ignore[attr-defined]
            return RETURNS_NOTHING  # (Encodec's ``ConvLayerNorm.forward`` ends in a bare ``return``)
        graph = file.values(forward)
        if not graph.reliable or not graph.returns:
            return UNKNOWN_PRODUCER
        inner = Producers(file, file.class_model(classdef))
        inner.nesting = self.nesting + 1
        inner.returned = True
        if call is not None:
            inner.given = self._given(classdef, call, inner.model)
            inner.built_by = call
        # every return, and every arm of a join each returns: what any way through makes; a
        # tuple returned beside a tensor is not what a layer reading the call's result gets
        # (``return out, (edge_index, alpha)`` behind ``return_attention_weights``: the program
        # would fail there)
        returns = [value for value in graph.returns if value.op != "tuple"] or graph.returns
        made = joined([p for value in returns for p in inner.of(value, graph.self_name)])
        if made.category is Category.UNKNOWN:
            return UNKNOWN_PRODUCER
        shown = made.description.replace("`", "")
        return Producer(made.category, f"{classdef.name.value}, whose forward returns {shown}")

    def _held_class(self, func: cst.BaseExpression) -> Optional[cst.BaseExpression]:
        """The class ``self.<attribute>`` names where its one assignment, at construction, is a
        class's name (``self.conv = GATv2Conv``), not an instance."""
        if type(func) is not cst.Attribute or type(func.value) is not cst.Name or self.model is None:
            return None
        assignment = self.model.single_assignment(func.attr.value)
        if assignment is None or type(assignment.value) not in (cst.Name, cst.Attribute):
            return None
        if self.model.self_name(assignment.method) != func.value.value or _rooted_at(assignment.value, func.value.value):
            return None  # (``self.conv = self.other``: another attribute, never followed round)
        dotted = _dotted(assignment.value)
        return assignment.value if dotted is not None and dotted.rsplit(".", 1)[-1][:1].isupper() else None

    def _given(self, classdef: cst.ClassDef, call: cst.Call, model: Any) -> Dict[str, Producer]:
        """For ``call`` constructing ``classdef`` (``model``: its class model): each ``self.<x> =
        <param>`` (or ``self.<x>: T = <param>``) among the top-level statements of its
        ``__init__``, the class's only assignment of ``x``, where the call passes that parameter a
        torch layer built in place (``TimeDistributed(nn.Linear(a, b))``): ``x`` -> what that
        layer makes."""
        init = next((f for f in classdef.body.body if type(f) is cst.FunctionDef and f.name.value == "__init__"), None)
        if init is None or any(arg.star for arg in call.args) or init.params.star_arg is not cst.MaybeSentinel.DEFAULT:
            return {}
        params = [p.name.value for p in init.params.params][1:]
        passed: Dict[str, cst.BaseExpression] = {}
        for position, arg in enumerate(call.args):
            if arg.keyword is not None:
                passed[arg.keyword.value] = arg.value
            elif position < len(params):
                passed[params[position]] = arg.value
        given: Dict[str, Producer] = {}
        for statement in init.body.body:
            small = statement.body[0] if type(statement) is cst.SimpleStatementLine and len(statement.body) == 1 else None
            if type(small) is cst.Assign and len(small.targets) == 1:
                target, value = small.targets[0].target, small.value
            elif type(small) is cst.AnnAssign and small.value is not None:
                target, value = small.target, small.value
            else:
                continue
            if type(target) is not cst.Attribute or type(value) is not cst.Name or value.value not in passed:
                continue
            if model is None or len(model.assignments.get(target.attr.value, [])) != 1:
                continue  # (assigned again: what it holds when called is not known here)
            layer = self.file.resolver.layer(passed[value.value])
            if layer is not None and layer.category() is not Category.UNKNOWN:
                given[target.attr.value] = Producer(layer.category(), f"`{short_name(layer.qualified)}`")
        return given

    def _chosen(self, func: cst.Name, call: cst.Call) -> Optional[List[Producer]]:
        """For ``klass(...)`` where ``klass`` is a local of the function around ``call``
        assigned once, to a class or to either of two (``a if c else b``), each maybe through
        ``functools.partial``: what the module of each arm makes (None: not such a local)."""
        if self.file.resolver.qualify(func) is not None or func.value in self.file.callables.classes:
            return None
        function, _ = enclosing_definitions(self.file.module, call)
        value = single_local_value(function, func.value) if function is not None else None
        if value is None:
            return None
        made = []
        for arm in arms(value):
            if type(arm) is cst.Call and self.file.resolver.qualify(arm.func) == PARTIAL and arm.args and not arm.args[0].keyword:
                arm = arm.args[0].value
            dimensioned = self._dimensioned(arm) if type(arm) is cst.Call else None
            if dimensioned is not None:  # ``conv_fn = getattr(nn, "Conv{0}d".format(dim))``
                made.append(dimensioned)
                continue
            if type(arm) not in (cst.Name, cst.Attribute):
                return None
            qualified = self.file.resolver.qualify(arm)
            if qualified is not None and qualified.startswith(NN):
                made.append(Producer(Layer(qualified, call).category(), f"`{short_name(qualified)}`"))
            else:
                made.append(self._class_made(arm))
        return made

    def _dimensioned(self, call: cst.Call) -> Optional[Producer]:
        """``getattr(nn, "Conv%dd" % ndims)`` (also ``"Conv{}d".format(dim)``, ``f"Conv{dim}d"``):
        a layer class of torch chosen by its dimension; what it makes when every dimension
        (1, 2, 3) names a torch layer of one kind (a convolution, a norm, a pooling). None
        otherwise."""
        func, args = call.func, call.args
        if type(func) is not cst.Name or func.value != "getattr" or len(args) != 2 or any(a.keyword or a.star for a in args):
            return None
        if self.file.resolver.qualify(args[0].value) != NN.rstrip("."):
            return None
        template = _dimension_template(args[1].value)
        if template is None:
            return None
        categories = {Layer(NN + template.replace("{}", dim), call).category() for dim in "123"}
        if len(categories) != 1 or Category.UNKNOWN in categories or Category.SAVES_OUTPUT in categories:
            return None
        return Producer(categories.pop(), f"`nn.{template.replace('{}', '{dim}')}`")

    def _built(self, file: "FileAnalysis", builder: cst.FunctionDef, call: Optional[cst.Call] = None) -> Producer:
        """Calling the module a function of the file builds (``def SPConvDownsample(dim):
        return nn.Sequential(Rearrange(...), nn.Conv2d(...))``): what every module it returns
        makes (a Sequential: its last layers); a returned parameter, maybe wrapped
        (``return weight_norm(module)``, ``return module``), is what ``call`` passes for it."""
        made: List[Producer] = []
        inner = Producers(file, None)
        inner.nesting = self.nesting + 1
        passes = False  # (``else: return nn.Identity()``: Encodec's ``get_norm_module``)
        for statement in scan(builder.body, (cst.Return,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
            if type(statement.value) is cst.Name and statement.value.value == "None":  # type: ignore[attr-defined]
                continue  # (``norm=None``: nothing to place; a None in a Sequential fails to build)
            given = self._returned_argument(file, builder, statement, call)  # type: ignore[arg-type]
            if given is not None:
                made.append(given)
                continue
            values = _returned_calls(file, builder, statement)  # type: ignore[arg-type]
            if values is None:
                return UNKNOWN_PRODUCER
            for value in values:
                if file.resolver.qualify(value.func) == IDENTITY and not value.args:
                    passes = True
                    continue
                made.extend(self._built_value(file, inner, builder, value))
        found = joined(made)
        if found.category is Category.UNKNOWN:
            return UNKNOWN_PRODUCER
        shown = f"`{builder.name.value}`, which returns {found.description.replace('`', '')}"
        return Producer(found.category, shown + (" or `nn.Identity`" if passes else ""), passes=passes)

    def _returned_argument(self, file: "FileAnalysis", builder: cst.FunctionDef, statement: cst.Return, call: Optional[cst.Call]) -> Optional[Producer]:
        """For ``return <parameter>`` or ``return weight_norm(<parameter>)`` (a wrapper that
        keeps the module, ``SAME_MODULE``): what the module ``call`` passes there makes."""
        value = statement.value
        if type(value) is cst.Call and value.args and not value.args[0].star and file.resolver.qualify(value.func) in SAME_MODULE:
            value = value.args[0].value
        if call is None or type(value) is not cst.Name or any(arg.star for arg in call.args):
            return None
        params = [*builder.params.posonly_params, *builder.params.params]
        position = next((i for i, p in enumerate(params) if p.name.value == value.value), None)
        if position is None or _rebound_in(builder, value.value):
            return None
        passed = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == value.value), None)
        positional = [a for a in call.args if a.keyword is None]
        if passed is None and position < len(positional):
            passed = positional[position].value
        return None if passed is None else self.part(self.file.resolver.part(passed, None, None))

    @staticmethod
    def _built_value(file: "FileAnalysis", inner: "Producers", builder: cst.FunctionDef, value: cst.Call) -> List[Producer]:
        """What calling the module ``value`` (a call ``builder`` returns) builds makes (a
        Sequential: its last layers)."""
        order = file.resolver.sequential_order(value, None, builder, None)
        if order is None:
            return [inner.part(file.resolver.part(value, None, builder))]
        if order.nullable or not order.last:
            return [UNKNOWN_PRODUCER]
        return [inner.part(part) for part in order.last]

    def _inherited_attribute(self, attribute: str, depth: int) -> Producer:
        """``self.<attribute>`` that the class never assigns, of its one base class that this file
        or another file of the project defines (``class Det(DetModule)`` running
        ``self.insnorm1``, built by ``DetModule.__init__``): what it is there."""
        assert self.model is not None
        bases = self.model.node.bases
        if len(bases) != 1 or type(bases[0].value) not in (cst.Name, cst.Attribute):
            return UNKNOWN_PRODUCER
        base = bases[0].value
        file, classdef = self.file, None
        if type(base) is cst.Name and self.file.resolver.qualify(base) is None:
            classdef = file.callables.classes.get(base.value)
        if classdef is None and file.links is not None:
            found = file.links.definition(_dotted(base), "class", package=True)
            if found is not None:
                file, classdef = found
        if classdef is None or classdef is self.model.node:
            return UNKNOWN_PRODUCER
        inner = Producers(file, file.class_model(classdef))
        inner.nesting = self.nesting
        # (an attribute named at run time is its template, ``"conv{}"``: not an identifier)
        node = cst.Name(attribute) if attribute.isidentifier() else cst.SimpleString(repr(attribute))
        return inner.part(Part(node, attribute=attribute), depth + 1)

    def _rewrapped(self, attribute: str) -> Optional[List[Part]]:
        """``self.conv = nn.Conv1d(...)`` then ``self.conv = weight_norm(self.conv)`` in
        ``__init__``: the one layer, wrapped (a wrapper returns the module it is given)."""
        assert self.model is not None
        assignments = self.model.assignments.get(attribute, [])
        if len(assignments) < 2:
            return None
        built = []
        for assignment in assignments:
            value = assignment.value
            self_name = self.model.self_name(assignment.method)
            if (
                type(value) is cst.Call and self.file.resolver.qualify(value.func) in SAME_MODULE
                and value.args and value.args[0].keyword is None and not value.args[0].star
                and type(value.args[0].value) is cst.Attribute
                and _is_self(value.args[0].value.value, self_name)  # type: ignore[attr-defined]
                and value.args[0].value.attr.value == attribute  # type: ignore[attr-defined]
            ):
                continue  # ``self.conv = weight_norm(self.conv)``, also in ``remove_weight_norm()``
            if not self.model.builds(assignment.method):
                return None
            built.append(self.file.resolver.part(value, self_name, assignment.method))
        return built if len(built) == 1 and built[0].layer is not None else None

    def _reader(self, callee: Optional["Value"]):
        """The value of a name where the function of ``callee`` reads it."""
        function = callee.function if callee is not None else None
        return lambda name: self.file.values(function).names.get(id(name)) if function is not None else None

    def listed(self, attribute: str, position: Optional[Tuple[int, ...]] = None, inner: bool = False) -> Producer:
        """Calling one element of the module list ``self.<attribute>``: what all its elements are
        (a Sequential element: what its last layers make); with ``position``, the module at that
        position of each of its rows (``for conv, act in self.layers``); ``inner``: an element of
        one of its elements, each a module list (``for stack in self.convs: for layer in stack:``)."""
        lists = module_lists(self.file, self.model) if self.model is not None else None
        if lists is not None and inner:
            layers = lists.inner_elements(attribute)
        elif lists is not None and position is not None:
            layers = lists.row_elements(attribute, position)
        else:
            layers = lists.elements(attribute) if lists is not None else None
        kept = [layer for layer in layers or () if not self._identity(layer)]  # (``nn.Identity()`` in one arm: passes its input)
        if not kept:
            return UNKNOWN_PRODUCER
        passes, layers = len(kept) < len(layers), kept  # type: ignore[arg-type]
        made = [self._element(layer, lists) for layer in layers]
        category = joined([Producer(layer.category(), "") if found is None else found for layer, found in zip(layers, made)]).category
        if category is Category.UNKNOWN:
            return UNKNOWN_PRODUCER
        kinds = "/".join(sorted({
            short_name(layer.qualified) if found is None else found.description for layer, found in zip(layers, made)
        }))
        return Producer(category, f"{'a module of ' if inner else ''}an element of `self.{attribute}` ({kinds}{' or nn.Identity' if passes else ''})", passes=passes)

    def _identity(self, layer: Any) -> bool:
        call = layer if type(layer) is cst.Call else getattr(layer, "call", None)  # (a ``Layer``: its construction)
        return type(call) is cst.Call and not call.args and (self.file.resolver.qualify(call.func) == IDENTITY or identity_class(self.file, call.func))

    def _element(self, layer: Any, lists: Any) -> Optional[Producer]:
        if type(layer) is cst.Call:
            return self.block(layer)
        last = lists.last_parts(layer)
        if last is None:
            return None
        return joined([self.part(part) for part in last]) if last else UNKNOWN_PRODUCER

    def call(self, call: cst.Call, self_name: Optional[str], callee: Optional["Value"] = None) -> Producer:
        func = call.func
        attribute = listed_attribute(func, callee, self_name, self.file.resolver.qualify)
        if attribute is not None:
            return self.listed(attribute)
        row = listed_row(func, callee, self_name)
        if row is not None:
            return self.listed(*row)
        nested = nested_listed(func, callee, self_name, self.file.resolver.qualify, self._reader(callee))
        if nested is not None:
            return self.listed(nested, inner=True)
        if type(func) is cst.Name and callee is not None and callee.op == "attribute" and type(callee.node) is cst.Attribute and _is_self(callee.node.value, self_name):
            func = callee.node  # ``bn(x)`` in ``def call_bn(bn, x)``, run as ``call_bn(self.bn1, h)``: ``self.bn1``
        if type(func) is cst.Attribute and _is_self(func.value, self_name):
            if func.attr.value == "propagate" and self.model is not None and aggregates_freshly(self.file, self.model.node, self.built_by):
                return Producer(Category.FRESH, "PyG's `propagate`, a sum or mean aggregation")
            return self.part(Part(func, attribute=func.attr.value))
        if (named := got_attribute(func, self_name)) is not None:  # ``getattr(self, f"linear_{i}")(x)``
            return self.part(Part(func, attribute=named))
        if self.model is not None and _super_forward(func):
            # ``return super().forward(x)`` in a subclass of one torch layer: what that layer makes
            return _inherited(self.file, self.model.node, own_forward=True)
        qualify = self.file.resolver.qualify
        qualified = qualify(func)
        if qualified is not None:
            return self._function(call, qualified)
        if type(func) is cst.Attribute and not _rooted_at(func.value, self_name):
            # A method of a tensor (not of a sub-module such as `self.op.add`).
            method = func.attr.value
            if method in OUTPUT_SAVING_METHODS:
                return Producer(Category.SAVES_OUTPUT, f"`.{method}()`")
            if method in FRESH_METHODS:
                return Producer(Category.FRESH, f"`.{method}()`")
        return UNKNOWN_PRODUCER

    @staticmethod
    def _function(call: cst.Call, qualified: str) -> Producer:
        shown = f"`{short_name(qualified)}`"
        kind = KIND_BY_FUNCTION.get(qualified)
        if kind is not None:
            if kind.name == "relu":
                return Producer(Category.SAVES_OUTPUT, shown)
            if kind.saves is Saves.MASK or has_star_args(call):
                return UNKNOWN_PRODUCER
            arg = argument(call, kind.functional_params.index("inplace") + 1, "inplace")
            inplace = False if arg is None else literal_bool(arg.value)
            if inplace is None:
                return UNKNOWN_PRODUCER
            if inplace:
                category = Category.SAVES_OUTPUT if kind.name in OUTPUT_SAVING_WHEN_INPLACE else Category.UNKNOWN
                return Producer(category, shown)
            return Producer(Category.FRESH, shown)
        if qualified in OUTPUT_SAVING_FUNCTIONS:
            return Producer(Category.SAVES_OUTPUT, shown)
        if qualified in POOL_FUNCTIONS:
            return Producer(Category.POOL, shown)
        if qualified in FRESH_FUNCTIONS:
            return Producer(Category.FRESH, shown)
        return UNKNOWN_PRODUCER

    def of(self, value: "Value", self_name: Optional[str], depth: int = 0) -> List[Producer]:
        """Every producer that may have made ``value`` (a node of the value graph): through the
        arms of a join, what made each."""
        op = value.op if not value.info.get("held") else "held"  # (``self.conv(x, e)`` run through its class's forward: the call)
        if op == "join" and depth < 8:
            arms = value.inputs
            if len(arms) == 2 and type(value.node) is cst.For and runs_at_least_once(self.file, self.model, value.node):
                arms = arms[:1]  # (a loop that runs: what its body binds, never what came before)
            return [p for arm in arms for p in self.of(arm, self_name, depth + 1)]
        if op == "helper" and value.info.get("helper") is not None and depth < 8:
            return self.of(value.inputs[0], self_name, depth + 1)  # what the same-file helper returns
        viewed = op in ("reshape", "relabel", "same") or (op == "call" and value.info.get("method") in VIEWS)  # (``.movedim(-1, self.dim)``)
        if viewed and value.inputs and depth < 8 and self._only_view(value):
            return self.of(value.inputs[0], self_name, depth + 1)  # a view of a value nothing else reads
        if op == "argument":
            name = value.info.get("name")
            return [Producer(Category.UNKNOWN, f"`{name}`", from_parameter=name if name != self_name else None)]
        if op == "member" and value.info.get("name") == SPARSE_FIELD and value.inputs:
            return [self._sparse_features(value.inputs[0], self_name)]
        if op == "element" and value.info.get("index") == 0 and value.inputs and depth < 8 and _with_attention(value.inputs[0].node):
            return self.of(value.inputs[0], self_name, depth + 1)  # ``h, att = conv(x, e, return_attention_weights=True)``
        node = value.node
        where = value.info.get("layer")
        where = where if type(where) is tuple else None  # (attribute, position, count) of ``self.x(...)``
        if op == "dropout" and value.inputs and depth < 8 and self._dropout_out_of_place(value):
            if not self._read_only_by(value, value.inputs[0]):
                return [UNKNOWN_PRODUCER]  # (in evaluation it returns its input, which is read again)
            return [Producer(Category.FRESH, "a dropout")] + self.of(value.inputs[0], self_name, depth + 1)
        if op in ("call", "module") and depth < 8 and (passed := self._passed_through(value, self_name)) is not None:
            return passed + self.of(value.inputs[-1 if op == "call" else 0], self_name, depth + 1)
        if type(node) is cst.Call:
            if where is not None and where[1] != where[2] - 1:  # a layer inside a Sequential the call runs whole
                element = self._sequence_element(where)
                return [UNKNOWN_PRODUCER if element is None else self.part(element)]
            callee = value.inputs[0] if op == "call" and value.inputs and type(node.func) is cst.Name else None
            first = node.args[0] if node.args and op == "call" and value.inputs else None
            if first is not None and not first.star and first.keyword is None and self.file.resolver.qualify(node.func) == CHECKPOINT:
                # ``checkpoint(layer, z)``, also in a helper that hands its parameter to it: what
                # calling the module makes (an output the module keeps is not the one returned)
                made = self.call(cst.Call(func=first.value), self_name, value.inputs[0] if type(first.value) is cst.Name else None)
                return [made if made.category is not Category.SAVES_OUTPUT else UNKNOWN_PRODUCER]
            made = self.call(node, self_name, callee)
            if made.passes and op == "module" and value.inputs and depth < 8:  # ``self.norm(x)``, maybe an ``nn.Identity``
                return [replace(made, passes=False)] + self.of(value.inputs[0], self_name, depth + 1)
            if made.passes and op == "call" and len(value.inputs) == 2 and depth < 8 and self._read_only_by(value, value.inputs[1]):
                return [replace(made, passes=False)] + self.of(value.inputs[1], self_name, depth + 1)  # ``bn(h)``, ``bn`` of a list
            return [replace(made, passes=False) if made.passes else made]
        if type(node) is cst.BinaryOperation and op in ("add", "scale", "arith", "contract"):
            if isinstance(node.operator, _FRESH_OPERATORS):
                return [Producer(Category.FRESH, "an arithmetic operation")]
        if type(node) is cst.AugAssign and op in ("add", "scale", "arith", "contract"):
            fresh = isinstance(node.operator, _FRESH_AUGMENTED)
            return [Producer(Category.FRESH, "an in-place addition") if fresh else UNKNOWN_PRODUCER]
        return [UNKNOWN_PRODUCER]

    def _sequence_element(self, where: Tuple[str, int, int]) -> Optional[Part]:
        """The module at ``position`` of the ``count`` that ``self.<attribute>(x)`` runs in turn
        (the value graph's ``info["layer"]``)."""
        attribute, position, count = where
        sequence = self.model.attribute_sequence(attribute) if self.model is not None else None
        return sequence[position] if sequence is not None and len(sequence) == count else None

    def _dropout_out_of_place(self, value: "Value") -> bool:
        """``F.dropout(h, p, training)`` or ``self.drop(h)`` (an ``nn.Dropout``, maybe inside a
        Sequential) that makes a new tensor when it drops: in training a fresh one whose value
        its backward never reads (it keeps only its mask); in evaluation, or with ``p=0``, its
        input itself (what made that is asked too)."""
        where = value.info.get("layer")
        if type(where) is tuple:
            element = self._sequence_element(where)
            layer = element.layer if element is not None else None
            return layer is not None and layer.kind is not None and layer.kind.saves is Saves.MASK and layer.inplace() is False
        call = value.info.get("call")
        if type(call) is not cst.Call or has_star_args(call):
            return False
        kind = KIND_BY_FUNCTION.get(self.file.resolver.qualify(call.func) or "")
        if kind is None or kind.saves is not Saves.MASK:
            return False
        given = argument(call, kind.functional_params.index("inplace") + 1, "inplace")
        return given is None or literal_bool(given.value) is False

    def _sparse_features(self, base: "Value", self_name: Optional[str]) -> Producer:
        """``out.features`` of ``out = self.conv(x)``, ``self.conv`` a sparse convolution of
        spconv or mmcv.ops (``analysis/fields.py``): the convolution's output."""
        node = base.node
        if type(node) is not cst.Call or self.model is None:
            return UNKNOWN_PRODUCER
        func = node.func
        if type(func) is not cst.Attribute or not _is_self(func.value, self_name):
            return UNKNOWN_PRODUCER
        sequence = self.model.attribute_sequence(func.attr.value)
        built = sequence[0].node if sequence and len(sequence) == 1 else None
        qualified = self.file.resolver.qualify(built.func) if type(built) is cst.Call else None
        if qualified not in SPARSE_CONVS:
            return UNKNOWN_PRODUCER
        return Producer(Category.FRESH, f"the features of `self.{func.attr.value}` ({short_name(qualified)})")

    def _passed_through(self, value: "Value", self_name: Optional[str]) -> Optional[List[Producer]]:
        """``self.norm(x)`` where ``self.norm`` is ``nn.Identity()`` in some arm of its
        construction (``if norm: self.norm = nn.BatchNorm2d(c)`` / ``else: self.norm =
        nn.Identity()``, or ``nn.BatchNorm2d(c) if norm else nn.Identity()``) and nothing else
        reads ``x``: what the other arms make; the caller adds what made ``x`` (None: not such a
        call)."""
        node, model = value.node, self.model
        if (
            model is None or type(node) is not cst.Call or len(node.args) != 1 or node.args[0].keyword is not None
            or node.args[0].star or type(node.func) is not cst.Attribute or not _is_self(node.func.value, self_name)
            or len(value.inputs) != (2 if value.op == "call" else 1)
        ):
            return None
        found = model.assignments.get(node.func.attr.value, [])
        if len(found) == 1 and type(found[0].value) is cst.IfExp:
            arms_of = [(arm, found[0]) for arm in (found[0].value.body, found[0].value.orelse)]
        elif model.exclusive_assignments(node.func.attr.value):
            arms_of = [(assignment.value, assignment) for assignment in found]
        else:
            return None
        qualify, identity, made = self.file.resolver.qualify, False, []
        for expression, assignment in arms_of:
            if type(expression) is cst.Call and not expression.args and (qualify(expression.func) == NN + "Identity" or identity_class(self.file, expression.func)):
                identity = True
                continue
            part = self.file.resolver.part(expression, model.self_name(assignment.method), assignment.method)
            arm = self.part(part, 1)
            shown = f"`self.{node.func.attr.value}` ({unquoted(arm.description)} or nn.Identity)"
            made.append(arm if arm.category is Category.UNKNOWN else Producer(arm.category, shown))
        if not identity or not self._read_only_by(value, value.inputs[-1 if value.op == "call" else 0]):
            return None
        return made

    def _read_only_by(self, value: "Value", base: "Value") -> bool:
        """Nothing but ``value`` (and the joins of a rebinding) reads ``base``."""
        graph = self.file.values(value.function)
        others = [c for c in graph.consumers(base) if not (c == "return" and self.returned)]
        exclusive = self.file.index.exclusive  # (a read in the other arm of an ``if`` never runs with it)
        return [
            c for c in others if type(c) is str or (c.op not in ("join", "meta") and (c is value or not exclusive(c.node, value.node)))
        ] == [value]  # (``y.size(-1)``: keeps nothing)

    def _only_view(self, value: "Value") -> bool:
        """``wx.transpose(1, -1)`` / ``wx.squeeze(1)`` / ``x.contiguous()`` of a value read by
        nothing but this view (and the joins of a rebinding): what made the base made it."""
        node, base = value.node, value.inputs[0]
        if type(node) is not cst.Call or value.function is None:
            return False
        if type(node.func) is cst.Attribute and node.func.attr.value in VIEWS:
            pass
        elif self.file.resolver.qualify(node.func) not in VIEW_FUNCTIONS:
            return False
        return self._read_only_by(value, base)


def _local_builder(file: "FileAnalysis", call: cst.Call, name: str) -> Optional[cst.FunctionDef]:
    """The function ``name`` that the function around ``call`` defines among its own
    statements (``def conv(*args, **kwargs): return nn.Conv2d(*args, **kwargs)`` in an
    ``__init__``), when it binds ``name`` nowhere else; None otherwise."""
    index = file.index
    here = index.find(call)
    function = index.function_of(here) if here is not None else -1
    if function < 0:
        return None
    body = index.order[function].body  # type: ignore[attr-defined]
    found = [
        statement for statement in (body.body if type(body) is cst.IndentedBlock else ())
        if type(statement) is cst.FunctionDef and statement.name.value == name
    ]
    if len(found) != 1 or found[0].decorators or _rebound_in(index.order[function], name):  # type: ignore[arg-type]
        return None
    return found[0]


def _dimension_template(node: cst.BaseExpression) -> Optional[str]:
    """``"Conv{}d"`` for ``"Conv%dd" % n``, ``"Conv{0}d".format(n)`` or ``f"Conv{n}d"``: a class
    name with one number put in (None for anything else)."""
    if type(node) is cst.BinaryOperation and type(node.operator) is cst.Modulo and type(node.left) is cst.SimpleString:
        text = node.left.evaluated_value
        template = text.replace("%d", "{}", 1) if isinstance(text, str) and text.count("%") == 1 else None
    elif (
        type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "format"
        and type(node.func.value) is cst.SimpleString and len(node.args) == 1
    ):
        text = node.func.value.evaluated_value
        template = re.sub(r"\{[^{}]*\}", "{}", text) if isinstance(text, str) else None
    elif type(node) is cst.FormattedString and len(node.parts) == 3 and type(node.parts[1]) is cst.FormattedStringExpression:
        head, tail = node.parts[0], node.parts[2]
        if type(head) is not cst.FormattedStringText or type(tail) is not cst.FormattedStringText:
            return None
        template = head.value + "{}" + tail.value
    else:
        return None
    if template is None or template.count("{}") != 1 or not template.replace("{}", "2").isidentifier():
        return None
    return template


def _super_forward(func: cst.BaseExpression) -> bool:
    """``super().forward`` / ``super(Cls, self).forward``: the base class's ``forward``."""
    return (
        type(func) is cst.Attribute and func.attr.value == "forward" and type(func.value) is cst.Call
        and type(func.value.func) is cst.Name and func.value.func.value == "super"
    )


def _inherited(file: "FileAnalysis", classdef: cst.ClassDef, own_forward: bool = False, depth: int = 0) -> Producer:
    """A module class without its own ``forward`` (nor ``__call__``) that derives one torch
    layer (``class Conv1d(nn.Conv1d)`` that only initialises its weights), also through classes
    of the file without one (torchfusion's ``BatchNorm2d(BatchNorm)``, ``BatchNorm(_BatchNorm)``):
    what that layer's ``forward`` makes. An activation or dropout base is not read (its
    ``inplace``/``p`` is the subclass's ``__init__``'s business). ``own_forward``: the class's
    ``forward`` calls its base's (``return super().forward(x)``), which makes the same."""
    graphs = file.value_graphs
    if (not own_forward and graphs.method(classdef, "__call__") is not None) or len(classdef.bases) != 1:
        return UNKNOWN_PRODUCER
    qualified, parent = file.resolver.qualify(classdef.bases[0].value), file.callables.classes.get(_dotted(classdef.bases[0].value) or "")
    if parent is not None and parent is not classdef and depth < 4 and graphs.method(parent, "forward") is None:
        return _inherited(file, parent, depth=depth + 1)
    category = Category.POOL if qualified in POOL_MODULES else Category.FRESH if qualified in FRESH_MODULES else None
    return UNKNOWN_PRODUCER if category is None else Producer(category, f"{classdef.name.value}, a subclass of `{short_name(qualified)}`")


def joined(made: List[Producer]) -> Producer:
    """What any of ``made`` (the ways a value may come) is: one category when all agree
    (fresh and pooled outputs are both fresh), else unknown."""
    made = [p for p in made if p is not RETURNS_NOTHING] if len(made) > 1 else made
    categories = {p.category for p in made}
    if not made or Category.UNKNOWN in categories:
        return UNKNOWN_PRODUCER
    if categories <= {Category.FRESH, Category.POOL}:
        category = Category.FRESH if Category.FRESH in categories else Category.POOL
    elif len(categories) == 1:
        category = categories.pop()
    else:
        return UNKNOWN_PRODUCER
    return Producer(category, " / ".join(dict.fromkeys(p.description for p in made)))


def _returned_calls(file: "FileAnalysis", builder: cst.FunctionDef, statement: cst.Return, depth: int = 0) -> Optional[List[cst.Call]]:
    """The calls that build what ``return <value>`` returns: the call itself, or for a local
    name each call assigned to it that reaches the return (``layer = nn.Linear(...)``, ``if sn:
    layer = spectral_norm(layer)``: a wrapper of the name itself gives the module it is given,
    so the assignments that reach it are read instead). None when one is not such a call."""
    value = statement.value
    if type(value) is cst.Call:
        return [value]
    flow = file.flow(builder)
    at = flow.statement_index(_line_of(builder, statement))
    if type(value) is not cst.Name or at is None or not flow.reliable:
        return None
    found: List[cst.Call] = []
    todo, seen = [(value.value, at)], set()
    while todo:
        name, index = todo.pop()
        if (name, index) in seen or len(seen) > 16:
            continue
        seen.add((name, index))
        for definition in flow.definitions(name, index):
            made = definition.value
            if type(made) is not cst.Call or definition.augmented is not None:
                return None
            first = made.args[0].value if made.args and made.args[0].keyword is None and not made.args[0].star else None
            if file.resolver.qualify(made.func) in SAME_MODULE and type(first) is cst.Name and first.value == name:
                todo.append((name, definition.index))  # ``layer = spectral_norm(layer)``
            else:
                found.append(made)
    return found or None


def _line_of(function: cst.FunctionDef, node: cst.CSTNode) -> Optional[cst.CSTNode]:
    """The simple statement line of ``function`` holding ``node``."""
    for line in scan(function.body, (cst.SimpleStatementLine,), (cst.FunctionDef, cst.ClassDef, cst.Lambda)):
        if any(small is node for small in line.body):  # type: ignore[attr-defined]
            return line
    return None


def _with_attention(node: Optional[cst.CSTNode]) -> bool:
    """A call passing ``return_attention_weights=True``: PyG's attention convolutions then
    return ``(out, (edge_index, alpha))``, ``out`` what the convolution makes (the value
    graph asks what made the first item)."""
    return type(node) is cst.Call and any(
        arg.keyword is not None and arg.keyword.value == "return_attention_weights"
        and type(arg.value) is cst.Name and arg.value.value == "True" for arg in node.args
    )

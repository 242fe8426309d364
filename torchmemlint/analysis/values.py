"""The value graph of one function: every tensor value a node, made by a normalised operation
from other values.

``FileAnalysis.values(function)`` builds it on first need, once per function. The statements
are run in order over an environment (name -> ``Value``); an ``if``/``else`` runs both arms and
joins what they bind (``join``, with the test and the arm of each input; a ``try``'s ``else`` runs after its body), a loop body runs once
and joins with what came before it, a ``return``/``raise``/``break``/``continue`` ends its arm.
Spellings are normalised here, once:

- ``a @ b``, ``torch.matmul``/``bmm``/``mm``, ``x.matmul(y)``, ``torch.einsum``/``einops.einsum``
  (any layout, ``...``, an f-string whose parts are constants, the two operands in one list) are
  ``contract`` over named axes
  (xformers' ``masked_matmul(a, b, m)``: ``contract``, then ``add`` of ``m``; a function-local import is read);
- ``F.softmax``/``torch.softmax``/``x.softmax``, an ``nn.Softmax`` attribute (alone or in an
  ``nn.Sequential``), a local alias (``softmax = torch.softmax if c else F.softmax``) are
  ``softmax`` over one axis (``dim=2`` of a 3-D tensor is its last axis); ``transpose``/``permute``/``.mT``/``.T`` are ``relabel`` (the same axes, reordered);
  ``view``/``reshape``/``rearrange``/``flatten`` are ``reshape`` (axes no longer known), but a
  ``rearrange`` that only reorders axes (``"b i j -> b j i"``) is ``relabel``, and
  ``unsqueeze(d)``/``squeeze(d)`` keep the other axes (``axes.squeezed``);
- ``* s``/``/ s`` are ``scale`` (``torch.mul``/``s.div(d)``... too: ``arithmetic_calls.py``); ``masked_fill(_)`` is ``fill`` (its value a ``constant``
  when one can be computed: ``-torch.finfo(x.dtype).max`` held in a local, ``float('-inf')``,
  a module constant, a helper that returns one, ``float("-1e20")``); ``+`` is ``add``;
- ``x[h:] = x[h:].softmax(-1)`` then ``x[:h] = ...`` is ``softmax`` of ``x`` (``writes.py``);
- ``F.dropout``/``nn.Dropout`` are ``dropout``, ``.float()``/``.to(...)``/``.type(...)`` ``cast``,
  ``F.scaled_dot_product_attention`` ``attention``; ``baddbmm`` and ``amax``/``max``/``logsumexp``/``sum``
  over one axis are composed of these (``compound.py``: ``contract``, ``scale``, ``add``; ``reduce``),
  and so is a softmax written out (``e / e.sum(-1, keepdim=True)`` of ``e = x.exp()``: ``softmax``);
- a same-file function or method is run with its arguments bound (``helper``: what it returns
  in terms of its arguments); an attribute or local holding a function (``partial(F.softmax,
  dim=-1)``) is that function's call (``attribute_calls.py``); an ``nn`` layer attribute is ``linear``/``norm``/``activation``/
  ``module`` (one of unknown kind, or a callable argument, keeps its input's axes: a same-shaped step, conservatively).

Each use of a value is recorded (``uses``: the value or sink that reads it: ``return``, ``store``,
``opaque``, ``meta`` for ``.shape``, ``test`` for an ``if``): a question can say what escapes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import libcst as cst

from torchmemlint.analysis.arithmetic_calls import arithmetic_call, in_place_step, OPERATORS
from torchmemlint.analysis.attribute_calls import attribute_call, listed_layer, partial_call
from torchmemlint.analysis.axes import Axis, cat_layout, implicit_softmax_dim, joined as _joined, rearranged_axes, relabel, squeezed, tensorish as _tensorish
from torchmemlint.analysis.compound import COMPOSED, compound_value, written_softmax
from torchmemlint.analysis.einsum import einsum_value, float_text, int_of as _int_of, literal_number as _number, parse_rearrange, rearranged, spec_axes as _spec_axes, string_info
from torchmemlint.analysis.fields import LocalFields, opaque, starred_arguments
from torchmemlint.analysis.helper_runs import flag_truth, inherited_method, run_helper
from torchmemlint.analysis.mapped import comprehension, mapped_call
from torchmemlint.analysis.named_attributes import got_attribute
from torchmemlint.analysis.sizes import sized_call
from torchmemlint.analysis.writes import slice_write
from torchmemlint.analysis.activation_calls import ACTIVATION_METHODS, ACTIVATION_MODULES, activation_value
from torchmemlint.tree import walk

SOFTMAX = frozenset({"torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax", "torch.special.softmax"})
MATMUL = frozenset({"torch.matmul", "torch.bmm"})
EINSUM = frozenset({"torch.einsum", "einops.einsum", "opt_einsum.contract"})
DROPOUT = frozenset({"torch.nn.functional.dropout", "torch.dropout"})
SDPA = frozenset({"torch.nn.functional.scaled_dot_product_attention"})
CASTS = frozenset({"to", "type_as", "type", "float", "half", "bfloat16", "double"})
RESHAPES = frozenset({"view", "reshape", "flatten", "unflatten", "unsqueeze", "squeeze", "expand", "repeat", "view_as", "reshape_as", "expand_as"})
KEEPS_AXES = frozenset({"contiguous", "clone", "detach", "requires_grad_"})
META = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "size", "dim", "numel", "stride", "data_ptr"})
NEW_TENSORS = frozenset(f"new_{kind}" for kind in ("zeros", "ones", "empty", "full", "tensor"))  # the receiver's dtype and device only
LIKE = frozenset(f"torch.{kind}_like" for kind in ("zeros", "ones", "empty", "full", "rand", "randn", "randint"))  # x's layout only
KNOWN_LIBRARIES = ("torch.", "math.", "numpy.", "einops.", "builtins.", "functools.", "operator.")
NUMBER_BUILTINS = frozenset({"float", "int", "len"})  # what they return is a Python number, not a tensor


@dataclass(eq=False)
class Value:
    op: str
    inputs: Tuple["Value", ...] = ()
    node: Optional[cst.CSTNode] = None  # the expression that made it
    statement: Optional[cst.CSTNode] = None  # the statement it was made in
    function: Optional[cst.FunctionDef] = None
    axes: Optional[Tuple[Optional[Axis], ...]] = None  # the trailing axes, when known
    rank: Optional[int] = None  # the number of axes, when known
    info: Dict[str, Any] = field(default_factory=dict)

    def axis(self, dim: Optional[int]) -> Optional[Axis]:
        """The axis at index ``dim`` (negative from the end, or from the start when the rank
        is known), None when not known."""
        if dim is None or self.axes is None:
            return None
        if dim >= 0:
            if self.rank is None:
                return None
            dim -= self.rank
        return self.axes[dim] if -len(self.axes) <= dim < 0 else None

    def position(self, axis: Axis) -> Optional[int]:
        """The negative index of ``axis`` in this value, None when it is not one of its known axes."""
        for offset, mine in enumerate(reversed(self.axes or ())):
            if mine is axis:
                return -1 - offset
        return None


class Use(NamedTuple):
    value: Value
    consumer: Union[Value, str]  # a value, or a sink: return, store, opaque, meta, test
    name: Optional[cst.Name] = None  # the name read, when the use was through one
    statement: Optional[cst.CSTNode] = None  # a sink's statement (in a helper run: the call's)


Environment = Dict[str, Value]


class _Ended(Exception):
    """Every path through the statements run so far ended (return, raise, break)."""


class FileValues:
    """The value graphs of one file's functions, each built on first need
    (``FileAnalysis.values``), and what they share: the file's functions, methods and
    module-level constants."""

    def __init__(self, analysis: Any) -> None:  # a FileAnalysis (file.py imports this module)
        self.analysis = analysis
        self.bindings = analysis.bindings
        self.resolver = analysis.resolver
        self._graphs: Dict[int, FunctionValues] = {}
        self._ordered: Optional[List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]]] = None
        self._owners: Dict[int, Optional[cst.ClassDef]] = {}
        self._functions: Dict[str, cst.FunctionDef] = {}
        self._constants: Dict[str, Optional[cst.BaseExpression]] = {}
        self._classes: Dict[str, cst.ClassDef] = {}
        for statement in analysis.module.body:
            if type(statement) is cst.FunctionDef:
                self._functions[statement.name.value] = statement
            elif type(statement) is cst.ClassDef:
                self._classes[statement.name.value] = statement
            elif type(statement) is cst.SimpleStatementLine:
                for small in statement.body:
                    if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) is cst.Name:
                        name = small.targets[0].target.value  # type: ignore[attr-defined]
                        self._constants[name] = None if name in self._constants else small.value  # (twice: no one value)

    def close(self) -> None:
        """Drop the graphs, which refer back to this file (``FileAnalysis.close``)."""
        self.__dict__.clear()

    def functions(self) -> List[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]]:
        """Every function of the file, in order, with the class it is directly a method of."""
        if self._ordered is None:
            index = self.analysis.index
            order, scope = index.order, index.scope
            self._ordered = []
            for here in index.positions(cst.FunctionDef):
                inside = scope[here]
                owner = order[inside] if inside >= 0 and type(order[inside]) is cst.ClassDef else None
                self._owners[id(order[here])] = owner  # type: ignore[assignment]
                self._ordered.append((order[here], owner))  # type: ignore[arg-type]
        return self._ordered

    def of(self, function: cst.FunctionDef) -> "FunctionValues":
        """The value graph of ``function`` (built once)."""
        graph = self._graphs.get(id(function))
        if graph is None:
            self.functions()
            graph = self._graphs[id(function)] = FunctionValues(self, function, self._owners.get(id(function)))
        return graph

    def function_named(self, name: str) -> Optional[cst.FunctionDef]:
        return self._functions.get(name) if self.bindings.qualify(cst.Name(name)) is None else None

    def method(self, classdef: Optional[cst.ClassDef], name: str, inherited: bool = False, depth: int = 0) -> Optional[cst.FunctionDef]:
        """The method ``name`` of ``classdef`` (``inherited``: or the one it inherits from a base
        class of this file: ``class RelAttention(Attention)`` calling ``self.attend(...)`` defined
        in ``Attention``)."""
        if classdef is None or type(classdef.body) is not cst.IndentedBlock:
            return None
        for statement in classdef.body.body:
            if type(statement) is cst.FunctionDef and statement.name.value == name:
                return statement
        return inherited_method(self, classdef, name, depth) if inherited else None

    def attribute_parts(self, classdef: Optional[cst.ClassDef], name: str) -> Optional[List[Any]]:
        """The layers ``self.<name>(x)`` runs (``ClassModel.attribute_sequence``)."""
        if classdef is None:
            return None
        return self.analysis.class_model(classdef).attribute_sequence(name)

    def module_value(self, node: cst.Name, graph: "FunctionValues") -> Value:
        """A name the function does not bind: an import, a same-file function, a constant (a
        number, or a string: ``_EINSUM_QK = "bhld,bhmd->bhlm"``)."""
        qualified = self.bindings.qualify(node)
        if qualified is not None:
            if qualified in ("math.inf", "numpy.inf", "torch.inf"):
                return graph._new("constant", node=node, info={"number": math.inf})
            return graph._new("global", node=node, info={"qualified": qualified})
        function = self._functions.get(node.value)
        if function is not None:
            return graph._new("function", node=node, info={"define": function})
        constant = self._constants.get(node.value)
        if constant is not None and type(constant) in (cst.Integer, cst.Float, cst.UnaryOperation, cst.SimpleString, cst.ConcatenatedString):
            return graph.expression(constant, {})
        return graph._new("global", node=node, info={"qualified": None, "name": node.value})


class FunctionValues:
    """The value graph of one function (see the module doc)."""

    def __init__(
        self, file: FileValues, function: cst.FunctionDef, classdef: Optional[cst.ClassDef],
        bound: Optional[Environment] = None, depth: int = 0, uses: Optional[List[Use]] = None,
    ) -> None:
        self.file = file
        self.function, self.depth = function, depth
        self.values: List[Value] = []
        self.inlined: List[Value] = []  # the values of the same-file helpers it ran (``_helper``), with their own ``function``
        self.uses: List[Use] = [] if uses is None else uses
        self.returns: List[Value] = []
        self.names: Dict[int, Value] = {}  # id(a cst.Name read) -> the value it read
        self.results: Dict[int, Value] = {}  # id(an assignment or expression statement) -> its value
        self.snapshots: Dict[int, Environment] = {}  # id(simple statement) -> names bound before it
        self.reliable = file.analysis.flow(function).reliable
        self._consumers: Optional[Dict[int, List[Union[Value, str]]]] = None
        self._statement: Optional[cst.CSTNode] = None
        params = function.params
        first = params.params[0].name.value if params.params else None  # a method, or one outside its class: ``def f(self, x)``
        self.self_name, self.classdef = (first if classdef is not None or first == "self" else None), classdef
        self.fields = LocalFields(function, self.self_name, Use, META)  # ``s.features = ...`` (``fields.py``)
        env: Environment = {}
        for param in (*params.posonly_params, *params.params, *params.kwonly_params):
            name = param.name.value
            if bound is not None and name in bound:
                env[name] = bound[name]
            elif bound is not None and param.default is not None:
                env[name] = self.expression(param.default, {})
            else:
                env[name] = self._new("argument", node=param.name, info={"name": name})
        for star in (params.star_arg, params.star_kwarg):
            if isinstance(star, cst.Param):
                env[star.name.value] = self._new("argument", node=star.name, info={"name": star.name.value})
        if self.reliable:
            body = function.body
            try:
                self._block(_statements(body), env)
            except _Ended:
                pass

    # -- values --------------------------------------------------------------------------------
    def _new(self, op: str, inputs: Sequence[Value] = (), node: Optional[cst.CSTNode] = None,
             axes: Optional[Tuple[Optional[Axis], ...]] = None, rank: Optional[int] = None,
             info: Optional[Dict[str, Any]] = None) -> Value:
        value = Value(op, tuple(inputs), node, self._statement, self.function, axes, rank, info or {})
        self.values.append(value)
        for source in value.inputs:
            self.uses.append(Use(source, value))
        return value

    def _same(self, op: str, source: Value, node: cst.CSTNode, inputs: Sequence[Value] = (), **info: Any) -> Value:
        """A value of the shape of ``source`` (an elementwise step)."""
        return self._new(op, (source, *inputs), node, source.axes, source.rank, info)

    def _sink(self, value: Value, kind: str) -> None:
        self.uses.append(Use(value, kind, None, self._statement))

    def consumers(self, value: Value) -> List[Union[Value, str]]:
        """What reads ``value``: the values made from it and sinks (see the module doc)."""
        if self._consumers is None:
            self._consumers = {}
            for use in self.uses:
                self._consumers.setdefault(id(use.value), []).append(use.consumer)
        return self._consumers.get(id(value), [])

    # -- statements ----------------------------------------------------------------------------
    def _block(self, statements: Sequence[cst.CSTNode], env: Environment) -> None:
        for statement in statements:
            self._run(statement, env)

    def _suite(self, suite: cst.BaseSuite, env: Environment) -> Optional[Environment]:
        """Run a suite on a copy of ``env``; None when every path through it ends."""
        inner = dict(env)
        try:
            self._block(_statements(suite), inner)
        except _Ended:
            return None
        return inner

    def _run(self, statement: cst.CSTNode, env: Environment) -> None:
        self._statement = statement
        kind = type(statement)
        if kind in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            self.snapshots[id(statement)] = dict(env)
            for small in statement.body:  # type: ignore[attr-defined]
                self._statement = statement
                self._small(small, env)
        elif kind is cst.If:
            test = self.expression(statement.test, env)  # type: ignore[attr-defined]
            self._sink(test, "test")
            known = flag_truth(test) if self.depth else None
            if known is not None:  # a helper run with a flag its caller passes (``split(x, k=True)``): that arm only
                orelse = statement.orelse  # type: ignore[attr-defined]
                if known:
                    self._block(_statements(statement.body), env)  # type: ignore[attr-defined]
                elif type(orelse) is cst.Else:
                    self._block(_statements(orelse.body), env)
                elif orelse is not None:
                    self._run(orelse, env)
                return
            body = self._suite(statement.body, env)  # type: ignore[attr-defined]
            orelse = statement.orelse  # type: ignore[attr-defined]
            other: Optional[Environment]
            if type(orelse) is cst.If:
                other = dict(env)
                try:
                    self._run(orelse, other)
                except _Ended:
                    other = None
            elif type(orelse) is cst.Else:
                other = self._suite(orelse.body, env)
            else:
                other = dict(env)
            self._statement = statement
            self._join(env, [(body, True), (other, False)], statement)
        elif kind in (cst.For, cst.While):
            if kind is cst.For:
                element = self._new("element", [self.expression(statement.iter, env)], statement.iter)  # type: ignore[attr-defined]
                self._bind(statement.target, element, env)  # type: ignore[attr-defined]
            else:
                self._sink(self.expression(statement.test, env), "test")  # type: ignore[attr-defined]
            body = self._suite(statement.body, env)  # type: ignore[attr-defined]
            self._statement = statement
            self._join(env, [(body, None), (dict(env), None)], statement)
            if statement.orelse is not None:  # type: ignore[attr-defined]
                self._block(_statements(statement.orelse.body), env)  # type: ignore[attr-defined]
        elif kind is cst.With:
            for item in statement.items:  # type: ignore[attr-defined]
                value = self.expression(item.item, env)
                if item.asname is not None:
                    self._bind(item.asname.name, value, env)
            self._block(_statements(statement.body), env)  # type: ignore[attr-defined]
        elif kind in (cst.Try, cst.TryStar):
            done = self._suite(statement.body, env)  # type: ignore[attr-defined]
            if done is not None and statement.orelse is not None:  # type: ignore[attr-defined]
                done = self._suite(statement.orelse.body, done)  # ``else:`` runs after the body  # type: ignore[attr-defined]
            arms: List[Tuple[Optional[Environment], Optional[bool]]] = [(done, None)]
            for handler in statement.handlers:  # type: ignore[attr-defined]
                arms.append((self._suite(handler.body, env), None))
            self._statement = statement
            self._join(env, arms, statement)
            if statement.finalbody is not None:  # type: ignore[attr-defined]
                self._block(_statements(statement.finalbody.body), env)  # type: ignore[attr-defined]
        elif kind in (cst.FunctionDef, cst.ClassDef):
            opaque(self, statement, env)
            env[statement.name.value] = self._new("function", node=statement, info={"define": statement, "scope": dict(env)})  # type: ignore[attr-defined]  (the names its body may read)
        else:
            opaque(self, statement, env)

    def _join(self, env: Environment, arms: List[Tuple[Optional[Environment], Optional[bool]]], statement: cst.CSTNode) -> None:
        live = [(arm, branch) for arm, branch in arms if arm is not None]
        if not live:
            raise _Ended()
        test = statement.test if type(statement) is cst.If else None  # type: ignore[attr-defined]
        names = set().union(*(arm.keys() for arm, _ in live))
        for name in names:
            found = [(arm[name], branch) for arm, branch in live if name in arm]
            first = found[0][0]
            if all(value is first for value, _ in found):
                env[name] = first
                continue
            axes, rank = _joined([v for v, _ in found])
            env[name] = self._new("join", [v for v, _ in found], statement, axes, rank, {"test": test, "branches": tuple(b for _, b in found)})

    def _small(self, small: cst.BaseSmallStatement, env: Environment) -> None:
        kind = type(small)
        if kind is cst.Assign:
            value = self.results[id(small)] = self.expression(small.value, env)  # type: ignore[attr-defined]
            for target in small.targets:  # type: ignore[attr-defined]
                self._bind(target.target, value, env)
        elif kind is cst.AnnAssign:
            if small.value is not None:  # type: ignore[attr-defined]
                self._bind(small.target, self.expression(small.value, env), env)  # type: ignore[attr-defined]
        elif kind is cst.AugAssign:
            target = small.target  # type: ignore[attr-defined]
            current = self.expression(target, env)
            other = self.expression(small.value, env)  # type: ignore[attr-defined]
            operator = type(small.operator).__name__[: -len("Assign")]  # type: ignore[attr-defined]
            value = self.results[id(small)] = self._binary(operator, current, other, small, small.value)  # type: ignore[attr-defined]
            self._bind(target, value, env)
        elif kind is cst.Expr:
            call = small.value  # type: ignore[attr-defined]
            value = self.results[id(small)] = self.expression(call, env)
            if value.op == "activation" and value.info.get("inplace") and type(value.info.get("operand")) is cst.Name:
                self._bind(value.info["operand"], value, env)  # ``F.relu_(x)``, ``x.relu_()``: ``x`` is now the result
            elif (  # ``x.masked_fill_(m, v)``, ``x.mul_(s)``: ``x`` is now that value
                type(call) is cst.Call and type(call.func) is cst.Attribute and type(call.func.value) is cst.Name
                and call.func.attr.value.endswith("_") and value.op not in ("call", "meta")
            ):
                env[call.func.value.value] = value
                value.info.setdefault("names", []).append(call.func.value.value)
            else:
                self._sink(value, "opaque")
        elif kind is cst.Return:
            if small.value is not None:  # type: ignore[attr-defined]
                value = self.expression(small.value, env)  # type: ignore[attr-defined]
                self.returns.append(value)
                self._sink(value, "return")
            raise _Ended()
        elif kind in (cst.Raise, cst.Break, cst.Continue):
            opaque(self, small, env)
            raise _Ended()
        elif kind is cst.ImportFrom and isinstance(small.names, Sequence) and small.module is not None and not small.relative:  # type: ignore[attr-defined]
            for alias in small.names:  # ``from xformers.ops import masked_matmul`` inside the function
                qualified = "%s.%s" % (cst.Module([]).code_for_node(small.module), alias.name.value)  # type: ignore[attr-defined]
                env[(alias.asname.name if alias.asname else alias.name).value] = self._new("global", node=alias, info={"qualified": qualified})  # type: ignore[union-attr]
        elif kind is cst.Del:
            for name in (n for n in walk(small) if type(n) is cst.Name):
                env.pop(name.value, None)
        elif kind is cst.Assert:  # a check, as an ``if``'s test: ``assert mask.shape == s.shape`` reads sizes
            self._sink(self.expression(small.test, env), "test")  # type: ignore[attr-defined]
            if small.msg is not None:  # type: ignore[attr-defined]
                opaque(self, small.msg, env)  # type: ignore[attr-defined]
        else:
            opaque(self, small, env)

    def _bind(self, target: cst.BaseExpression, value: Value, env: Environment) -> None:
        kind = type(target)
        if kind is cst.Name:
            self.fields.drop(target.value, env)  # type: ignore[attr-defined]
            env[target.value] = value  # type: ignore[attr-defined]
            value.info.setdefault("names", []).append(target.value)  # type: ignore[attr-defined]
        elif kind in (cst.Tuple, cst.List):
            elements = target.elements  # type: ignore[attr-defined]
            parts = value.info.get("elements") if value.op == "tuple" else None
            for position, element in enumerate(elements):
                if type(element) is cst.StarredElement:
                    self._bind(element.value, self._new("element", [value], element), env)
                elif parts is not None and len(parts) == len(elements):
                    self._bind(element.value, parts[position], env)
                else:
                    self._bind(element.value, self._new("element", [value], element, info={"index": position}), env)
        elif kind is cst.Subscript and type(target.value) is cst.Name and (  # type: ignore[attr-defined]
            written := slice_write(self, target, value, env)  # type: ignore[arg-type]
        ) is not None:  # ``x[h:] = x[h:].softmax(-1)``: ``x`` is now that value (``writes.py``)
            self._bind(target.value, written, env)  # type: ignore[attr-defined]
        else:  # ``self.x = v``, ``d[k] = v``: stored where this function no longer sees it
            written = self.expression(target, env)
            if kind is cst.Subscript and type(target.value) is cst.Name and target.value.value in env:  # type: ignore[attr-defined]
                value.info.setdefault("into", []).append(env[target.value.value])  # type: ignore[attr-defined]  # ``s[..., 1:] = v``: written into ``s``
                written.info["target"] = True  # the slice written, not read
            self._sink(value, "store")
            self.fields.store(target, value, env)

    # -- expressions ---------------------------------------------------------------------------
    def expression(self, node: cst.BaseExpression, env: Environment) -> Value:
        kind = type(node)
        if kind is cst.Name:
            value = env.get(node.value)  # type: ignore[attr-defined]
            if value is None:
                value = self.file.module_value(node, self)  # type: ignore[arg-type]
            elif node.value in self.fields.bases:  # type: ignore[attr-defined]
                self.fields.whole(self, node, env)  # type: ignore[arg-type]
            self.names[id(node)] = value
            return value
        if kind is cst.Call:
            return self._call(node, env)  # type: ignore[arg-type]
        if kind is cst.BinaryOperation:
            left = self.expression(node.left, env)  # type: ignore[attr-defined]
            right = self.expression(node.right, env)  # type: ignore[attr-defined]
            return self._binary(type(node.operator).__name__, left, right, node, node.right)  # type: ignore[attr-defined]
        if kind is cst.Attribute:
            return self._attribute(node, env)  # type: ignore[arg-type]
        if kind in (cst.Integer, cst.Float):
            return self._new("constant", node=node, info={"number": float(node.evaluated_value)})  # type: ignore[attr-defined]
        if kind is cst.UnaryOperation:
            inner = self.expression(node.expression, env)  # type: ignore[attr-defined]
            if type(node.operator) is cst.Minus and inner.op == "constant" and "number" in inner.info:  # type: ignore[attr-defined]
                return self._new("constant", [inner], node, info={"number": -inner.info["number"]})
            return self._same("unary", inner, node)
        if kind in (cst.Tuple, cst.List):
            parts = [self.expression(e.value, env) for e in node.elements]  # type: ignore[attr-defined]
            return self._new("tuple", parts, node, info={"elements": parts})
        if kind is cst.IfExp:
            self._sink(self.expression(node.test, env), "test")  # type: ignore[attr-defined]
            body, orelse = self.expression(node.body, env), self.expression(node.orelse, env)  # type: ignore[attr-defined]
            axes, rank = _joined([body, orelse])
            return self._new("join", [body, orelse], node, axes, rank, {"test": node.test, "branches": (True, False)})  # type: ignore[attr-defined]
        if kind is cst.Subscript:
            base = self.expression(node.value, env)  # type: ignore[attr-defined]
            for element in node.slice:  # ``x[:, :s.size(-1)]`` reads only the size of ``s``  # type: ignore[attr-defined]
                index = element.slice
                for part in [index.value] if type(index) is cst.Index else [p for p in (index.lower, index.upper, index.step) if p is not None]:  # type: ignore[attr-defined]
                    self._sink(self.expression(part, env), "opaque")
            if base.op == "tuple" and len(node.slice) == 1 and type(node.slice[0].slice) is cst.Index:  # type: ignore[attr-defined]
                index = _number(node.slice[0].slice.value)  # type: ignore[attr-defined]
                if index is not None and int(index) == index and -len(base.inputs) <= index < len(base.inputs):
                    return base.inputs[int(index)]
            return self._new("index", [base], node)
        if kind in (cst.SimpleString, cst.ConcatenatedString, cst.FormattedString):
            return self._new("constant", node=node, info=string_info(node, env, self))
        if kind is cst.Comparison:  # ``a.shape == s.shape``, ``x.dim() == 4``: sizes compared, the tensors not read
            parts = [self.expression(part, env) for part in (node.left, *(c.comparator for c in node.comparisons))]  # type: ignore[attr-defined]
            if all(part.op in ("meta", "constant") or not _tensorish(part) and part.op in ("element", "index") for part in parts):
                return self._new("meta", parts, node)
        if (made := comprehension(self, node, env)) is not None:
            return made  # ``(f(t) for t in (q, k, v))``, ``[f(s) for s in x.split(n, 1)]`` (``mapped.py``)
        opaque(self, node, env)
        return self._new("meta" if kind in (cst.Comparison, cst.BooleanOperation) else "unknown", node=node)

    def _attribute(self, node: cst.Attribute, env: Environment) -> Value:
        name = node.attr.value
        qualified = self.file.bindings.qualify(node)
        if qualified is not None and type(node.value) is not cst.Call:
            if qualified in ("math.inf", "numpy.inf", "torch.inf"):
                return self._new("constant", node=node, info={"number": math.inf})
            return self._new("global", node=node, info={"qualified": qualified})
        if self.fields.stored and (field := self.fields.read(self, node, env)) is not None:
            return field
        base = self.expression(node.value, env)
        if name in ("mT", "T"):
            axes = base.axes[:-2] + (base.axes[-1], base.axes[-2]) if base.axes is not None and len(base.axes) >= 2 else None
            return self._new("relabel", [base], node, axes, base.rank, {"swap": True, "dims": (-1, -2), "transpose": True})
        if name in ("max", "min") and base.op == "finfo":
            return self._new("constant", [base], node, info={"number": 3.0e38 if name == "max" else -3.0e38})
        if name in META:
            return self._new("meta", [base], node)
        if self.self_name is not None and type(node.value) is cst.Name and node.value.value == self.self_name:
            if name in base.info.get("flags", ()):  # a held module's literal its constructor set (``attribute_calls.constructor_flags``)
                literal = base.info["flags"][name]
                if type(literal) is cst.Name:  # ``True``/``False``
                    return self._new("global", [base], node, info={"truth": literal.value == "True"})
                return self.expression(literal, {})
            return self._new("attribute", [base], node, info={"name": name})
        return self._new("member", [base], node, info={"name": name})

    def _binary(self, operator: str, left: Value, right: Value, node: cst.CSTNode, right_node: cst.CSTNode,
                left_node: Optional[cst.CSTNode] = None) -> Value:  # (``node``: also a call spelling it)
        left_node = getattr(node, "left", None) if left_node is None else left_node
        if operator == "MatrixMultiply":
            return self._contract(left, right, node, MATMUL_SPECS, "@")
        numbers = [v.info.get("number") for v in (left, right)]
        if left.op == "constant" and right.op == "constant" and None not in numbers:
            combine = {"Add": lambda a, b: a + b, "Subtract": lambda a, b: a - b, "Multiply": lambda a, b: a * b}.get(operator)
            if combine is not None:
                return self._new("constant", [left, right], node, info={"number": combine(*numbers)})  # type: ignore[misc]
        if operator == "Divide" and (softmax := written_softmax(self, left, right, node)) is not None:
            return softmax  # ``e / e.sum(-1, keepdim=True)`` of ``e = x.exp()`` (compound.py)
        if operator in ("Multiply", "Divide", "Add", "Subtract") and not (_tensorish(left) or _tensorish(right)):
            return self._same("arith", left, node, [right], scalar=True)  # ``1.0 / math.sqrt(d)``: a number
        if operator in ("Multiply", "Divide"):
            if operator == "Divide" and not _tensorish(left) and _tensorish(right):
                return self._same("arith", right, node, [left])
            tensor, factor = (left, right) if _tensorish(left) or not _tensorish(right) else (right, left)
            factor_node = right_node if tensor is left else left_node
            return self._same("scale", tensor, node, [factor], divide=operator == "Divide", factor=factor_node)
        if operator in ("Add", "Subtract"):  # the tensor whose axes are known, when one's are: ``bias(s) + s``
            tensor, other = (left, right) if _tensorish(left) and (left.axes is not None or right.axes is None) or not _tensorish(right) else (right, left)
            other_node = right_node if tensor is left else left_node
            info = {"reversed": True} if operator == "Subtract" and tensor is not left else {}  # ``c - s``: ``-s + c``
            return self._same("add", tensor, node, [other], subtract=operator == "Subtract", other=other_node, **info)
        return self._same("arith", left, node, [right], scalar=not (_tensorish(left) or _tensorish(right)))

    # -- calls ---------------------------------------------------------------------------------
    def _call(self, node: cst.Call, env: Environment) -> Value:
        func = node.func
        qualified = self.file.bindings.qualify(func)
        if (made := sized_call(self, node, qualified, env) or mapped_call(self, node, qualified, env)) is not None:
            return made  # ``torch.ones(*shape(s))``: sizes read (``sizes.py``); ``map(lambda t: ..., (q, k))`` (``mapped.py``)
        method = func.attr.value if type(func) is cst.Attribute else got_attribute(func, self.self_name)  # ``getattr(self, f"act_{i}")(x)``
        on_self = method is not None and self.self_name is not None and (type(func) is cst.Call or (
            type(func.value) is cst.Name and func.value.value == self.self_name and func.value.value not in ("torch",)  # type: ignore[attr-defined]
        ))
        receiver: Optional[Value] = None
        if method is not None and qualified is None and type(func) is cst.Attribute:
            receiver = self.expression(func.value, env)  # type: ignore[attr-defined]
        callee = env.get(func.value) if type(func) is cst.Name else None  # type: ignore[attr-defined]
        if type(func) is cst.Call and (made := self.expression(func, env)).op == "layer":
            callee = made  # ``nn.Softmax(dim=-1)(s)``: the layer built and run at once
        positional = [self.expression(a.value, env) for a in node.args if a.keyword is None and not a.star]
        keywords = {a.keyword.value: self.expression(a.value, env) for a in node.args if a.keyword is not None}
        keywords.update(starred_arguments(self, node.args, env))  # ``f(**kw)``, ``kw = dict(query=q)``: ``query=q``
        starred = any(a.star for a in node.args)
        if callee is not None:
            self.names[id(func)] = callee
            return self._call_value(callee, node, positional, keywords)
        tensorish = len(positional) == 1 and _tensorish(positional[0])
        if on_self and not starred and (made := attribute_call(self, method, node, positional, keywords, tensorish)) is not None:  # type: ignore[arg-type]
            return made  # a method, the layers or the function ``self.<method>`` holds, a module (``attribute_calls.py``)
        if len(positional) == 1 and not keywords and (listed := listed_layer(self.file, self.classdef, func, self.self_name)) is not None:
            return self._layers([listed], positional[0], node, None)  # ``self.q[i](x)`` of ``nn.ModuleList([nn.Linear(...) ...])``
        if qualified is None and type(func) is cst.Name:
            helper = self.file.function_named(func.value)
            if helper is not None and not starred:
                return self._helper(helper, node, positional, keywords)
            if func.value == "float" and positional and (number := float_text(positional[0].info.get("text"))) is not None:
                return self._new("constant", node=node, info={"number": number})  # ``float("-inf")``, ``float("-1e20")``
        if receiver is not None:
            return self._method(method, receiver, node, positional, keywords)  # type: ignore[arg-type]
        return self._function(qualified or "", node, positional, keywords)

    def _function(self, name: str, node: cst.Call, positional: List[Value], keywords: Dict[str, Value]) -> Value:
        if (activation := activation_value(self, name, node, positional, keywords)) is not None:
            return activation
        if name.startswith("torch.") and (compound := compound_value(self, name[6:], node, None, positional, keywords)) is not None:
            return compound  # ``torch.baddbmm``, ``torch.amax``: composed of the graph's operations
        if name.startswith("torch.") and (spelled := arithmetic_call(node, name[6:], None, positional, keywords)) is not None:
            return self._binary(*spelled[:3], node, spelled[4], spelled[3])  # ``torch.mul(s, m)``: ``s * m``
        if name in SOFTMAX and positional:
            return self._softmax(positional[0], node, positional[1:], keywords)
        if name in MATMUL and len(positional) == 2 and not keywords:
            return self._contract(positional[0], positional[1], node, MATMUL_SPECS, name)
        if name == "torch.mm" and len(positional) == 2 and not keywords:  # 2-D matrices only
            return self._contract(positional[0], positional[1], node, MM_SPECS, name)
        if name in EINSUM:
            return einsum_value(self, node, positional, name)
        if name == "xformers.ops.masked_matmul" and len(positional) == 3 and not keywords:  # ``a @ b``, then the mask added
            product = self._contract(positional[0], positional[1], node, MATMUL_SPECS, name, (node.args[0].value, node.args[1].value))
            return self._same("add", product, node, [positional[2]], other=node.args[2].value)
        if name in DROPOUT and positional:
            return self._same("dropout", positional[0], node, [*positional[1:], *keywords.values()], call=node)
        if name in SDPA:
            return self._new("attention", [*positional, *keywords.values()], node)
        if name == "torch.finfo":
            return self._new("finfo", positional, node)
        short = name.rsplit(".", 1)[-1]
        if name.startswith("torch.") and short in ("transpose", "permute", "softmax") and positional:
            return self._method(short, positional[0], node, positional[1:], keywords)
        if name == "einops.rearrange" and len(positional) > 1 and isinstance(positional[1].info.get("text"), str):
            how = rearranged(positional[1].info["text"])
            if how is not None and how[0] is not None:  # ``"b i j -> b j i"``: a permute
                return relabel(self, positional[0], node, how[0], transpose=False)
            if how is not None:  # axes grouped or split: ``swap``, the features moved past the positions
                groups = parse_rearrange(positional[1].info["text"])  # ``"b (w n) r -> b w n r"`` keeps ``r``; ``"(b w) ..."`` merged back is ``b w``'s axis
                return self._new("reshape", [*positional, *keywords.values()], node, rearranged_axes(positional[0], groups), len(groups[1]) if groups else None, {"qualified": name, "swap": how[1]})
        if name.startswith("einops."):
            return self._new("reshape", [*positional, *keywords.values()], node, info={"qualified": name})
        if name in LIKE and positional:  # ``torch.zeros_like(s)``: a fresh tensor of s's layout; no read of its values
            return self._new("call", [*positional[1:], *keywords.values()], node, positional[0].axes, positional[0].rank, {"qualified": name})
        if name in ("torch.cat", "torch.stack", "torch.concat"):
            return self._new("cat", [*positional, *keywords.values()], node, *cat_layout(name, positional, keywords))  # a ``CatAxis`` at ``dim``
        layer = self.file.resolver.layer(node)
        if layer is not None:
            return self._new("layer", [*positional, *keywords.values()], node, info={"layer": layer})
        if name.startswith("math.") or (not name and type(node.func) is cst.Name and node.func.value in NUMBER_BUILTINS):  # type: ignore[attr-defined]
            return self._new("call", [*positional, *keywords.values()], node, info={"qualified": name or None, "scalar": True})
        if not name.startswith(KNOWN_LIBRARIES) and positional and _tensorish(positional[0]):
            # a function not defined here, on a tensor: assumed to keep its shape (conservatively);
            # the first argument whose axes are known when the first's are not (``pe(pos, scores, q)``)
            main = next((p for p in positional if p.axes is not None and _tensorish(p)), positional[0])
            rest = [p for p in positional if p is not main]
            return self._new("helper", [main, *rest, *keywords.values()], node, main.axes, main.rank, {"assumed": True})
        return self._new("call", [*positional, *keywords.values()], node, info={"qualified": name or None})

    def _call_value(self, callee: Value, node: cst.Call, positional: List[Value], keywords: Dict[str, Value]) -> Value:
        """``alias(x)`` where ``alias`` is a local bound to a function (or to either of two); a local ``class`` is not run."""
        if callee.op == "join":
            results = [self._call_value(arm, node, positional, keywords) for arm in callee.inputs]
            axes, rank = _joined(results)
            return self._new("join", results, node, axes, rank, {"test": callee.info.get("test"), "branches": callee.info.get("branches")})
        if callee.op == "global" and callee.info.get("qualified"):
            return self._function(callee.info["qualified"], node, positional, keywords)
        if callee.op == "function" and type(callee.info.get("define")) is cst.FunctionDef and type(callee.node) is not cst.FunctionDef:
            return self._helper(callee.info["define"], node, positional, keywords)
        if callee.op == "layer" and len(positional) == 1:
            return self._layers([callee.info["layer"]], positional[0], node, None)
        if callee.op == "call" and (made := partial_call(self, callee, node, positional, keywords)) is not None:
            return made  # ``p = partial(F.softmax, dim=-1)`` before
        if callee.op == "argument" and len(positional) == 1 and not keywords and _tensorish(positional[0]):
            return self._same("module", positional[0], node, [callee], assumed=True)  # a callable passed in: same-shaped, conservatively
        return self._new("call", [callee, *positional, *keywords.values()], node)

    def _method(self, method: str, receiver: Value, node: cst.Call, positional: List[Value], keywords: Dict[str, Value]) -> Value:
        numbers = [_int(v) for v in positional]
        if method in ACTIVATION_METHODS:  # ``x.relu_()``: an activation that overwrites ``x``
            return self._same("activation", receiver, node, positional, method=method, inplace=True, operand=node.func.value)  # type: ignore[attr-defined]
        if method == "softmax":
            return self._softmax(receiver, node, positional, keywords)
        if method in COMPOSED and (compound := compound_value(self, method, node, receiver, positional, keywords)) is not None:
            return compound
        if method in ("matmul", "bmm") and len(positional) == 1 and not keywords:
            return self._contract(receiver, positional[0], node, MATMUL_SPECS, method)
        if method == "mm" and len(positional) == 1 and not keywords:
            return self._contract(receiver, positional[0], node, MM_SPECS, method)
        if method in ("masked_fill", "masked_fill_") and len(positional) == 2 and not keywords:
            return self._same("fill", receiver, node, positional, where=node.args[0].value, fill=positional[1], inplace=method.endswith("_"))
        if method in ("transpose", "swapaxes") and len(positional) == 2 and None not in numbers:
            return relabel(self, receiver, node, numbers, transpose=True)  # type: ignore[arg-type]
        if method == "permute" and positional:
            dims = numbers if len(positional) > 1 or positional[0].op != "tuple" else [_int(v) for v in positional[0].inputs]
            if dims and None not in dims:
                return relabel(self, receiver, node, dims, transpose=False)  # type: ignore[arg-type]
        if method == "t" and not positional:  # (a matrix's transpose: ``t()`` takes at most 2-D)
            made = relabel(self, receiver, node, [-2, -1], transpose=True)
            made.rank = made.rank or 2
            return made
        if method in CASTS:
            return self._same("cast", receiver, node, [*positional, *keywords.values()], method=method)
        if method in KEEPS_AXES:
            return self._same("same", receiver, node, positional)
        if (step := in_place_step(method, node, positional, keywords)) is not None:  # ``s.mul_(c)``, ``s.sub_(m)``
            return self._same(step[0], receiver, node, positional, **step[1])
        if method in OPERATORS and _tensorish(receiver) and (spelled := arithmetic_call(node, method, receiver, positional, keywords)) is not None:
            return self._binary(*spelled[:3], node, spelled[4], spelled[3])  # ``s.div(d)``: ``s / d``
        if method in META:
            return self._new("meta", [receiver, *positional], node)
        if method in NEW_TENSORS:  # ``s.new_full(shape, n)``: a fresh tensor of s's dtype and device; no read of its values
            return self._new("call", [*positional, *keywords.values()], node, info={"method": method})
        dim = numbers[0] if len(positional) == 1 and not keywords else (_int(keywords["dim"]) if not positional and list(keywords) == ["dim"] else None)
        if method in ("unsqueeze", "squeeze") and dim is not None:  # the same axes, one more or fewer
            return self._new("reshape", [receiver, *positional, *keywords.values()], node, *squeezed(receiver, method, dim))
        if method in RESHAPES:
            return self._new("reshape", [receiver, *positional, *keywords.values()], node)
        if method in ("chunk", "split", "unbind"):
            return self._new("split", [receiver, *positional], node)
        return self._new("call", [receiver, *positional, *keywords.values()], node, info={"method": method})

    def _softmax(self, source: Value, node: cst.Call, rest: Sequence[Value], keywords: Dict[str, Value]) -> Value:
        dim_value = keywords.get("dim", rest[0] if rest else None)
        dim = _int(dim_value) if dim_value is not None else implicit_softmax_dim(source.rank)
        extra = sorted(set(keywords) - {"dim"}) + (["dtype"] if len(rest) > 1 else [])
        return self._same("softmax", source, node, [*rest, *keywords.values()], dim=dim, axis=source.axis(dim), extra=extra)

    def _contract(self, left: Value, right: Value, node: cst.CSTNode,
                  specs: Tuple[Sequence[str], Sequence[str], Sequence[str]], spelling: str,
                  operands: Optional[Tuple[cst.CSTNode, cst.CSTNode]] = None) -> Value:
        """``out = sum over the labels not in out of left[lspec] * right[rspec]`` (``...``: the
        leading axes, broadcast). ``info["known"]``: the operands' axes at their labels."""
        lspec, rspec, out = specs
        if spelling in ("@", "matmul", "torch.matmul", "mm", "torch.mm") and right.op == "relabel" and right.rank is None and right.info.get("dims") in ((0, 1), (1, 0)):
            right.info["swap"], right.rank = True, 2  # ``q @ k.transpose(0, 1)``: only a matrix's transpose makes sense there
        in_left, in_right = set(lspec) - {"..."}, set(rspec) - {"..."}
        result_axes = []
        for letter in out:
            if letter != "...":
                side = "both" if letter in in_left and letter in in_right else ("left" if letter in in_left else "right")
                result_axes.append(Axis(side))
        rank = None if "..." in out else len(result_axes)
        if rank is None and left.rank is not None and right.rank is not None:
            rank = max(left.rank, right.rank)
        rank = 3 if spelling in ("torch.bmm", "bmm") else rank
        if operands is None and type(node) is cst.BinaryOperation:
            operands = (node.left, node.right)  # type: ignore[attr-defined]
        elif operands is None and type(node) is cst.Call:
            args = [a.value for a in node.args]  # type: ignore[attr-defined]
            operands = (node.func.value, args[0]) if len(args) == 1 else (args[0], args[1])  # type: ignore[attr-defined]
        return self._new("contract", [left, right], node, tuple(result_axes), rank, {
            "spelling": spelling, "specs": (tuple(lspec), tuple(rspec), tuple(out)),
            "contracted": sorted(letter for letter in in_left & in_right if letter not in out),
            "known": (_spec_axes(left, lspec), _spec_axes(right, rspec)), "operands": operands,
        })

    def _layers(self, parts: Sequence[Any], source: Value, node: cst.Call, attribute: Optional[str]) -> Value:
        """``self.x(source)`` where ``self.x`` holds one layer or a Sequential of layers
        (``ClassModel.attribute_sequence``); ``info["layer"]``: (attribute, position, count)."""
        value = source
        for position, part in enumerate(parts):
            layer = getattr(part, "layer", part)
            qualified = getattr(layer, "qualified", None) or ""
            short = qualified.rsplit(".", 1)[-1] if qualified.startswith("torch.nn.") else ""
            where = (attribute, position, len(parts))
            if short == "Softmax":
                dim = None if layer.effective.args else implicit_softmax_dim(value.rank)  # (``nn.Softmax()``: torch's choice)
                for index, arg in enumerate(layer.effective.args):
                    if (arg.keyword is None and index == 0) or (arg.keyword is not None and arg.keyword.value == "dim"):
                        dim = _int_of(_number(arg.value))
                value = self._same("softmax", value, node, dim=dim, axis=value.axis(dim), extra=[], layer=where)
            elif short == "Dropout":
                value = self._same("dropout", value, node, layer=where)
            elif short == "Identity":
                continue
            elif "Norm" in short:
                value = self._same("norm", value, node, layer=where)
            elif qualified in ACTIVATION_MODULES:
                value = self._same("activation", value, node, layer=where)
            elif short:
                value = self._new("linear", [value], node, info={"layer": where, "qualified": qualified})
            else:
                value = self._same("module", value, node, layer=where)
        if value is source:
            value = self._same("same", source, node)
        return value

    def _helper(self, helper: cst.FunctionDef, node: cst.Call, positional: List[Value], keywords: Dict[str, Value], bound_self: bool = False, foreign: Any = None) -> Value:
        """A function run with its arguments bound: the value it returns (``helper_runs.py``; ``foreign``: another file's method)."""
        return run_helper(self, helper, node, positional, keywords, bound_self, bool(positional) and _tensorish(positional[0]), foreign)


MATMUL_SPECS = (("...", "i", "c"), ("...", "c", "j"), ("...", "i", "j"))
MM_SPECS = (("i", "c"), ("c", "j"), ("i", "j"))  # ``torch.mm``: two matrices


def _statements(suite: cst.BaseSuite) -> Sequence[cst.CSTNode]:
    return suite.body if type(suite) is cst.IndentedBlock else [suite]  # type: ignore[return-value]


def _int(value: Optional[Value]) -> Optional[int]:
    return _int_of(value.info.get("number")) if value is not None and value.op == "constant" else None

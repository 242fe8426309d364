"""Activation calls as the value graph normalises them (``analysis/values.py``): which
functions and layers are activations, and for a call, the tensor it runs on and whether it
overwrites it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.tree import walk

from torchmemlint.analysis.dropout_probabilities import zero_probability
from torchmemlint.analysis.layer_lists import enclosing_definitions
from torchmemlint.analysis.syntax import argument, has_star_args, is_staticmethod, literal_bool, literal_number, mentions, path_to, presence_test
from torchmemlint.analysis.vocabulary import INPLACE_FUNCTIONS, INPLACE_METHODS, KIND_BY_FUNCTION, KIND_BY_MODULE, KIND_BY_NAME, NN, Saves

ACTIVATION_FUNCTIONS = frozenset(n for n in (*KIND_BY_FUNCTION, *INPLACE_FUNCTIONS) if "dropout" not in n)
# the ``nn`` activation layers (those with an ``inplace`` switch and the others)
ACTIVATION_MODULES = frozenset(n for n in KIND_BY_MODULE if "Dropout" not in n) | frozenset(
    NN + n for n in ("ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "LeakyReLU", "Mish", "ELU", "Hardswish")
)
ACTIVATION_METHODS = frozenset(INPLACE_METHODS)  # ``x.relu_()``: always in place


def activation_call(name: str, call: cst.Call) -> Optional[Tuple[cst.BaseExpression, Optional[bool]]]:
    """For ``F.leaky_relu(x, 0.1)``, ``F.relu(input=x, inplace=True)``, ``torch.sigmoid_(x)``
    (``name``: the qualified function): the expression it runs on and whether it overwrites it
    (None: not a literal). None for anything else."""
    if name not in ACTIVATION_FUNCTIONS:
        return None
    operand = argument(call, 0, "input")
    if operand is None:
        return None
    if name in INPLACE_FUNCTIONS:
        return operand.value, True
    params = KIND_BY_FUNCTION[name].functional_params
    given = argument(call, params.index("inplace") + 1 if "inplace" in params else None, "inplace")
    if has_star_args(call):
        return operand.value, None
    return operand.value, False if given is None else literal_bool(given.value)


def activation_value(graph: Any, name: str, call: cst.Call, positional: List[Any], keywords: Dict[str, Any]) -> Any:
    """The value graph's ``activation`` value for an activation function call (None for any
    other call): made from the tensor it runs on; ``info["inplace"]``: True, False or None (not
    a literal), ``info["operand"]``: the expression it runs on."""
    found = activation_call(name, call)
    if found is None:
        return None
    source = positional[0] if positional else keywords["input"]
    rest = [v for v in (*positional, *keywords.values()) if v is not source]
    return graph._same("activation", source, call, rest, qualified=name, inplace=found[1], operand=found[0])


def nested_calls(call: cst.Call, resolver, function: Optional[cst.FunctionDef] = None) -> List[cst.Call]:
    """The element constructors and nested Sequentials that ``call``'s flattening covers."""
    found: List[cst.Call] = []
    for arg in call.args:
        value = arg.value
        if arg.star or type(value) is not cst.Call:
            continue
        if resolver.constructor(value) == NN + "Sequential":
            found.append(value)
            found.extend(nested_calls(value, resolver, function))
        elif (layer := resolver.layer(value, function)) is not None:
            found.extend((value, layer.call) if layer.call is not value else (value,))  # ``nn.ELU().to(d)``: ``nn.ELU()``
        elif resolver.qualify(value.func) == "collections.OrderedDict" and value.args:
            pairs = value.args[0].value
            for element in getattr(pairs, "elements", ()):
                pair = element.value
                if type(pair) is cst.Tuple and len(pair.elements) == 2:
                    inner = pair.elements[1].value
                    if type(inner) is cst.Call:
                        found.append(inner)
                        if resolver.constructor(inner) == NN + "Sequential":
                            found.extend(nested_calls(inner, resolver))
    return found


def bound_local(statement: Any, call: cst.Call, function: cst.FunctionDef) -> Optional[Tuple[cst.Name, Optional[str]]]:
    """For ``nl = <call>`` or ``nl = <call> if p is None else p`` (``p`` a parameter of
    ``function`` that defaults to None; also ``p if p is not None else <call>``, ``p or
    <call>``): the target
    ``nl`` and ``p`` (None for the plain form). None for any other statement."""
    if type(statement) is not cst.SimpleStatementLine or len(statement.body) != 1:
        return None
    small = statement.body[0]
    if type(small) is not cst.Assign or len(small.targets) != 1 or type(small.targets[0].target) is not cst.Name:
        return None
    target, value = small.targets[0].target, small.value
    if value is call:
        return target, None
    if type(value) is cst.BooleanOperation and type(value.operator) is cst.Or and value.right is call:
        other = value.left  # ``nl = nonlinearity or nn.LeakyReLU(0.2)``
        return (target, other.value) if type(other) is cst.Name and _none_default(function, other.value) else None
    if type(value) is not cst.IfExp:
        return None
    other, negated = (value.orelse, False) if value.body is call else (value.body, True) if value.orelse is call else (None, False)
    test = value.test
    if type(other) is not cst.Name or type(test) is not cst.Comparison or len(test.comparisons) != 1:
        return None
    comparison = test.comparisons[0]
    operator = cst.IsNot if negated else cst.Is
    if not (
        type(test.left) is cst.Name and test.left.value == other.value and type(comparison.operator) is operator
        and type(comparison.comparator) is cst.Name and comparison.comparator.value == "None"
    ):
        return None
    return (target, other.value) if _none_default(function, other.value) else None


def _none_default(function: cst.FunctionDef, name: str) -> bool:
    """``name`` is a parameter of ``function`` that defaults to None."""
    params = function.params
    param = next((p for p in (*params.params, *params.kwonly_params) if p.name.value == name), None)
    return param is not None and type(param.default) is cst.Name and param.default.value == "None"


def names_read(function: cst.FunctionDef, target: cst.Name) -> List[cst.Name]:
    """Every read of the local ``target`` names in ``function`` (not attribute or keyword names)."""
    skip = {id(target)}
    nodes = walk(function.body)
    for node in nodes:
        if type(node) is cst.Attribute:
            skip.add(id(node.attr))
        elif type(node) is cst.Arg and node.keyword is not None:
            skip.add(id(node.keyword))
    return [node for node in nodes if type(node) is cst.Name and node.value == target.value and id(node) not in skip]  # type: ignore[misc]


def passed_to(file: Any, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, cst.Name, str]]:
    """For a layer passed to a class or function of the file (``FullyConnected(sizes,
    final_activation=nn.ELU())``): the function that receives it (the class's
    ``__init__``), the parameter, and the callee's name."""
    index = file.index
    here = index.find(call)
    above = index.parent[here] if here is not None else -1
    if above < 0 or type(index.order[above]) is not cst.Arg:
        return None
    arg, outer = index.order[above], index.order[index.parent[above]]
    if arg.star or type(outer) is not cst.Call:  # type: ignore[attr-defined]
        return None
    if type(outer.func) is cst.Attribute:  # ``self._conv_block(16, 32, activation=nn.LeakyReLU())``
        method = _own_method(file, outer)
        if method is None:
            return None
        target, skip = method
        name = target.name.value
    elif type(outer.func) is not cst.Name:
        return None
    else:
        name = outer.func.value  # type: ignore[attr-defined]
        target, skip = file.callables.functions.get(name), 0
    callables = file.callables
    if target is None and name in callables.classes:
        body = callables.classes[name].body.body
        target = next((f for f in body if type(f) is cst.FunctionDef and f.name.value == "__init__"), None)
        skip = 1
    if target is None or target.params.star_arg is not cst.MaybeSentinel.DEFAULT or target.params.posonly_params:
        return None  # (a ``*args`` shifts the positions)
    params = list(target.params.params)[skip:]
    if arg.keyword is not None:  # type: ignore[attr-defined]
        params += list(target.params.kwonly_params)
        chosen = next((p for p in params if p.name.value == arg.keyword.value), None)  # type: ignore[attr-defined]
    else:
        position = next(i for i, a in enumerate(a for a in outer.args if a.keyword is None) if a is arg)  # type: ignore[attr-defined]
        chosen = params[position] if position < len(params) else None
    return (target, chosen.name, name) if chosen is not None else None


def _own_method(file: Any, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, int]]:
    """The method of the calling method's own class that ``self.name(...)`` / ``cls.name(...)``
    runs, defined once there, and how many leading parameters the call does not fill (``self``
    or ``cls``; none for a ``@staticmethod``)."""
    func = call.func
    if type(func.value) is not cst.Name or func.value.value not in ("self", "cls"):  # type: ignore[attr-defined]
        return None
    _, owner = enclosing_definitions(file.module, call)
    if owner is None:
        return None
    methods = [f for f in owner.body.body if type(f) is cst.FunctionDef and f.name.value == func.attr.value]  # type: ignore[attr-defined]
    if len(methods) != 1:
        return None
    if is_staticmethod(methods[0]):
        return methods[0], 0
    if any(not (type(d.decorator) is cst.Name and d.decorator.value == "classmethod") for d in methods[0].decorators):
        return None  # (a ``property``, a wrapper: what runs is not the body as written)
    return methods[0], 1


def default_of(file: Any, call: cst.Call) -> Optional[Tuple[cst.FunctionDef, cst.Name, str]]:
    """For a layer built as a parameter's default (``def __init__(self, dim, actv=nn.LeakyReLU(0.2))``):
    the function, the parameter and the function's name (its class's, for ``__init__``), as
    ``passed_to`` gives them: the layer runs where the function puts the parameter."""
    index = file.index
    here = index.find(call)
    above = index.parent[here] if here is not None else -1
    param = index.order[above] if above >= 0 else None
    if type(param) is not cst.Param or param.default is not call:
        return None
    params = index.parent[above]
    function = index.order[index.parent[params]] if params >= 0 and index.parent[params] >= 0 else None
    if type(function) is not cst.FunctionDef:
        return None
    name = function.name.value
    if name == "__init__":
        owner = index.parent[index.parent[index.find(function)]]
        name = index.order[owner].name.value if owner >= 0 and type(index.order[owner]) is cst.ClassDef else name
    return function, param.name, name


def none_test(function: cst.FunctionDef, name: cst.Name) -> bool:
    """``name`` is read only to test it against None (``if p is not None:``)."""
    for node in walk(function.body):
        if type(node) is cst.Comparison and node.left is name and len(node.comparisons) == 1:
            comparison = node.comparisons[0]
            return type(comparison.operator) in (cst.Is, cst.IsNot) and type(comparison.comparator) is cst.Name \
                and comparison.comparator.value == "None"
    return False


def guarded_by_flag(statement_stack, call: cst.Call) -> bool:
    """``x.relu_() if self.inplace else x.relu()`` (``statement_stack``: the statements around
    ``call``, outermost first): in place is the caller's explicit choice."""
    for statement in reversed(statement_stack):
        if type(statement) is cst.FunctionDef:
            break
        if type(statement) in (cst.If, cst.While) and mentions(statement.test, "inplace"):
            return True
        if type(statement) is cst.SimpleStatementLine:
            for node in path_to(statement, call) or ():
                if type(node) is cst.IfExp and mentions(node.test, "inplace"):
                    return True
    return False


def feeds_dropout_only(file: Any, after: List[Any], last: bool) -> bool:
    """Every layer that may follow (the parts ``after``; ``last``: the activation may also be
    the last of its chain) is a dropout that drops (p > 0): it keeps only its mask, so in place
    the activation before it keeps its result instead of its input, as many tensors as out of
    place (TML201; tests/test_module_rules.py). Not when the activation may be last: what
    follows the chain is not known here."""
    return not last and bool(after) and all(
        b.layer is not None and b.layer.kind is not None and b.layer.kind.saves is Saves.MASK
        and not never_drops(file, SimpleNamespace(
            kind=b.layer.kind, form="module", arguments=b.layer.effective or b.layer.call, node=b.layer.call,
        ), by_default=True)
        for b in after
    )


def followers(file: Any, order: Any, part: Any) -> Tuple[bool, bool]:
    """What may follow ``part`` in the Sequential ``order``: only dropouts that drop
    (``feeds_dropout_only``), a layer that may change its input in place (``feeds_inplace``)."""
    return parts_follow(file, [b for a, b in order.pairs if a is part], part in order.last)


def parts_follow(file: Any, after: List[Any], last: bool) -> Tuple[bool, bool]:
    """``followers`` for the parts ``after`` that may follow an activation in any chain (a
    Sequential's order, a module list ``forward`` runs in turn)."""
    return feeds_dropout_only(file, after, last), feeds_inplace(after)


def feeds_inplace(after: List[Any]) -> bool:
    """A layer that may follow (the parts ``after``) may change its input in place
    (``nn.ELU(inplace=True)``, an in-place dropout; a switch not known counts): in place, the
    activation's result, which its backward then keeps, would be changed (autograd raises)."""
    return any(b.layer is not None and b.layer.kind is not None and b.layer.inplace() is not False for b in after)


def sequential_elements(file: Any, model: Any, attribute: str) -> Optional[List[Tuple[Any, Any, Any]]]:
    """Where ``self.<attribute>`` is an element of an ``nn.Sequential(...)`` built in a method of
    ``model`` (mne-icalabel's ``nn.Sequential(self.conv1, self.relu1, ...)``): ``(order, part,
    method)`` per place, the Sequential's orders and the element's part in them. None when a
    reference is neither a call, a test of whether it is set, nor such an element."""
    index = file.index
    found = []
    for reference in model.references.get(attribute, []):
        if (reference.call is not None and reference.call.func is reference.node) or presence_test(index, reference.node):
            continue
        here = index.find(reference.node)
        arg = index.order[index.parent[here]] if here is not None and index.parent[here] >= 0 else None
        call = index.order[index.parent[index.find(arg)]] if type(arg) is cst.Arg and not arg.star and arg.keyword is None else None
        calls = _splicing(index, reference.method, arg, call) or ([(call, None)] if type(call) is cst.Call else [])
        if not calls:
            return None
        for call, statement in calls:
            order = file.resolver.sequential_order(call, model.self_name(reference.method), reference.method, statement)
            part = next((p for p in order.items if p.node is reference.node), None) if order is not None else None
            if part is None:
                return None
            found.append((order, part, reference.method))
    return found


def _splicing(index: Any, method: cst.FunctionDef, arg: Any, call: Any) -> List[Tuple[cst.Call, cst.CSTNode]]:
    """The ``nn.Sequential(*ops)`` calls of ``method`` (with their statements) splicing the list a reference is put in:
    an element of ``ops = [conv, bn, self.act]``, or ``ops.append(self.act)``; empty when the
    reference is in no such list (the caller reads it as an argument)."""
    if type(arg) is cst.Element:
        holder = index.order[index.parent[index.find(arg)]]
        statement = index.order[index.parent[index.find(holder)]] if type(holder) is cst.List else None
        if type(statement) is not cst.Assign or len(statement.targets) != 1 or type(statement.targets[0].target) is not cst.Name:
            return []
        name = statement.targets[0].target.value
    elif (
        type(call) is cst.Call and type(call.func) is cst.Attribute and call.func.attr.value == "append"
        and type(call.func.value) is cst.Name
    ):
        name = call.func.value.value
    else:
        return []
    here = index.find(method)
    splices = [
        (node, _statement(index, node)) for node in index.of_types(here, (cst.Call,))
        if any(a.star == "*" and type(a.value) is cst.Name and a.value.value == name for a in node.args)
    ]
    for node in index.of_types(here, (cst.Name,)):  # every other read of the list: appended to, bound
        if node.value != name:
            continue
        above = index.order[index.parent[index.find(node)]]
        if type(above) is cst.Arg and above.star == "*" or type(above) is cst.AssignTarget:
            continue
        if type(above) is cst.Attribute and above.attr is node:
            continue  # (``self.ops``: another name)
        if type(above) is cst.Attribute and above.value is node and above.attr.value in ("append", "extend", "insert"):
            continue
        return []  # (``ops`` read some other way: where the layer runs is not only the splices)
    return splices


def _statement(index: Any, node: cst.CSTNode) -> cst.CSTNode:
    here = index.find(node)
    while type(index.order[index.parent[here]]) not in (cst.IndentedBlock, cst.SimpleStatementSuite, cst.Module):
        here = index.parent[here]
    return index.order[here]


def changes_in_place(value: Any, readers: Any, model: Any, reads: Any = None, seen: Optional[Set[int]] = None) -> bool:
    """One of ``readers`` of ``value`` (an activation's result, in its function's value graph)
    may change it in place: ``h += x``, ``h.mul_(s)``, ``F.elu(h, inplace=True)``, a layer of
    ``model`` built in place (``self.act2(h)``): the in-place activation's kept result would be
    changed. A reader that takes ``value`` after its first input (``x += h``) does not. With
    the graph's ``reads`` (id of a value -> its readers), also a reader of a join ``value``
    may be (``if a: h = F.elu(h)`` ... ``if b: h += x``: the ``+=`` may change the result)."""
    for _, reader in readers:
        if type(reader) is str:
            continue
        if reader.op == "join" and reads is not None and value in reader.inputs:
            seen = set() if seen is None else seen
            if id(reader) not in seen:
                seen.add(id(reader))
                if changes_in_place(reader, reads.get(id(reader), ()), model, reads, seen):
                    return True
            continue
        if not reader.inputs or reader.inputs[0] is not value:
            continue
        node = reader.node
        if type(node) is cst.AugAssign or reader.info.get("inplace"):
            return True
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and func.attr.value.endswith("_") and not func.attr.value.startswith("_"):
                return True
            if any(a.keyword is not None and a.keyword.value == "inplace" and literal_bool(a.value) is not False for a in node.args):
                return True
        where = reader.info.get("layer")
        layer = _held_layer(where, model) if type(where) is tuple else where
        if layer is not None and getattr(layer, "kind", None) is not None and layer.inplace() is not False:
            return True
    return False


def _held_layer(where: Tuple[str, int, int], model: Any) -> Any:
    """The ``Layer`` at ``where`` (attribute, position, count: a layer of a Sequential attribute
    ``model`` holds, as the value graph records it), None where not known."""
    parts = model.attribute_sequence(where[0]) if model is not None else None
    return getattr(parts[where[1]], "layer", None) if parts and where[1] < len(parts) else None


def dropouts_only(file: Any, readers: Any, model: Any, value: Any = None, depth: int = 0) -> bool:
    """``readers`` (of an activation's result ``value``, in its function's value graph:
    ``(position, reader)``) keep nothing of it for backward, at least one, and nothing else
    reads it but ``.shape``-like reads: dropouts that drop (``x = self.drop(self.act(x))``,
    ``h = F.elu(h); h = F.dropout(h, 0.1, self.training)``: a dropout keeps only its mask), a
    ``torch.where``/``masked_fill`` that keeps it where a condition holds (its backward needs
    only the condition: pyGAT's ``torch.where(adj > 0, e, zero_vec)``), a softmax (it keeps its
    own output), an addition (``elu(q) + 1`` of a linear attention's feature map). In place the
    activation then keeps its result instead of its input, as many tensors (TML201, as
    ``feeds_dropout_only`` for a Sequential)."""
    found = False
    for _, reader in readers:
        if reader == "meta" or type(reader) is not str and reader.op == "meta":
            continue  # (``torch.ones_like(e)``: its size)
        if type(reader) is str or not (
            _dropout_that_drops(file, reader, model) or _keeps_none_of(file, reader, value)
            or _module_drops_it(file, reader, value, model, depth)
        ):
            return False
        found = True
    return found


def _module_drops_it(file: Any, reader: Any, value: Any, model: Any, depth: int = 0) -> bool:
    """``reader`` is ``self.<x>(..., value, ...)``, ``self.<x>`` an instance of a class of the
    file (``self.gc1 = GraphConvolution(...)``) whose ``forward`` reads that parameter only
    through dropouts that drop (Kipf's ``input = self.dropout(input)`` before ``torch.mm``):
    the layer keeps nothing of ``value`` either (``dropouts_only``, one level in)."""
    node = reader.node
    if value is None or model is None or depth > 1 or reader.op != "call" or type(node) is not cst.Call:
        return False
    func = node.func
    if type(func) is not cst.Attribute or type(func.value) is not cst.Name or func.value.value != "self":
        return False
    assignment = model.single_assignment(func.attr.value)
    built = assignment.value if assignment is not None else None
    classdef = file.callables.classes.get(built.func.value) if type(built) is cst.Call and type(built.func) is cst.Name else None
    forward = next((s for s in classdef.body.body if type(s) is cst.FunctionDef and s.name.value == "forward"), None) if classdef is not None else None
    at = [i for i, arg in enumerate(node.args) if arg.keyword is None and not arg.star and i + 1 < len(reader.inputs) and reader.inputs[i + 1] is value] if forward is not None else []
    params = forward.params.params[1:] if forward is not None else ()
    if len(at) != 1 or at[0] >= len(params):
        return False
    graph = file.values(forward)
    argument = next((v for v in graph.values if v.op == "argument" and v.info.get("name") == params[at[0]].name.value), None)
    readers = [(0, r) for r in graph.consumers(argument)] if argument is not None else []
    return bool(readers) and dropouts_only(file, readers, file.class_model(classdef), argument, depth + 1)


# Graph libraries' softmaxes over the edges of each node (by the position of the scores): like
# ``torch.softmax``, their backward reads their output (DGL's ``edge_softmax``; PyG's
# ``softmax`` is ``exp`` of the shifted scores divided by their sum).
GRAPH_SOFTMAXES = {
    "dgl.ops.edge_softmax": 1, "dgl.nn.functional.edge_softmax": 1, "dgl.nn.pytorch.softmax.edge_softmax": 1,
    "dgl.nn.edge_softmax": 1, "torch_geometric.utils.softmax": 0,
}


def _keeps_none_of(file: Any, reader: Any, value: Any, depth: int = 0) -> bool:
    """``reader`` reads ``value`` as a tensor its backward does not need: a term of an addition
    or a subtraction, the kept tensor of a fill (not in place) or of ``torch.where`` between two
    tensors, or the input of a softmax (also a graph library's softmax over edges); or a slice
    or view of it that only such readers read (``input2 += F.leaky_relu(h)[:n]``)."""
    if value is None or not reader.inputs:
        return False
    if reader.op in ("index", "reshape", "relabel") and reader.inputs[0] is value and depth < 3 and reader.function is not None:
        if any(i is value for i in reader.inputs[1:]):
            return False
        readers = file.values(reader.function).consumers(reader)
        return bool(readers) and all(
            type(r) is not str and (r.op == "meta" or _keeps_none_of(file, r, reader, depth + 1)) for r in readers
        )
    if reader.op == "call" and reader.info.get("qualified") == "torch.where" and len(reader.inputs) == 3:
        return reader.inputs[0] is not value  # ``torch.where(c, e, other)``: needs only ``c``
    at = None
    if reader.op in ("call", "helper"):
        called = reader.info.get("qualified") or (file.bindings.qualify(reader.node.func) if type(reader.node) is cst.Call else None)
        at = GRAPH_SOFTMAXES.get(called or "")
    if at is not None:  # ``edge_softmax(g, e)``: a softmax over each node's edges keeps its output
        return len(reader.inputs) > at and reader.inputs[at] is value and sum(i is value for i in reader.inputs) == 1
    if reader.op == "add":  # ``elu(q) + 1``, ``h + act(x)``: an addition's backward reads neither term
        return sum(i is value for i in reader.inputs) == 1
    if reader.op == "call" and reader.info.get("method") in ("mean", "sum") and reader.inputs[0] is value:
        return not any(i is value for i in reader.inputs[1:])  # ``act(s).mean(dim=-1)``: a sum's backward reads nothing
    if reader.inputs[0] is not value or any(i is value for i in reader.inputs[1:]):
        return False
    if reader.op == "fill":
        return reader.info.get("inplace") is False
    return reader.op == "softmax" and not reader.info.get("in_place")


def _dropout_that_drops(file: Any, value: Any, model: Any) -> bool:
    """The value graph's ``value`` is made by a dropout with p > 0 (``self.drop(x)``, an element
    of ``self.head(x)``, ``F.dropout(x, p)``)."""
    where = value.info.get("layer")
    if type(where) is tuple:  # (attribute, position, count) of a layer attribute ``model`` holds
        layer = _held_layer(where, model)
        if layer is None or layer.kind is None or layer.kind.saves is not Saves.MASK:
            return False
        return not never_drops(file, SimpleNamespace(
            kind=layer.kind, form="module", arguments=layer.effective or layer.call, node=layer.call,
        ), by_default=True)
    if value.op != "dropout" or type(value.node) is not cst.Call:
        return False
    return not never_drops(file, SimpleNamespace(kind=KIND_BY_NAME["dropout"], form="functional", node=value.node), by_default=True)


def never_drops(file: Any, site: Any, by_default: bool = False) -> bool:
    """A dropout ``site`` whose probability is 0 here: no mask is drawn (``nn.Dropout(p=0.0)``, or
    a parameter defaulting to 0 that every call of its function in ``file`` leaves at 0).
    ``by_default`` (asked where a dropout that does not drop only makes a finding: TML201, whose
    fix is safe either way, and TML204; never where it would hide a broken backward): also a constructor's
    parameter, or Lightning's ``self.hparams.<parameter>``, of a class built nowhere in its file,
    when every construction in the files importing it leaves it at 0 (none: its default)."""
    if site.kind is None or site.kind.saves is not Saves.MASK or site.form == "method":
        return False
    if site.form == "module":
        arg = argument(site.arguments, site.kind.module_params.index("p"), "p")
    else:
        arg = argument(site.node, site.kind.functional_params.index("p") + 1, "p")
    if arg is None:
        return False  # torch's default is 0.5
    if literal_number(arg.value) is not None:
        return literal_number(arg.value) == 0
    function, owner = enclosing_definitions(file.module, site.node)
    return zero_probability(file.module, function, owner, arg.value, file.factories, analysis=file if by_default else None)


def unread(facts: Any, value: Any, depth: int = 0) -> bool:
    """Nothing reads ``value`` (of a function's value graph), nor any join of branches it is
    one arm of (``if c: out = act(bn(x))`` / ``else: out = x``, then ``out = conv(x)``: overwritten
    unread). A value that leaves the function is read (``return``, an attribute, a call)."""
    readers = facts.reads.get(id(value), ())
    if depth > 8:
        return False
    return all(
        type(reader) is not str and reader.op == "join" and unread(facts, reader, depth + 1) for _, reader in readers
    )

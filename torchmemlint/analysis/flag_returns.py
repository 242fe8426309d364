"""A value a function returns only behind a flag off by default (``analysis/flags.py``).

``if return_attn: return out, context_out, attn, context_attn`` with ``return_attn=False`` in
the signature and no call of the file passing it: by default the weights are not returned and
the function is eager attention whose weights nothing keeps; a caller that sets the flag keeps
them (SDPA cannot make them, so no fix is written). Asked of a read of a value (``Use``): either
a ``return`` sink of the value itself (every ``return`` statement of the function that names
it), or a tuple (a detach, a cast) made from it and only returned, in the statement that returns
it. Every such statement must be in the arm of an ``if`` that runs only while the flag is set.
"""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Tuple, Union

import libcst as cst

from torchmemlint.tree import walk

HANDED = frozenset({"tuple", "same", "cast"})  # ``return out, attn``, ``return out, attn.detach()``


def returned_behind_flag(graph: Any, value: Any, consumer: Union[Any, str]) -> Optional[cst.BaseExpression]:
    """The test of the ``if`` (a flag off by default) under which ``consumer``, a read of
    ``value`` in ``graph`` (``FunctionValues``), returns it; None when it may return it by
    default or does something else with it."""
    if not isinstance(consumer, str) and consumer.op == "join":
        return _nulled_unless_flag(graph, value, consumer)
    if consumer == "return":
        if value.function is not graph.function:
            return None
        statements = _returns_naming(graph, value)
    elif not isinstance(consumer, str) and consumer.op in HANDED and consumer.function is graph.function:
        consumers = graph.consumers(consumer)
        if consumers and all(not isinstance(c, str) and c.op == "join" for c in consumers):
            return _chosen_behind_flag(graph, consumer, consumers)
        returned = type(consumer.statement) is cst.SimpleStatementLine and any(type(s) is cst.Return for s in consumer.statement.body)
        statements = [consumer.statement] if consumers and all(c == "return" for c in consumers) and returned else []
    else:
        return None
    tests = [_flag_test(graph, statement) for statement in statements]
    return tests[0] if tests and all(test is not None for test in tests) else None


def _chosen_behind_flag(graph: Any, handed: Any, joins: List[Any]) -> Optional[cst.BaseExpression]:
    """``(ctx, probs) if output_attentions else (ctx,)``, returned (directly, or bound and
    returned, or with more outputs added: ``outputs + (past,)``): the test of the conditional
    expression, when ``handed`` is its first arm and the test needs a flag off by default."""
    from torchmemlint.analysis.flags import off_by_default  # flags reads the factories, which read the value graph's users

    tests = []
    for join in joins:
        node = join.node
        if type(node) is not cst.IfExp or join.inputs[:1] != (handed,) or handed in join.inputs[1:]:
            return None
        if not _only_returned(graph, join, 3) or not off_by_default(graph, node.test, True):
            return None
        tests.append(node.test)
    return tests[0] if tests else None


def _nulled_unless_flag(graph: Any, value: Any, join: Any) -> Optional[cst.BaseExpression]:
    """``if not output_attentions: attn_weights = None`` (transformers' eager attention before its
    ``return attn_output, attn_weights``): ``join``, the name after the ``if``, holds ``value``
    only when the test is false, ``None`` otherwise; the flag the test negates, when it is off by
    default (then, by default, nothing after the ``if`` reads the weights). Also ``value if flag
    else None``: the flag, when off by default."""
    from torchmemlint.analysis.flags import off_by_default  # (as above)

    test, branches = join.info.get("test"), join.info.get("branches") or ()
    if type(join.node) is cst.IfExp and len(join.inputs) == 2 and join.inputs[0] is value and join.inputs[1] is not value:
        # ``weights = attention_probs if self.vis else None`` (TransUNet's attention)
        return test if _none(join.inputs[1]) and off_by_default(graph, test, True) else None
    if type(join.node) is not cst.If or join.node.orelse is not None or type(test) is not cst.UnaryOperation or type(test.operator) is not cst.Not:
        return None
    if len(join.inputs) != 2 or tuple(branches) not in ((True, None), (True, False)):
        return None
    nulled, kept = join.inputs
    if kept is not value or not _none(nulled) or not off_by_default(graph, test, False):
        return None
    return test.expression


def _none(value: Any) -> bool:
    """``value`` (of the value graph) is ``None``."""
    return value.op == "global" and value.info.get("name") == "None"


def _only_returned(graph: Any, value: Any, depth: int) -> bool:
    """Is ``value`` returned and nothing else, directly or after tuples are added to it (in
    an ``if``: then the name holds either)?"""
    consumers = graph.consumers(value)
    return bool(consumers) and all(
        c == "return" or (depth > 0 and not isinstance(c, str) and c.op in ("add", "arith", "join") and _only_returned(graph, c, depth - 1))
        for c in consumers
    )


def _returns_naming(graph: Any, value: Any) -> List[cst.CSTNode]:
    """The statements of the function with a ``return`` whose expression names ``value``."""
    found = []
    for node in walk(graph.function.body):
        if type(node) is cst.SimpleStatementLine:
            for small in node.body:
                if type(small) is cst.Return and small.value is not None and any(
                    type(name) is cst.Name and graph.names.get(id(name)) is value for name in walk(small.value)
                ):
                    found.append(node)
    return found


def _flag_test(graph: Any, statement: cst.CSTNode) -> Optional[cst.BaseExpression]:
    from torchmemlint.analysis.flags import flag_test  # (flags reads the factories, which read the value graph's users)

    return flag_test(graph, statement)


def dropped_by_callers(graph: Any, value: Any, consumer: Union[Any, str]) -> bool:
    """``return torch.matmul(p_attn, value), p_attn`` in a function of the file whose every call
    (at least one) drops that position: ``x, _ = attention(q, k, v)``, ``attention(...)[0]``,
    ``self.attend(q, k, v)`` alone on its line; a call through an attribute holding the function
    (``self.attention = attention``) is one of its calls. ``consumer`` is the tuple that holds ``value``,
    returned as it is; a call the file does not show (another file's, a call through an alias)
    would keep it, so the function must be the file's own and called only so there."""
    if isinstance(consumer, str) or consumer.op != "tuple" or consumer.function is None:
        return False
    if type(consumer.statement) is not cst.SimpleStatementLine or not any(type(s) is cst.Return and s.value is consumer.node for s in consumer.statement.body):
        return False  # (the tuple is what a ``return`` gives: in the helper's own graph, or run inline in a caller's)
    positions = [i for i, part in enumerate(consumer.inputs) if part is value]
    if len(positions) != 1:
        return False
    return _dropped(graph.file.analysis, consumer.function, positions[0], 0)


def _dropped(analysis: Any, function: cst.FunctionDef, position: int, depth: int) -> bool:
    """Every call of ``function`` in the file (at least one) leaves out its result's ``position``:
    drops it, or binds it to a name read only under ``if not self.training:`` or returned at a
    position its own function's callers drop in turn (HTSAT's Swin layers); a module's
    ``forward`` through the attributes holding its instances (``forward_calls.py``)."""
    from torchmemlint.analysis.forward_calls import forward_calls  # (it reads the factories, which read the value graph's users)

    index = analysis.index
    if function.name.value == "forward" and depth <= _DEPTH:
        graph = analysis.values(function)
        own = forward_calls(graph, function) if graph.classdef is not None else None
        if own is None:
            return False
        calls = [(analysis, args) for args, _ in own]
        if analysis.links is not None and analysis.links.may_name(graph.classdef.name.value):
            elsewhere = _calls_elsewhere(analysis, graph.classdef.name.value)
            if elsewhere is None:
                return False  # (another file may build it and keep what it returns)
            calls += elsewhere
        if not calls or any(not args for _, args in calls):
            return False
        for theirs, args in calls:
            call = theirs.index.above(args[0])  # (the Arg's Call)
            here = theirs.index.find(call) if type(call) is cst.Call else None
            if here is None or not _drops(theirs.index, here, position, theirs, depth):
                return False
        return True
    params = [*function.params.posonly_params, *function.params.params]
    method = bool(params) and params[0].name.value == "self"
    name, links = function.name.value, analysis.links
    if name.startswith("__") or links is not None and (
        links.read_by_importers(name) if method else bool(links.index.importers(links.path, name))
    ):
        return False  # (another file may call it and keep what it returns)
    aliases = set() if method else _held_by_self(index, name)
    if aliases is None:
        return False  # (``self.attend = attention`` read otherwise than called: handed on)
    calls = 0
    for here in index.positions(cst.Call):
        call = index.order[here]
        func = call.func  # type: ignore[attr-defined]
        if method and type(func) is cst.Attribute and func.attr.value == name and not (type(func.value) is cst.Name and func.value.value == "self"):
            return False  # ``block.attend(q, k, v)``: another object's call, its use not read here
        on_self = type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == "self"
        named = func.value if type(func) is cst.Name and not method else (
            func.attr.value if method and on_self else name if on_self and func.attr.value in aliases else None
        )
        if named != name:
            continue
        calls += 1
        if not _drops(index, here, position, analysis, depth):
            return False
    return calls > 0


_DEPTH = 4  # how many callers up weights handed on by ``return x, attn`` are followed


def _calls_elsewhere(analysis: Any, name: str) -> Optional[List[Tuple[Any, Sequence[cst.Arg]]]]:
    """The calls of the module class ``name``'s instances in the project files that import it
    by name (``from DeepSecE.module import TransformerLayer``; ``for layer in self.layers: x,
    attn = layer(x)``), each with that file's analysis; None when a file may name it otherwise
    (a module import, a star), or builds none (a re-export: its own importers are not read)."""
    from torchmemlint.analysis.forward_calls import instance_calls  # (as ``forward_calls`` above)

    importing = analysis.links.importing(name)
    if not importing:
        return None
    found: List[Tuple[Any, Sequence[cst.Arg]]] = []
    for theirs, names in importing:
        for local in names:
            calls = instance_calls(theirs, local)
            if not calls:
                return None
            found.extend((theirs, args) for args, _ in calls)
    return found


def _held_by_self(index: Any, name: str) -> Optional[set]:
    """The attributes ``self.<a>`` that hold the function ``name`` (``self.self_attention =
    self_attention`` in a constructor: each is bound to it alone in the file), whose calls are
    the function's calls; None when one is also read otherwise than called (handed on)."""
    held: set = set()
    others: set = set()
    for here in index.positions(cst.Assign):
        node = index.order[here]
        for target in node.targets:
            attribute = target.target
            if type(attribute) is cst.Attribute and type(attribute.value) is cst.Name and attribute.value.value == "self":
                bound = type(node.value) is cst.Name and node.value.value == name
                (held if bound else others).add(attribute.attr.value)
    held -= others
    if not held:
        return held
    for here in index.positions(cst.Attribute):
        node = index.order[here]
        if node.attr.value not in held:
            continue
        if type(node.value) is not cst.Name or node.value.value != "self":
            return None  # ``block.attention``: another object's, read where the file does not follow it
        above = index.above(node)
        if not ((type(above) is cst.Call and above.func is node) or (type(above) is cst.AssignTarget and above.target is node)):
            return None
    return held


def _drops(index: Any, here: int, position: int, analysis: Any = None, depth: int = 0) -> bool:
    """The call at ``here`` in the file's index leaves out the result's ``position`` (bound to a
    name: ``_handed_on``)."""
    above = index.parent[here]
    outer = index.order[above] if above >= 0 else None
    if type(outer) is cst.Expr:
        return True  # (the result is not used at all)
    if type(outer) is cst.Subscript and len(outer.slice) == 1 and type(outer.slice[0].slice) is cst.Index:
        number = outer.slice[0].slice.value
        return type(number) is cst.Integer and int(number.value) != position
    if type(outer) is cst.Assign and len(outer.targets) == 1 and type(outer.targets[0].target) in (cst.Tuple, cst.List):
        elements = outer.targets[0].target.elements
        if position >= len(elements) or type(elements[position].value) is not cst.Name:
            return False
        name = elements[position].value
        return name.value == "_" or (analysis is not None and depth < _DEPTH and _handed_on(analysis, here, name, depth))
    return False


def _handed_on(analysis: Any, here: int, target: cst.Name, depth: int) -> bool:
    """``target``, bound by the call at ``here``, is read in its function only under ``if not
    self.training:`` or as an element of a returned tuple that the function's callers drop."""
    index = analysis.index
    at = index.function_of(here)
    if at < 0:
        return False
    function = index.order[at]
    for node in walk(function.body):
        if type(node) is not cst.Name or node.value != target.value or _bound(index, node):
            continue
        above = index.above(node)
        if (type(above) is cst.Attribute and above.attr is node) or _in_evaluation(index, node, function):
            continue  # (``self.attn``: another name)
        outer = index.above(above) if type(above) is cst.Element else None
        if type(outer) is cst.Tuple and type(index.above(outer)) is cst.Return:
            spot = [element.value for element in outer.elements].index(node)
            if _dropped(analysis, function, spot, depth + 1):  # type: ignore[arg-type]
                continue
            if _flag_test(analysis.values(function), outer) is not None:
                continue  # ``if self.return_attn: return logits, attn`` with ``return_attn=False``
        return False
    return True


def _bound(index: Any, name: cst.Name) -> bool:
    """``name`` is (part of) an assignment's or a loop's target."""
    node: Any = name
    while True:
        above = index.above(node)
        if type(above) in (cst.AssignTarget, cst.For) and (type(above) is cst.AssignTarget or above.target is node):
            return True
        if type(above) not in (cst.Element, cst.Tuple, cst.List):
            return False
        node = above


def _in_evaluation(index: Any, node: cst.CSTNode, function: cst.FunctionDef) -> bool:
    """``node`` is in the body of an ``if not self.training:`` of ``function``."""
    params = function.params.params
    me = params[0].name.value if params else None
    child, above = node, index.above(node)
    while above is not None and above is not function:
        if type(above) is cst.If and child is above.body:
            test = above.test
            if (type(test) is cst.UnaryOperation and type(test.operator) is cst.Not and type(test.expression) is cst.Attribute
                    and test.expression.attr.value == "training" and type(test.expression.value) is cst.Name and test.expression.value.value == me):
                return True
        child, above = above, index.above(above)
    return False


def kept_behind_flag(graph: Any, value: Any, consumer: Any) -> Optional[cst.BaseExpression]:
    """The test of the flag off by default that every read of ``value`` by ``consumer`` (a sink:
    ``"store"``, or a value made from it) runs behind: ``if is_cross_attention and
    self.save_attention: self.save_attention_map(attention_probs)`` (BLIP's BERT, the store in
    the helper it calls) with ``self.save_attention = False`` in ``__init__``; None otherwise."""
    if isinstance(consumer, str):
        statements = [u.statement for u in graph.uses if u.value is value and u.consumer == consumer]
    else:
        statements = [consumer.statement]
        if consumer.function is not None and consumer.function is not graph.function:
            graph = graph.file.analysis.values(consumer.function)  # (a helper run inline: its own ``if``, read in its graph)
    tests = [_flag_test(graph, statement) if statement is not None else None for statement in statements]
    return tests[0] if tests and all(test is not None for test in tests) else None


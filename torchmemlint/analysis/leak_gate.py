"""Whether a file can hold a TML5xx finding at all, decided before the scope walk
(``ScopeWalk``, the costly part of the loop analysis, which most model files need for nothing)
and, where only loop rules are left for a file, before libcst parses it.

The decision reads a few syntactic facts (``LoopFacts``): function names, mode switches,
stores on ``self`` in ``forward``, and for each outermost loop whether it accumulates and what
it calls. Two readers give the same facts: one from the file's node index (the file is parsed
anyway) and one from Python's ``ast`` (a tenth of a libcst parse), used by the engine when the
loop rules are the only ones whose text gates pass. Each test is a necessary condition of one
rule, taken from what ``rules/loops.py`` requires before it reports (the names are the ones
``analysis/training.py`` and ``autograd.py`` use): it may answer True for a file without
findings, never False for a file with one. ``tests/test_gates.py`` lints every example and
fixture with the gates on and off and compares the two readers' facts.
"""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, Iterator, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import (
    _COMPREHENSIONS, _is_false, AUTOGRAD_CALLS, CRITERION_NAME, FUNCTIONAL_LOSSES, MODEL_NAME, MODULE_METHODS,
    Scope,
)
from torchmemlint.analysis.feeds import over_loader
from torchmemlint.analysis.loop_facts import (  # (the facts and their ast reader)
    _visible_methods, FunctionFacts, HANDED, Loop, LoopFacts, MODE_ATTRS, MOVED_BY,
)
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.step_hooks import STEP_HOOKS
from torchmemlint.analysis.sinks import (
    metric_call, SINK_MODULE_ROOTS, STRONG_METHODS, STRONG_NAMES, sink_name, tensor_comparison,
)
from torchmemlint.analysis.training import (
    FOLDING_NAMES, is_eval_name, _keyword, _self_attribute, _self_attribute_name,
)
from torchmemlint.analysis.vocabulary import whole_words
from torchmemlint.tree import NodeIndex, nodes_of

# the loop rules' codes (rules/loops.py reports under these)
EVAL_WITHOUT_NO_GRAD = "TML501"
ACCUMULATED_TENSOR = "TML502"
RETAIN_GRAPH = "TML503"
LIST_ON_SELF = "TML504"
TENSOR_ON_SELF = "TML505"
LOOP_CODES = frozenset(
    {EVAL_WITHOUT_NO_GRAD, ACCUMULATED_TENSOR, RETAIN_GRAPH, LIST_ON_SELF, TENSOR_ON_SELF}
)

# `def evaluate`, `model.eval()`, `model.train(False)`: all TML501 can start from, in words
_MODE_WORD = re.compile(r"(?:eval|train)\b")  # whole words (vocabulary.whole_words)
_DEF_NAME = re.compile(r"def[\s\\]+(\w+)")
_AUTOGRAD_NAMES = frozenset(name.rsplit(".", 1)[-1] for name in AUTOGRAD_CALLS)
_STEP_ATTRS = frozenset({"backward", "manual_backward", "step"})


_SINK_TEXT = re.compile(
    r"(?i)\.(?:data|%s)\b|\b(?:%s)\b|[<>]|[=!]=|save|print|log|write|show|plot|display|dump|metric|score|acc|psnr|"
    r"ssim|lpips|bleu|fid|info|debug|warning|%s" % (
        "|".join(sorted(STRONG_METHODS)), "|".join(sorted(STRONG_NAMES)), "|".join(SINK_MODULE_ROOTS),
    )
)


def sink_code_possible(text: str) -> bool:
    """TML501 outside evaluation-named code needs a strong sink (``analysis.sinks``): one of
    their names is in the text."""
    # (``_SINK_TEXT`` matches every comparison operator, which nearly every file writes
    # (`->` too): found first by plain substring tests, without the case-insensitive scan)
    if "<" in text or ">" in text or "==" in text or "!=" in text:
        return True
    return _SINK_TEXT.search(text) is not None


def loader_comprehension_possible(text: str) -> bool:
    """TML501 reports a model call collected by a comprehension over a loader
    (``feeds.collected_over_loader``): a `for ... in` naming a loader, data set or batches."""
    if text.isascii():  # (ASCII: ``(?i)`` matches what the lowered text holds; cheap when absent)
        lowered = text.lower()
        if "loader" not in lowered and "dataset" not in lowered and "batches" not in lowered:
            return False
    return _LOADER_FOR.search(text) is not None


_LOADER_FOR = re.compile(r"(?i)\bfor\b[^\n]*\bin\b[^\n]*(?:loader|dataset|batches)")


# Array frameworks with their own autograd and `model.eval()` / `loss.backward()` (Paddle,
# Jittor, OneFlow, MegEngine, MindSpore, MXNet, Chainer, TensorFlow/Keras, JAX/Flax, MLX,
# tinygrad): a file that imports one of them and never names torch is that framework's code.
_OTHER_FRAMEWORK_IMPORT = re.compile(
    r"(?m)^[ \t]*(?:import|from)[ \t]+(?:paddle|jittor|oneflow|megengine|mindspore|mxnet|chainer"
    r"|tensorflow|tf_keras|keras|jax|flax|mlx|tinygrad)\b"
)


# What torch's modules and tensors are asked in training and evaluation code, and code for
# other libraries rarely writes: a file that never names torch must show one of them.
_TORCH_IDIOMS = re.compile(
    r"\.(?:eval|train)\(\s*\)|\.backward\(|\bzero_grad\(|\bno_grad\b|\binference_mode\b"
    r"|\.cuda\(|\.parameters\(\)|\bstate_dict\("
)


_TORCH_WORD = re.compile(r"\btorch")


def torch_code_possible(text: str) -> bool:
    """Whether the file may be torch code: it names torch, or it imports no other array
    framework and asks a module or tensor what torch code asks (``model.eval()``,
    ``loss.backward()``, ``optimizer.zero_grad()`` ...). A module of a training project that
    never names torch (`def validate(loader, model, criterion)` beside `from tqdm import tqdm`,
    a helper of `train.py`) is read; a Paddle or JAX file whose loops look alike is not, nor
    one whose `model` is another library's (fontTools' `model.interpolateFromMasters(loc, v)`
    collected in a loop). "torch" inside another word (a comment's `pytorch_ema` link) names it
    only in a file that imports no other array framework (not nequix's JAX `train.py`)."""
    if "torch" in text and (_TORCH_WORD.search(text) is not None or _OTHER_FRAMEWORK_IMPORT.search(text) is None):
        return True
    return _OTHER_FRAMEWORK_IMPORT.search(text) is None and _TORCH_IDIOMS.search(text) is not None


def eval_code_possible(text: str) -> bool:
    """TML501 reports a model call in a function named like evaluation (``is_eval_name``) or
    after a ``.eval()`` / ``.train(False)``: the text names one or the other."""
    return any(True for _ in whole_words(_MODE_WORD, text)) or any(
        is_eval_name(match.group(1)) for match in whole_words(_DEF_NAME, text)
    )


def may_report(facts: LoopFacts, codes: FrozenSet[str], text: Optional[str]) -> bool:
    """False only when none of the TML5xx ``codes`` can report in the file ``facts`` were
    read from (``text``: its source, None when unknown)."""
    return (
        RETAIN_GRAPH in codes  # its text gate (`retain_graph`) already passed
        or (EVAL_WITHOUT_NO_GRAD in codes and (
            _eval_code(facts) or _sink_code(facts) or any(loop.comprehension for loop in facts.loops)))
        or (LIST_ON_SELF in codes and facts.forward_appends)
        or (TENSOR_ON_SELF in codes and facts.forward_assigns)
        or (ACCUMULATED_TENSOR in codes and (_accumulating_loop(facts, text) or _step_hooks(facts)))
    )


def _step_hooks(facts: LoopFacts) -> bool:
    """TML502: a method a framework runs once per batch (``step_hooks.STEP_HOOKS``)."""
    return not STEP_HOOKS.isdisjoint(facts.function_names)


def _eval_code(facts: LoopFacts) -> bool:
    """TML501: a function named like evaluation, or a switch to evaluation mode."""
    return any(is_eval_name(name) for name in facts.function_names) or any(
        to_eval for _, to_eval in facts.mode_calls
    )


def _sinks_in(
    function: FunctionFacts, depth: int, imported: Dict[str, str], by_name: Dict[str, List[FunctionFacts]]
) -> bool:
    """``function``'s own sink, or one in a helper of the file it calls (`self._report(out)`,
    `report(out)`): ``analysis.sinks`` follows an output into helpers two levels deep."""
    if function.sinks(imported):
        return True
    return depth > 0 and any(_sinks_in(helper, depth - 1, imported, by_name) for helper in _helpers(function, by_name))


def _helpers(function: FunctionFacts, by_name: Dict[str, List[FunctionFacts]]) -> Iterator[FunctionFacts]:
    """The functions of the file ``function`` calls by name (`report(out)`, `self._report(out)`),
    other than itself, ``__init__`` and ``forward``."""
    for callee in function.callees:
        head, _, rest = callee.partition(".")
        name = rest if head == "self" and rest and "." not in rest else callee
        if "." not in name:
            for helper in by_name.get(name, ()):
                if helper is not function and helper.name not in ("__init__", "forward"):
                    yield helper


def _sink_code(facts: LoopFacts) -> bool:
    """TML501 outside evaluation-named code: a module's output that reaches only saving,
    printing, logging or numbers needs, in one function (other than ``__init__`` /
    ``forward``), a call of one of those (a sink named so, or a call into numpy, matplotlib
    ...: ``analysis.sinks``) and a call that may run a module (``FunctionFacts``)."""
    return any(True for _ in _sink_functions(facts))


def _sink_functions(facts: LoopFacts) -> Iterator[FunctionFacts]:
    """The functions ``_sink_code`` asks for: each where such a finding may be."""
    by_name = _functions_by_name(facts)
    for function in facts.functions:
        if _runs_module(facts, function, 2, by_name) and _sinks_in(function, 2, facts.imported, by_name):
            yield function


def _runs_module(facts: LoopFacts, function: FunctionFacts, depth: int, by_name: Dict[str, List[FunctionFacts]]) -> bool:
    """A call in ``function`` may run a module (``FunctionFacts.may_run_module``), or a helper of
    the file it calls may (``classify_online(model, ...)``: TML501 finds the helper running the
    model it is handed, ``model_helpers.helper_run_model``), two levels deep as ``_sinks_in`` reads."""
    if function.may_run_module(facts.module_stores, facts.self_bound, facts.moved):
        return True
    return depth > 0 and any(_runs_module(facts, helper, depth - 1, by_name) for helper in _helpers(function, by_name))


def sink_only_functions(facts: LoopFacts, codes: FrozenSet[str], text: Optional[str]) -> Optional[FrozenSet[int]]:
    """Where a file passes ``may_report`` only by TML501's sink case (most model files that
    pass: timm's `forward_intermediates` compares indices and calls blocks), the only
    functions a finding may be in: the ids of the ``FunctionDef`` nodes (``facts`` read by
    ``facts_from_index``) ``_sink_code`` names; the rules replay no other scope. None when
    another condition of ``may_report`` holds (every scope may hold a finding)."""
    if (
        EVAL_WITHOUT_NO_GRAD not in codes or RETAIN_GRAPH in codes
        or (LIST_ON_SELF in codes and facts.forward_appends)
        or (TENSOR_ON_SELF in codes and facts.forward_assigns)
        or (ACCUMULATED_TENSOR in codes and (_accumulating_loop(facts, text) or _step_hooks(facts)))
        or _eval_code(facts) or any(loop.comprehension for loop in facts.loops)
    ):
        return None
    found = [function.node for function in _sink_functions(facts)]
    if any(node is None for node in found):
        return None  # (facts read from Python's ast: no libcst node to name)
    return frozenset(id(node) for node in found)


def _accumulating_loop(facts: LoopFacts, text: Optional[str]) -> bool:
    """TML502: a loop that both accumulates and computes: runs a model, steps, or computes a
    loss (``ScopeFacts.loop_computes``). Only outermost loops are read: an inner loop's nodes
    are all in the loop around it."""
    # what `.eval()` / `.train(...)` is called on is a model (``ScopeFacts._model_names``)
    switched = {name for name, _ in facts.mode_calls if name is not None}
    # a name bound to an `nn.*Loss` instance computes a loss whatever it is called
    # (``ScopeFacts._loss_instances``): its class's name is written in the file's code
    loss_class = text is None or ("Loss" in text and facts.loss_named())
    by_name: Optional[Dict[str, List[FunctionFacts]]] = None
    for loop in facts.loops:
        if not (loop.accumulates or any(_folds(dotted, facts.renamed) for _, dotted in loop.calls)):
            continue
        # (a name handed to a call computes only as a model a helper runs: ``_helper_runs_model``)
        if any(
            _handed_model(dotted, switched) if attr == HANDED  # type: ignore[arg-type]
            else _computes(attr, dotted, switched, facts.renamed, loss_class)
            for attr, dotted in loop.calls
        ):
            return True
        if by_name is None:
            by_name = _functions_by_name(facts)
        # `loss = self.optimize(batch)`: a helper of the file that runs the model, a loss or
        # backward (two levels deep, as the rules' helper summaries read)
        if any(_helper_computes(facts, dotted, 2, by_name, switched, loss_class) for _, dotted in loop.calls):
            return True
    return False


def _functions_by_name(facts: LoopFacts) -> Dict[str, List[FunctionFacts]]:
    by_name: Dict[str, List[FunctionFacts]] = {}
    for function in facts.functions:
        by_name.setdefault(function.name, []).append(function)
    return by_name


def _helper_computes(
    facts: LoopFacts, dotted: Optional[str], depth: int, by_name: Dict[str, List[FunctionFacts]], switched, loss_class: bool
) -> bool:
    """``dotted`` (`helper`, `self.helper`) names a function of the file (not ``__init__`` /
    ``forward``) a call of which computes (``_computes``), or one of whose helpers does."""
    if dotted is None:
        return False
    head, _, rest = dotted.partition(".")
    name = rest if head == "self" and rest and "." not in rest else dotted
    if "." in name:
        return False
    for helper in by_name.get(name, ()):
        if helper.name in ("__init__", "forward"):
            continue
        for callee in helper.callees:
            attr = callee.rsplit(".", 1)[-1] if "." in callee else None
            if _computes(attr, callee, switched, facts.renamed, loss_class):
                return True
        if depth > 1 and any(_helper_computes(facts, callee, depth - 1, by_name, switched, loss_class) for callee in helper.callees if callee != dotted):
            return True
    return False


def _folds(dotted: Optional[str], renamed: Dict[str, str]) -> bool:
    """A call that may join a tensor to a loop-carried one (``acc = torch.cat((acc, out))``:
    ``ScopeFacts.folded``): its name is torch's ``cat`` / ``stack`` ..., perhaps renamed."""
    if dotted is None:
        return False
    last = dotted.rsplit(".", 1)[-1]
    if "." not in dotted:
        last = renamed.get(last, last)
    return last in FOLDING_NAMES


def _handed_model(name: str, switched: Set[str]) -> bool:
    """``ScopeFacts.is_model`` of a bare name, as the gate reads a called one (``_computes``):
    a receiver of ``.eval()`` / ``.train()``, or a name like a model's."""
    return name in switched or MODEL_NAME.match(name) is not None


def _computes(
    attr: Optional[str], dotted: Optional[str], switched, renamed: Dict[str, str], loss_class: bool
) -> bool:
    if attr in _STEP_ATTRS:
        return True  # backward, manual_backward, an optimizer's step
    if dotted is None:
        return False
    if dotted.endswith(".forward"):
        dotted = dotted[: -len(".forward")]
    if dotted in switched or loss_class:
        return True
    head = dotted.rpartition(".")[0]
    if head and (head in switched or MODEL_NAME.match(head.rsplit(".", 1)[-1])):
        return True  # a part or method of the model (``ScopeFacts.model_part``)
    last = dotted.rsplit(".", 1)[-1]
    if "." not in dotted:
        last = renamed.get(last, last)
    return bool(
        MODEL_NAME.match(last) or CRITERION_NAME.search(last)
        or last.endswith("_loss") or last in FUNCTIONAL_LOSSES or last in _AUTOGRAD_NAMES
    )


# -- reading the facts from the node index (libcst) -------------------------------------------
def facts_from_index(index: NodeIndex) -> LoopFacts:
    order = index.order
    facts = LoopFacts(identifiers=lambda: (order[here].value for here in index.positions(cst.Name)))

    def nodes(node_type: type) -> List[cst.CSTNode]:
        return [order[here] for here in index.positions(node_type)]

    facts.function_names = [function.name.value for function in nodes(cst.FunctionDef)]
    records: Dict[int, FunctionFacts] = {}
    for here in index.positions(cst.FunctionDef):
        function_node = order[here]
        record = records[here] = facts.function(function_node.name.value)
        record.node = function_node
        record.params.update(_param_names(function_node.params))

    def record_of(here: int) -> Optional[FunctionFacts]:
        function = index.function_of(here)
        return records[function] if function >= 0 else None

    for here in index.positions(cst.Lambda):
        owner = record_of(here)
        for name in _param_names(order[here].params):
            if owner is not None:
                owner.params.add(name)
            else:
                facts.note_store(None, name)
    for node_type, read_target in _STORE_TARGETS:
        for here in index.positions(node_type):
            target = read_target(order[here])
            if target is not None:
                owner = record_of(here)
                for name in _target_names(target):
                    facts.note_store(owner, name)
                facts.self_bound.update(_target_names(target, on_self=True))
    classes: Dict[str, List[Tuple[List[str], Set[str]]]] = {}  # name: (bases, methods) of each
    for here in index.positions(cst.ClassDef):
        node = order[here]
        bases = [arg.value.value for arg in node.bases if type(arg.value) is cst.Name]
        methods = {
            statement.name.value for statement in getattr(node.body, "body", ())
            if type(statement) is cst.FunctionDef
        }
        classes.setdefault(node.name.value, []).append((bases, methods))
    for here in index.positions(cst.FunctionDef):
        owner_class = index.scope[here]
        if owner_class >= 0 and type(order[owner_class]) is cst.ClassDef and order[here] in getattr(
            order[owner_class].body, "body", ()
        ):
            node = order[owner_class]
            record = records[here]
            record.method = True
            record.first, record.annotated = _first_and_annotated(order[here].params)
            record.methods = _visible_methods(
                [arg.value.value for arg in node.bases if type(arg.value) is cst.Name],
                {s.name.value for s in getattr(node.body, "body", ()) if type(s) is cst.FunctionDef},
                classes,
            )
    for here in index.positions(cst.Call):
        call = order[here]
        func = call.func
        function = index.function_of(here)
        name = order[function].name.value if function >= 0 else None
        if name is not None and name not in ("__init__", "forward"):
            records[function].note_call(
                func.attr.value if type(func) is cst.Attribute else None, dotted_name(func),
            )
        if type(func) is cst.Attribute and func.attr.value in MODULE_METHODS:
            facts.self_bound.update(_target_names(func.value, on_self=True))
        if type(func) is cst.Attribute and type(func.value) is cst.Name and func.attr.value in MOVED_BY:
            facts.moved.add(func.value.value)
        if type(func) is cst.Attribute and func.attr.value in MODE_ATTRS:
            receiver = dotted_name(func.value)
            if func.attr.value == "eval":
                if not call.args:
                    facts.mode_calls.append((receiver, True))
            else:
                to_eval = bool(call.args) and _is_false(call.args[0].value)
                facts.mode_calls.append((receiver, to_eval))
    for here in index.positions(cst.FunctionDef):
        if order[here].name.value != "forward" or index.scope[here] < 0:
            continue
        if type(order[index.scope[here]]) is not cst.ClassDef:
            continue  # not a method
        for node in index.of_types(here, (cst.Call, cst.Assign, cst.AnnAssign, cst.AugAssign)):
            if type(node) is cst.Call:
                func = node.func
                if (
                    type(func) is cst.Attribute and func.attr.value == "append"
                    and _self_attribute(func.value) is not None
                ):
                    facts.forward_appends = True
            else:
                targets = (
                    [target.target for target in node.targets]
                    if type(node) is cst.Assign else [node.target]
                )
                if any(_self_attribute(target) is not None for target in targets):
                    facts.forward_assigns = True
    outer_end = -1
    comprehensions = [here for kind in _COMPREHENSIONS for here in index.positions(kind)]
    for here in sorted(index.positions(cst.For) + index.positions(cst.While) + comprehensions):
        if here < outer_end:
            continue
        outer_end = index.end[here]
        loop = Loop(accumulates=type(order[here]) in _COMPREHENSIONS)  # a comprehension collects
        for node in index.of_types(here, (cst.AugAssign, cst.BinaryOperation, cst.Call) + _COMPREHENSIONS):
            if type(node) in _COMPREHENSIONS:
                loop.comprehension = loop.comprehension or over_loader(node)  # type: ignore[arg-type]
            elif type(node) is cst.AugAssign:
                if type(node.operator) in (cst.AddAssign, cst.SubtractAssign):
                    loop.accumulates = True
            elif type(node) is cst.BinaryOperation:
                if type(node.operator) is cst.Add:
                    loop.accumulates = True
            else:
                func = node.func
                attr = func.attr.value if type(func) is cst.Attribute else None
                if attr == "append":
                    loop.accumulates = True
                loop.calls.append((attr, dotted_name(func)))
                loop.calls.extend(
                    (HANDED, argument.value.value) for argument in node.args
                    if not argument.star and type(argument.value) is cst.Name
                    and argument.value.value not in ("True", "False", "None")  # (constants in ``ast``)
                )
        facts.loops.append(loop)
    for here in index.positions(cst.Attribute):
        if order[here].attr.value == "data":
            function = index.function_of(here)
            if function >= 0:
                records[function].note_data()
    for here in index.positions(cst.Comparison):
        if tensor_comparison(order[here]):
            function = index.function_of(here)
            if function >= 0:
                records[function].note_data()
    for node in nodes(cst.ImportFrom):
        if type(node.names) is cst.ImportStar:
            continue
        module = dotted_name(node.module) if node.module is not None and not node.relative else None
        for alias in node.names:
            original = dotted_name(alias.name) or ""
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                facts.renamed[alias.asname.name.value] = original.rsplit(".", 1)[-1]
            if module is not None:
                bound = alias.asname.name.value if alias.asname is not None and type(alias.asname.name) is cst.Name else original
                facts.imported[bound] = f"{module}.{original}"
    for node in nodes(cst.Import):
        for alias in node.names:
            original = dotted_name(alias.name) or ""
            if alias.asname is not None and type(alias.asname.name) is cst.Name:
                facts.imported[alias.asname.name.value] = original
            else:
                facts.imported[original.split(".", 1)[0]] = original.split(".", 1)[0]
    return facts


def _first_and_annotated(params: cst.Parameters) -> Tuple[Optional[str], Set[str]]:
    positional = [*params.posonly_params, *params.params]
    found = [*positional, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    first = positional[0].name.value if positional else None
    return first, {param.name.value for param in found if param.annotation is not None}


def _param_names(params: cst.Parameters) -> List[str]:
    found = [*params.posonly_params, *params.params, *params.kwonly_params]
    if isinstance(params.star_arg, cst.Param):
        found.append(params.star_arg)
    if params.star_kwarg is not None:
        found.append(params.star_kwarg)
    return [param.name.value for param in found]


def _target_names(target: cst.BaseExpression, on_self: bool = False) -> List[str]:
    """The names a binding target binds (`a`, `a, (b, *c)`; not `x.a`, `x[i]`); ``on_self``:
    the `x` of each `self.x` it binds instead."""
    names: List[str] = []
    stack = [target]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is cst.Attribute:
            if on_self and type(item.value) is cst.Name and item.value.value == "self":  # type: ignore
                names.append(item.attr.value)  # type: ignore[attr-defined]
        elif kind is cst.Name:
            if not on_self:
                names.append(item.value)  # type: ignore[attr-defined]
        elif kind in (cst.Tuple, cst.List):
            stack.extend(element.value for element in item.elements)  # type: ignore[attr-defined]
        elif kind is cst.StarredElement:
            stack.append(item.value)  # type: ignore[attr-defined]
    return names


# the binding targets of each statement or expression that binds names
_STORE_TARGETS = (
    (cst.AssignTarget, lambda node: node.target),
    (cst.AnnAssign, lambda node: node.target),
    (cst.AugAssign, lambda node: node.target),
    (cst.For, lambda node: node.target),
    (cst.CompFor, lambda node: node.target),
    (cst.NamedExpr, lambda node: node.target),
    (cst.WithItem, lambda node: node.asname.name if node.asname is not None else None),
)


# -- per scope, after the walk -----------------------------------------------------------------
def scope_may_leak(scope: Scope) -> bool:
    """Cheap test, per scope of a file the gate let through, for a pattern some TML5xx rule
    looks at (``rules/loops.py`` replays only these); most scopes have none."""
    if scope.owner is not None and scope.name == "forward":
        return any(
            call.attr == "append" and call.receiver is not None
            and _self_attribute(call.receiver) is not None
            for call in scope.calls
        ) or any(
            not event.augmented and any(_self_attribute_name(t) for t in event.targets)
            for event in scope.assigns
        )
    if scope.name in STEP_HOOKS and scope.owner is not None and (
        any(event.augmented and any(_self_attribute_name(t) for t in event.targets) for event in scope.assigns)
        or any(call.attr == "append" and call.receiver is not None and _self_attribute(call.receiver) is not None for call in scope.calls)
    ):
        return True  # `self.val_loss += loss` in a `training_step` (TML502: ``step_hooks``)
    sinks = scope.function is not None and scope.name not in ("__init__", "forward")
    if sinks and is_eval_name(scope.name) and scope.calls:
        return True  # `predict()`: any module it calls is a model call (analysis.module_calls)
    if sinks and scope.calls and any(tensor_comparison(node) for node in nodes_of(scope.function, cst.Comparison)):
        return True  # `return logits >= threshold`: a bool tensor (analysis.sinks)
    for call in scope.calls:
        if call.attr in ("eval", "train") or (call.attr == "append" and call.ctx.loops):
            return True
        if sinks and (call.attr in STRONG_METHODS or sink_name(call.attr or call.func) or metric_call(call.func)
                      or (call.func or "").rsplit(".", 1)[-1] in STRONG_NAMES
                      or (call.func is not None and "." in call.func and (
                          scope.bindings.qualify(call.node.func) or "").startswith(SINK_MODULE_ROOTS))):
            return True  # a module's output may end here (TML501: analysis.sinks)
        if call.attr == "backward" and call.ctx.loops and _keyword(call.node, "retain_graph"):
            return True
        if call.func is not None and MODEL_NAME.match(call.func.rsplit(".", 1)[-1]):
            return True
        if sinks and call.func is not None and MODEL_NAME.match(call.func.split(".", 1)[0]):
            return True  # `model.encode(...)`: its output may end in `.data` (TML501)
    if any(over_loader(event.value) for event in scope.assigns):
        return True  # `outs = [model(b) for b in loader]` (TML502: ``feeds.collected_over_loader``)
    return any(event.ctx.loops and event.value is not None for event in scope.assigns) and (
        any(event.augmented or type(event.value) is cst.BinaryOperation
            for event in scope.assigns if event.ctx.loops)
    )

"""Whether a call runs a module, from what the called value is rather than from its name.

``callers.module_call`` knows a module by how it is built (``Generator()``, ``nn.Linear(...)``,
``torch.load``), by an annotation, or by a model-like name. This module adds what the class
model and the values of the function show:

- ``self.<x>`` that a method of the class, or of a base or subclass in the file
  (``class_lineage.py``), binds to a module build, or to a parameter of that method annotated
  as a module or a tensor function (``encoder: nn.Module``, ``Optional[Callable[[Tensor],
  Tensor]]``), or, in a class derived from ``nn.Module``, to a parameter at all (a submodule
  handed in: ``self.encoder = encoder``); or on which it calls a module's method (``.eval()``);
- a local name whose every binding is a module value: a module build, an item or attribute of
  one (``encoder = torch.load(path)["model"].g_a``: a loaded checkpoint's model, a part of a
  model), or a name the function also moves or switches like a module (``model =
  exp.expert_model; model.to(device)``, then ``model(x)``: a tensor is never called);
- an attribute path ending in a model of another object (``self.learn.model(...)``: the
  same name rule as ``self.model``);
- a model's method that returns what one of its submodules returns (``model.generate(n)``
  with ``def generate(self, n): return self.decoder(torch.randn(n, d))``), looked up in the
  class the receiver is built from (this file's or another project file's) or, for a model
  handed in, in every module class of this file that defines it; also a method of a module the
  class holds (``self.autoencoder.encode_image(x)``), its class read from what the class's
  methods assign.

``runs_no_module`` says the opposite of a call: a method of the model's class that calls only
builtins and data methods (``get_data_from_batch`` unpacking a batch) runs no module at all.

``as_model`` says where such a call counts as the model for the evaluation-named and
mode-switch cases; elsewhere its output must reach only sinks (``callers.only_sinks_reached``)."""

from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import (
    CallEvent, GRAD_KEEPING_METHODS, MODEL_NAME, MODULE_METHODS as _MODULE_METHODS,
    MODULE_MOVES as _MOVES,
)
from torchmemlint.analysis.class_lineage import lineage
from torchmemlint.analysis.callers import MODEL_VERBS, _builds_module, assigned_on_self, module_call, module_instance, output_only_sinks
from torchmemlint.analysis.gradient_models import forward_reach
from torchmemlint.analysis.feeds import collected_over_loader, defined_without_grad, iterates_loader
from torchmemlint.analysis.module_annotations import annotated_module, held_annotation, module_type, moved_itself, unmoved
from torchmemlint.analysis.module_builders import loss_module  # noqa: F401 (asked from here by rules/loops.py)
from torchmemlint.analysis.module_items import held_item, loop_item
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.quiet_methods import receiver_classes, without_autograd
from torchmemlint.analysis.sinks import SINK_METHODS
from torchmemlint.analysis.test_suites import test_suite_function
from torchmemlint.analysis.syntax import _first_param, is_static, _small_statements, terminal_name
from torchmemlint.analysis.training import ScopeFacts, is_eval_name
from torchmemlint.project import ensure_reach
from torchmemlint.tree import nodes_of

# a module's own methods and a tensor's: never a model's method that returns an output
NOT_OUTPUT_METHODS = _MODULE_METHODS | _MOVES | GRAD_KEEPING_METHODS | SINK_METHODS | {
    "append", "extend", "items", "keys", "values", "get", "update", "format", "join", "split"}
_DEPTH = 4  # local bindings followed, at most


def called_module(facts: ScopeFacts, event: CallEvent) -> Optional[str]:
    """The module ``event`` runs, as the code names it (``self.encoder``, ``encoder``), when
    what the called value is shows a module; None otherwise. A test function (``test_*``)
    exercises modules on purpose: None there; so is a module class's method running its own
    forward (``self(x)``) that another function of the file, or a file importing this one, calls."""
    callee = event.func
    if test_suite_function(facts.scope):
        return None
    if callee is None:  # ``self.layers[i](x)``, ``models[k](x)``: an item of a container of modules
        return held_item(facts, event.node, lambda value: held_value(facts, value, 1))
    if callee.endswith(".forward"):
        callee = callee[: -len(".forward")]
    known = module_call(facts, event)
    function = facts.scope.function
    if (
        known is not None and function is not None and facts.scope.owner is not None
        and known == _first_param(function) and not is_static(function)
    ):
        # `self(x)` / `self.forward(x)` in a method of the module class: its callers in the
        # file, when there are some, decide about autograd (and are reported themselves)
        return None if called_in_file(facts) or called_in_project(facts) else known
    if known is not None:
        return known
    head, _, attr = callee.partition(".")
    if head == "self" and attr and "." not in attr:
        if module_attribute(facts, attr):
            return callee
        # `self._get_model_output(texts)`, a method of the module class returning its own
        # forward's (or a submodule's) output: a run of the module, judged as `self(x)` is
        return callee if _own_output_method(facts, attr) and not (called_in_file(facts) or called_in_project(facts)) else None
    if facts.bindings.qualify(cst.Name(head)) is not None:
        return None  # `torch.cat`, `F.relu`, `np.mean`: imported
    if (
        head != "self" and attr and "." not in attr and attr not in NOT_OUTPUT_METHODS
        and _output_method(facts, head, attr)
    ):
        return callee  # `model.generate(10)`: a method of the model returning a module's output
    part, _, method = attr.partition(".")
    if head == "self" and method and "." not in method and method not in NOT_OUTPUT_METHODS and (
        module_attribute(facts, part) and _output_method(facts, f"self.{part}", method)
    ):
        return callee  # `self.autoencoder.encode_image(x)`: a method of a module the class holds, returning an output
    if "." in callee:
        last = callee.rsplit(".", 1)[-1]
        # `self.learn.model(...)`: the model of another object, as `self.model` is one
        return callee if head == "self" and MODEL_NAME.match(last) and callee.count(".") == 2 else None
    return callee if module_local(facts, callee, 0) else None


# what GAN code names its generator (``G(z)``, ``self.netG(z)``, ``g_ema(z)``): with the
# names ``MODEL_NAME`` takes, the names that say a called value is a model
_GENERATOR_NAME = re.compile(r"^(?:G|netG|net_G|G_ema|g_ema|netG_ema|gen|generator|generator_ema)$")
# a parameter named for what it does with a model's output: a metric, a loss
_CONSUMER_NAME = re.compile(r"(?i)(?:^|_)(?:metric|metrics|accuracy|acc|loss|losses|criterion)(?:$|_)")


def called_value(facts: ScopeFacts, event: CallEvent) -> Optional[Tuple[str, bool]]:
    """``G(z)``, ``generator(noise)``, ``self.netG(z)``, ``self.netG.sample(n)``,
    ``model.module.generation(n)``: a call of a parameter of the function, of an object the
    module's top level binds, or of an attribute of ``self`` that the class assigns (or of a
    generating method of one, ``MODEL_VERBS``), where what the value is built from shows a
    module (a module class, layer or loaded checkpoint bound at the top level: ``seg_model =
    torch.load(path)``; ``self.x`` a module of the class; a parameter the function takes for
    its model) or its name is a model's (``MODEL_NAME``, a generator's). With whether the value
    showed it (True) or only the name (False; always for a method, which may switch autograd
    off itself: transformers' ``generate``): TML501 then counts the call as the model only
    where the function detaches its output (``.detach()``, ``.data``) on its way to the sinks,
    the code saying that the output carries a graph (a transform, a cost function, a
    distribution's ``sample`` are not named so and not built so). None for anything else (an
    import, a function or class of the file, a method of the class, a local the function binds:
    ``called_module`` judges those)."""
    callee, function = event.func, facts.scope.function
    if callee is None or function is None or test_suite_function(facts.scope):
        return None
    parts = callee.split(".")
    receiver = parts[:-1] if len(parts) > 1 and parts[-1] in MODEL_VERBS else parts
    if receiver[-1] == "module" and len(receiver) > 1:
        receiver = receiver[:-1]  # a wrapped model (`DistributedDataParallel`'s `.module`)
    head, last = receiver[0], receiver[-1]
    named = MODEL_NAME.match(last) is not None or _GENERATOR_NAME.match(last) is not None
    this = _first_param(function) if facts.scope.owner is not None and not is_static(function) else None
    if head == this:
        if len(receiver) != 2 or not assigned_on_self(facts, last):
            return None
        shown = module_attribute(facts, last)
    elif len(receiver) != 1:
        return None  # `x.float()`, `a.b(...)`: a method, whatever it is
    elif any(param.name.value == head for param in facts.scope.params()):
        shown = facts.is_model(head) or module_call_name(facts, head)
        # a parameter called on the batches of a loader, whatever its name (``netC(images)``):
        # counted where the function detaches the output on its way to the sinks (the code
        # saying it has a graph)
        named = named or (len(parts) == 1 and bool(event.node.args) and not _CONSUMER_NAME.search(head) and (
            any(iterates_loader(loop) for loop in event.ctx.loops) or collected_over_loader(facts, event) is not None
        ))  # (not ``metric(y, out)``, ``criterion(out, y)``: named for taking the model's output)
    elif any(event.targets == (head,) for event in facts.scope.assigns):
        return None
    else:
        built = _built_at_top_level(facts, head)
        if built is None:
            return None
        shown = _builds_module(facts, built)
    if len(parts) > 1 and parts[-1] in MODEL_VERBS:
        # a method: library models run theirs without autograd (transformers' `generate`), and a
        # class of the file may too (`@torch.no_grad()`, `with torch.no_grad():`; a module or a
        # wrapper, rvc's `FCPEInfer.infer`); the caller's detach is needed to say that this one
        # records a graph
        if any(
            method.name == parts[-1] and method.function is not None and _may_switch_autograd(method.function)
            for classfacts in facts.walk.classes for method in classfacts.methods
        ):
            return None
        shown = False
    return (callee, shown) if shown or named else None


def _may_switch_autograd(function: cst.FunctionDef) -> bool:
    """The method is decorated or enters a context at its top level (``@torch.no_grad()``,
    ``import torch`` then ``with torch.no_grad():``)."""
    body = function.body
    return bool(function.decorators) or (
        type(body) is cst.IndentedBlock and any(type(statement) is cst.With for statement in body.body)
    )


def _built_at_top_level(facts: ScopeFacts, name: str) -> Optional[cst.Call]:
    """What the module's top-level code binds ``name`` to, when that is one call (``generator =
    Generator(...).to(device)``, ``G = torch.load(path)``)."""
    found: Optional[cst.Call] = None
    for scope in facts.walk.scopes:
        if scope.function is not None or scope.owner is not None:
            continue
        for event in scope.assigns:
            if name in event.targets:
                if type(event.value) is not cst.Call or event.augmented or event.unpacked or found is not None:
                    return None
                found = event.value
    return found


def as_model(facts: ScopeFacts) -> bool:
    """Whether a module called in this scope counts as the model (reported in an
    evaluation-named function or after `.eval()`, whatever becomes of its output), rather than
    only when its output reaches nothing but sinks: not in a method of a module class (a
    `predict()` or `_inference_forward()` there is part of the module's own computation), nor
    in a function another function of the file calls (its caller decides, and may train on
    what it returns)."""
    return not module_method(facts) and not called_in_file(facts)


def module_method(facts: ScopeFacts) -> bool:
    """The scope is a method of a module class (of this file, or deriving from one of the project)."""
    owner = facts.scope.owner
    return owner is not None and owner.node.name.value in facts.walk.module_classes()


# Methods a library's module base class runs itself, in training as in evaluation: scvi-tools'
# ``BaseModuleClass.forward`` calls ``inference``, ``generative`` and ``loss`` (its documented
# module interface), so an ``inference`` method there is the training forward's first half.
LIBRARY_HOOKS = (("scvi.", frozenset({"inference", "generative", "loss"})),)


def library_hook(facts: ScopeFacts) -> bool:
    """The scope is a method that a base class of its class, from a library, calls itself."""
    owner = facts.scope.owner
    if owner is None:
        return False
    for base in owner.node.bases:
        qualified = facts.bindings.qualify(base.value) or ""
        if any(qualified.startswith(prefix) and facts.scope.name in names for prefix, names in LIBRARY_HOOKS):
            return True
    return False


def called_in_file(facts: ScopeFacts) -> bool:
    """Another function of the file calls the scope's function (``self.predict(x)``,
    ``predict(model, x)``): the computation it is part of, and its autograd mode, are the
    caller's. Not the module's own top-level code (a ``__main__`` demo, ``print(model.generate(
    prefix))``) calling it with autograd on where that code never backpropagates: the function
    then runs with autograd on and nothing trains on it. Nor evaluation code that is open in
    turn (``_open_evaluation``: parsnip's ``predict`` calling ``predict_dataset`` with autograd
    on, nobody deciding for either)."""
    return _decided_by_callers(facts.walk, facts.scope, 0)


def _callers_by_name(walk: Any) -> Dict[str, List[Tuple[Any, bool]]]:
    """Per function name: each scope of the file that calls it, and whether autograd is off at
    that call (top-level code that never trains, calling with autograd on, left out)."""
    callers = getattr(walk, "_callers_by_name", None)
    if callers is None:
        callers = {}
        for scope in walk.scopes:
            script = scope.function is None and not scope.grad_work and not any(
                call.attr in _TRAINING_CALLS or (call.func or "").endswith("autograd.grad") for call in scope.calls
            )
            for call in scope.calls:
                grad_off = call.ctx.no_grad or scope.no_grad or (scope.grad_off_seq is not None and scope.grad_off_seq < call.seq)
                if call.func is not None and not (script and not grad_off):  # (`torch.set_grad_enabled(False)` first: off)
                    callers.setdefault(call.func.rsplit(".", 1)[-1], []).append((scope, grad_off))
        walk._callers_by_name = callers  # type: ignore[attr-defined]  # once per file
    return callers


def _decided_by_callers(walk: Any, scope: Any, depth: int) -> bool:
    """Some call of ``scope``'s function in the file decides its autograd mode: made with
    autograd off, or from code that is not open evaluation."""
    return any(
        caller is not scope and (grad_off or not _open_evaluation(walk, caller, depth + 1))
        for caller, grad_off in _callers_by_name(walk).get(scope.name, ())
    )


def _open_evaluation(walk: Any, scope: Any, depth: int) -> bool:
    """``scope`` is evaluation code (its name says so) that runs with autograd on, neither
    trains nor turns gradients on, and whose own callers in the file decide nothing either."""
    return (
        depth < 4 and scope.function is not None and is_eval_name(scope.name) and not scope.no_grad
        and not scope.grad_work and scope.name != "forward"
        and not any(call.attr in _TRAINING_CALLS or (call.func or "").endswith("autograd.grad") for call in scope.calls)
        and not _decided_by_callers(walk, scope, depth)
    )


_TRAINING_CALLS = frozenset({"backward", "step", "zero_grad", "fit", "train"})  # top-level code that may train


def opened_by_caller(facts: ScopeFacts) -> bool:
    """A helper some caller of the file runs under ``no_grad`` (``ScopeFacts.grad_controlled``)
    that another caller runs with autograd on from open evaluation code (``_open_evaluation``:
    hypermodule's ``predict`` calling ``_predict_image`` after ``self.model.eval()``, while
    ``_predict_dataloader`` calls it under ``no_grad``): that caller records the graph."""
    scope = facts.scope
    if scope.function is None or scope.no_grad or scope.grad_off_seq is not None:
        return False
    local = {classfacts.node.name.value: classfacts.node for classfacts in facts.walk.classes}
    return any(
        caller is not scope and not grad_off and _open_evaluation(facts.walk, caller, 1)
        and (caller.owner is None or _own_lineage(caller.owner.node, local, 0))
        for caller, grad_off in _callers_by_name(facts.walk).get(scope.name, ())
    )


def _own_lineage(classdef: cst.ClassDef, local: Dict[str, cst.ClassDef], depth: int) -> bool:
    """Every base of the class, through the file's own classes, is of this file (or
    ``object``): no base class from elsewhere may run its methods under its own autograd mode
    (ultralytics' predictors, whose ``BasePredictor`` runs inference under inference mode)."""
    for base in classdef.bases:
        name = dotted_name(base.value)
        if name == "object":
            continue
        if name not in local or local[name] is classdef or depth > 8 or not _own_lineage(local[name], local, depth + 1):
            return False
    return True


def called_in_project(facts: ScopeFacts) -> bool:
    """A file of the project that imports this one may call the scope's method
    (``self.duration_head.predict_num_frames(...)`` in a pipeline): its caller there decides,
    unless every call there is open evaluation code in turn (``_open_evaluation``: caver's
    ``CaverModel.predict`` handing ``self._inside_model.predict(texts)`` on with autograd on)."""
    links, name = facts.walk.links, facts.scope.name
    return links is not None and bool(name) and links.read_by_importers(name) and not _opened_in_project(links, name)


def _opened_in_project(links: Any, name: str) -> bool:
    """Every importer reading ``.<name>`` calls it, and only from open evaluation code."""
    found = False
    for other in links.index.readers(links.path):
        if ensure_reach(other).error is not None:
            return False
        if name not in other.foreign_reads:
            continue
        theirs = links.analysis_of(other.path, other.digest)
        callers = None if theirs is None else _callers_by_name(theirs.scopes).get(name)
        if not callers or not all(not grad_off and _open_evaluation(theirs.scopes, caller, 1) for caller, grad_off in callers):
            return False
        found = True
    return found


def part_of_forward(facts: ScopeFacts) -> bool:
    """The scope is a method that its class's ``forward`` runs, itself or through other methods
    (``self._block_sparse_attention(q, k, v)``; a module class, also one whose base comes from a
    file or package not read), or a function of the file that only such methods call: the
    training forward's computation (a router whose scores serve only ``topk`` indices), not
    evaluation code."""
    owner = facts.scope.owner
    if owner is None:  # a function of the file that only forwards call (torch-encoding's ``module_inference``)
        callers = [scope for scope in facts.walk.scopes for call in scope.calls if call.func == facts.scope.name]
        return bool(callers) and all(scope.owner is not None and (scope.name == "forward" or (  # (``forward``: a module's)
            scope.owner.node.name.value in facts.walk.module_classes() and scope.name in forward_reach(scope.owner))) for scope in callers)
    reached = forward_reach(owner)
    return facts.scope.name != "forward" and facts.scope.name in reached


def callers_elsewhere(facts: ScopeFacts) -> bool:
    """Every other function of the file that calls the scope's method (``self.transcribeFrames(
    x)``) does so with autograd off, or is itself a method a file of the project may call
    (``called_in_project``): the autograd mode is theirs, or their callers' (transkun's
    ``computeStatsMIREVAL``, called by its training script under ``torch.no_grad()``). False
    when no other function calls it."""
    walk, name, links = facts.walk, facts.scope.name, facts.walk.links
    if links is None or not name:
        return False
    found = False
    for scope in walk.scopes:
        if scope is facts.scope:
            continue
        for call in scope.calls:
            if call.func is None or call.func.rsplit(".", 1)[-1] != name:
                continue
            if call.ctx.no_grad or scope.no_grad or (scope.grad_off_seq is not None and scope.grad_off_seq < call.seq):
                found = True
            elif scope.function is not None and scope.owner is not None and links.read_by_importers(scope.name):
                found = True
            else:
                return False
    return found


def module_attribute(facts: ScopeFacts, attr: str) -> bool:
    """``self.<attr>`` is a module in the scope's class (see the module docstring)."""
    owner = facts.scope.owner
    related = lineage(facts.walk, owner) if owner is not None else []  # (a subclass may bind it)
    if owner is None or any(method.name == attr for klass in related for method in klass.methods):
        return False
    target = f"self.{attr}"
    for method in (method for klass in related for method in klass.methods):
        for call in method.calls:
            if call.attr in _MODULE_METHODS and call.receiver is not None and dotted_name(call.receiver) == target:
                return True
        params = {param.name.value: param for param in method.params()}
        for event in method.assigns:
            if event.targets != (target,) or event.value is None or event.augmented:
                continue
            value = event.value
            if _builds_module(facts, value):
                return True
            if type(value) is cst.Name and value.value in params:
                if method.owner.node.name.value in facts.walk.module_classes() or _module_annotation(facts, params[value.value]):
                    return True
    return False


def _module_annotation(facts: ScopeFacts, param: cst.Param) -> bool:
    """Annotated as a module (``nn.Module``, a module class) or a tensor function
    (``Callable[[Tensor], Tensor]``), possibly ``Optional[...]``."""
    return param.annotation is not None and module_type(facts, param.annotation.annotation)


def module_local(facts: ScopeFacts, name: str, depth: int) -> bool:
    """A local name (or parameter) whose every binding here is a module value."""
    if depth > _DEPTH:
        return False
    assigned = [event for event in facts.scope.assigns if name in event.targets]
    if depth == 0 and _moved_like_a_module(facts, name):
        return True
    if not assigned:
        return False
    return all(  # (or an item of a container of modules a loop binds: ``module_items.loop_item``)
        (event.value is not None and not event.augmented and not event.unpacked and _module_value(facts, event.value, depth))
        or loop_item(facts, event, name, lambda value: held_value(facts, value, depth + 1))
        for event in assigned
    )


def held_value(facts: ScopeFacts, value: cst.BaseExpression, depth: int) -> bool:
    """A module value (``_module_value``; not an attribute of one, which may be a dict of metric
    functions: ``new_model.metrics``), a module attribute of the class (``self.layers``), or a
    parameter annotated as a module."""
    if type(value) is cst.Attribute:
        return type(value.value) is cst.Name and value.value.value == "self" and module_attribute(facts, value.attr.value)
    if type(value) is cst.Name and (_moved_like_a_module(facts, value.value) or annotated_module(facts, value.value)):
        return True  # (``sub_model.eval()``, then ``models.append(sub_model)``; ``heads: Heads``)
    return _module_value(facts, value, depth)


def _moved_like_a_module(facts: ScopeFacts, name: str) -> bool:
    """``name.eval()``, ``name.parameters()`` ... or ``name.to(device)`` as a statement of its
    own (a tensor's ``.to`` is bound, a module's is not needed), or bound back to the name that
    is then called (``probe = probe.cuda()``, then ``probe(inputs)``: a tensor is not called,
    and a function has no ``.cuda()``)."""
    for call in facts.scope.calls:
        if call.receiver is None or type(call.receiver) is not cst.Name or call.receiver.value != name:
            continue
        if call.attr in _MODULE_METHODS:
            return True
        statement = call.ctx.chain[-1].statement if call.ctx.chain else None
        if call.attr in _MOVES and type(statement) is cst.SimpleStatementLine and any(
            (type(small) is cst.Expr and small.value is call.node) or (
                type(small) is cst.Assign and small.value is call.node  # (the receiver is the name)
                and [dotted_name(t.target) for t in small.targets] == [name]
            )
            for small in statement.body
        ):
            return True
    return False


def _module_value(facts: ScopeFacts, value: cst.BaseExpression, depth: int) -> bool:
    """A module build (``_builds_module``: classes, torch layers, loaders), an item or an
    attribute of a module value or of a loaded checkpoint, or a local that is one."""
    if _builds_module(facts, value):
        return True
    if type(value) in (cst.Attribute, cst.Subscript):
        return _module_value(facts, value.value, depth + 1)
    if type(value) is cst.Name:
        return value.value != "None" and module_local(facts, value.value, depth + 1)
    return False


def _output_method(facts: ScopeFacts, receiver: str, method: str) -> bool:
    """``receiver.method(...)`` returns the output of a module: ``receiver`` is a model here (a
    parameter named or annotated so, a local bound to a module value), and the method, in its
    class (``model = VAE(...)``: that class, of this file or of the project; otherwise every
    module class of this file defining ``method``), returns what one of its submodules returns
    (``_returns_output``)."""
    found = _receiver_methods(facts, receiver, method)
    if found is not None and not all(node is not None and _returns_output(node) for node in found):
        return False
    if found is None:
        local = _module_class_methods(facts).get(method)
        if not local or not all(_returns_output(node) for node in local):
            return False
    return facts.is_model(receiver) or module_local(facts, receiver, 0) or module_call_name(facts, receiver)


def class_method_runs(facts: ScopeFacts, receiver: str, method: str) -> Optional[bool]:
    """Whether ``receiver.method(...)``, where the class of ``receiver`` and its method are known
    (``model = VAE(...)``, ``self.vae = VAE()``, a parameter annotated ``model: VAE``, of this
    file or the project), runs the instance's modules: it returns what one of its submodules
    returns (``_returns_output``), or runs the instance's parts in a loop (a decoder stepped by
    ``self.decode(...)`` in stanfordnlp's ``Seq2SeqModel.predict``: whatever it returns, token
    ids, each step's graph is built with autograd on). None where they are not known (a
    library's class)."""
    found = _receiver_methods(facts, receiver, method, handed=True)
    if found is None or any(node is None for node in found):
        return None
    return all(_returns_output(node) or _steps(node) for node in found)  # type: ignore[arg-type]


def _steps(function: cst.FunctionDef) -> bool:
    """A loop of the method (not decorated: ``@torch.no_grad()``) calls a part of the instance."""
    this = _first_param(function)
    return not function.decorators and any(
        type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and call.func.value.value == this
        for loop in nodes_of(function.body, cst.For, cst.While) for call in nodes_of(loop.body, cst.Call)
    )


def _receiver_methods(facts: ScopeFacts, receiver: str, method: str, handed: bool = False) -> Optional[List[Any]]:
    """``method`` of each class ``receiver`` is built from or annotated with (None where the
    class does not define it); None where no such class is known. ``handed``: also the class
    a parameter bound to ``self.<attr>`` is annotated with (``module_annotations.held_annotation``:
    asked only to say that a method runs no module)."""
    owner = facts.scope.owner
    scopes = owner.methods if receiver.startswith("self.") and owner is not None else [facts.scope]
    classes = [
        unmoved(event.value).func for scope in scopes for event in scope.assigns  # type: ignore[union-attr]
        if receiver in event.targets and type(event.value) is cst.Call and not moved_itself(event.value, receiver)
    ]
    annotated = (_annotated_class(facts, receiver) or (held_annotation(facts, receiver) if handed else [])) if not classes else []  # (``model: TRecover``)
    classes = classes or annotated
    if not classes:
        return None
    # (a module of the class, or one a parameter is annotated with: any class of the project may be its)
    held = receiver.startswith("self.") or bool(annotated)
    return [_class_method(facts, func, method, package=held) for func in classes]


def _annotated_class(facts: ScopeFacts, receiver: str) -> List[cst.BaseExpression]:
    """The class a parameter ``receiver`` of the function (or of a function around it, for a
    closure) is annotated with, where that names a module class of this file or of the project
    (``model: TRecover``); else nothing."""
    scope, param = facts.scope, None
    while scope is not None and scope.function is not None and "." not in receiver and param is None:
        params = scope.function.params
        param = next((p for p in (*params.posonly_params, *params.params, *params.kwonly_params) if p.name.value == receiver), None)
        if param is None and receiver in scope.bindings.names:
            return []  # (bound here otherwise)
        scope = scope.parent  # (a closure reads its enclosing function's parameter)
    annotation = param.annotation.annotation if param is not None and param.annotation is not None else None
    if type(annotation) not in (cst.Name, cst.Attribute) or facts.bindings.qualify(annotation) == "torch.nn.Module":
        return []
    links = facts.walk.links
    by_package = links is not None and links.module_class(dotted_name(annotation), package=True)  # (``from trecover.model import TRecover``)
    return [annotation] if by_package or module_type(facts, annotation) else []  # type: ignore[list-item]


def _module_class_methods(facts: ScopeFacts) -> Dict[str, List[cst.FunctionDef]]:
    """The methods of this file's module classes, by name (once per file)."""
    walk = facts.walk
    methods = getattr(walk, "_module_class_methods", None)
    if methods is None:
        methods = {}
        modules = walk.module_classes()
        for classfacts in walk.classes:
            if classfacts.node.name.value in modules:
                for scope in classfacts.methods:
                    if scope.function is not None:
                        methods.setdefault(scope.name, []).append(scope.function)
        walk._module_class_methods = methods  # type: ignore[attr-defined]
    return methods


def runs_own_parts(facts: ScopeFacts, method: str) -> Optional[bool]:
    """Whether some module class of this file defining ``method`` calls something of its own
    in it (``self(x)``, ``self.encoder(x)``, ``self.decode(z)``): a method that calls nothing of
    its instance (``validation_epoch_end`` stacking the outputs it is given) runs no module.
    None where no module class of the file defines it."""
    defined = _module_class_methods(facts).get(method)
    if not defined:
        return None
    return any(_calls_itself(function) for function in defined)


def _calls_itself(function: cst.FunctionDef) -> bool:
    this = _first_param(function)
    for call in nodes_of(function.body, cst.Call):
        node = call.func
        while type(node) is cst.Attribute:
            node = node.value
        if type(node) is cst.Name and node.value == this:
            return True
    return False


def module_call_name(facts: ScopeFacts, name: str) -> bool:
    """``name`` is a parameter annotated as (or given) a module (``callers.module_instance``)."""
    return "." not in name and module_instance(facts, name)


def _class_method(facts: ScopeFacts, func: cst.BaseExpression, method: str, package: bool = False) -> Optional[cst.FunctionDef]:
    """The method ``method`` of the class ``func`` names (this file's, or another project
    file's module class through ``links``; with ``package``, any class of the project, also one
    imported by absolute name from the file's own package); None when unknown."""
    name = dotted_name(func)
    if name is None:
        return None
    for classfacts in facts.walk.classes:
        if classfacts.node.name.value == name:
            return next((m.function for m in classfacts.methods if m.name == method), None)
    links = facts.walk.links
    qualified = facts.bindings.qualify(func)
    if links is None or (qualified or "").startswith(("torch.", "numpy.", "builtins.")) or (
        qualified is None and not facts.bindings.is_bound(name.split(".", 1)[0])
    ) or not (package or facts.walk.project_module_class(func)):
        return None
    definition = links.definition(name, "class", package=package)
    if definition is None:
        return None
    body = definition[1].body
    for statement in body.body if type(body) is cst.IndentedBlock else ():
        if type(statement) is cst.FunctionDef and statement.name.value == method:
            return statement
    return None


def _own_output_method(facts: ScopeFacts, name: str) -> bool:
    """``name`` is a method of the scope's module class (not ``forward``, nor a module's or a
    tensor's own) that returns what its class's forward or one of its submodules returns, and
    runs one (``self.forward(x)``, ``self.encoder(x)``), any other method of the class it calls
    being such a method too or one that leaves autograd as it is (not torchify's ``predict``,
    whose helper runs under ``no_grad``)."""
    owner = facts.scope.owner
    if owner is None or name == "forward" or name in NOT_OUTPUT_METHODS or not module_method(facts):
        return False
    known = owner.__dict__.setdefault("_own_outputs", {})  # once per class and name
    if name not in known:
        known[name] = False  # (a method calling itself back: not known to run a module)
        known[name] = _runs_own_output(facts, owner, name)
    return known[name]


def _runs_own_output(facts: ScopeFacts, owner: Any, name: str) -> bool:
    method = next((m for m in owner.methods if m.name == name), None)
    if method is None or method.function is None or not _returns_output(method.function):
        return False
    this, runs = _first_param(method.function), False
    for call in method.calls:
        head, _, attr = (call.func or "").partition(".")
        if head != this or not attr or "." in attr:
            continue
        if attr == "forward" or module_attribute(facts, attr):
            runs = True
        elif any(other.name == attr for other in owner.methods):
            if _own_output_method(facts, attr):
                runs = True
            elif _switches_autograd(next(other for other in owner.methods if other.name == attr)):
                return False  # (torchify's ``predict``: its helper runs the model under ``no_grad``)
    return runs


def _switches_autograd(method: Any) -> bool:
    """A method of the class that may turn autograd off or backpropagate (a decorator, or a
    call of ``no_grad``, ``inference_mode``, ``set_grad_enabled``, ``backward`` ...); a helper
    preparing the input (``self._get_basal_embedding(xs)``) does neither."""
    function = method.function
    return function is None or bool(function.decorators) or any(
        (call.func or "").rsplit(".", 1)[-1] in _AUTOGRAD_SWITCHES for call in method.calls)


_AUTOGRAD_SWITCHES = frozenset({"no_grad", "inference_mode", "set_grad_enabled", "enable_grad", "backward", "grad", "step"})


# functions that, given an output, make no tensor computed from it
_NO_GRAPH = frozenset({
    "len", "int", "float", "bool", "str", "isinstance", "type", "id", "print", "argmax", "argmin",
    "zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
})


def _output(node: cst.BaseExpression, this: str, outputs: Set[str]) -> bool:
    """``node`` is, or is made from, what an attribute of ``this`` returned (``_returns_output``)."""
    while True:
        if type(node) is cst.Name:
            return node.value in outputs
        if type(node) is cst.Call:
            func = node.func
            if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == this:
                return True  # `self.decoder(z)`
            if type(func) is cst.Attribute and func.attr.value in ("detach", "item", "tolist", "numpy"):
                return False
            if terminal_name(func) not in _NO_GRAPH and any(_output(arg.value, this, outputs) for arg in node.args if not arg.star):
                return True  # `torch.matmul(ns, cb)`, `dist.Dirichlet(alpha.exp())`: computed from an output
            if type(func) is not cst.Attribute:
                return False
            node = func.value  # `res.squeeze(0)`, `self.decoder(z).view(...)`
        elif type(node) is cst.BinaryOperation:
            return _output(node.left, this, outputs) or _output(node.right, this, outputs)  # `theta * library_size`
        elif type(node) in (cst.Subscript, cst.Attribute):
            node = node.value
        else:
            return False


def _returns_output(function: cst.FunctionDef) -> bool:
    """Every value the method returns is what a call of one of its class's attributes
    returned (``return self.decoder(z)``; ``res = self.decoder(z); res = res.squeeze(0);
    return res``), or computed from it (``dist.Dirichlet(alpha.exp()).mean``, ``theta * n``),
    and it neither turns autograd off nor backpropagates."""
    if function.decorators:
        return False  # `@torch.no_grad()`, `@property`, `@staticmethod` ...
    this = _first_param(function)
    if this is None or type(function.body) is not cst.IndentedBlock:
        return False
    outputs: Set[str] = set()  # the names bound to an output so far
    returned = False
    for small in _small_statements(function.body.body):
        if type(small) is cst.Assign and len(small.targets) == 1 and type(small.targets[0].target) in (cst.Name, cst.Tuple):
            target = small.targets[0].target  # (``z, attention = self.encoder(x)``: each item an output)
            names = [target] if type(target) is cst.Name else [e.value for e in target.elements]  # type: ignore[attr-defined]
            made = _output(small.value, this, outputs)
            for name in names:
                if type(name) is cst.Name:
                    (outputs.add if made else outputs.discard)(name.value)
        elif type(small) is cst.Return and small.value is not None:
            value = small.value  # (``return z, attention``: the outputs it returns)
            items = [e.value for e in value.elements] if type(value) is cst.Tuple else [value]
            if not items or not all(_output(item, this, outputs) for item in items):
                return False
            returned = True
        elif type(small) is cst.Expr and type(small.value) is cst.Call and (
            dotted_name(small.value.func) or ""
        ).endswith(("backward", "step", "no_grad")):
            return False
    for statement in function.body.body:
        if type(statement) is cst.With:
            return False  # `with torch.no_grad():` (or anything that may switch autograd)
    return returned


def runs_no_module(facts: ScopeFacts, event: CallEvent, analysis: Any = None) -> bool:
    """The call records no graph: what it returns reaches ``.numpy()`` undetached (with
    ``analysis``, the ``FileAnalysis``: torch would raise there if it required grad;
    hummingbird's containers run an executor that turns autograd off itself); or
    ``receiver.method(...)`` records no graph of the model's: ``receiver`` is built from a
    class (this file's or another project file's) in this function, or by every caller of the
    file that hands it in (``quiet_methods.receiver_classes``), whose own ``method`` calls nothing
    but builtins and data methods (fusilli's ``get_data_from_batch``, which unpacks a batch, and
    its static ``safe_squeeze``) or runs its modules under ``no_grad`` itself. Unknown (a method
    the class inherits, a receiver whose class is not known): False."""
    function = facts.scope.function
    if analysis is not None and function is not None and any(call.attr == "numpy" for call in facts.scope.calls) \
            and output_only_sinks(facts, event, analysis.flow(function), analysis).attached_numpy:
        return True  # (asked only where the function calls ``.numpy()`` at all)
    receiver, _, method = (event.func or "").rpartition(".")
    if receiver and defined_without_grad(facts, method):
        return True  # every class of the file defining it runs it under ``no_grad``
    if not receiver or "." in receiver:
        return False
    # (also a method that runs its modules under ``no_grad`` itself: ``analysis/quiet_methods.py``)
    built = receiver_classes(facts, receiver)
    return bool(built) and all(
        (found := _class_method(facts, func, method, package=True)) is not None  # type: ignore[arg-type]
        and (_calls_nothing(found) or without_autograd(found))
        for func in built  # type: ignore[union-attr]
    )


# builtins that run no module, and methods of tensors, containers and strings no module has
# (or that move, cast or switch one without running it)
_PLAIN_FUNCTIONS = frozenset({
    "len", "tuple", "list", "dict", "set", "isinstance", "issubclass", "range", "zip", "enumerate",
    "min", "max", "str", "int", "float", "bool", "hasattr", "getattr", "print", "sorted", "reversed",
    "ValueError", "TypeError", "KeyError", "RuntimeError", "NotImplementedError", "AssertionError",
})
# a tensor's methods that reshape, move, copy or read it (also words of a data step's name:
# ``evaluated_methods``' ``safe_squeeze``)
TENSOR_DATA_METHODS = frozenset({
    "squeeze", "unsqueeze", "view", "reshape", "size", "dim", "numel", "cpu", "cuda", "to",
    "detach", "float", "half", "numpy", "item", "tolist", "permute", "transpose", "contiguous",
    "clone", "flatten",
})
_DATA_METHODS = TENSOR_DATA_METHODS | {"double", "long", "int", "bool", "type"} | NOT_OUTPUT_METHODS - {"forward", "__call__"}


def _calls_nothing(function: cst.FunctionDef) -> bool:
    """Every call in ``function`` is of a builtin of ``_PLAIN_FUNCTIONS`` or a data method
    (``_DATA_METHODS``) of a value; it does not yield."""
    stack: List[cst.CSTNode] = [function.body]
    while stack:
        node = stack.pop()
        kind = type(node)
        if kind in (cst.Yield, cst.Await):
            return False
        if kind is cst.Call:
            func = node.func  # type: ignore[attr-defined]
            if not (
                type(func) is cst.Name and func.value in _PLAIN_FUNCTIONS
                or type(func) is cst.Attribute and func.attr.value in _DATA_METHODS
            ):
                return False
        stack.extend(node.children)
    return True

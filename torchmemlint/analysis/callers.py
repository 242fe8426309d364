"""What the caller of a scope decides, and evaluation code written straight: a model the
scope borrows (a parameter of a runner's method, a ``self.model`` owned by a base class in
another file), loops over one batch's items rather than over batches, and a single
``model.eval(); out = model(x)``. Facts over ``ScopeFacts`` for TML501/TML502."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Callable, Optional, Set

import libcst as cst

from torchmemlint.analysis.autograd import _is_false, _names_in, CallEvent, MODEL_NAME, MODULE_MOVES
from torchmemlint.analysis.borrowed_callers import called_with_grad
from torchmemlint.analysis.flow import Flow
from torchmemlint.analysis.module_annotations import moved_itself
from torchmemlint.analysis.module_builders import built_by_builder, copied_module
from torchmemlint.analysis.test_suites import test_suite_function
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.open_callers import opened_by_training_caller
from torchmemlint.analysis.sinks import Helper, Reach, SinkFollower
from torchmemlint.analysis.syntax import is_staticmethod, walk
from torchmemlint.analysis.training import is_eval_name, ScopeFacts
from torchmemlint.analysis.vocabulary import KIND_BY_MODULE, whole_words

_LOADER_WORDS = re.compile(r"(?i)loader|dataset|batches")
# Calls that turn a list of per-item tensors into one value of the same computation.
_REDUCTIONS = frozenset(
    {"torch.stack", "torch.cat", "torch.concat", "torch.concatenate", "torch.sum", "torch.mean"}
)


def switched_back(facts: ScopeFacts, callee: str, seq: int) -> bool:
    """`callee.train()` (or `.train(True)`) after `seq` in this scope."""
    for call in facts.scope.calls:
        if call.seq <= seq or call.attr != "train" or call.receiver is None:
            continue
        args = call.node.args
        if dotted_name(call.receiver) == callee and not (args and _is_false(args[0].value)):
            return True
    return False

def output_kept(facts: ScopeFacts, event: CallEvent) -> bool:
    """The call's output is bound or returned (`out = model(x)`, `return model(x)[0]`):
    its graph and saved activations live on; a bare `model(x)` statement drops them."""
    statement = event.ctx.chain[-1].statement if event.ctx.chain else None
    if type(statement) is not cst.SimpleStatementLine:
        return False
    for small in statement.body:
        value = small.value if type(small) in (cst.Assign, cst.AnnAssign, cst.Return) else None
        if value is not None and any(node is event.node for node in [value, *walk(value)]):
            return True
    return False

def trained_by_callers(facts: ScopeFacts) -> bool:
    """A function of the file that calls the scope's function binds what it returns to a
    name whose value reaches its ``backward`` (``embedding = self.test()`` ... ``loss =
    f(embedding)``; ``loss.backward()`` in ``train()``: ``ScopeFacts.backward_losses``): the
    caller trains on it (scProtein's ``test()``). A caller that plots or logs it does not."""
    found = getattr(facts.scope, "_trained_by_callers", None)  # (asked per model call: once per scope)
    if found is None:
        found = facts.scope._trained_by_callers = _trained_by_callers(facts)  # type: ignore[attr-defined]
    return found


def _trained_by_callers(facts: ScopeFacts) -> bool:
    name, owner = facts.scope.name, facts.scope.owner
    if not name:
        return False
    for scope in facts.walk.scopes:
        if scope is facts.scope or scope.function is None or (owner is not None and scope.owner is not owner):
            continue
        calls = [c for c in scope.calls if c.func is not None and (c.func == name or c.func.rpartition(".")[2] == name)]
        if not calls:
            continue
        trained = {loss.split(".", 1)[0] for loss in ScopeFacts(facts.walk, scope).backward_losses}  # (`embedding.pow`)
        for event in scope.assigns:
            if event.value is not None and trained.intersection(event.targets) and any(
                event.value is c.node or any(n is c.node for n in walk(event.value)) for c in calls
            ):
                return True
    return False


def returned_for_backward(facts: ScopeFacts, analysis: Optional[object], accumulator: str) -> bool:
    """The function returns the accumulator, or a value computed from it, to a caller that
    calls ``backward`` on what it gets, after getting it: a function of the file, or a method of
    a base class in another file of the project that runs ``self.<name>(...)`` (an RL trainer's
    ``compute_loss`` summing the losses of a trajectory, run by ``BaseRLTrainer.train_step``).
    The sum is then what training backpropagates: every iteration's graph is needed (gradient
    accumulation). A caller that only logs it (``loss.item()``) does not count, nor a
    ``backward`` on another value of the same name before the call."""
    scope, name = facts.scope, facts.scope.name
    if not name or not _returns(scope, accumulator):
        return False
    owner = scope.owner
    for other in facts.walk.scopes:
        if other is not scope and other.function is not None and (owner is None or other.owner is owner) \
                and _backpropagated_after(facts.walk, other, ("self." + name) if owner is not None else name):
            return True
    links = getattr(analysis, "links", None)
    if owner is None or links is None:
        return False
    for base in owner.node.bases:
        dotted = dotted_name(base.value)  # (as written: the links resolve the file's imports)
        found = links.definition(dotted, "class") if dotted else None
        if found is None:
            continue
        other_file, classdef = found
        walk_ = other_file.scopes
        for other in walk_.scopes:
            if other.owner is not None and other.owner.node is classdef and other.function is not None \
                    and _backpropagated_after(walk_, other, "self." + name):
                return True
    return False


def _backpropagated_after(scopes, scope, func: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether ``scope`` binds what a call of ``func`` returns to a name that a later
    ``backward`` of the scope is called on (``loss, metrics = self.compute_loss(...)``, then
    ``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``)."""
    calls = [c for c in scope.calls if c.func == func]
    if not calls:
        return False
    backwards = ScopeFacts(scopes, scope).backward_calls
    for event in scope.assigns:
        if event.value is None or not any(n is c.node for c in calls for n in walk(event.value)):
            continue
        for call in backwards:
            given = [call.receiver] if call.receiver is not None else []  # ``loss.backward()``, ``accelerator.backward(loss)``
            read = {n.split(".", 1)[0] for part in given + [a.value for a in call.node.args] for n in _names_in(part)}
            if call.seq > event.seq and read.intersection(event.targets):
                return True
    return False


def _returns(scope, accumulator: str) -> bool:  # type: ignore[no-untyped-def]
    """Whether a ``return`` of the scope's function hands out ``accumulator`` or a value
    computed from it (through the function's assignments)."""
    function = scope.function
    if function is None:
        return False
    carried = {accumulator}
    for event in scope.assigns:
        if event.value is not None and any(name.split(".", 1)[0] in carried for name in _names_in(event.value)):
            carried.update(event.targets)
    return any(
        type(node) is cst.Return and node.value is not None
        and any(name.split(".", 1)[0] in carried for name in _names_in(node.value))
        for node in walk(function.body)
    )


def borrowed_model(facts: ScopeFacts, callee: str, iterating: bool) -> bool:
    """The function runs a model it does not own, in code whose autograd mode its caller
    sets, and nothing here says it evaluates (no `.eval()`/`.train()` in the function):

    - a parameter (`network`) of a method other than `self`, called once (not in a loop): a helper of a
      runner object such as monai's `Inferer._run_inference(self, network, patch)`, which
      evaluators call without autograd and trainers with it (a module-level
      `def predict(net, x): return net(x)` is still reported);
    - `self.<name>` that no method of the class assigns, in a class that never calls
      `.eval()`, `.train()`, backward or an optimizer step and derives (maybe through
      classes of this file) from a base known to run its methods without autograd
      (``runs_without_grad``: transformers' pipelines run `_forward` under `no_grad` from
      `Pipeline.forward`). A base that only builds the model and calls `.eval()` does not
      turn autograd off: its subclass's calls are judged like any other.
    """
    if any(call.attr in ("eval", "train") for call in facts.scope.calls):
        return False
    params = {param.name.value for param in facts.scope.params()} - {_self_name(facts)}
    if callee in params:  # (`self` is the method's own module, not one it borrows)
        if _training_hook(facts):
            return False  # Lightning calls it from its training loop, with autograd on
        return (
            facts.scope.owner is not None and not iterating and not called_with_grad(facts, callee)
            and not _evaluation_of_a_trainer(facts)
        )
    head, _, attr = callee.partition(".")
    owner = facts.scope.owner
    if head != "self" or not attr or "." in attr or owner is None or not owner.node.bases:
        return False
    if not runs_without_grad(facts, owner.node):
        return False
    for method in owner.methods:
        for event in method.assigns:
            if callee in event.targets:
                return False
        for call in method.calls:
            if call.attr in ("eval", "train", "backward", "step", "zero_grad"):
                return False
    return True

def _evaluation_of_a_trainer(facts: ScopeFacts) -> bool:
    """An evaluation-named method (``eval_step(self, inputs, labels, model)``) of a class whose
    other methods backpropagate (``train_step`` ... ``loss.backward()``): the class is the
    training loop, and this method its evaluation, not a runner's helper that evaluators and
    trainers share (parse-pytorch's ``TrainLoop``)."""
    owner = facts.scope.owner
    if owner is None or not is_eval_name(facts.scope.name):
        return False
    return any(
        method is not facts.scope and any(call.attr == "backward" for call in method.calls)
        for method in owner.methods
    )


_CALLBACKS = frozenset({
    "pytorch_lightning.Callback", "pytorch_lightning.callbacks.Callback",
    "lightning.pytorch.Callback", "lightning.pytorch.callbacks.Callback",
})


def _training_hook(facts: ScopeFacts) -> bool:
    """An `on_train_*` method of a Lightning `Callback` subclass: the training loop calls it
    with the module it trains, autograd on (its `on_validation_*` hooks run without)."""
    owner = facts.scope.owner
    if owner is None or not (facts.scope.name or "").startswith("on_train_"):
        return False
    return any(facts.bindings.qualify(base.value) in _CALLBACKS for base in owner.node.bases)


# bases whose methods the library runs under `torch.no_grad()`: transformers' `Pipeline`
# (`ChunkPipeline`, `TextGenerationPipeline` ...: `Pipeline.forward` wraps `_forward`)
_NO_GRAD_BASE = re.compile(r"Pipeline$")


def runs_without_grad(facts: ScopeFacts, classdef: cst.ClassDef, depth: int = 0) -> bool:
    """A base of ``classdef`` (or of a class of this file it derives from) is known to run
    the class's methods without autograd: a transformers pipeline, imported from
    `transformers` or relatively inside it."""
    local = {classfacts.node.name.value: classfacts.node for classfacts in facts.walk.classes}
    for base in classdef.bases:
        dotted = dotted_name(base.value)
        if dotted is None:
            continue
        if dotted in local and local[dotted] is not classdef:
            if depth < 8 and runs_without_grad(facts, local[dotted], depth + 1):
                return True
            continue
        qualified = facts.bindings.qualify(base.value)
        head = dotted.split(".", 1)[0]
        imported_relatively = qualified is None and facts.bindings.is_bound(head)
        if _NO_GRAD_BASE.search(dotted.rsplit(".", 1)[-1]) and (
            (qualified or "").startswith("transformers.") or imported_relatively
        ):
            return True
    return False


def borrowed_loop(facts: ScopeFacts, loop: cst.CSTNode) -> bool:
    """Every model the loop calls is borrowed (``borrowed_model``)."""
    calls = [call for call in facts.scope.calls if loop in call.ctx.loops and facts.is_model(call.func)]
    return bool(calls) and all(borrowed_model(facts, call.func or "", True) for call in calls)


def runs_model(facts: ScopeFacts, loop: cst.CSTNode) -> bool:
    """A batch loop: it iterates something named like a loader or data set, or calls the
    model (or something named like one) or trains; not a loop over one batch's items."""
    if type(loop) is cst.For:
        names = [node.value for node in [loop.iter, *walk(loop.iter)] if type(node) is cst.Name]
        names += [
            node.attr.value for node in [loop.iter, *walk(loop.iter)] if type(node) is cst.Attribute
        ]
        if any(_LOADER_WORDS.search(name) for name in names):
            return True
    return _calls_model_in(facts, loop)


def _calls_model_in(facts: ScopeFacts, loop: cst.CSTNode, given: frozenset = frozenset()) -> bool:
    """A call in ``loop`` of the model, of something named like one or of a callable among the
    names ``given`` (the function's parameters), or a training step."""
    return any(
        loop in call.ctx.loops
        and (
            facts.is_model(call.func)
            or facts.is_training_step(call)
            or bool(call.func and MODEL_NAME.match(call.func.rsplit(".", 1)[-1]))
            or (call.func or "").split(".", 1)[0] in given
        )
        for call in facts.scope.calls
    )


def loss_terms_loop(facts: ScopeFacts, loop: cst.CSTNode) -> bool:
    """A loop of a function named as a loss (``IBP_loss``) that neither backpropagates nor calls
    the model, anything named like one or a callable it is given, over something it computes
    itself (not a parameter: a loader handed in): it sums the terms of one loss from the
    function's inputs (per group of ``torch.unique(batch_index)``), whatever the name of what it
    iterates says (``for cur_batch in batches``)."""
    function = facts.scope.function
    if "loss" not in facts.scope.name.lower() or facts.backward_calls or function is None or type(loop) is not cst.For:
        return False
    params = frozenset(p.name.value for p in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params))
    if params.intersection(_names_in(loop.iter)):  # type: ignore[attr-defined]
        return False  # iterating what the caller hands in: a loader (`for x, y in val_loader`)
    return not _calls_model_in(facts, loop, params)  # (nor a callable handed in: `predict(x)`)


def reduced_after(facts: ScopeFacts, name: str, loop: cst.CSTNode) -> bool:
    """`torch.stack(name)` / `torch.cat` / `sum(name)` ... after ``loop`` in this scope."""
    inside = [call.seq for call in facts.scope.calls if loop in call.ctx.loops]
    inside += [event.seq for event in facts.scope.assigns if loop in event.ctx.loops]
    end = max(inside, default=-1)
    for call in facts.scope.calls:
        if call.seq <= end or loop in call.ctx.loops or not call.node.args:
            continue
        func = call.node.func
        qualified = facts.bindings.qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
        reducing = qualified in _REDUCTIONS or (
            type(func) is cst.Name and func.value == "sum" and qualified is None
            and not facts.bindings.is_bound("sum")
        )
        first = call.node.args[0].value
        if reducing and type(first) is cst.Name and first.value == name:
            return True
    return False


# -- a module run for its output only (TML501 outside evaluation-named code) -------------------
# what a model's method runs that is its forward, or a part of it (annotated transformer:
# `model.encode`, `model.decode`, `model.generator`)
_FORWARD_PARTS = frozenset({"forward", "encode", "decode", "encoder", "decoder", "generator", "embed"})
# methods of a model that return what it generates (``netG.sample(n)``, ``model.module.generation(
# n)``): with an unknown receiver, only these count (a tensor's or a scaler's methods do not)
MODEL_VERBS = frozenset({"sample", "generate", "generation", "predict", "decode", "encode", "reconstruct",
                          "infer", "inference", "forward", "synthesize", "translate", "denoise"})


_WRAPPERS = MODULE_MOVES | {"eval", "train", "requires_grad_"}  # each returns the module it is called on
_LOADERS = frozenset({"torch.load", "torch.jit.load", "timm.create_model"})
# torch layers without parameters: on an input that does not require grad (`fbank =
# pad(torch.from_numpy(a))`) they record nothing
_PARAMETERLESS = re.compile(
    r"Pad\dd$|Pad$|Pool\dd$|Dropout|^(?:Flatten|Unflatten|Identity|Upsample\w*|PixelShuffle|PixelUnshuffle|"
    r"Softmax\w*|Softmin|LogSoftmax|ChannelShuffle|Fold|Unfold|CosineSimilarity|PairwiseDistance)$"
)
# what a ``from_pretrained`` loads that is not a module: transformers' tokenizers, processors,
# feature extractors and configurations (``AutoTokenizer.from_pretrained(name)``)
_NOT_MODULES = re.compile(r"(?:Tokenizer\w*|Processor|FeatureExtractor|Config|Configuration)\.from_pretrained$")
_MODEL_PACKAGES = ("torchvision.models.", "timm.models.", "segmentation_models_pytorch.")
# annotations that say a parameter is a module: Lightning's module is an `nn.Module`
_MODULE_TYPES = frozenset({
    "torch.nn.Module", "pytorch_lightning.LightningModule", "lightning.pytorch.LightningModule",
    "lightning.LightningModule", "pytorch_lightning.core.LightningModule",
})
# whole words (``vocabulary.whole_words``: a leading ``\b`` makes ``re`` try every position)
_HOOKS = re.compile(r"(?:register_(?:full_)?(?:forward|backward)(?:_pre)?_hook|register_hook|retain_grad)\b")


def _builds_module(facts: ScopeFacts, value: cst.BaseExpression) -> bool:
    """``Generator()``, ``Generator(ngpu).to(device)``, ``nn.Linear(...)``: an instance of a
    class of this file derived from ``nn.Module``, or of a torch layer."""
    value = _unwrapped(value)
    if type(value) is not cst.Call:
        return False
    func = value.func
    if type(func) is cst.Name and any(func.value in event.targets for event in facts.scope.assigns):
        return False  # ``DNF = DNF(...)`` in a function: the name is the function's own local
    qualified = facts.bindings.qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
    if qualified is not None:
        known = (
            (qualified.startswith("torch.nn.") and not qualified.startswith("torch.nn.functional.")
             and not _PARAMETERLESS.search(qualified.rsplit(".", 1)[-1]) and qualified not in KIND_BY_MODULE)
            or qualified in _LOADERS or (qualified.endswith(".from_pretrained") and not _NOT_MODULES.search(qualified))
            or qualified.startswith(_MODEL_PACKAGES)
        )
    else:
        known = type(func) is cst.Name and func.value in facts.walk.module_classes()
    # a module class of another file; a builder of this file returning modules (``self.build_actor()``); a deep copy
    return known or facts.walk.project_module_class(func) or built_by_builder(facts, value, _builds_module) or (
        copied_module(facts, value, _builds_module))


def module_instance(facts: ScopeFacts, callee: str) -> bool:
    """``callee`` is a module: ``self.<name>`` that ``ScopeFacts.is_model`` takes for the model
    (a wrapper object such as ``YOLO(path)`` is not) or that a method of its class binds to a
    module instance; a name bound in this function to module instances only (whatever it is
    called: ``model = YOLO(path)`` is not one); a parameter that is the model, or annotated or
    given one (``_module_parameter``); a global bound to module instances only."""
    if "." not in callee and (
        callee in facts.walk.defined_names()
        or facts.bindings.qualify(cst.Name(callee)) is not None
    ):
        return False  # a function or class of the file (`profile_model(...)`), or imported
    head, _, attr = callee.partition(".")
    if head == "self" and attr and "." not in attr and facts.scope.owner is not None:
        return facts.is_model(callee) or any(
            event.targets == (callee,) and event.value is not None and _builds_module(facts, event.value)
            for method in facts.scope.owner.methods for event in method.assigns
        )
    if "." in callee:
        return facts.is_model(callee)
    assigned = [
        event.value for event in facts.scope.assigns
        if callee in event.targets and not (event.value is not None and moved_itself(event.value, callee))  # ``model = model.eval()``
    ]
    if assigned:
        return all(
            value is not None and (_builds_module(facts, value) or _unwrapped_model(facts, callee, value))
            for value in assigned
        )
    owner = facts.scope.owner
    if callee == _self_name(facts) and owner is not None and facts.scope.name != "forward":
        # `self(idx)` in a method of a module class (`def generate(self, idx)`): its forward
        return owner.node.name.value in facts.walk.module_classes()
    if callee in {param.name.value for param in facts.scope.params()}:
        return facts.is_model(callee) or _module_parameter(facts, callee)
    return _global_module(facts, callee)


# what a DDP / DataParallel (`.module`) or `torch.compile` (`._orig_mod`) wrapper holds
_WRAPPED = frozenset({"module", "_orig_mod"})


def _unwrapped_model(facts: ScopeFacts, name: str, value: cst.BaseExpression) -> bool:
    """``model = model.module`` (or ``model = model``) where the parameter ``model`` is the
    model: the wrapped module of a DDP, DataParallel or compiled model is a module too."""
    while type(value) is cst.Attribute and value.attr.value in _WRAPPED:
        value = value.value
    if type(value) is not cst.Name or value.value != name:
        return False
    if name not in {param.name.value for param in facts.scope.params()}:
        return False
    return facts.is_model(name) or _module_parameter(facts, name)


def _module_parameter(facts: ScopeFacts, name: str) -> bool:
    """A parameter annotated as a module (``nn.Module``, a module class of this file), or
    one that a call of the function in this file gives a module (``sample_image(generator,
    z)`` with the global ``generator = Generator()``; one step: not through the caller's own
    parameters)."""
    params = facts.scope.params()
    param = next(p for p in params if p.name.value == name)
    annotation = param.annotation.annotation if param.annotation is not None else None
    if annotation is not None and type(annotation) in (cst.Name, cst.Attribute):
        qualified = facts.bindings.qualify(annotation)
        if qualified in _MODULE_TYPES or (
            type(annotation) is cst.Name and annotation.value in facts.walk.module_classes()
        ) or facts.walk.project_module_class(annotation):
            return True
    function = facts.scope.name
    if not function or facts.scope.owner is not None:
        return False
    position = [p.name.value for p in facts.scope.function.params.params].index(name) \
        if name in [p.name.value for p in facts.scope.function.params.params] else None  # type: ignore[union-attr]
    for scope in facts.walk.scopes:
        if scope is facts.scope:
            continue
        for call in scope.calls:
            if call.func != function:
                continue
            given = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == name), None)
            positional = [a for a in call.node.args if a.keyword is None and not a.star]
            if given is None and position is not None and position < len(positional):
                given = positional[position].value
            given_name = dotted_name(given) if given is not None else None
            if given_name is None:
                continue
            caller = ScopeFacts(facts.walk, scope)
            assigned = [event.value for event in scope.assigns if given_name in event.targets]
            if assigned:
                if all(value is not None and _builds_module(caller, value) for value in assigned):
                    return True
            elif caller.is_model(given_name) or ("." not in given_name and _global_module(caller, given_name)):
                return True
    return False


def _global_module(facts: ScopeFacts, name: str) -> bool:
    """``name`` is bound at module level to module instances only (and not here)."""
    if any(name in event.targets for event in facts.scope.assigns) and facts.scope.function is not None:
        return False
    module_scope = facts.walk.scopes[0] if facts.walk.scopes else None
    if module_scope is None or module_scope.function is not None:
        return False
    values = [event.value for event in module_scope.assigns if name in event.targets]
    built = [value for value in values if not _moved_itself(value, name)]  # (``model = model.to(device)``: still the module)
    return bool(built) and all(value is not None and _builds_module(facts, value) for value in built)


def _moved_itself(value: Optional[cst.BaseExpression], name: str) -> bool:
    """``name.to(device)``, ``name.cuda().eval()``: the value ``name`` holds, moved or switched."""
    inner = _unwrapped(value)
    return inner is not value and type(inner) is cst.Name and inner.value == name


def _unwrapped(value: Any) -> Any:
    """``value`` without the moves and switches around it (``Generator(ngpu).to(device)``:
    ``Generator(ngpu)``)."""
    while type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value in _WRAPPERS:
        value = value.func.value
    return value


def module_call(facts: ScopeFacts, event: CallEvent) -> Optional[str]:
    """The module this call runs (``generator(z)``, ``model.decode(...)``), as the code
    names it; None when it is not known to be one."""
    callee = event.func
    if callee is None:
        return None
    if callee.endswith(".forward"):
        callee = callee[: -len(".forward")]
    if module_instance(facts, callee):
        return callee
    root, _, part = callee.rpartition(".")
    if root and (part in _FORWARD_PARTS or part.startswith("forward_")) and module_instance(facts, root):
        return callee
    return None


def model_calls_under(facts: ScopeFacts, statement: Optional[cst.CSTNode]) -> int:
    """The calls of a model (or of a module: ``module_call``) with autograd on in the scope,
    or only in ``statement`` (a loop or statement that `torch.no_grad()` would wrap)."""
    count = 0
    for call in facts.scope.calls:
        if statement is not None and not any(frame.statement is statement for frame in call.ctx.chain):
            continue
        if not call.ctx.no_grad and (facts.is_model(call.func) or module_call(facts, call) is not None):
            count += 1
    return count


@lru_cache(maxsize=4)
def _registers_hooks(text: str) -> bool:
    """The file's text registers a hook or retains a gradient (asked once per file, not per scope)."""
    return any(True for _ in whole_words(_HOOKS, text))


def trained_through_hooks(facts: ScopeFacts, text: str) -> bool:
    """A function of this file that calls this scope's function also backpropagates, and the
    file registers hooks or retains gradients: the caller's backward may go through what this
    function's forward recorded (Grad-CAM style), whatever becomes of its output."""
    name = facts.scope.name
    if not name or not _registers_hooks(text):
        return False
    for scope in facts.walk.scopes:
        if scope is facts.scope:
            continue
        calls = [c for c in scope.calls if c.func is not None and c.func.rsplit(".", 1)[-1] == name]
        if calls and any(c.attr in ("backward", "manual_backward") for c in scope.calls):
            return True
    return False


def helper_of(facts: ScopeFacts, analysis) -> "Callable[[cst.Call], Optional[Helper]]":
    """What a call runs when it is a function of this file (``postprocess(out)``) or a method
    of the scope's class called on ``self`` (``self._apply_activate(fake)``)."""
    functions = {
        scope.name: scope.function for scope in facts.walk.scopes
        if scope.function is not None and scope.owner is None and scope.name
    }
    owner = facts.scope.owner
    methods = {} if owner is None else {
        method.name: method.function for method in owner.methods if method.function is not None
    }
    self_name = None
    if owner is not None and facts.scope.function is not None and facts.scope.function.params.params:
        self_name = facts.scope.function.params.params[0].name.value

    def resolve(call: cst.Call) -> Optional[Helper]:
        func = call.func
        if type(func) is cst.Name and func.value in functions and facts.bindings.qualify(func) is None:
            function, bound = functions[func.value], False
        elif (
            type(func) is cst.Attribute and type(func.value) is cst.Name and self_name is not None
            and func.value.value == self_name and func.attr.value in methods
        ):
            function = methods[func.attr.value]
            decorators = {
                dotted_name(d.decorator) for d in function.decorators
                if type(d.decorator) in (cst.Name, cst.Attribute)
            }
            # a static method called on `self` takes the arguments as written; a class
            # method's first parameter is the class, as a method's is `self`
            bound = "staticmethod" not in decorators
        elif type(func) is cst.Name and func.value not in functions:
            return _project_helper(func, facts, analysis)
        else:
            return None
        return Helper(function, analysis.flow(function), bound)

    return resolve


def _project_helper(func: cst.Name, facts: ScopeFacts, analysis) -> Optional[Helper]:
    """``cpunum(self(graph))``, ``cpunum`` imported from another file of the project or by
    absolute name from the file's own package: that file's function, read with its names."""
    links = getattr(analysis, "links", None)
    if links is None or not links.may_come_from_package(func.value):
        return None
    # (asked only for a model's output in a function that never backpropagates)
    found = links.definition(func.value, "function", package=True)
    if found is None:
        return None
    other, function = found
    local = {
        scope.name for scope in other.scopes.scopes if scope.function is not None and scope.owner is None and scope.name
    }
    return Helper(function, other.flow(function), False, other.bindings.qualify, local)


def output_only_sinks(facts: ScopeFacts, event: CallEvent, flow: Flow, analysis=None) -> Reach:
    """Where the output of the module call ``event`` goes in its function (``SinkFollower``);
    another call of a module passes it on (an encoder's output to the decoder), and so does a
    loss computed from it. With ``analysis`` (the ``FileAnalysis``), a function of the file or
    a method on ``self`` the output is passed to is followed (``helper_of``)."""
    by_node = {id(call.node): call for call in facts.scope.calls}
    local = {scope.name for scope in facts.walk.scopes if scope.function is not None}

    def is_module_call(call: cst.Call) -> bool:  # (or a loss of what a module returned)
        other = by_node.get(id(call))
        return other is not None and (
            module_call(facts, other) is not None or facts.loss_call(call) is not None or _submodule_call(facts, other)
        )

    statement = event.ctx.chain[-1].statement if event.ctx.chain else None
    if statement is None:
        return Reach(escape="not in a statement")
    helper = None if analysis is None else helper_of(facts, analysis)
    return SinkFollower(flow, facts.bindings.qualify, is_module_call, local, helper).reach(event.node, statement)


def _submodule_call(facts: ScopeFacts, call: CallEvent) -> bool:
    """``self.<attr>(x)`` in a method of a module class whose methods assign ``self.<attr>``
    (not a method of the class): a submodule, whatever builds it (gigaam's ``self.head =
    hydra.utils.instantiate(cfg.head)``): what it returns passes the output on."""
    owner, this = facts.scope.owner, _self_name(facts)
    func = call.func or ""
    if owner is None or this is None or not func.startswith(this + ".") or func.count(".") != 1:
        return False
    return owner.node.name.value in facts.walk.module_classes() and assigned_on_self(facts, func.split(".", 1)[1])


def assigned_on_self(facts: ScopeFacts, attr: str) -> bool:
    """A method of the scope's class assigns ``self.<attr>`` (an attribute, not a method)."""
    owner = facts.scope.owner
    if owner is None or any(method.name == attr for method in owner.methods):
        return False
    wanted = f"self.{attr}"
    return any(wanted in event.targets for method in owner.methods for event in method.assigns)


def _self_name(facts: ScopeFacts) -> Optional[str]:
    """The first parameter of a method (``self``), None outside a class and in a static
    method (whose first parameter is an argument like any other)."""
    function = facts.scope.function
    if facts.scope.owner is None or function is None or not function.params.params or is_staticmethod(function):
        return None
    return function.params.params[0].name.value


def only_sinks_reached(facts: ScopeFacts, event: CallEvent, callee: str, analysis, held_out: bool = False) -> Optional[Reach]:
    """Where the output of a module called where nothing says "evaluation" goes, when TML501
    may report it: in a function (not ``__init__``, not a test) that never backpropagates
    (``held_out``: or in a loop over held-out data after it trains, ``held_out_loops``),
    with autograd on and not switched by its callers, the model neither borrowed nor put back
    in training mode, and no caller training through hooks; None otherwise, or when the
    output reaches something besides sinks (``analysis``: the ``FileAnalysis``)."""
    scope = facts.scope
    function = scope.function
    if function is None or scope.name == "__init__" or test_suite_function(scope) or _unfinished_training_step(facts):
        return None
    if event.ctx.no_grad or (facts.grad_controlled(event.seq) and not opened_by_training_caller(facts)) or scope.grad_work or (facts.training_calls and not held_out):
        return None
    root = callee.rpartition(".")[0]
    if borrowed_model(facts, callee, event.ctx.iterating) or (
        root and root != _self_name(facts) and borrowed_model(facts, root, event.ctx.iterating)
    ):
        return None
    mode_seq = facts.last_mode_change(callee, event.seq)
    if mode_seq is not None and mode_seq[1] == "train":
        return None
    self_name = _self_name(facts)
    if self_name is not None and callee.split(".", 1)[0] == self_name and _grad_set_for(facts, callee):
        return None  # the class sets `requires_grad` of what it runs (frozen weights record nothing)
    if self_name is not None and any(
        target.startswith(self_name + ".") and target.endswith(".data") for event in scope.assigns for target in event.targets
    ):
        return None  # a state update (``self.memory.data = new.data``): the caller decides about autograd
    text = analysis.text if analysis.text is not None else analysis.module.code
    if trained_through_hooks(facts, text):
        return None
    reach = output_only_sinks(facts, event, analysis.flow(function), analysis)
    return reach if reach.only_sinks else None


# words of a function name that say it trains (``_learn_actor_critic``, ``update_policy``)
_TRAINING_WORDS = frozenset({"learn", "train", "training", "update", "fit", "optimize", "optimise"})
_LOSS_NAME = re.compile(r"(?i)loss")


def _unfinished_training_step(facts: ScopeFacts) -> bool:
    """A function named for training that computes a loss (a value it names ``*loss*``) but
    never backpropagates it (causaltorch's ``_learn_policy_gradient`` stubs): what it lacks is
    the backward, and ``no_grad`` would be the wrong fix."""
    words = re.findall(r"[a-z]+|[A-Z][a-z]*", facts.scope.name)
    return not facts.training_calls and any(word.lower() in _TRAINING_WORDS for word in words) and any(
        _LOSS_NAME.search(target) for event in facts.scope.assigns for target in event.targets
        if not _empty_container(event.value)  # (``losses = []`` alone computes nothing)
    )


def _empty_container(value: Optional[cst.BaseExpression]) -> bool:
    """``[]``, ``{}``, ``([], [])``: containers, empty, bound before a loop fills them."""
    if type(value) in (cst.List, cst.Dict, cst.Set):
        return not value.elements  # type: ignore[union-attr]
    if type(value) is cst.Tuple:
        return all(_empty_container(e.value) for e in value.elements)
    return False


def _grad_set_for(facts: ScopeFacts, callee: str) -> bool:
    """A method of the class turns gradients on or off (``grad_work``) for the module ``callee``
    (or a part of it, or one holding it), or in a way not read here (``enable_grad``, the
    ``requires_grad`` of something else than a module's parameters). ctdGAN freezes its
    classifiers ``self.Qy_``/``self.Qu_`` (``for p in self.Qy_.parameters(): p.requires_grad =
    False``), not the generator ``self.G_`` its ``sample`` runs."""
    for method in facts.scope.owner.methods:  # type: ignore[union-attr]
        if not method.grad_work:
            continue
        modules = _grad_targets(method)
        if modules is None or any(
            module == callee or module.startswith(callee + ".") or callee.startswith(module + ".")
            for module in modules
        ):
            return True
    return False


def _grad_targets(scope: Any) -> Optional[Set[str]]:
    """The modules (dotted) whose parameters ``scope`` sets ``requires_grad`` of: ``for p in
    X.parameters(): p.requires_grad = False`` (or ``p.requires_grad_(False)``), ``X.requires_grad_(False)``,
    ``X.freeze()``; None when it also turns gradients on or sets them some other way."""
    found: Set[str] = set()
    for event in scope.assigns:
        for target in event.targets:
            if target.endswith(".requires_grad"):
                module = _parameters_of(event.ctx, target[: -len(".requires_grad")])
                if module is None:
                    return None
                found.add(module)
    for call in scope.calls:
        if call.attr in ("requires_grad_", "freeze") and call.func is not None:
            holder = call.func.rpartition(".")[0]
            found.add(_parameters_of(call.ctx, holder) or holder)
    return found or None  # (none found: ``grad_work`` came from ``enable_grad`` or the like)


def _parameters_of(ctx: Any, name: str) -> Optional[str]:
    """The module ``X`` when ``name`` is the loop variable of ``for name in X.parameters()``
    (or ``for _, name in X.named_parameters()``) around ``ctx``."""
    for loop in reversed(ctx.loops):
        if type(loop) is not cst.For or type(loop.iter) is not cst.Call or type(loop.iter.func) is not cst.Attribute:
            continue
        target = loop.target
        if type(target) is cst.Tuple and len(target.elements) == 2:
            target = target.elements[1].value
        if type(target) is cst.Name and target.value == name:
            if loop.iter.func.attr.value in ("parameters", "named_parameters"):
                return dotted_name(loop.iter.func.value)
            return None
    return None


def eval_by_callers(facts: ScopeFacts, name: str) -> Optional[str]:
    """The caller that put the model parameter ``name`` in evaluation mode: every call of this
    function in the file (``self.<method>(...)`` from its class, or ``<function>(...)``) passes
    there a model the calling function switched with ``.eval()`` before the call, outside
    ``no_grad`` (pytorch_tabular's ``_predict``: ``model.eval()`` then
    ``self._generate_predictions(model, ...)``). None: no such call, or one that does not."""
    function = facts.scope.function
    params = [p.name.value for p in (*function.params.posonly_params, *function.params.params)] if function else []
    owner = facts.scope.owner
    if owner is not None:
        params = params[1:]  # `self`
    if name not in params or facts.scope.grad_work:
        return None
    position = params.index(name)
    wanted = f"self.{facts.scope.name}" if owner is not None else facts.scope.name
    scopes = owner.methods if owner is not None else [s for s in facts.walk.scopes if s.owner is None]
    found: Optional[str] = None
    for scope in scopes:
        for call in scope.calls:
            if call.func != wanted or scope is facts.scope:
                continue
            given = next((a.value for a in call.node.args if a.keyword is not None and a.keyword.value == name), None)
            positional = [a for a in call.node.args if a.keyword is None and not a.star]
            if given is None and position < len(positional) and not any(a.star for a in call.node.args):
                given = positional[position].value
            given_name = dotted_name(given) if given is not None else None
            caller = ScopeFacts(facts.walk, scope)
            mode = caller.last_mode_change(given_name, call.seq) if given_name is not None else None
            if mode is None or mode[1] != "eval" or call.ctx.no_grad or caller.grad_controlled(call.seq) or scope.grad_work:
                return None
            found = scope.name
    return found

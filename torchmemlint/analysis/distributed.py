"""The distributed-training facts of a file (``distributed_facts``), each found on first need
from the shared scope walk (``analysis/autograd.ScopeWalk``: every call of every scope with its
loops) and built once per file: the DDP constructions with the keywords they resolve to
(``**kwargs`` dicts built beside them, in ``__init__`` or by ``dataclasses.asdict`` included,
``analysis/mappings.spread_keywords``), the
``torch.load`` calls and whether they choose a device, ``torch.cuda.empty_cache()`` where it
runs every training step, and ``zero_grad`` calls that keep the gradients.

Which constructors build a DDP is written once here from the libraries' documentation; none
of them is imported.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterator, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import CallEvent, Scope, ScopeWalk
from torchmemlint.analysis.mappings import spread_keywords
from torchmemlint.analysis.scripts import call_keywords, multi_device_evidence
from torchmemlint.analysis.syntax import _body_statements, argument, has_star_args, literal_bool
from torchmemlint.analysis.training import ScopeFacts

# Constructors that build a torch DistributedDataParallel from their keywords: qualified name
# -> (how messages call it, the position `gradient_as_bucket_view` may be passed at; None:
# keyword only).
_DDP = ("torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed.DistributedDataParallel")
DDP_CONSTRUCTORS: Dict[str, Tuple[str, Optional[int]]] = {
    # torch: DistributedDataParallel(module, device_ids, output_device, dim, broadcast_buffers,
    # process_group, bucket_cap_mb, find_unused_parameters, check_reduction,
    # gradient_as_bucket_view, ...)
    **{name: ("DDP", 9) for name in _DDP},
    # accelerate's and Lightning's keyword holders: the DDP they build gets these keywords.
    **{
        f"accelerate.{module}DistributedDataParallelKwargs": ("DistributedDataParallelKwargs", None)
        for module in ("", "utils.", "utils.dataclasses.")
    },
    **{
        f"{package}.strategies.DDPStrategy": ("DDPStrategy", None)
        for package in ("lightning.pytorch", "lightning.fabric", "pytorch_lightning")
    },
    # mmengine: `MMDistributedDataParallel(module, detect_anomalous_params=False, **kwargs)`, a
    # DistributedDataParallel subclass whose `**kwargs` go to DDP's constructor (its first
    # releases also passed `*args` on after `detect_anomalous_params`: DDP's position + 1).
    **{
        f"mmengine.model.{module}MMDistributedDataParallel": ("MMDistributedDataParallel", 10)
        for module in ("", "wrappers.", "wrappers.distributed.")
    },
    # mmcv 1.x: `MMDistributedDataParallel(DistributedDataParallel)` keeps DDP's constructor.
    **{
        f"mmcv.parallel.{module}MMDistributedDataParallel": ("MMDistributedDataParallel", 9)
        for module in ("", "distributed.")
    },
}
_PARTIAL = frozenset({"functools.partial"})
TORCH_LOAD = "torch.load"
EMPTY_CACHE = frozenset({"torch.cuda.empty_cache", "torch.cuda.memory.empty_cache"})
# Methods a framework calls once per training step (Lightning's LightningModule hooks).
PER_STEP_METHODS = frozenset({
    "training_step", "on_train_batch_start", "on_train_batch_end", "on_before_backward",
    "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad",
})


@dataclass(frozen=True)
class DdpConstruction:
    """A DDP built here (or the keywords of one): ``what`` it is called in messages and the
    value it passes for ``gradient_as_bucket_view`` (None: not passed)."""

    node: cst.Call
    what: str
    bucket_view: Optional[cst.BaseExpression]
    last_argument: Optional[cst.BaseExpression]  # where a keyword can be added after
    # how a spread mapping's keywords were read when they are not written in the call's own
    # function (``analysis/mappings.py``): None when they are
    through: Optional[str] = None

    @property
    def bucket_view_off(self) -> bool:
        """The gradients are not bucket views: the keyword is not passed, or passed False."""
        return self.bucket_view is None or literal_bool(self.bucket_view) is False


@dataclass(frozen=True)
class Load:
    """A ``torch.load`` that passes no ``map_location`` (nor a ``**kwargs`` that may)."""

    node: cst.Call
    last_argument: Optional[cst.BaseExpression]  # None: no plain place to add a keyword after


@dataclass(frozen=True)
class EmptyCache:
    node: cst.Call
    per_step_method: Optional[str]  # the framework hook it is in; None: in a training loop


@dataclass(frozen=True)
class ZeroGrad:
    """A ``zero_grad`` whose ``set_to_none`` is False: the literal (``value``), or a parameter
    of the enclosing function passed on whose default is False (``parameter``)."""

    node: cst.Call
    value: cst.BaseExpression
    parameter: Optional[str]
    only_argument: bool  # `set_to_none=False` (or `False`) is the call's one argument


class DistributedFacts:
    """The answers for one file, each computed on first need."""

    def __init__(self, module: cst.Module, scopes: ScopeWalk) -> None:
        self.module = module
        self.scopes = scopes
        self._calls: Optional[List[Tuple[Scope, CallEvent, Optional[str]]]] = None

    def close(self) -> None:
        self.__dict__.clear()

    def calls(self) -> List[Tuple[Scope, CallEvent, Optional[str]]]:
        """Every call of the file with its scope and its callee, qualified (None: not imported)."""
        if self._calls is None:
            found = []
            for scope in self.scopes.scopes:
                qualify = scope.bindings.qualify
                for call in scope.calls:
                    func = call.node.func
                    qualified = qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
                    found.append((scope, call, qualified))
            self._calls = found
        return self._calls

    def ddp_constructions(self) -> Iterator[DdpConstruction]:
        """The DDPs built (and keyword holders of one) whose keywords the file shows all of."""
        for scope, call, qualified in self.calls():
            node = call.node
            constructor = DDP_CONSTRUCTORS.get(qualified) if qualified is not None else None
            offset = 0
            if constructor is None and qualified in _PARTIAL and node.args and node.args[0].keyword is None:
                # `partial(DistributedDataParallelKwargs, find_unused_parameters=True)`: what it
                # builds gets these keywords (and those of its own call: ``_called_with``)
                bound = node.args[0].value
                inner = scope.bindings.qualify(bound) if type(bound) in (cst.Name, cst.Attribute) else None
                constructor = DDP_CONSTRUCTORS.get(inner) if inner is not None else None
                offset = 1
                if constructor is not None and self._called_with(scope, node, "gradient_as_bucket_view"):
                    continue
            if constructor is None and qualified is None:
                # a subclass of one defined in this file that keeps its constructor
                constructor = self._local_subclass(scope, node.func)
            if constructor is None:
                continue
            what, position = constructor
            positional = [arg for arg in node.args if arg.keyword is None and not arg.star]
            if position is not None and len(positional) - offset > position:
                continue  # gradient_as_bucket_view may be passed by position
            spread = spread_keywords(node, scope, self.module)
            if spread is None:
                continue  # a **kwargs this file does not show
            bucket_view = spread.keywords.get("gradient_as_bucket_view")
            last = node.args[-1].value if node.args else None
            if spread.through is not None and (bucket_view is not None or spread.assumed_default):
                # the value is written elsewhere (a field default, `__init__`), or the caller
                # may pass the keyword: no plain place to add it
                last = None
            yield DdpConstruction(node, what, bucket_view, last, spread.through)

    def _local_subclass(self, scope: Scope, func: cst.BaseExpression) -> Optional[Tuple[str, Optional[int]]]:
        """What ``func`` builds when it names a class of this file that subclasses a DDP
        constructor and defines no ``__init__``/``__new__`` (its constructor is the base's,
        ``class _DDP(torch.nn.parallel.DistributedDataParallel): def __getattr__ ...``): a
        module-level class called by its name, or one nested in the class of the method that
        calls it as ``self._DDP``."""
        if type(func) is cst.Name:
            name = func.value
            bindings = scope.bindings
            while bindings.parent is not None and name not in bindings.names:
                bindings = bindings.parent
            if bindings.parent is not None or bindings.names.get(name, None) is not None:
                return None  # a local or parameter of a function, or imported
            classes = [node for node in self.module.body if type(node) is cst.ClassDef and node.name.value == name]
        elif (
            type(func) is cst.Attribute and type(func.value) is cst.Name and scope.owner is not None
            and scope.function is not None and scope.params()
            and scope.params()[0].name.value == func.value.value
        ):
            name = func.attr.value
            classes = [
                node for node in _body_statements(scope.owner.node.body)
                if type(node) is cst.ClassDef and node.name.value == name
            ]
        else:
            return None
        if len(classes) != 1:
            return None
        classdef = classes[0]
        body = _body_statements(classdef.body)
        if any(type(node) is cst.FunctionDef and node.name.value in ("__init__", "__new__") for node in body):
            return None  # its own constructor: which keywords reach DDP's is not read here
        for base in classdef.bases:
            if base.keyword is not None or type(base.value) not in (cst.Name, cst.Attribute):
                continue
            inherited = DDP_CONSTRUCTORS.get(scope.bindings.qualify(base.value) or "")
            if inherited is not None and inherited[0] == "DDP":
                return name, inherited[1]
        return None

    def _called_with(self, scope: Scope, partial: cst.Call, keyword: str) -> bool:
        """Whether a call of the partial ``partial`` (directly, or through the names it is bound
        to in ``scope``) passes ``keyword`` or a ``**mapping`` that may."""
        names = {
            target for event in scope.assigns if event.value is partial for target in event.targets
        }
        for call in scope.calls:
            func = call.node.func
            if func is partial or (call.func is not None and call.func in names):
                if has_star_args(call.node) or any(
                    arg.keyword is not None and arg.keyword.value == keyword for arg in call.node.args
                ):
                    return True
        return False

    def loads_without_map_location(self) -> Iterator[Load]:
        for scope, call, qualified in self.calls():
            if qualified != TORCH_LOAD:
                continue
            node = call.node
            if argument(node, 1, "map_location") is not None:
                continue
            keywords = call_keywords(node, scope)
            if keywords is None or "map_location" in keywords:
                continue
            last = node.args[-1].value if node.args and not has_star_args(node) else None
            yield Load(node, last)

    def has_loads(self) -> bool:
        return any(qualified == TORCH_LOAD for _, _, qualified in self.calls())

    def multi_device_evidence(self) -> Optional[str]:
        """What says the file runs one process per device (``analysis/scripts.py``)."""
        return multi_device_evidence(self.module, self.scopes)

    def empty_cache_per_step(self) -> Iterator[EmptyCache]:
        """``torch.cuda.empty_cache()`` in a per-step hook or in a loop that trains."""
        facts_of: Dict[int, ScopeFacts] = {}
        for scope, call, qualified in self.calls():
            if qualified not in EMPTY_CACHE:
                continue
            if scope.name in PER_STEP_METHODS and scope.owner is not None:
                yield EmptyCache(call.node, scope.name)
                continue
            facts = facts_of.get(id(scope))
            if facts is None:
                facts = facts_of[id(scope)] = ScopeFacts(self.scopes, scope)
            if any(facts.loop_has(loop, facts.training_calls) for loop in call.ctx.loops):
                yield EmptyCache(call.node, None)

    def zero_grads_keeping_gradients(self) -> Iterator[ZeroGrad]:
        for scope, call, _ in self.calls():
            if call.attr != "zero_grad":
                continue
            node = call.node
            if not _may_be_torch_zero_grad(node):
                continue
            arg = argument(node, 0, "set_to_none")
            if arg is not None:
                value = arg.value
            else:
                keywords = call_keywords(node, scope)
                value = None if keywords is None else keywords.get("set_to_none")
            if value is None:
                continue
            default = _parameter_default(scope, value)
            if literal_bool(default if default is not None else value) is not False:
                continue
            parameter = value.value if default is not None else None  # type: ignore[attr-defined]
            yield ZeroGrad(node, value, parameter, arg is not None and len(node.args) == 1)


def distributed_facts(context) -> DistributedFacts:
    """The file's facts, built once and shared by the rules that ask."""
    return context.shared(
        "distributed-facts", lambda: DistributedFacts(context.module, context.analysis.scopes)
    )


def _may_be_torch_zero_grad(node: cst.Call) -> bool:
    """Whether the call fits the signature of torch's ``zero_grad(set_to_none=True)`` (the
    optimizer's and the module's alike): one argument at most, by position or as
    ``set_to_none``. ``self.models[k].zero_grad(set_to_none, force)`` is a project's own method,
    which hands the value on to a torch call the rule sees there."""
    named = [arg for arg in node.args if not arg.star]
    if len(named) > 1:
        return False
    return all(arg.keyword is None or arg.keyword.value == "set_to_none" for arg in named)


def _parameter_default(scope: Scope, value: cst.BaseExpression) -> Optional[cst.BaseExpression]:
    """The default of the enclosing function's parameter that ``value`` names, when the
    function never rebinds it (a `zero_grad(self, set_to_none=False)` that passes it on)."""
    function = scope.node
    if type(value) is not cst.Name or type(function) is not cst.FunctionDef:
        return None
    params = function.params
    for param in (*params.params, *params.kwonly_params):
        if param.name.value == value.value and param.default is not None:
            if any(value.value in event.targets for event in scope.assigns):
                return None
            return param.default
    return None

"""What a training script shows about itself, for the TML6xx rules: does the file train
(``training_evidence``), does it mention mixed precision (``uses_mixed_precision``), and where
are the ``.backward()`` calls of its loops (``loop_backward_calls``)."""

from __future__ import annotations

from typing import Dict, List, Optional

import libcst as cst

from torchmemlint.analysis.autograd import Scope, ScopeWalk
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import nodes_of


# -- does the file train? ------------------------------------------------------------------------
TRAINER_CLASSES = ("Trainer", "SFTTrainer", "Seq2SeqTrainer", "Accelerator")


def training_evidence(module: cst.Module) -> Optional[str]:
    """What in the file shows it trains a model: a ``.backward()`` call, an optimizer
    ``.step()``, a ``*Trainer(...)`` / ``trainer.train()`` / ``fit(...)``, or a Lightning
    ``training_step``; None when nothing does."""
    for node in nodes_of(module, cst.FunctionDef, cst.Call):
        if type(node) is cst.FunctionDef:
            if node.name.value == "training_step":
                return "`training_step`"
            continue
        func = node.func
        name = func.attr.value if type(func) is cst.Attribute else func.value if type(func) is cst.Name else None
        if name is None:
            continue
        if name == "backward":
            return "`.backward()`"
        if name == "step" and type(func) is cst.Attribute:
            owner = dotted_name(func.value) or ""
            if "optim" in owner.lower() or owner.endswith(("opt", "optimizer")):
                return "`%s.step()`" % owner
        if name.endswith(TRAINER_CLASSES):
            return "`%s(...)`" % name
        if name in ("train", "fit") and type(func) is cst.Attribute and not node.args:
            owner = dotted_name(func.value) or ""
            if "trainer" in owner.lower():
                return "`%s.%s()`" % (owner, name)
        if name == "fit" and type(func) is cst.Attribute and "trainer" in (dotted_name(func.value) or "").lower():
            return "`%s.fit(...)`" % dotted_name(func.value)
    return None


# -- mixed precision -----------------------------------------------------------------------------
MIXED_PRECISION_MARKERS = (
    "autocast", "GradScaler", "bfloat16", "float16", ".half()", "fp16", "bf16", "precision",
    "cuda.amp", "torch.amp", "apex",
)


def uses_mixed_precision(text: str) -> Optional[str]:
    """The first mixed-precision marker the file's text mentions, or None."""
    for marker in MIXED_PRECISION_MARKERS:
        if marker in text:
            return marker
    return None


def loop_backward_calls(scopes: ScopeWalk) -> List[cst.Call]:
    """``x.backward()`` calls inside a ``for``/``while`` loop of their own function (the shared
    scope walk's loops): the training steps of the file."""
    return [
        call.node
        for scope in scopes.scopes
        for call in scope.calls
        if call.attr == "backward" and call.ctx.loops
    ]


# -- several devices -------------------------------------------------------------------------------
# Imports that make a script run one process per device (torchrun, accelerate, DeepSpeed,
# Lightning's strategies), and the environment variables torchrun sets for each process.
DISTRIBUTED_MODULES = (
    "torch.distributed", "torch.nn.parallel.DistributedDataParallel", "torch.nn.parallel.distributed",
    "accelerate", "deepspeed", "lightning.pytorch.strategies", "pytorch_lightning.strategies",
    "lightning.fabric", "torch.multiprocessing.spawn",
)
RANK_VARIABLES = frozenset({"LOCAL_RANK", "WORLD_SIZE", "RANK", "LOCAL_WORLD_SIZE"})


def _distributed(qualified: Optional[str]) -> bool:
    return qualified is not None and any(
        qualified == prefix or qualified.startswith(prefix + ".") for prefix in DISTRIBUTED_MODULES
    )


def multi_device_evidence(module: cst.Module, scopes: ScopeWalk) -> Optional[str]:
    """What in the file shows it runs as one process per device: an import from
    ``torch.distributed``, DDP, accelerate, DeepSpeed or a Lightning strategy, a call that
    qualifies to one (``torch.distributed.init_process_group``), or torchrun's environment
    variables (``os.environ["LOCAL_RANK"]``); None when nothing does."""
    for scope in scopes.scopes:
        for name, qualified in scope.bindings.names.items():
            if _distributed(qualified):
                return "`%s`" % qualified
        for call in scope.calls:
            func = call.node.func
            qualified = scope.bindings.qualify(func) if type(func) in (cst.Name, cst.Attribute) else None
            if _distributed(qualified):
                return "`%s`" % qualified
    for string in nodes_of(module, cst.SimpleString):
        if string.evaluated_value in RANK_VARIABLES:
            return "`%s`" % string.value
    return None


def call_keywords(call: cst.Call, scope: Scope) -> Optional[Dict[str, cst.BaseExpression]]:
    """The keyword arguments of ``call``, with those of a ``**name`` whose name the scope binds
    once, before the call, to a dict display or ``dict(...)`` with literal keys; None when a
    ``**`` argument cannot be read (a parameter, a dict built elsewhere)."""
    found: Dict[str, cst.BaseExpression] = {}
    for arg in call.args:
        if arg.star == "**":
            spread = _dict_of(arg.value, call, scope)
            if spread is None:
                return None
            found.update(spread)
        elif arg.keyword is not None:
            found[arg.keyword.value] = arg.value
    return found


def _dict_of(
    value: cst.BaseExpression, call: cst.Call, scope: Scope
) -> Optional[Dict[str, cst.BaseExpression]]:
    if type(value) is not cst.Name:
        return dict_display(value)
    events = [event for event in scope.assigns if value.value in event.targets]
    seq = next((event.seq for event in scope.calls if event.node is call), None)
    if len(events) != 1 or events[0].augmented or seq is None or events[0].seq > seq:
        return None
    found = dict_display(events[0].value) if events[0].value is not None else None
    if found is None:
        return None
    # Filled in after its definition, maybe under an `if`: a key written with a literal name
    # may be passed, with that value; any other write: unknown.
    return found if apply_dict_writes(found, value.value, scope, events[0].seq) else None


def apply_dict_writes(found: Dict[str, cst.BaseExpression], name: str, scope: Scope, after: int) -> bool:
    """Apply to ``found`` what ``scope`` writes into the dict ``name`` after sequence point
    ``after`` (maybe under ``if``s: a key written may be passed, with that value); False when a
    write cannot be read."""
    for event in scope.calls:
        if event.seq <= after:
            continue
        if event.func == "%s.update" % name:
            args = event.node.args
            if len(args) == 1 and args[0].keyword is None and not args[0].star:
                added = dict_display(args[0].value)
            else:
                added = dict_display(cst.Call(cst.Name("dict"), args))
            if added is None:
                return False
            found.update(added)
        elif event.func == "%s.setdefault" % name:
            args = event.node.args
            if len(args) != 2 or type(args[0].value) is not cst.SimpleString or args[0].keyword or args[0].star:
                return False
            found.setdefault(args[0].value.evaluated_value, args[1].value)  # type: ignore[arg-type]
        elif event.func == "%s.pop" % name:
            args = event.node.args
            if not args or type(args[0].value) is not cst.SimpleString:
                return False
            found.pop(args[0].value.evaluated_value, None)  # type: ignore[arg-type]
    for assign in nodes_of(scope.node, cst.Assign):
        for target in assign.targets:
            written = target.target
            if type(written) is cst.Subscript and dotted_name(written.value) == name:
                key = written.slice[0].slice if len(written.slice) == 1 else None
                if type(key) is not cst.Index or type(key.value) is not cst.SimpleString:
                    return False
                found[key.value.evaluated_value] = assign.value  # type: ignore[index]
    for statement in nodes_of(scope.node, cst.Del):
        target = statement.target
        if type(target) is cst.Subscript and dotted_name(target.value) == name:
            key = target.slice[0].slice if len(target.slice) == 1 else None
            if type(key) is not cst.Index or type(key.value) is not cst.SimpleString:
                return False
            found.pop(key.value.evaluated_value, None)  # type: ignore[arg-type]
    return True


def dict_display(value: cst.BaseExpression) -> Optional[Dict[str, cst.BaseExpression]]:
    """The literal keys of a dict display or `dict(k=v)` call (None: not such a display)."""
    found: Dict[str, cst.BaseExpression] = {}
    if type(value) is cst.Dict:
        for element in value.elements:
            if type(element) is not cst.DictElement or type(element.key) is not cst.SimpleString:
                return None
            found[element.key.evaluated_value] = element.value  # type: ignore[index]
        return found
    if type(value) is cst.Call and type(value.func) is cst.Name and value.func.value == "dict":
        for arg in value.args:
            if arg.keyword is None:
                return None
            found[arg.keyword.value] = arg.value
        return found
    return None

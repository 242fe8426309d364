"""TML3xx: downsampling removed in front of a deep (ResNet-style) encoder."""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.classes import ClassModel, Part
from torchmemlint.analysis.factories import possible_callees
from torchmemlint.analysis.flow import ENTRY
from torchmemlint.analysis.named_layers import method_qualify, stored_values
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.producers import Producers
from torchmemlint.analysis.syntax import argument, enclosing, literal_number, walk
from torchmemlint.analysis.vocabulary import (
    Category, KIND_BY_MODULE, NN, NORM_MODULES, POOL_FUNCTIONS, POOL_MODULES, SENET_STEM,
)

from torchmemlint.rules.base import Rule

_RESNET_PREFIXES = ("resnet", "resnext", "wide_resnet")
_RESNET_PACKAGES = ("torchvision.models", "timm.models", "timm")
_RESNET_CLASSES = frozenset(
    {
        "torchvision.models.ResNet",
        "torchvision.models.resnet.ResNet",
        "timm.models.ResNet",
        "timm.models.resnet.ResNet",
    }
)
_STEM_BODY = frozenset({"bn1", "relu", "act1"})
_STAGES = ("layer1", "layer2", "layer3", "layer4")

FACTOR_TEXT = (
    "every later activation is 4x larger (measured x2.30 saved activations for a resnet34 "
    "UNet, x3.28 resnet101, x3.44 resnet152; batch 64 at 128x128: resnet101 4.1 -> 11.8 GiB, "
    "resnet152 5.3 -> 15.9 GiB)"
)
ADVICE = (
    "keep the pool, use a stride-2 stem conv, or checkpoint the high-resolution stages; keeping the "
    "pool (or a stride-2 conv) halves the output's height and width, so a model that must return "
    "the input's resolution needs one more upsampling stage"
)


@dataclass(frozen=True)
class _Verdict:
    """Result of walking back from ``layer1``: the stem reached without a pool, or not."""

    found: bool
    stem: Optional[cst.CSTNode] = None  # the Sequential that rebuilds the stem, if it is one
    walked: Tuple[str, ...] = ()  # stem parts passed on the way (for the message)
    pool: str = "maxpool"  # the pool left out, as a path below the encoder


_STOP = _Verdict(False)


class _StemWalk:
    """Walks backwards from ``base.layer1`` through what feeds it, looking for ``base.maxpool``."""

    def __init__(self, model: ClassModel, base: str) -> None:
        self.model = model
        self.base = base
        self.walked: List[str] = []

    def part(self, part: Part, depth: int = 0) -> Optional[_Verdict]:
        """None: keep walking; a verdict: stop."""
        borrowed = part.borrowed or self._inherited(part)
        if borrowed is not None:
            base, name = borrowed
            if base == f"{self.base}.layer0":  # a SENet stem: layer0.conv1 ... layer0.pool
                if name not in SENET_STEM:
                    return _STOP  # layer0.pool is kept
                self.walked.append(f"layer0.{name}")
                if name == "conv1":
                    return _Verdict(True, walked=tuple(reversed(self.walked)), pool="layer0.pool")
                return None
            if base != self.base:
                return _STOP
            if name == "conv1":
                self.walked.append(name)
                return _Verdict(True, walked=tuple(reversed(self.walked)))
            if name in _STEM_BODY:
                self.walked.append(name)
                return None
            return _STOP  # maxpool, or a later stage
        if part.layer is not None:
            qualified = part.layer.qualified
            if qualified in POOL_MODULES:
                return _STOP
            if qualified == NN + "Conv2d" and self.walked and self.walked[-1] == "bn1":
                # the stem conv replaced in a rebuilt stem (`stem[0] = nn.Conv2d(6, 64, ...)`)
                self.walked.append("conv1")
                return _Verdict(True, walked=tuple(reversed(self.walked)))
            if qualified in KIND_BY_MODULE or qualified in NORM_MODULES:
                return None
            return _STOP
        if part.attribute is not None and depth < 4:
            sequence = self.model.attribute_sequence(part.attribute)
            if sequence is None:
                return _STOP
            return self.parts(sequence, depth + 1)
        return _STOP

    def parts(self, parts: List[Part], depth: int = 0) -> Optional[_Verdict]:
        for part in reversed(parts):
            verdict = self.part(part, depth)
            if verdict is not None:
                return verdict
        return None

    def _inherited(self, part: Part) -> Optional[Tuple[str, str]]:
        """``self.conv1`` of a class that inherits a ResNet and does not set ``conv1`` itself."""
        name = part.attribute
        if self.base != "self" or name is None or name in self.model.assignments:
            return None
        return ("self", name) if name in _STEM_BODY | {"conv1", "maxpool", *_STAGES} else None


class DroppedStemPool(Rule):
    """
    ## What it does
    Flags a ResNet-style encoder (torchvision or timm `resnet*`, `resnext*`, `wide_resnet*`,
    also picked by name from a dict of such constructors or by `getattr(torchvision.models,
    name)`, or any object whose `conv1`, `bn1`, `relu`, `maxpool`, `layer1`..`layer4` are used) whose stem
    max-pool is dropped: the stem is rebuilt as `nn.Sequential(enc.conv1, enc.bn1, enc.relu)`
    and fed straight into `enc.layer1`, `enc.maxpool` is replaced by `nn.Identity()`, or
    `enc.conv1` is replaced by a stride-1 convolution. Also followed: a SENet-style stem
    rebuilt from `enc.layer0.conv1 ... relu1` without `enc.layer0.pool`, the children of a
    torchvision/timm ResNet or of a ResNet class of the same file sliced past the pool
    (`nn.Sequential(*list(resnet.children())[:3])`, then `[4:8]`), and a local Sequential put
    into another (`stem[0] = nn.Conv2d(6, 64, ...)`; `nn.Sequential(stem, body)`). A class
    counts as a ResNet when it derives, directly or through classes of the project (this file,
    another file of its package, a script's sibling file), from torchvision's or timm's
    `ResNet` or from a project class that builds `conv1`, a max-pool `maxpool` and `layer1`
    in `__init__` (`tests/test_project_rules.py`). A constructor stored on `self` and built
    later counts as what it was given (`self.base_model = {"resnet18": resnet18, ...}[name]`,
    then `self.encoder = self.base_model(**kw)` in that or another method, or in a subclass):
    a ResNet among the dict's constructors, beside the project's own encoders but beside no
    torchvision or timm model that is not one (`tests/test_downsampling_stored.py`). A model
    picked from a models package by name (`torchvision.models.__dict__[name]`,
    `vars(models)[name]`), `timm.create_model(name)` where the replacement runs only under
    `if "resnet" in name` (or `name.startswith("resnet")`), and a function handed the model that
    replaces both its `conv1` and its `maxpool` count too (`tests/test_downsampling_helpers.py`).

    ## Why is this bad?
    The stem pool halves the height and width before `layer1`. Without it every later stage
    works at twice the resolution and keeps 4x larger activations for backward, which is where
    most of the training memory of a ResNet encoder (and of the UNet decoder on top of it) goes.
    A model that fitted in 8 GB may then run out of memory; it is a real cost, not a bug.

    ## Example
    ```python
    import torch.nn as nn
    import torchvision


    class UNetEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet34()
            self.stem = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)
            self.enc1 = self.encoder.layer1

        def forward(self, x):
            return self.enc1(self.stem(x))
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    import torchvision


    class UNetEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet34()
            self.stem = nn.Sequential(
                self.encoder.conv1, self.encoder.bn1, self.encoder.relu, self.encoder.maxpool
            )
            self.enc1 = self.encoder.layer1

        def forward(self, x):
            return self.enc1(self.stem(x))
    ```
    If the higher resolution is wanted, budget for it: a smaller batch, mixed precision, or
    `torch.utils.checkpoint` around the high-resolution stages.

    ## Fix safety
    No fix: putting the pool back changes the architecture (receptive field, output size). A
    UNet whose decoder upsamples back to the input's size then returns H/2 x W/2 instead of
    H x W: add an upsampling stage (e.g. `nn.Upsample(scale_factor=2)` before the head) to
    restore it. `torchmemlint profile` measures the variant that keeps the pool and says when
    its output shape differs; such a variant is never reported as confirmed
    (`tests/dynamic/test_profile_inputs.py`).

    ## Measured
    UNet with a torchvision-style resnet34 encoder, 4x3x128x128: saved for backward
    96,151,808 -> 220,801,280 B without the pool (x2.30); resnet101 x3.28, resnet152 x3.44; at
    batch 64 (with Adam state) 1.85 -> 3.70, 4.10 -> 11.80 and 5.26 -> 15.91 GiB
    (`benchmarks/memory_figures.py`, `benchmarks/results/memory_figures.json`, c_stem_pool).
    """

    code = "TML301"
    # the triggers below: `x.layer1` / `x.children()` in a class, `x.maxpool = `, `x.conv1 = `
    needs = (("layer1", "children", "maxpool", "conv1"),)
    needs_project = True  # an encoder's base class may be defined in another file
    project_facts = frozenset({"imports"})
    name = "dropped-stem-pool"
    summary = "ResNet stem max-pool dropped before layer1: every later activation is 4x larger"

    def __init__(self, context) -> None:
        super().__init__(context)
        self._classes_with_stages: Set[int] = set()
        self._reported: Set[int] = set()

    # -- triggers ---------------------------------------------------------------------------------
    def visit_Attribute(self, node: cst.Attribute) -> None:
        if node.attr.value in ("layer1", "children"):  # `list(resnet.children())[4:8]`
            classdef = enclosing(self.context, cst.ClassDef)
            if classdef is not None:
                self._classes_with_stages.add(id(classdef))

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        if id(original_node) in self._classes_with_stages:
            self._check_class(original_node)

    def visit_Assign(self, node: cst.Assign) -> None:
        if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Attribute:
            return
        target = node.targets[0].target
        attribute = target.attr.value
        if attribute == "maxpool":
            self._check_pool_replacement(target, node.value)
        elif attribute == "conv1":
            self._check_conv_replacement(target.value, node.value, node.value)
        elif attribute == "stride" and type(target.value) is cst.Attribute:
            if target.value.attr.value == "conv1" and _is_stride_one(node.value):
                self._check_conv_replacement(target.value.value, None, node.value)

    # -- replacements -------------------------------------------------------------------------------
    def _check_pool_replacement(self, target: cst.Attribute, value: cst.BaseExpression) -> None:
        if type(value) is not cst.Call:
            return
        qualified = self.qualify(value.func)
        empty_sequential = qualified == NN + "Sequential" and not value.args
        if qualified != NN + "Identity" and not empty_sequential:
            return
        base = dotted_name(target.value)
        if base is None or not self._is_resnet(base):
            return
        self.report(
            value,
            f"`{base}.maxpool` is replaced by a no-op: every later activation is 4x larger. "
            f"Layer1 to layer4 of this ResNet-style "
            f"encoder run at twice the height and width, so {FACTOR_TEXT}; {ADVICE}",
        )

    def _check_conv_replacement(
        self, owner: cst.BaseExpression, conv: Optional[cst.BaseExpression], anchor: cst.BaseExpression
    ) -> None:
        base = dotted_name(owner)
        if base is None:
            return
        if conv is not None:
            if type(conv) is not cst.Call or self.qualify(conv.func) != NN + "Conv2d":
                return
            stride = argument(conv, 3, "stride")
            if stride is not None and not _is_stride_one(stride.value):
                return
        if not self._is_resnet(base):
            return
        self.report(
            anchor,
            f"`{base}.conv1` has stride 1: every later activation is 4x larger. A ResNet stem "
            f"has stride 2; the stem and every stage after it run at twice the height and width, so {FACTOR_TEXT}; {ADVICE}",
        )

    def _is_resnet(self, base: str) -> bool:
        """Evidence in the surrounding class, function or module that ``base`` is a ResNet."""
        if base == "self":
            classdef = enclosing(self.context, cst.ClassDef)
            return type(classdef) is cst.ClassDef and self._inherits_resnet(classdef)
        scope: cst.CSTNode = (
            enclosing(self.context, cst.ClassDef)
            or enclosing(self.context, cst.FunctionDef)
            or self.context.module
        )
        function = enclosing(self.context, cst.FunctionDef)
        if type(function) is cst.FunctionDef and _stem_helper(function, base):
            return True
        for node in walk(scope):
            if type(node) is cst.Attribute and node.attr.value in _STAGES:
                if dotted_name(node.value) == base:
                    return True
            elif type(node) is cst.Assign and len(node.targets) == 1:
                if dotted_name(node.targets[0].target) == base and self._is_resnet_factory(node.value):
                    return True
        return False

    def _is_resnet_factory(self, value: cst.BaseExpression) -> bool:
        """A call of a ResNet constructor, also picked from a dict of them or by
        ``getattr(torchvision.models, name)`` (every constructor it may call is one)."""
        if type(value) is not cst.Call:
            return False
        function = enclosing(self.context, cst.FunctionDef)
        callees = possible_callees(value.func, self.qualify, self.context.module, function)
        classdef = enclosing(self.context, cst.ClassDef)
        func = value.func
        if callees is None and type(classdef) is cst.ClassDef and type(func) is cst.Attribute and type(func.value) is cst.Name:
            # ``self.encoder = self.base_model(**kw)``: what the class stored in ``self.base_model``
            stored = stored_values(self.context.analysis, classdef, func.attr.value)
            callees = []
            for stored_value, method in stored or ():
                found = possible_callees(stored_value, self._project_qualify(method), self.context.module, method)
                if found is None:
                    return False
                callees.extend(found)
            # a constructor picked by name from a dict that also holds the project's other
            # encoders (``vit_tiny``): a ResNet among them, and no torchvision/timm model that is not one
            return any(self._resnet_constructor(value, q) for q in callees) and not any(
                q.startswith(("torchvision.", "timm.")) and not self._resnet_constructor(value, q) for q in callees
            )
        return bool(callees) and all(self._resnet_constructor(value, qualified) for qualified in callees)

    def _name_constrained(self, name: cst.BaseExpression) -> bool:
        """The statement being visited runs only where the model name ``name`` is a ResNet's:
        in the body of an ``if "resnet" in name`` (``name.startswith("resnet")``, also one
        side of an ``and``)."""
        if type(name) is not cst.Name:
            return False
        stack = self.context.statement_stack
        for position, statement in enumerate(stack[:-1]):
            if type(statement) is cst.If and any(s is stack[position + 1] for s in statement.body.body):
                if _constrains(statement.test, name.value):
                    return True
        return False

    def _project_qualify(self, method: cst.FunctionDef):
        """Qualified names as ``method`` binds them; a name the project defines
        (``from .backbones import vit_tiny``) as ``<project>.vit_tiny``."""
        qualify = method_qualify(self.context.analysis, method)
        links = self.context.analysis.links

        def project_qualify(node: cst.BaseExpression) -> Optional[str]:
            found = qualify(node)
            dotted = dotted_name(node) if found is None and links is not None else None
            return f"<project>.{dotted}" if dotted and links.may_come_from_project(dotted) else found

        return project_qualify

    def _resnet_constructor(self, value: cst.Call, qualified: str) -> bool:
        if qualified == "timm.create_model" and value.args:
            name = value.args[0].value
            if type(name) is not cst.SimpleString:
                return self._name_constrained(name)  # `if "resnet" in model_name:`
            return name.evaluated_value.startswith(_RESNET_PREFIXES)
        package, _, function = qualified.rpartition(".")
        if package in ("torchvision.models", "timm.models") and not function:
            return True  # `getattr(torchvision.models, name)`: its `maxpool`/`conv1` are used below
        return package.startswith(_RESNET_PACKAGES) and function.startswith(_RESNET_PREFIXES)

    def _inherits_resnet(self, classdef: cst.ClassDef) -> bool:
        """A torchvision/timm ``ResNet`` among the class's bases, or a class of the project (this
        file or another) that derives from one or builds a ResNet stem itself (``conv1``,
        ``maxpool`` a max-pool, ``layer1``)."""
        if any(self.qualify(base.value) in _RESNET_CLASSES for base in classdef.bases):
            return True
        links = self.context.analysis.links
        if links is None:
            return False
        for base in classdef.bases:
            for ancestor in links.ancestry(dotted_name(base.value), own=True):
                if ancestor.kind == "external" and ancestor.name in _RESNET_CLASSES:
                    return True
                if self._resnet_stem(links, ancestor):
                    return True
        return False

    @staticmethod
    def _resnet_stem(links, ancestor) -> bool:
        klass = links.index.class_facts(ancestor)
        if klass is None or not {"conv1", "layer1"} <= klass.assigned:
            return False
        pool = dict(klass.builds).get("maxpool")
        located = links.index.locate(ancestor.module.path, pool) if pool else None
        return located is not None and located.kind == "external" and located.name in POOL_MODULES

    # -- rebuilt stems ----------------------------------------------------------------------------
    def _check_class(self, classdef: cst.ClassDef) -> None:
        file = self.context.analysis
        model = file.class_model(classdef)
        resolver = file.resolver
        for call, qualified, method, statement in model.constructors:
            if qualified not in (NN + "Sequential", NN + "ModuleList"):
                continue
            self_name = model.self_name(method)
            elements = _container_elements(resolver, call, qualified, self_name, method, statement)
            if elements is None:
                continue
            for position, part in enumerate(elements):
                base = self._stage_base(model, part)
                if base is None:
                    continue
                # What runs before layer1 in the same container; a Sequential that starts with
                # layer1 is followed into its callers by `_stage_calls`.
                verdict = _StemWalk(model, base).parts(elements[:position])
                if verdict is not None and verdict.found:
                    self._report_stem(verdict, base, call)
        for stage_call, method, statement, base in self._stage_calls(model):
            self._walk_flow(model, method, statement, stage_call, _StemWalk(model, base), base)

    def _stage_base(self, model: ClassModel, part: Part) -> Optional[str]:
        """``enc`` when ``part`` is ``enc.layer1`` (directly or through an attribute)."""
        if part.borrowed is not None:
            base, name = part.borrowed
            return base if name == "layer1" else None
        if part.attribute is None:
            return None
        if part.attribute == "layer1" and "layer1" not in model.assignments:
            return "self" if self._inherits_resnet(model.node) else None
        inner = model.attribute_part(part.attribute)
        if inner is not None and inner.borrowed is not None and inner.borrowed[1] == "layer1":
            return inner.borrowed[0]
        return None

    def _stage_calls(self, model: ClassModel):
        """Direct calls that run ``layer1`` first: ``enc.layer1(x)`` or ``self.enc1(x)``."""
        for use in model.borrowed:
            if use.part == "layer1" and use.call is not None and use.call.func is use.node:
                yield use.call, use.method, use.statement, use.base
        for name in model.references:
            sequence = model.attribute_sequence(name)
            first = sequence[0] if sequence else None
            if first is None and name == "layer1" and self._inherits_resnet(model.node):
                first = Part(cst.Name("layer1"), attribute="layer1")
            if first is None:
                continue
            base = self._stage_base(model, first)
            if base is None:
                continue
            for reference in model.calls(name):
                yield reference.call, reference.method, reference.statement, base

    def _walk_flow(
        self,
        model: ClassModel,
        method: cst.FunctionDef,
        statement: Optional[cst.CSTNode],
        call: cst.Call,
        walker: _StemWalk,
        base: str,
    ) -> None:
        """Follow the input of ``call`` back through ``method`` until the stem or a pool."""
        flow = model.file.flow(method)
        index = flow.statement_index(statement)
        if index is None or not flow.reliable or len(call.args) != 1:
            return
        self_name = model.self_name(method)
        producers = Producers(model.file, model)
        expression: cst.BaseExpression = call.args[0].value
        for _ in range(16):
            if type(expression) is cst.Name:
                definitions = flow.definitions(expression.value, index)
                if len(definitions) != 1 or definitions[0].index == ENTRY or definitions[0].value is None:
                    return
                expression, index = definitions[0].value, definitions[0].index
                continue
            if type(expression) is not cst.Call or not expression.args:
                return
            func = expression.func
            parts: Optional[List[Part]] = None
            if type(func) is cst.Attribute and self_name is not None and dotted_name(func.value) == self_name:
                parts = [Part(func, attribute=func.attr.value)]
            elif type(func) is cst.Attribute and dotted_name(func.value) is not None:
                if self.qualify(func.value) is None:
                    parts = [Part(func, borrowed=(dotted_name(func.value), func.attr.value))]  # type: ignore[arg-type]
            if parts is not None:
                verdict = walker.parts(parts)
                if verdict is not None:
                    if verdict.found:
                        stem = _stem_sequential(model, parts[0])
                        self._report_stem(verdict, base, stem if stem is not None else call)
                    return
            else:
                qualified = self.qualify(func)
                if qualified is None or qualified in POOL_FUNCTIONS:
                    return  # a method's input is its receiver, not its first argument
                category = producers.call(expression, self_name).category
                if category in (Category.UNKNOWN, Category.POOL):
                    return
            expression = expression.args[0].value

    def _report_stem(self, verdict: _Verdict, base: str, anchor: cst.CSTNode) -> None:
        if id(anchor) in self._reported:
            return
        self._reported.add(id(anchor))
        stem = ", ".join(f"`{base}.{name}`" for name in verdict.walked)
        self.report(
            anchor,
            f"`{base}.{verdict.pool}` is dropped: every later activation is 4x larger. "
            f"The stem ({stem}) feeds `{base}.layer1` directly, so "
            f"layer1 to layer4 run at twice the height and width and {FACTOR_TEXT}; {ADVICE}",
        )


def _container_elements(
    resolver, call: cst.Call, qualified: str, self_name: Optional[str],
    function: Optional[cst.FunctionDef] = None, statement: Optional[cst.CSTNode] = None,
) -> Optional[List[Part]]:
    if qualified == NN + "Sequential":
        return resolver.sequential(call, self_name, function, statement)
    if len(call.args) != 1 or type(call.args[0].value) not in (cst.List, cst.Tuple):
        return None
    parts: List[Part] = []
    for element in call.args[0].value.elements:
        if type(element) is not cst.Element:
            return None
        value = element.value
        inner = resolver.sequential(value, self_name) if type(value) is cst.Call else None
        # A stage list runs its elements one after another, like a Sequential.
        parts.extend(inner if inner is not None else [resolver.part(value, self_name)])
    return parts


def _stem_sequential(model: ClassModel, part: Part) -> Optional[cst.CSTNode]:
    """The Sequential constructor behind ``self.x`` (the stem rebuild), to report it there."""
    if part.attribute is None:
        return None
    assignment = model.single_assignment(part.attribute)
    if assignment is None or type(assignment.value) is not cst.Call:
        return None
    return assignment.value if model.file.resolver.constructor(assignment.value) == NN + "Sequential" else None


def _is_stride_one(node: cst.BaseExpression) -> bool:
    if type(node) in (cst.Tuple, cst.List):
        return bool(node.elements) and all(_is_stride_one(e.value) for e in node.elements)
    return literal_number(node) == 1


def _stem_helper(function: cst.FunctionDef, base: str) -> bool:
    """``def adapt(model): model.conv1 = ...; model.maxpool = nn.Identity()``: a parameter whose
    ``conv1`` and ``maxpool`` the function both replaces (a ResNet's stem, by its parts)."""
    names = [p.name.value for p in (*function.params.posonly_params, *function.params.params, *function.params.kwonly_params)]
    if base not in names:
        return False
    replaced = set()
    for node in walk(function):
        if type(node) is cst.Assign:
            for target in node.targets:
                if type(target.target) is cst.Attribute and dotted_name(target.target.value) == base:
                    replaced.add(target.target.attr.value)
    return {"conv1", "maxpool"} <= replaced


def _constrains(test: cst.BaseExpression, name: str) -> bool:
    """``test`` holds only for a ResNet model name: ``"resnet" in name``,
    ``name.startswith("resnet")``, or an ``and`` with one of these."""
    if type(test) is cst.BooleanOperation:
        if type(test.operator) is cst.And:
            return _constrains(test.left, name) or _constrains(test.right, name)
        return False
    if type(test) is cst.Comparison and len(test.comparisons) == 1:
        comparison = test.comparisons[0]
        return (
            type(comparison.operator) is cst.In and type(test.left) is cst.SimpleString
            and test.left.evaluated_value.startswith(_RESNET_PREFIXES)
            and type(comparison.comparator) is cst.Name and comparison.comparator.value == name
        )
    if type(test) is cst.Call and type(test.func) is cst.Attribute and test.func.attr.value == "startswith":
        owner, args = test.func.value, test.args
        return (
            type(owner) is cst.Name and owner.value == name and len(args) == 1
            and type(args[0].value) is cst.SimpleString and args[0].value.evaluated_value.startswith(_RESNET_PREFIXES)
        )
    return False

"""Where a ResNet-style encoder's stem pool is dropped (TML301's question).

``dropped_stem_pools(analysis)`` answers, once per file, from its index:

- which classes are ResNet-style encoders: a torchvision/timm ``ResNet`` among their bases, or a
  class of the project (this file, another file of its package: ``analysis/links.py``) that
  derives from one or builds a ResNet stem itself (``conv1``, a max-pool ``maxpool``, ``layer1``);
- which objects are ResNets where a stem part is replaced: built by a ResNet constructor (also
  picked from a dict of them, ``getattr(torchvision.models, name)``, ``timm.create_model`` under
  ``if "resnet" in name``, a constructor stored on ``self`` and built later), an object whose
  stages are used beside it, ``self`` in such a class, a parameter of a stem helper;
- where the pool is lost: ``x.maxpool = nn.Identity()`` (or an empty ``nn.Sequential()``),
  ``x.conv1`` replaced by a stride-1 convolution (``x.conv1.stride = 1``), and a stem rebuilt
  from ``x.conv1``, ``x.bn1``, ``x.relu`` (a SENet's ``x.layer0.*``, a torchvision/timm ResNet's
  children sliced past the pool) that feeds ``x.layer1`` without ``x.maxpool``: in one
  container, or through the statements of a method (its flow).

Each answer is a ``StemPoolDrop``: where to report it and what was found; the rule words it.
Names are resolved as the engine's traversal resolves them where the code stands
(``analysis/sites.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.classes import ClassModel, Part
from torchmemlint.analysis.callees import possible_callees
from torchmemlint.analysis.flow import ENTRY
from torchmemlint.analysis.named_layers import method_qualify, stored_values
from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.producers import Producers
from torchmemlint.analysis.sites import Sites
from torchmemlint.analysis.syntax import argument, literal_number, walk
from torchmemlint.analysis.vocabulary import (
    Category, KIND_BY_MODULE, NN, NORM_MODULES, POOL_FUNCTIONS, POOL_MODULES, SENET_STEM,
)

Qualify = Callable[[cst.BaseExpression], Optional[str]]

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

# What was found: the pool replaced by a no-op, the stem conv made stride 1, a stem rebuilt
# without the pool that feeds layer1.
POOL_REPLACED = "pool replaced"
STRIDE_ONE = "stride one"
STEM_WITHOUT_POOL = "stem without pool"


@dataclass(frozen=True)
class StemPoolDrop:
    """One place where the stem pool of the ResNet ``base`` is lost."""

    kind: str  # POOL_REPLACED, STRIDE_ONE or STEM_WITHOUT_POOL
    node: cst.CSTNode  # where to report it
    base: str  # the encoder, as the code names it (``self``, ``self.encoder``, ``model``)
    walked: Tuple[str, ...] = ()  # STEM_WITHOUT_POOL: the stem parts, in order
    pool: str = "maxpool"  # STEM_WITHOUT_POOL: the pool left out, as a path below the encoder


def dropped_stem_pools(analysis) -> List[StemPoolDrop]:
    """Every place of the file where a ResNet-style encoder's stem pool is dropped."""
    return _Stems(analysis).run()


@dataclass(frozen=True)
class _Site:
    """Where a replacement stands: the statements around it, the names it sees."""

    statements: List[cst.CSTNode]
    qualify: Qualify

    def enclosing(self, node_type: type) -> Optional[cst.CSTNode]:
        for statement in reversed(self.statements):
            if isinstance(statement, node_type):
                return statement
        return None


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


class _Stems:
    """The questions of ``dropped_stem_pools``, asked over one file."""

    def __init__(self, analysis) -> None:
        self.analysis = analysis
        self.module = analysis.module
        self.index = analysis.index
        self.sites = Sites(self.index, analysis.bindings)
        self.found: List[StemPoolDrop] = []
        self._reported: Set[int] = set()

    def run(self) -> List[StemPoolDrop]:
        index, order, sites = self.index, self.index.order, self.sites
        # the classes that use some object's stages (`x.layer1`, `list(resnet.children())[4:8]`)
        with_stages: List[int] = []
        for here in index.positions(cst.Attribute):
            if order[here].attr.value in ("layer1", "children"):  # type: ignore[attr-defined]
                classdef = sites.enclosing(here, cst.ClassDef)
                if classdef is not None:
                    at = index.find(classdef)
                    if at is not None and at not in with_stages:
                        with_stages.append(at)
        for at in with_stages:
            qualify = sites.qualify(at)  # the names the class sees (a function's imports too)
            self._check_class(sites.class_model(self.analysis, order[at], qualify), qualify)  # type: ignore[arg-type]
        # the stem parts replaced: `x.maxpool = ...`, `x.conv1 = ...`, `x.conv1.stride = ...`
        for here in index.positions(cst.Assign):
            node = order[here]
            if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Attribute:  # type: ignore[attr-defined]
                continue
            target = node.targets[0].target  # type: ignore[attr-defined]
            value = node.value  # type: ignore[attr-defined]
            attribute = target.attr.value
            if attribute not in ("maxpool", "conv1", "stride"):
                continue
            site = _Site(sites.statements(here), sites.qualify(here))
            if attribute == "maxpool":
                self._check_pool_replacement(site, target, value)
            elif attribute == "conv1":
                self._check_conv_replacement(site, target.value, value, value)
            elif attribute == "stride" and type(target.value) is cst.Attribute:
                if target.value.attr.value == "conv1" and _is_stride_one(value):
                    self._check_conv_replacement(site, target.value.value, None, value)
        return self.found

    # -- replacements -------------------------------------------------------------------------------
    def _check_pool_replacement(self, site: _Site, target: cst.Attribute, value: cst.BaseExpression) -> None:
        if type(value) is not cst.Call:
            return
        qualified = site.qualify(value.func)
        empty_sequential = qualified == NN + "Sequential" and not value.args
        if qualified != NN + "Identity" and not empty_sequential:
            return
        base = dotted_name(target.value)
        if base is None or not self._is_resnet(site, base):
            return
        self.found.append(StemPoolDrop(POOL_REPLACED, value, base))

    def _check_conv_replacement(
        self, site: _Site, owner: cst.BaseExpression, conv: Optional[cst.BaseExpression],
        anchor: cst.BaseExpression,
    ) -> None:
        base = dotted_name(owner)
        if base is None:
            return
        if conv is not None:
            if type(conv) is not cst.Call or site.qualify(conv.func) != NN + "Conv2d":
                return
            stride = argument(conv, 3, "stride")
            if stride is not None and not _is_stride_one(stride.value):
                return
        if not self._is_resnet(site, base):
            return
        self.found.append(StemPoolDrop(STRIDE_ONE, anchor, base))

    def _is_resnet(self, site: _Site, base: str) -> bool:
        """Evidence in the surrounding class, function or module that ``base`` is a ResNet."""
        if base == "self":
            classdef = site.enclosing(cst.ClassDef)
            return type(classdef) is cst.ClassDef and self._inherits_resnet(classdef, site.qualify)
        scope: cst.CSTNode = (
            site.enclosing(cst.ClassDef) or site.enclosing(cst.FunctionDef) or self.module
        )
        function = site.enclosing(cst.FunctionDef)
        if type(function) is cst.FunctionDef and _stem_helper(function, base):
            return True
        for node in walk(scope):
            if type(node) is cst.Attribute and node.attr.value in _STAGES:
                if dotted_name(node.value) == base:
                    return True
            elif type(node) is cst.Assign and len(node.targets) == 1:
                if dotted_name(node.targets[0].target) == base and self._is_resnet_factory(site, node.value):
                    return True
        return False

    def _is_resnet_factory(self, site: _Site, value: cst.BaseExpression) -> bool:
        """A call of a ResNet constructor, also picked from a dict of them or by
        ``getattr(torchvision.models, name)`` (every constructor it may call is one)."""
        if type(value) is not cst.Call:
            return False
        function = site.enclosing(cst.FunctionDef)
        callees = possible_callees(value.func, site.qualify, self.module, function)
        classdef = site.enclosing(cst.ClassDef)
        func = value.func
        if callees is None and type(classdef) is cst.ClassDef and type(func) is cst.Attribute and type(func.value) is cst.Name:
            # ``self.encoder = self.base_model(**kw)``: what the class stored in ``self.base_model``
            stored = stored_values(self.analysis, classdef, func.attr.value)
            callees = []
            for stored_value, method in stored or ():
                found = possible_callees(stored_value, self._project_qualify(method), self.module, method)
                if found is None:
                    return False
                callees.extend(found)
            # a constructor picked by name from a dict that also holds the project's other
            # encoders (``vit_tiny``): a ResNet among them, and no torchvision/timm model that is not one
            return any(self._resnet_constructor(site, value, q) for q in callees) and not any(
                q.startswith(("torchvision.", "timm.")) and not self._resnet_constructor(site, value, q)
                for q in callees
            )
        return bool(callees) and all(self._resnet_constructor(site, value, qualified) for qualified in callees)

    @staticmethod
    def _name_constrained(site: _Site, name: cst.BaseExpression) -> bool:
        """The replacement runs only where the model name ``name`` is a ResNet's: in the body
        of an ``if "resnet" in name`` (``name.startswith("resnet")``, also one side of an ``and``)."""
        if type(name) is not cst.Name:
            return False
        stack = site.statements
        for position, statement in enumerate(stack[:-1]):
            if type(statement) is cst.If and any(s is stack[position + 1] for s in statement.body.body):
                if _constrains(statement.test, name.value):
                    return True
        return False

    def _project_qualify(self, method: cst.FunctionDef) -> Qualify:
        """Qualified names as ``method`` binds them; a name the project defines
        (``from .backbones import vit_tiny``) as ``<project>.vit_tiny``."""
        qualify = method_qualify(self.analysis, method)
        links = self.analysis.links

        def project_qualify(node: cst.BaseExpression) -> Optional[str]:
            found = qualify(node)
            dotted = dotted_name(node) if found is None and links is not None else None
            return f"<project>.{dotted}" if dotted and links.may_come_from_project(dotted) else found

        return project_qualify

    def _resnet_constructor(self, site: _Site, value: cst.Call, qualified: str) -> bool:
        if qualified == "timm.create_model" and value.args:
            name = value.args[0].value
            if type(name) is not cst.SimpleString:
                return self._name_constrained(site, name)  # `if "resnet" in model_name:`
            return name.evaluated_value.startswith(_RESNET_PREFIXES)
        package, _, function = qualified.rpartition(".")
        if package in ("torchvision.models", "timm.models") and not function:
            return True  # `getattr(torchvision.models, name)`: its `maxpool`/`conv1` are used below
        return package.startswith(_RESNET_PACKAGES) and function.startswith(_RESNET_PREFIXES)

    def _inherits_resnet(self, classdef: cst.ClassDef, qualify: Qualify) -> bool:
        """A torchvision/timm ``ResNet`` among the class's bases, or a class of the project (this
        file or another) that derives from one or builds a ResNet stem itself (``conv1``,
        ``maxpool`` a max-pool, ``layer1``)."""
        if any(qualify(base.value) in _RESNET_CLASSES for base in classdef.bases):
            return True
        links = self.analysis.links
        if links is None:
            return False
        for base in classdef.bases:
            for ancestor in links.ancestry(dotted_name(base.value), own=True):
                if ancestor.kind == "external" and ancestor.name in _RESNET_CLASSES:
                    return True
                if _resnet_stem(links, ancestor):
                    return True
        return False

    # -- rebuilt stems ----------------------------------------------------------------------------
    def _check_class(self, model: ClassModel, qualify: Qualify) -> None:
        resolver = model.file.resolver
        for call, qualified, method, statement in model.constructors:
            if qualified not in (NN + "Sequential", NN + "ModuleList"):
                continue
            self_name = model.self_name(method)
            elements = _container_elements(resolver, call, qualified, self_name, method, statement)
            if elements is None:
                continue
            for position, part in enumerate(elements):
                base = self._stage_base(model, part, qualify)
                if base is None:
                    continue
                # What runs before layer1 in the same container; a Sequential that starts with
                # layer1 is followed into its callers by `_stage_calls`.
                verdict = _StemWalk(model, base).parts(elements[:position])
                if verdict is not None and verdict.found:
                    self._report_stem(verdict, base, call)
        for stage_call, method, statement, base in self._stage_calls(model, qualify):
            self._walk_flow(model, method, statement, stage_call, _StemWalk(model, base), base, qualify)

    def _stage_base(self, model: ClassModel, part: Part, qualify: Qualify) -> Optional[str]:
        """``enc`` when ``part`` is ``enc.layer1`` (directly or through an attribute)."""
        if part.borrowed is not None:
            base, name = part.borrowed
            return base if name == "layer1" else None
        if part.attribute is None:
            return None
        if part.attribute == "layer1" and "layer1" not in model.assignments:
            return "self" if self._inherits_resnet(model.node, qualify) else None
        inner = model.attribute_part(part.attribute)
        if inner is not None and inner.borrowed is not None and inner.borrowed[1] == "layer1":
            return inner.borrowed[0]
        return None

    def _stage_calls(self, model: ClassModel, qualify: Qualify):
        """Direct calls that run ``layer1`` first: ``enc.layer1(x)`` or ``self.enc1(x)``."""
        for use in model.borrowed:
            if use.part == "layer1" and use.call is not None and use.call.func is use.node:
                yield use.call, use.method, use.statement, use.base
        for name in model.references:
            sequence = model.attribute_sequence(name)
            first = sequence[0] if sequence else None
            if first is None and name == "layer1" and self._inherits_resnet(model.node, qualify):
                first = Part(cst.Name("layer1"), attribute="layer1")
            if first is None:
                continue
            base = self._stage_base(model, first, qualify)
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
        qualify: Qualify,
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
                if qualify(func.value) is None:
                    parts = [Part(func, borrowed=(dotted_name(func.value), func.attr.value))]  # type: ignore[arg-type]
            if parts is not None:
                verdict = walker.parts(parts)
                if verdict is not None:
                    if verdict.found:
                        stem = _stem_sequential(model, parts[0])
                        self._report_stem(verdict, base, stem if stem is not None else call)
                    return
            else:
                qualified = qualify(func)
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
        self.found.append(StemPoolDrop(STEM_WITHOUT_POOL, anchor, base, verdict.walked, verdict.pool))


def _resnet_stem(links, ancestor) -> bool:
    klass = links.index.class_facts(ancestor)
    if klass is None or not {"conv1", "layer1"} <= klass.assigned:
        return False
    pool = dict(klass.builds).get("maxpool")
    located = links.index.locate(ancestor.module.path, pool) if pool else None
    return located is not None and located.kind == "external" and located.name in POOL_MODULES


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

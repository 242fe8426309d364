"""The activation sites of a file, as the TML2xx rules see them: each activation (``Site``),
the tensors it receives (``Use``) and, for a layer a factory returns, each place a call of the
factory puts it (``Placement``). Found by ``analysis/activations.py``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import Layer
from torchmemlint.analysis.factories import one_activation
from torchmemlint.analysis.inplace_switch import configured_inplace
from torchmemlint.analysis.named_layers import spread_inplace
from torchmemlint.analysis.activation_calls import followers
from torchmemlint.analysis.producers import joined, Producer, Producers
from torchmemlint.analysis.syntax import has_star_args, terminal_name
from torchmemlint.analysis.vocabulary import ActivationKind, Category, Saves, short_name, VIEW_MODULES


@dataclass
class Use:
    """One tensor an activation receives, and what the data flow says about it."""

    anchor: cst.CSTNode  # where a finding about this use is reported
    producers: List[Producer]
    name: Optional[str] = None  # the variable passed, when it is one
    reused: bool = False  # the tensor may be read after the activation
    single_use: bool = False  # nothing else reads the tensor, before or after
    caller_tensor: Optional[str] = None  # `forward`'s own argument
    to_dropout: bool = False  # what the activation makes here goes only to dropouts that drop
    to_inplace: bool = False  # what the activation makes here may be changed in place after it
    dead: bool = False  # nothing reads what the activation makes here (overwritten unread): nothing kept

    @property
    def fresh(self) -> bool:
        return bool(self.producers) and all(
            p.category in (Category.FRESH, Category.POOL) for p in self.producers
        )

    def output_saver(self) -> Optional[Producer]:
        return next((p for p in self.producers if p.category is Category.SAVES_OUTPUT), None)


@dataclass
class Placement:
    """One place a call of a factory (a function of the file returning the layer: ``def
    leaky(p=0.1): return nn.LeakyReLU(p)``) puts its layer: an element of ``nn.Sequential``
    (directly or through a spliced list, ``layers.append(leaky())``), ``self.act = leaky()``
    called in the class's methods, an element of a module list run as a chain. What the layer
    receives there is judged there, as for a layer written at that place."""

    node: cst.Call  # the factory call, where a finding about this place is reported
    off: bool = False  # the call never takes the factory's arm that builds the layer (``factory_arms.py``)
    uses: List[Use] = field(default_factory=list)
    complete: bool = False  # every way the layer runs from here is among ``uses``
    privates: List[Tuple[Any, ...]] = field(default_factory=list)  # (classdef, attribute[, its subclasses read])
    label: Optional[str] = None  # how messages name the layer here (None: the site's label)
    # ``def act(slope=0.1, inplace=False): return nn.LeakyReLU(slope, inplace=inplace)``: the
    # factory's parameter that sets ``inplace``, the argument this call passes for it (None:
    # left at its default) and the value it gets here (None: not known)
    switch: Optional[str] = None
    switch_arg: Optional[cst.Arg] = None
    inplace: Optional[bool] = None
    # ``def get_activation(name, **kwargs): ... return nn.LeakyReLU(**kwargs)``: ``inplace``
    # reaches the layer through the factory's ``**kwargs`` (``placing.forwarded_switch``); no edit
    # is offered (another arm may take the same keywords and no ``inplace``: ``nn.GELU(**kwargs)``)
    forwarded: bool = False
    # the layer's parameters the factory passes its own for (``nn.LeakyReLU(slope)``:
    # ``negative_slope``), with what each gets from this call (None: not known)
    bound: Dict[str, Optional[cst.BaseExpression]] = field(default_factory=dict)


@dataclass
class Site:
    """An activation with an ``inplace`` switch: a module, a function call or a method call."""

    name: str  # functional name: "leaky_relu", "sigmoid"
    kind: Optional[ActivationKind]
    form: str  # "module", "functional", "torch" (``torch.selu(x)``), "underscore" or "method"
    node: cst.Call  # the constructor or the call; fixes edit it
    label: str  # how messages name it
    inplace: Optional[bool]
    _uses: List[Use] = field(default_factory=list)
    _complete: bool = False  # every call of it in its class is among ``uses``
    # (class, attribute) of the module attributes that hold it (known once ``uses`` is)
    privates: List[Tuple[Any, ...]] = field(default_factory=list)  # (classdef, attribute[, its subclasses read])
    # the call with a factory's preset arguments in front (``partial(nn.X, 0.1)()``)
    effective: Optional[cst.Call] = None
    certain: bool = True  # False: the layer is a factory default callers elsewhere may change
    # the keywords a ``**params`` passes, read from the parameter's default dict (None: not read)
    spread: Optional[Dict[str, cst.BaseExpression]] = None
    # what finds ``uses`` and ``complete``, run when a rule first asks (a rule that skips the
    # site for its kind or its ``inplace`` never builds a value graph for it)
    pending: Optional[Callable[["Site"], None]] = field(default=None, repr=False)
    # a layer a factory returns: each place a call of it puts it (empty: not one)
    _placements: List[Placement] = field(default_factory=list)
    # every call of the factory is among ``placements`` and no other file of the project
    # imports it: an edit of the construction changes only those places
    _every_placement: bool = False
    foreign: bool = False  # made in another file of the project: ``node`` is the call placing it here
    configured: bool = False  # built from a config dict (``build_activation_layer(cfg)``): no keyword to add

    def _settle(self) -> None:
        if self.pending is not None:
            pending, self.pending = self.pending, None
            pending(self)

    @property
    def uses(self) -> List[Use]:
        self._settle()
        return self._uses

    @property
    def complete(self) -> bool:
        self._settle()
        return self._complete

    @complete.setter
    def complete(self, value: bool) -> None:
        self._complete = value

    @property
    def placements(self) -> List[Placement]:
        self._settle()
        return self._placements

    @property
    def every_placement(self) -> bool:
        self._settle()
        return self._every_placement

    @property
    def arguments(self) -> cst.Call:
        """The call whose arguments the layer receives (the factory's preset ones included)."""
        return self.effective if self.effective is not None else self.node

    def inplace_position(self) -> Optional[int]:
        if self.kind is None:
            return None
        if self.form == "module":
            return self.kind.module_params.index("inplace")
        if self.form == "functional":
            return self.kind.functional_params.index("inplace") + 1
        return None


def one_of(file: Any, node: cst.BaseExpression, function: Optional[cst.FunctionDef]) -> Optional[Layer]:
    """A factory call whose callers pass different activation classes (``activ()``: nn.ReLU from
    one call, nn.LeakyReLU from another), as the activation it is for some of them
    (``factories.one_activation``), not certain. ``ClassModel.layer`` leaves it unknown, so it is
    a site here and never a known producer of what follows it."""
    factories = file.factories
    if type(node) is not cst.Call or factories is None:
        return None
    factory = factories.layer(node, function, alternatives=True)
    chosen = one_activation(factory) if factory is not None and factory.alternatives else None
    if chosen is None:
        return None
    return Layer(chosen, node, (), factory.via, False)  # type: ignore[union-attr]


def layer_site(layer: Layer, function: Optional[cst.FunctionDef] = None, factories: Any = None) -> Site:
    """The site of a layer constructor (direct, or through a factory)."""
    kind = layer.kind
    assert kind is not None
    site = Site(
        kind.name, kind, "module", layer.call,
        f"`{short_name(layer.qualified)}`" + (f" ({via(layer).strip()})" if layer.via else ""),
        layer.inplace(),
    )
    if site.inplace is None and has_star_args(layer.effective):
        # ``(**params)`` with ``params={"negative_slope": 0.2}`` as the parameter's default
        site.spread, site.inplace = spread_inplace(layer.effective, function)
    switched = None
    if site.inplace is None and not has_star_args(layer.effective):
        switched = site.inplace = configured_inplace(factories, layer, function)  # ``inplace=inplace``, ``__init__``'s
    if layer.preset or layer.via is not None or layer.configured:
        site.effective = layer.effective
        site.certain = layer.certain
    site.configured = layer.configured or switched is not None  # (no edit: the switch is the configuration's)
    return site


def via(layer: Layer) -> str:
    return f" through {layer.via}" if layer.via else ""


def spelled(func: cst.BaseExpression) -> str:
    """How a call's function reads: ``self.act_fn``, ``act``."""
    return f"{func.value.value}.{func.attr.value}" if type(func) is cst.Attribute and type(func.value) is cst.Name else terminal_name(func) or "?"


def sequence_uses(file: Any, model: Any, order: Any, part: Any, anchor: cst.CSTNode) -> List[Use]:
    """The uses of the activation at ``part`` of the layer order ``order`` (an
    ``nn.Sequential``'s, a list's): one per element that may come right before it, with what may
    follow it (``activation_calls.followers``)."""
    dropout, changed = followers(file, order, part)
    producers = Producers(file, model)
    return [
        Use(anchor, made, single_use=True, to_dropout=dropout, to_inplace=changed)
        for made in _made_before(producers, order, part)
    ]


_LOOKED_THROUGH = VIEW_MODULES | {"torch.nn.Identity"}


def _made_before(producers: Producers, order: Any, part: Any, depth: int = 0) -> List[List[Producer]]:
    """What may make the input of ``part``: per element right before it, its producer. An
    out-of-place dropout there is looked through: in training it makes a fresh tensor whose
    value its backward never reads (it keeps only its mask), in evaluation or with ``p=0`` it
    returns its input, so what makes that input counts too (nothing else reads it in an order:
    tests/test_inplace_after_dropout.py). A view module there (``nn.Unflatten``, ``nn.Flatten``)
    is looked through as well: the activation's input is then that element's input, viewed
    (``Linear, Unflatten, LeakyReLU``: in place writes the Linear's output, which nothing keeps),
    and so is an ``nn.Identity`` (``Conv2d, BatchNorm2d(c) if i else nn.Identity(), LeakyReLU``:
    it returns its input itself)."""
    found = []
    for previous in order.predecessors(part):
        layer = previous.layer
        if (
            depth < 4 and layer is not None and layer.kind is not None and layer.kind.saves is Saves.MASK
            and layer.inplace() is False and previous not in order.first
        ):
            for made in _made_before(producers, order, previous, depth + 1):
                both = joined([Producer(Category.FRESH), *made])
                shown = " / ".join(dict.fromkeys(p.description for p in made))
                found.append([Producer(both.category, f"`{short_name(layer.qualified)}` after {shown}")])
            continue
        if depth < 4 and layer is not None and layer.qualified in _LOOKED_THROUGH and previous not in order.first:
            for made in _made_before(producers, order, previous, depth + 1):
                shown = " / ".join(dict.fromkeys(p.description for p in made))
                found.append([Producer(joined(made).category, f"`{short_name(layer.qualified)}` of {shown}")])
            continue
        found.append([producers.part(previous)])
    return found

"""Activation sites and their uses: every activation (module, ``nn.Sequential`` element,
functional, ``relu_``/``.relu_()``) with its ``inplace`` switch, what produced its input, and
how the tensor it runs on is used afterwards (read again, held by another name, the caller's).
Asked by the TML2xx rules from ``visit_Module`` (``sites()``); each call is read with a
``Cursor`` at it, in the engine's traversal order."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.activation_configs import CONFIG_BUILDERS
from torchmemlint.analysis.activation_sites import layer_site, one_of, Placement, sequence_uses, Site, spelled, Use, via  # (the rules take them from here)
from torchmemlint.analysis.classes import ClassModel, Layer
from torchmemlint.analysis.file import FileAnalysis
from torchmemlint.analysis.flag_arms import may_come_first
from torchmemlint.analysis.chosen_functions import ChosenFunctions
from torchmemlint.analysis.spliced_layers import SplicedLayers
from torchmemlint.analysis.module_flow import attribute_reads, dispatched_reads, module_flow, receiver
from torchmemlint.analysis.module_lists import module_lists
from torchmemlint.analysis.module_level_layers import list_holder, module_level_reads
from torchmemlint.analysis.project_sites import ProjectSites
from torchmemlint.analysis.factory_arms import arm_not_taken, never_built
from torchmemlint.analysis.placing import FactoryPlacing, bound, forwarded_inplace, forwarded_switch, held_attribute, placing_of, switch_of, switched
from torchmemlint.analysis.activation_calls import (
    ACTIVATION_FUNCTIONS, bound_local, changes_in_place, default_of, dropouts_only, followers,
    guarded_by_flag, names_read, nested_calls, none_test, passed_to, sequential_elements, unread,
)
from torchmemlint.analysis.sites import Cursor
from torchmemlint.analysis.factories import assigned_values
from torchmemlint.analysis.activation_facts import GraphFacts, holds
from torchmemlint.analysis.named_attributes import spelled_elsewhere
from torchmemlint.analysis.named_layers import FunctionAliases
from torchmemlint.analysis.producers import Producers
from torchmemlint.analysis.added_modules import added_before
from torchmemlint.analysis.chained_uses import chain_uses, run_before
from torchmemlint.analysis.helper_activations import helper_uses
from torchmemlint.analysis.returned_locals import returned_local
from torchmemlint.analysis.syntax import argument, enclosing, has_star_args, literal_bool, terminal_name, watched_names
from torchmemlint.analysis.vocabulary import (
    INPLACE_FUNCTIONS, INPLACE_METHODS, KIND_BY_FUNCTION, KIND_BY_MODULE, KIND_BY_NAME, NN,
    TORCH_OUT_OF_PLACE, short_name,
)

SEQUENTIAL = NN + "Sequential"
_WATCHED = frozenset(KIND_BY_MODULE) | frozenset(KIND_BY_FUNCTION) | frozenset(INPLACE_FUNCTIONS) | {SEQUENTIAL}


class InplaceAnalysis(ProjectSites):
    """Activation sites of one file, found from its calls (``sites()``)."""

    def __init__(self, context) -> None:
        self.file: FileAnalysis = context.analysis
        self.watched_names = watched_names(context, _WATCHED | frozenset(CONFIG_BUILDERS), (".Sequential",)) | frozenset(INPLACE_METHODS) | {"__init__", "add_module"}
        self._in_sequential: Set[int] = set()
        self.spliced = SplicedLayers(self.file)  # layers of lists spliced into a Sequential
        self._claimed: Set[int] = set()  # layers already given a site through a Sequential
        self._graph_facts: Dict[int, GraphFacts] = {}
        self._kept_by: Dict[str, Tuple[List[Tuple[ClassModel, str]], bool]] = {}
        self.placing = FactoryPlacing(self.file)  # where the file's factories' layers are put
        self._alias_names: Optional[FunctionAliases] = None
        self._chosen_attributes: Set[Tuple[int, str]] = set()
        # where discovery is: the statements and names around the call it reads
        self.cursor = Cursor(self.file.index, context.module_bindings)
        self._all: Optional[List[Site]] = None

    def close(self) -> None:
        """Drop the sites (``FileContext.close``): an unsettled one refers back to this."""
        self.__dict__.clear()

    def sites(self) -> List[Site]:
        """Every activation site of the file, in source order: each call read once, in the
        engine's traversal order (a Sequential before the layers in it), with the cursor at it."""
        if self._all is None:
            found: List[Site] = []
            for call in self.cursor.walk(cst.Call, self._may_be_site):
                found.extend(self._discover(call))  # type: ignore[arg-type]
            found.extend(self._parameter_sites())
            self._all = found
        return self._all

    def _may_be_site(self, call: cst.Call) -> bool:
        name = terminal_name(call.func)
        return name in self.watched_names or (
            type(call.func) in (cst.Call, cst.Subscript) or (name is not None and name in self.file.factories.names())
            or (type(call.func) is cst.Name and name in self._aliases().names)  # ``act = F.leaky_relu``
            or (type(call.func) is cst.Name and self._from_project(name))  # ``from .layers import leaky``
            or (type(call.func) is cst.Name and self.file.resolver.helpers.container(name) is not None)
            or (type(call.func) in (cst.Name, cst.Attribute) and name in self._chosen().names)  # ``self.act_fn(x)``
        )

    def _aliases(self) -> FunctionAliases:
        if self._alias_names is None:
            self._alias_names = FunctionAliases(self.file, ACTIVATION_FUNCTIONS)
        return self._alias_names

    # -- discovery ------------------------------------------------------------------------------
    def _discover(self, call: cst.Call) -> List[Site]:
        qualified = self.cursor.qualify(call.func) or self._aliases().resolve(call.func, enclosing(self.cursor, cst.FunctionDef))
        if (qualified is None and (type(call.func) is cst.Name or (
            type(call.func) is cst.Attribute and call.func.attr.value in ("__init__", "add_module")
        ))) or (
            qualified is not None and qualified.endswith(".Sequential") and not qualified.startswith(NN)
        ):  # ``super().__init__(*layers)`` of a Sequential; another package's Sequential of modules;
            # a function of the file that builds a Sequential of the modules it is given
            qualified = self.file.resolver.constructor(call)
        # (``self.x = <call>``: the layer is an attribute, never an element of a spliced list)
        if qualified == SEQUENTIAL:
            if self._assigned(call) is None and id(call) in self.spliced.all():
                return []  # read as part of the Sequential it is spliced into
            return self._sequential(call)
        if qualified in KIND_BY_MODULE:
            if id(call) in self._in_sequential or (self._assigned(call) is None and id(call) in self.spliced.all()):
                return []
            return [self._module(Layer(qualified, call))]
        held = type(call.func) is cst.Attribute and type(call.func.value) is cst.Name and call.func.attr.value in self.file.factories.names()
        if (qualified is None and (type(call.func) is not cst.Attribute or held)) or qualified in CONFIG_BUILDERS:  # (``self.act_layer()``)
            function = enclosing(self.cursor, cst.FunctionDef)
            function = function if type(function) is cst.FunctionDef else None
            layer = self.file.resolver.layer(call, function) or one_of(self.file, call, function)
            if layer is not None and layer.kind is not None:
                if id(call) in self._in_sequential or (
                    self._assigned(call) is None and id(call) in self.spliced.all()
                ):
                    return []
                return [self._module(layer)]
        if qualified in KIND_BY_FUNCTION or qualified in TORCH_OUT_OF_PLACE:  # (``torch.selu(x)``: no ``inplace``)
            kind = KIND_BY_FUNCTION.get(qualified) or KIND_BY_NAME[TORCH_OUT_OF_PLACE[qualified]]
            form = "functional" if qualified in KIND_BY_FUNCTION else "torch"
            site = Site(kind.name, kind, form, call, f"`{short_name(qualified)}`", None if form == "functional" else False)
            if form == "functional" and not has_star_args(call):
                inplace = argument(call, site.inplace_position(), "inplace")
                site.inplace = False if inplace is None else literal_bool(inplace.value)
            self._functional_use(site, argument(call, 0, "input"))
            return [site]
        if qualified in INPLACE_FUNCTIONS:
            name = INPLACE_FUNCTIONS[qualified]
            site = Site(name, KIND_BY_NAME.get(name), "underscore", call, f"`{short_name(qualified)}`", True)
            self._functional_use(site, argument(call, 0, "input"))
            return [site]
        func = call.func
        if qualified is None and type(func) is cst.Attribute and func.attr.value in INPLACE_METHODS:
            if self.cursor.qualify(func.value) is None:
                name = INPLACE_METHODS[func.attr.value]
                site = Site(name, KIND_BY_NAME.get(name), "method", call, f"`.{func.attr.value}()`", True)
                self._functional_use(site, cst.Arg(func.value))
                return [site]
        chosen = self._chosen_function(call) if qualified is None else None
        if chosen is not None:
            return [chosen]
        return self._foreign(call) if type(func) is cst.Name else []

    def _chosen(self) -> ChosenFunctions:
        return self.file.choices  # (the file's one: the layer factories ask it too)

    def _chosen_function(self, call: cst.Call) -> Optional[Site]:
        """``self.act_fn(x)`` / ``fn(x)`` where the attribute or local holds a torch activation
        function chosen by configuration (``analysis/chosen_functions.py``): a functional site,
        never edited (another key would choose a function without ``inplace``)."""
        func, function = call.func, enclosing(self.cursor, cst.FunctionDef)
        if type(function) is not cst.FunctionDef or terminal_name(func) not in self._chosen().names:
            return None
        model, assignment = None, None
        if type(func) is cst.Attribute:
            model = self._class()
            if model is None or type(func.value) is not cst.Name or func.value.value != model.self_name(function):
                return None
            assignment = model.single_assignment(func.attr.value)
            if assignment is None or (id(model.node), func.attr.value) in self._chosen_attributes:
                return None  # (one site for the attribute, at its assignment: read at its first call)
            found = self._chosen().value(assignment.value, assignment.method, {})
        else:
            found = self._chosen().value(func, function, {})
        if found is None or has_star_args(call):
            return None
        kind = KIND_BY_FUNCTION[found.qualified]
        how = f", chosen by {found.chosen_by}" if found.chosen_by else ""
        site = Site(kind.name, kind, "functional", call, f"`{spelled(func)}` ({short_name(found.qualified)}{how})", None)
        inplace = argument(call, site.inplace_position(), "inplace")
        site.inplace = False if inplace is None else literal_bool(inplace.value)
        site.configured = True
        if model is None or assignment is None:
            self._functional_use(site, argument(call, 0, "input"))
            return site
        self._chosen_attributes.add((id(model.node), func.attr.value))
        # reported where it is chosen, judged at every call (each passing the tensor alone:
        # ``_attribute_uses``), whose arguments are what the function receives
        site.node, site.effective = assignment.value, call  # type: ignore[assignment]
        calls = model.calls(func.attr.value)
        if any(c.call is None or literal_bool(a.value) is not site.inplace for c in calls for a in [argument(c.call, site.inplace_position(), "inplace")] if a is not None):
            return None  # (calls that choose ``inplace`` differently)
        self._attribute_uses(site, model, func.attr.value)
        return site

    def _class(self) -> Optional[ClassModel]:
        node = enclosing(self.cursor, cst.ClassDef)
        return self.file.class_model(node) if type(node) is cst.ClassDef else None

    def _module(self, layer: Layer) -> Site:
        call, qualified = layer.call, layer.qualified
        kind = layer.kind
        assert kind is not None
        function = enclosing(self.cursor, cst.FunctionDef)
        site = layer_site(layer, function if type(function) is cst.FunctionDef else None, self.file.factories)
        if type(function) is cst.FunctionDef and never_built(self.file, function, call):
            return site  # (an arm no configuration takes: not a site, ``factory_arms.never_built``)
        returning = None if self._assigned(call) else self._returning(call)
        if returning is not None:
            spots, every = self.placing.spots(returning)
            if spots:
                return self._placed(site, layer, returning, spots, every)
        destinations, complete = self._destinations(call)
        if not destinations:
            model = self._class()
            holder = self._list_holder(model, call) if model is not None else None
            if holder is not None:
                return self._chained(site, layer, model, holder)  # type: ignore[arg-type]
            row = module_lists(self.file, model).row(call) if model is not None else None
            if row is not None:  # ``for conv, act in self.layers``, rows ``nn.ModuleList([conv, act])``
                site.label, site.privates = f"`{short_name(qualified)}` (in the rows of `self.{row[0]}`)", [(model.node, row[0])]
                site.pending = lambda site: self._call_uses(site, model, *module_lists(self.file, model).row_calls(*row))
                return site
            defaults: List[str] = []
            before = added_before(self.file, function, call, defaults) if type(function) is cst.FunctionDef else None
            if before:  # ``seq.add_module("act", nn.LeakyReLU())``, ``layers["act"] = ...`` after others
                if defaults:  # ``if batch_norm:`` before it: first when a caller passes False
                    flags = ", ".join(f"`{flag}`" for flag in defaults)
                    kept = f"when {flags} keep{'' if len(defaults) > 1 else 's'} {'their defaults' if len(defaults) > 1 else 'its default'}"
                    site.certain, site.label = False, f"`{short_name(qualified)}` ({via(layer).strip() + ', ' if layer.via else ''}{kept})"
                site.uses.extend(Use(call, [Producers(self.file, None).part(self.file.resolver.part(p, None, function))], single_use=True) for p in before)
                site.complete = True
                return site
            outer = self._called_at_once(call)
            if outer is not None and type(function) is cst.FunctionDef:  # ``nn.LeakyReLU()(h)``
                model = self._class()
                use = self._use(outer.args[0].value, outer, function, model, model.self_name(function) if model is not None else None)
                if use is not None:
                    site.uses.append(use)
                    site.complete = True
                site.label = f"`{short_name(qualified)}` (built and called at once{via(layer)})"
                return site
            passed = passed_to(self.file, call) or default_of(self.file, call)
            if passed is not None:
                return self._parameter(site, layer, *passed)
            received = receiver(self.file, call)
            if received is not None:  # ``MLP(..., activation=nn.LeakyReLU(0.2))``, MLP of another file
                outer = self.file.index.above(self.file.index.above(call))
                site.label = f"`{short_name(qualified)}` (passed to `{terminal_name(outer.func)}`{via(layer)})"  # type: ignore[union-attr]
                site.pending = self._placed_after([call])
                return site
            if type(function) is cst.FunctionDef:
                return self._local(site, layer, function)
            return self._module_level(site, layer) if function is None else site
        site.label = f"`self.{destinations[0][1]}` ({short_name(qualified)}{via(layer)})"

        def settle(site: Site) -> None:
            done = complete
            for model, attribute in destinations:
                done = self._kept_uses(site, model, attribute) and done
            site.complete = done

        site.pending = settle
        return site

    def _kept_uses(self, site: Site, model: ClassModel, attribute: str, depth: int = 0) -> bool:
        """Add the uses of ``self.<attribute>``, which holds ``site``'s layer; whether those are all.
        Never called but passed on (``ConvBlock(..., activation=self.activation)``, one instance
        for every block): it runs where each receiver runs it."""
        reads = attribute_reads(model, attribute) if depth < 2 and model.single_assignment(attribute) is not None else None
        if reads is not None and all(receiver(self.file, read) is not None for read in reads):
            site.privates.append((model.node, attribute))
            return self._flow_uses(site, model, reads, depth + 1)
        self._attribute_uses(site, model, attribute)
        done = site.complete
        site.complete = True
        self._leading_uses(site, model, attribute)
        return done and site.complete

    def _placed(self, site: Site, layer: Layer, returning: str, spots, every: bool, factory=None, where: str = "") -> Site:
        """A layer the function ``returning`` (``factory``: the one of the file being visited)
        returns: judged at each place a call of it puts the layer (``Placement``); complete
        when every call of it is such a place."""
        name = short_name(layer.qualified)
        site.label = f"`{name}` (returned by `{returning}`{where}{via(layer)})"
        factory = factory or enclosing(self.cursor, cst.FunctionDef)
        switch = switch_of(layer, factory) if site.inplace is None and type(factory) is cst.FunctionDef else None
        spread = switch is None and site.inplace is None and type(factory) is cst.FunctionDef and forwarded_switch(layer, factory)

        def settle(site: Site) -> None:
            complete = every
            for call, kind, data in spots:
                placement = Placement(call)
                if kind == "sequence":
                    placement.complete = True
                    for sequence, part in data:
                        before = sequence.predecessors(part)
                        placement.complete = placement.complete and bool(before) and part not in sequence.first
                        placement.uses.extend(sequence_uses(self.file, None, sequence, part, site.node))
                elif kind == "chain":
                    model, holder, before = data
                    placement.privates.append((model.node, holder))
                    lists = module_lists(self.file, model)
                    if before is not None:
                        placement.uses.extend(chain_uses(self.file, model, site.node, [before], holder, call))
                        placement.complete = True
                    elif not lists.chained(holder):  # its elements called one by one (``_chained``)
                        scratch = Site(site.name, site.kind, site.form, site.node, site.label, site.inplace)
                        self._call_uses(scratch, model, *lists.element_calls(holder))
                        placement.uses, placement.complete = scratch.uses, scratch.complete
                else:
                    model, attribute = data
                    scratch = Site(site.name, site.kind, site.form, site.node, site.label, site.inplace)
                    if kind == "flow":  # ``act = leaky()``, ``mlp(sizes, leaky())``: where it runs
                        scratch.complete = self._flow_uses(scratch, model, attribute)
                    elif kind == "row":  # what the name a loop binds to it is called with
                        scratch.privates.append((model.node, attribute[0]))
                        self._call_uses(scratch, model, *module_lists(self.file, model).row_calls(*attribute))
                        placement.label = f"`{name}` (returned by `{returning}`{where}, in the rows of `self.{attribute[0]}`{via(layer)})"
                    else:
                        scratch.complete = self._kept_uses(scratch, model, attribute)
                        placement.label = f"`self.{attribute}` ({name}, returned by `{returning}`{where}{via(layer)})"
                    placement.uses, placement.privates, placement.complete = scratch.uses, scratch.privates, scratch.complete
                through = terminal_name(call.func)
                if placement.label is None and through != returning:  # ``make_act()`` returns ``leaky()``
                    placement.label = f"`{name}` (returned by `{returning}`{where}, through `{through}`{via(layer)})"
                if type(factory) is cst.FunctionDef:
                    placement.bound = bound(layer, factory, call)
                placement.off = type(factory) is cst.FunctionDef and arm_not_taken(self.file, factory, site.node, call)
                if switch is not None:
                    placement.switch = switch.name.value
                    placement.switch_arg, placement.inplace = switched(factory, switch, call)  # type: ignore[arg-type]
                elif spread:  # ``get_activation(activation)``: ``inplace`` through its ``**kwargs``
                    placement.switch, placement.forwarded, placement.inplace = "inplace", True, forwarded_inplace(call)
                site._placements.append(placement)
                site._uses.extend(placement.uses)
                site.privates.extend(placement.privates)
                complete = complete and placement.complete
            site.complete = complete
            site._every_placement = every and self.placing.imported_elsewhere(returning) is None

        site.pending = settle
        return site

    def _chained(self, site: Site, layer: Layer, model: ClassModel, holder: str) -> Site:
        """An element of the module list ``self.<holder>`` that ``forward`` runs as a Sequential
        (``for block in self.tdnns: x = block(x)``): it runs on what the element before it makes;
        or one whose elements are called one by one (``for c1, a2 in zip(self.convs1,
        self.acts2): xt = a2(c1(x))``, ``self.acts[i](h)``): it runs at each of those calls."""
        site.label = f"`{short_name(layer.qualified)}` (an element of `self.{holder}`{via(layer)})"
        site.privates.append((model.node, holder))
        lists = module_lists(self.file, model)
        before = run_before(self.file, model, holder, layer.call)  # (or appended one by one)
        if not before:
            calls, complete = lists.element_calls(holder)
            if calls and not lists.chained(holder):  # ``for c1, a2 in zip(self.convs, self.acts): a2(c1(x))``
                site.pending = lambda site: self._call_uses(site, model, calls, complete)
            return site  # (else not complete)

        def settle(site: Site) -> None:
            site.uses.extend(chain_uses(self.file, model, site.node, before, holder))
            site.complete = True

        site.pending = settle
        return site

    def _parameter(self, site: Site, layer: Layer, function: cst.FunctionDef, param: cst.Name, callee: str) -> Site:
        """A layer passed in as ``param`` of ``function``, which places it in its Sequentials
        (``layers.append(final_activation)`` ... ``super().__init__(*layers)``): it runs on what
        precedes it there (complete when every other read of ``param`` is an ``is None`` test)."""
        if assigned_values(function, param.value):
            return site
        reads = [r for r in names_read(function, param) if not none_test(function, r)]
        site.label = f"`{short_name(layer.qualified)}` (`{param.value}` of `{callee}`{via(layer)})"

        site.pending = self._placed_after(reads)
        return site

    def _local(self, site: Site, layer: Layer, function: cst.FunctionDef) -> Site:
        """``nl = nn.LeakyReLU(0.2) if nonlinearity is None else nonlinearity`` (or ``nl =
        nn.LeakyReLU(0.2)``), ``nl`` then placed in Sequentials of the function: it runs on what
        precedes it in each (complete when every read of ``nl`` is such an element, never first)."""
        statement = self.cursor.statement_stack[-1] if self.cursor.statement_stack else None
        bound = bound_local(statement, layer.call, function)
        if bound is None or len(assigned_values(function, bound[0].value)) != 1:
            reads = dispatched_reads(self.file.index, statement, layer.call, function)
            if not reads:  # ``if activation == "leakyrelu": act = nn.LeakyReLU() elif ...``, the default's arm
                return site
            site.label = f"`{short_name(layer.qualified)}` (`{reads[0].value}`{via(layer)})"  # (its place is the same in every arm)
            site.pending = self._placed_after(reads)
            return site
        target, param = bound
        reads = names_read(function, target)
        if param is not None:
            site.certain = False
        when = f", when `{param}` is None" if param is not None else ""
        site.label = f"`{short_name(layer.qualified)}` (`{target.value}`{when}{via(layer)})"

        site.pending = self._placed_after(reads)
        return site

    def _module_level(self, site: Site, layer: Layer) -> Site:
        """``ACT = nn.LeakyReLU(0.2)`` at module level, or an element of a module-level list
        (``analysis/module_level_layers.py``): it runs where the reads of the name put it."""
        statement = self.cursor.statement_stack[-1] if self.cursor.statement_stack else None
        held = list_holder(self.file, statement, layer.call)
        if held is not None:  # ``activate_functions = [nn.LeakyReLU(), ...]``, ``self.acts = activate_functions``
            return self._chained(site, layer, *held)
        found = module_level_reads(self.file, statement, layer.call)
        if found is None:
            return site
        name, groups = found
        site.label = f"`{short_name(layer.qualified)}` (`{name}`{via(layer)})"

        def settle(site: Site) -> None:
            site.complete = all([self._flow_uses(site, model, reads) for model, reads in groups])

        site.pending = settle
        return site

    def _placed_after(self, reads: List[Any]) -> Callable[[Site], None]:
        """A site's ``pending``: the layer runs where each of ``reads`` puts it (``_flow_uses``)."""
        model = self._class()  # (``settle`` runs after the visit has left the class)
        return lambda site: setattr(site, "complete", self._flow_uses(site, model, reads))

    def _flow_uses(self, site: Site, model: Optional[ClassModel], reads: List[Any], depth: int = 0) -> bool:
        """Add the uses of the instance ``reads`` hold (``analysis/module_flow.py``: Sequential
        elements, of this file or of a builder it is passed to, never the first one, and
        ``self.act = act``); whether those are all."""
        flow = module_flow(self.file, reads, model, lambda file: self.placing if file is self.file else placing_of(file))
        complete = flow.complete
        for file, classdef, attribute in flow.privates:  # (``self.activation`` placed in its class)
            if file is self.file:
                site.privates.append((classdef, attribute))
            else:
                complete = complete and file.private_attribute(classdef, attribute)
        for file, owner, holder, read in flow.chains:  # ``self.layers.append(act)``, run in turn
            before = run_before(file, owner, holder, read)
            site.uses.extend(chain_uses(file, owner, site.node, before or [], holder, read))
            complete = complete and bool(before)
        for kept in flow.kept:  # ``self.act = act`` too: the same module, run where ``self.act`` is
            complete = self._kept_uses(site, *kept, depth=depth) and complete
        for file, sequence, part in flow.elements:
            complete = complete and part not in sequence.first
            site.uses.extend(sequence_uses(file, None, sequence, part, site.node))
        return complete and bool(site.uses)

    def _assigned(self, call: cst.Call) -> Optional[Tuple[ClassModel, str]]:
        """``(model, x)`` when the statement being visited is ``self.x = <call>`` in ``__init__``."""
        model = self._class()
        if model is None or not self.cursor.statement_stack:
            return None
        attribute = held_attribute(self.file, self.cursor.statement_stack[-1], call, model, enclosing(self.cursor, cst.FunctionDef))
        return (model, attribute) if attribute is not None else None

    def _returning(self, call: cst.Call) -> Optional[str]:
        """The name of the function the statement being visited returns ``call`` from."""
        statement = self.cursor.statement_stack[-1] if self.cursor.statement_stack else None
        function = enclosing(self.cursor, cst.FunctionDef)
        if type(function) is not cst.FunctionDef or self.placing.superseded(function):
            return None  # (a ``def`` a later one of the module replaces: never called)
        if not (
            type(statement) is cst.SimpleStatementLine and len(statement.body) == 1
            and type(statement.body[0]) is cst.Return and statement.body[0].value is call
        ) and not returned_local(self.file.flow(function), function, statement, call, self.file.index):  # ``act = nn.ELU()`` ... ``return act``
            return None
        return function.name.value

    def _destinations(self, call: cst.Call) -> Tuple[List[Tuple[ClassModel, str]], bool]:
        """Where the module ``call`` builds is kept: ``self.x = <call>`` in ``__init__``, or,
        for ``return <call>`` in a function of this file (``get_act(name)``, ``make_block(...)``),
        every ``self.x = f(...)`` / ``self.x = self.f(...)`` in an ``__init__`` of the file.
        The flag is False when ``f`` is also called elsewhere (what runs before it there is
        not known)."""
        assigned = self._assigned(call)
        if assigned is not None:
            return [assigned], True
        name = self._returning(call)
        if name is None:
            return [], False
        if name not in self._kept_by:
            self._kept_by[name] = self._kept(name)
        return self._kept_by[name]

    def _kept(self, name: str) -> Tuple[List[Tuple[ClassModel, str]], bool]:
        """Every ``self.x = name(...)`` / ``self.x = self.name(...)`` in an ``__init__`` of the
        file, and whether every call of ``name`` is one, or an element of a Sequential that
        follows another."""
        spots, complete = self.placing.spots(name)
        found: List[Tuple[ClassModel, str]] = []
        for call, kind, data in spots:
            if kind == "attribute" and terminal_name(call.func) == name:
                found.append(data)
            elif kind == "sequence" and terminal_name(call.func) == name:
                complete = complete and all(
                    sequence.predecessors(part) and part not in sequence.first for sequence, part in data
                )
            else:
                complete = False  # (a place that the Sequential's own first layer is not followed to)
        return found, complete and bool(spots)

    def _leading_uses(self, site: Site, model: ClassModel, attribute: str) -> None:
        """Uses of ``self.<attribute>`` as the first element of another Sequential attribute
        (``rep.append(self.relu)`` ... ``self.rep = nn.Sequential(*rep)``): it runs on what
        ``self.rep`` is called with."""
        for other in model.assignments:
            if other == attribute:
                continue
            order = model.attribute_order(other)
            if order is None or not any(
                part.attribute == attribute and any(a == part for a, _ in order.pairs) for part in order.first
            ):
                continue  # (a list filled in branches: first, with a layer after it, in any order counts)
            site.complete = False
            for reference in model.calls(other):
                call = reference.call
                assert call is not None
                if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                    continue
                use = self._use(
                    call.args[0].value, call, reference.method, model, model.self_name(reference.method),
                )
                if use is not None:
                    site.uses.append(use)

    def _sequential(self, call: cst.Call) -> List[Site]:
        model = self._class()
        method = enclosing(self.cursor, cst.FunctionDef)
        function = method if type(method) is cst.FunctionDef else None
        self_name = model.self_name(function) if model is not None and function is not None else None
        statement = self.cursor.statement_stack[-1] if self.cursor.statement_stack else None
        order = self.file.resolver.sequential_order(call, self_name, function, statement)
        if order is None:
            return []
        nested = nested_calls(call, self.file.resolver, function)
        for inner in nested:
            self._in_sequential.add(id(inner))
        # its layers can be in a spliced list only through a ``*list`` in it (or ``self.add_module`` over one)
        spliced_here = terminal_name(call.func) == "add_module" or any(arg.star for inner in (call, *nested) for arg in inner.args)
        destinations, kept_complete = self._destinations(call)
        sites: Dict[int, Site] = {}
        for part in order.items:  # what may directly precede each layer, over every order
            layer = part.layer or one_of(self.file, part.node, function)
            if layer is None or layer.kind is None or id(layer.call) in self._claimed:
                continue
            site = sites.get(id(layer.call))
            if site is None:
                site = sites[id(layer.call)] = layer_site(layer, function)
                site.complete = True
            site.uses.extend(sequence_uses(self.file, model, order, part, layer.call))
            start = len(site.uses)  # (the uses below come from where the Sequential runs)
            if part not in order.first:
                continue
            holder = self._list_holder(model, call) if not destinations else None
            if holder is not None:  # first in an element of a module list: what each element call gets
                site.label = f"`{short_name(layer.qualified)}` (first in an element of `self.{holder}`{',' if layer.via else ''}{via(layer)})"
                site.privates.append((model.node, holder))
                self._call_uses(site, model, *module_lists(self.file, model).element_calls(holder))
            elif destinations and not site.privates:
                attribute = destinations[0][1]
                site.label = (
                    f"`{short_name(layer.qualified)}` (first in `self.{attribute}`,{via(layer)})"
                    if layer.via else f"`{short_name(layer.qualified)}` (first in `self.{attribute}`)"
                )
                complete = site.complete and kept_complete
                for owner, attribute in destinations:
                    self._attribute_uses(site, owner, attribute, layer.call)
                    complete = complete and site.complete
                site.complete = complete
            else:
                site.complete = False  # what runs before it is not known here
            dropout, changed = followers(self.file, order, part)
            for use in site.uses[start:]:  # (what follows it is the Sequential's to say)
                use.to_dropout, use.to_inplace = dropout, use.to_inplace or changed
        for key, site in sites.items():
            self._claimed.add(key)
            if spliced_here and key in self.spliced.all():
                self._other_splices(site, call)
        return list(sites.values())

    def _call_uses(self, site: Site, model: ClassModel, calls, complete: bool) -> None:
        """The uses of a module run as ``m(x)`` at each of ``calls`` (``(call, method)``)."""
        for element_call, method in calls:
            arg = element_call.args[0] if len(element_call.args) == 1 else None
            use = None if arg is None or arg.keyword is not None or arg.star else self._use(
                arg.value, element_call, method, model, model.self_name(method))
            complete = complete and use is not None
            site.uses.extend([use] if use is not None else [])
        site.complete = complete and bool(site.uses)

    def _list_holder(self, model: Optional[ClassModel], call: cst.Call) -> Optional[str]:
        """``x`` when ``call`` is an element expression of the module list ``self.x`` of ``model``."""
        return module_lists(self.file, model).holder(call) if model is not None else None

    def _other_splices(self, site: Site, visited: cst.Call) -> None:
        """Uses of a spliced layer in the other Sequentials its list is spliced into (a helper
        called from two places): what runs before it there."""
        resolver = self.file.resolver
        for call, function, statement in self.spliced.calls():
            if call is visited or id(site.node) not in self.spliced.into(call, function, statement):
                continue
            order = resolver.sequential_order(call, None, function, statement)
            if order is None:
                site.complete = False
                continue
            for part in order.items:
                if part.layer is None or part.layer.call is not site.node:
                    continue
                if part in order.first:
                    site.complete = False
                site.uses.extend(sequence_uses(self.file, None, order, part, site.node))

    # -- uses -------------------------------------------------------------------------------------
    def _attribute_uses(self, site: Site, model: ClassModel, attribute: str, first: Optional[cst.Call] = None) -> None:
        only_called = model.runs_only_where_called(attribute)
        elements = None if only_called else sequential_elements(self.file, model, attribute)
        assigned = model.single_assignment(attribute) is not None or model.exclusive_assignments(attribute)
        complete = assigned and (only_called or elements is not None) and not spelled_elsewhere(model, attribute)
        site.privates.append((model.node, attribute, True))  # (its subclasses' uses read below)
        for order, part, _ in elements or ():  # ``nn.Sequential(self.conv1, self.relu1, ...)``
            complete = complete and part not in order.first  # (first: what the Sequential is given)
            site.uses.extend(sequence_uses(self.file, model, order, part, part.node))
        callers = [(model, reference) for reference in model.calls(attribute)]
        for sub in self.file.subclasses(model.node):  # ``class Sub(Base)`` calling the ``self.act`` Base builds
            if sub.assignments.get(attribute):
                continue  # (it holds the subclass's own module there: judged at that construction)
            complete = complete and (not sub.references.get(attribute) or sub.runs_only_where_called(attribute))  # (not read there: the base's uses)
            callers.extend((sub, reference) for reference in sub.calls(attribute))
        for holder, reference in callers:
            call = reference.call
            assert call is not None
            if first is not None and not may_come_first(self.file, model, attribute, first, reference.method, reference.statement):
                continue  # (``if self.outermost:``: built by arms of ``__init__`` where it is not first)
            if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
                complete = False
                continue
            use = self._use(
                call.args[0].value, call, reference.method, holder, holder.self_name(reference.method),
            )
            if use is None:
                complete = False
            else:
                site.uses.append(use)
        site.complete = complete and bool(site.uses)

    def _called_at_once(self, call: cst.Call) -> Optional[cst.Call]:
        """The call ``<call>(x)`` when the layer ``call`` builds is called right away, on one
        positional argument (``nn.LeakyReLU()(self.attention_W(h))``)."""
        index = self.file.index
        here = index.find(call)
        above = index.parent[here] if here is not None else -1
        outer = index.order[above] if above >= 0 else None
        if type(outer) is not cst.Call or outer.func is not call or len(outer.args) != 1:
            return None
        arg = outer.args[0]
        return outer if arg.keyword is None and not arg.star else None

    def _functional_use(self, site: Site, arg: Optional[cst.Arg]) -> None:
        function = enclosing(self.cursor, cst.FunctionDef)
        if arg is None or type(function) is not cst.FunctionDef:
            return
        model = self._class()
        self_name = model.self_name(function) if model is not None else None
        use = self._use(arg.value, site.node, function, model, self_name)
        if use is not None and use.caller_tensor is not None and guarded_by_flag(self.cursor.statement_stack, site.node):
            use.caller_tensor = None
        helped = helper_uses(self, site, function) if use is not None and function.name.value != "forward" else None
        if helped:  # ``def actvn(self, x): return F.leaky_relu(x, 0.2)``: where each call runs it
            site.uses.extend(helped)
            site.complete = True
        elif use is not None:
            site.uses.append(use)
            site.complete = True

    def _use(
        self,
        expression: cst.BaseExpression,
        anchor: cst.CSTNode,
        function: cst.FunctionDef,
        model: Optional[ClassModel],
        self_name: Optional[str],
    ) -> Optional[Use]:
        """The tensor ``expression`` as the activation called at ``anchor`` receives it, asked
        of ``function``'s value graph: what made it (through the arms of a join), and which
        other values and sinks read it. After a bare ``p.sigmoid_()`` the graph binds ``p`` to
        the result, so only other names still holding the tensor (``skip = p``) read the
        overwritten one."""
        graph = self.file.values(function)
        if not graph.reliable:
            return None
        facts = self._facts(graph)
        source = graph.names.get(id(expression)) if type(expression) is cst.Name else None
        if source is None:
            made = facts.made.get(id(expression))
            source = made[-1] if made else None
        if source is None:
            return None
        consumer = next((v for v in facts.made.get(id(anchor), ()) if source in v.inputs), None)
        if consumer is None:
            return None
        return self._use_of(facts, source, consumer, anchor, expression, function, model, self_name)

    def _use_of(self, facts: "GraphFacts", source: Any, consumer: Any, anchor: cst.CSTNode, expression: Optional[cst.BaseExpression],
                function: cst.FunctionDef, model: Optional[ClassModel], self_name: Optional[str], beside: Any = None) -> Use:
        """The use of ``source`` by the activation value ``consumer`` in ``facts``' graph
        (``beside``: a reader that is the same use, the call of a helper that runs it)."""
        producers = Producers(self.file, model).of(source, self_name)
        carried = facts.carried(source, consumer)  # what the previous round of a loop leaves
        for value in carried:
            producers += Producers(self.file, model).of(value, self_name)
        use = Use(anchor, producers)
        if type(expression) is cst.Name:
            use.name = expression.value  # type: ignore[union-attr]
        reads = facts.reads.get(id(source), [])
        at = next((position for position, reader in reads if reader is consumer), None)
        returns = "site" not in consumer.info and type(consumer.statement) is cst.SimpleStatementLine and any(
            type(s) is cst.Return for s in consumer.statement.body)  # (an inlined helper's ``return`` ends the helper only)
        others = [  # a join of the branch or loop the activation is in: the way where it did not run;
            # a size read (``ret.shape[-1]``) keeps nothing; a read in the other arm of an ``if``
            # (``x = F.leaky_relu(x)`` / ``else: x = torch.sigmoid(x)``) never runs with it, nor
            # one after the ``return`` it is in; an inlined helper's read runs at its call
            (position, reader) for position, reader in reads if reader is not consumer and reader is not beside and not (
                type(reader) is not str and (
                    (reader.op == "join" and facts.passed_by(source, consumer, reader)) or reader.op == "meta"
                    or facts.exclusive(consumer.statement, _site(reader)[1]) or facts.exclusive(consumer.node, _site(reader)[0])
                    or (returns and at is not None and position > at and _site(reader)[1] is not consumer.statement)
                )
            )
        ]
        again = facts.repeated(source, consumer)  # a loop runs the activation on it again
        use.reused = again or any(position > at or holds(reader) for position, reader in others)
        use.single_use = (
            not again and not others and source.op != "argument" and facts.arms_alone(source)
            and all(
                type(reader) is not str and reader.op == "join" for value in carried
                for _, reader in facts.reads.get(id(value), ())
            )
        )
        use.dead = type(consumer) is not str and consumer.op != "argument" and unread(facts, consumer)
        use.to_dropout = dropouts_only(self.file, facts.reads.get(id(consumer), ()), model, consumer)
        use.to_inplace = changes_in_place(consumer, facts.reads.get(id(consumer), ()), model, facts.reads)
        if function.name.value == "forward":
            use.caller_tensor = next((p.from_parameter for p in producers if p.from_parameter), None)
        return use

    def _facts(self, graph) -> "GraphFacts":
        facts = self._graph_facts.get(id(graph))
        if facts is None or facts.graph is not graph:
            facts = self._graph_facts[id(graph)] = GraphFacts(graph, self.file)
        return facts


def _site(reader: Any) -> Tuple[Any, Any]:
    """Where ``reader`` runs in the graph read: its node and statement, or, for a value of a
    helper run inline, the helper's call (``helper_runs.run_helper``)."""
    return reader.info.get("site") or (reader.node, reader.statement)


def activation_sites(context) -> InplaceAnalysis:
    """The activation sites of the file (found once, when a rule first asks)."""
    return context.shared("tml.inplace", lambda: InplaceAnalysis(context))

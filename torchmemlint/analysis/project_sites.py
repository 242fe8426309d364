"""The activation sites another file of the project makes for this one, asked by the activation
sites (``analysis/activations.py``, whose ``InplaceAnalysis`` this is a part of: it supplies
``file``, ``placing``, ``_placed`` and ``_flow_uses``): a factory of another file called here
(``leaky()`` from ``.layers``), a parameter of this file's function every caller in the project
passes a layer for (``create_mlp(sizes, n, activation)``), and an activation class this file
passes to a builder of another file (``build_mlp(..., activation=nn.ELU)``)."""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.activation_calls import names_read, none_test
from torchmemlint.analysis.activation_sites import layer_site, sequence_uses, Site
from torchmemlint.analysis.classes import Layer
from torchmemlint.analysis.factory_arms import arm_not_taken
from torchmemlint.analysis.passed_classes import PassedClass, passed_classes
from torchmemlint.analysis.passed_layers import parameter_layers
from torchmemlint.analysis.placing import placing_of
from torchmemlint.analysis.vocabulary import Saves, short_name


class ProjectSites:
    """The sites of ``InplaceAnalysis`` that come from other files of the project."""

    def _parameter_sites(self) -> List[Site]:
        """``def create_mlp(sizes, n, activation)`` placing ``activation`` in Sequentials, every
        caller passing a layer for it (``analysis/passed_layers.py``): a site at the element for
        each layer kind passed, out of place when every caller leaves it so, judged where the
        parameter is placed (never fixed here: the construction is the callers')."""
        sites: List[Site] = []
        for node, function, param, passed in parameter_layers(self.file, self.placing.elements()):
            kinds: Dict[str, Tuple[Layer, Optional[bool]]] = {}
            for layer, inplace in passed:
                known = kinds.get(layer.qualified)
                kinds[layer.qualified] = (layer, inplace if known is None or known[1] == inplace else None)
            for layer, inplace in kinds.values():
                if layer.kind is None:
                    continue
                site = layer_site(layer)
                site.node, site.effective, site.inplace, site.foreign = node, layer.effective, inplace, True  # type: ignore[assignment]
                site.label = f"`{short_name(layer.qualified)}` (`{param.value}` of `{function.name.value}`, as its callers pass it)"
                reads = [r for r in names_read(function, param) if not none_test(function, r)]
                site.pending = lambda site, reads=reads: setattr(site, "complete", self._flow_uses(site, None, reads))
                sites.append(site)
        return sites

    def _from_project(self, name: Optional[str]) -> bool:
        """Whether another file of the project may define ``name`` (also of its own package)."""
        links = self.file.links
        return links is not None and links.may_come_from_package(name)

    def _foreign(self, call: cst.Call) -> List[Site]:
        """A call of a factory another file of the project defines, placed here: a site for each
        activation it may return, judged at this place (the edit of the factory is that file's:
        never offered here; a call passing the factory's ``inplace`` parameter is fixed here)."""
        sites = [self._passed_class(passed) for passed in passed_classes(self.file, call)]
        found = self.placing.foreign(call)
        if found is None:
            return sites
        spot, function, layers, shown, home = found
        for layer in layers:
            kind = layer.kind
            if kind is None or kind.saves is Saves.MASK:
                continue  # (dropout: TML204 reports the construction in its own file)
            if arm_not_taken(self.file, function, layer.call, call, home):
                continue  # (``get_act("relu")``: not the arm that builds it)
            site = layer_site(layer)
            site.node, site.effective, site.foreign = call, layer.effective, True
            sites.append(self._placed(site, layer, function.name.value, [spot], False, function, f", defined in `{shown}`"))
        return sites

    def _passed_class(self, passed: PassedClass) -> Site:
        """``build_mlp(..., activation=nn.ELU)``: judged where the builder runs what it builds."""
        site = layer_site(passed.layer)
        site.node, site.effective, site.foreign = passed.node, passed.layer.effective, True  # type: ignore[assignment]
        site.label = f"`{short_name(passed.layer.qualified)}` (built by `{passed.callee}`, defined in `{passed.shown}`)"
        site.pending = lambda site: setattr(site, "complete", self._built_uses(site, passed))
        return site

    def _built_uses(self, site: Site, passed: PassedClass) -> bool:
        """Add the uses where the builder places what it builds (Sequential elements only, never
        the first one); whether those are all."""
        placed = [(other, placing_of(other).built_elements().get(id(call))) for other, call in passed.made]
        for other, sequence, part in ((other, *pair) for other, pairs in placed for pair in pairs or ()):
            site.uses.extend(sequence_uses(other, None, sequence, part, site.node))
        return all(pairs for _, pairs in placed) and bool(site.uses) and not any(
            part in sequence.first for _, pairs in placed for sequence, part in pairs or ())

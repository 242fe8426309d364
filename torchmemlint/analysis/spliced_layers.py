"""Which layer constructors of a file reach an ``nn.Sequential`` through a spliced list
(``layers.append(nn.LeakyReLU())`` ... ``nn.Sequential(*layers)``), per Sequential and in all.
Asked by the activation sites (``analysis/activations.py``): such a layer is read as an element
of the Sequential it is spliced into, not as a module of its own."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

import libcst as cst

from torchmemlint.analysis.activation_calls import nested_calls
from torchmemlint.analysis.layer_lists import splices
from torchmemlint.analysis.registered_layers import registered_list
from torchmemlint.analysis.vocabulary import NN

SEQUENTIAL = NN + "Sequential"


class SplicedLayers:
    def __init__(self, file: Any) -> None:
        self.file = file
        self._calls: Optional[List[Any]] = None
        self._by_call: Dict[int, Set[int]] = {}
        self._all: Optional[Set[int]] = None

    def calls(self) -> List[Any]:
        """Every ``nn.Sequential(*...)`` of the file, with its function and statement."""
        if self._calls is None:
            resolver = self.file.resolver
            self._calls = [found for found in splices(self.file.module) if resolver.constructor(found[0]) == SEQUENTIAL]
        return self._calls

    def into(self, call: cst.Call, function: Any, statement: Any) -> Set[int]:
        """The layer constructors that reach the Sequential ``call`` through a spliced list."""
        key = id(call)
        if key not in self._by_call:
            found: Set[int] = set()
            resolver = self.file.resolver
            registered = registered_list(self.file.module, resolver.qualify, call)  # ``self.add_module`` over a list
            statement = registered[1] if registered is not None else statement
            for arg in (registered[0],) if registered is not None else call.args:
                spliced = resolver.spliced_order(arg, function, statement)
                for value in spliced.items if spliced is not None else ():
                    if type(value) is cst.Call:
                        found.add(id(value))
                        if resolver.constructor(value) == SEQUENTIAL:
                            found.update(id(inner) for inner in nested_calls(value, resolver, function))
            self._by_call[key] = found
        return self._by_call[key]

    def all(self) -> Set[int]:
        """The layer constructors that reach any Sequential of the file through a spliced list."""
        if self._all is None:
            found: Set[int] = set()
            for call, function, statement in self.calls():
                found |= self.into(call, function, statement)
            self._all = found
        return self._all

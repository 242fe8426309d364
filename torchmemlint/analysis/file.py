"""``FileAnalysis``: the per-file entry point of the shared analysis (``FileContext.analysis``)."""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.autograd import ScopeWalk
from torchmemlint.analysis.classes import ClassModel, Resolver
from torchmemlint.analysis.flow import Flow
from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.syntax import walk


class FileAnalysis:
    """Everything the rules may ask about one file, each part built on first need.

    ``qualify`` resolves a name in the scope the engine is visiting (``FileContext.qualify``);
    ``bindings`` are the module-level bindings.
    """

    def __init__(
        self,
        module: cst.Module,
        bindings: Bindings,
        qualify: Optional[Callable[[cst.BaseExpression], Optional[str]]] = None,
    ) -> None:
        self.module = module
        self.bindings = bindings
        self.qualify = qualify if qualify is not None else bindings.qualify
        # module-level names bound by imports
        self.imported = frozenset(name for name, q in bindings.names.items() if q is not None)
        self.resolver = Resolver(self.qualify)
        self._scopes: Optional[ScopeWalk] = None
        self._classes: Dict[int, ClassModel] = {}
        self._flows: Dict[int, Flow] = {}
        self._subclassed: Optional[Set[str]] = None
        self._foreign_attributes: Optional[Set[str]] = None

    @property
    def scopes(self) -> ScopeWalk:
        """Every scope of the file with its autograd state, loops, calls and assignments."""
        if self._scopes is None:
            self._scopes = ScopeWalk(self.module, self.bindings)
            self._scopes.run(self.bindings)
        return self._scopes

    def class_model(self, node: cst.ClassDef, indent: str) -> ClassModel:
        model = self._classes.get(id(node))
        if model is None:
            model = self._classes[id(node)] = ClassModel(node, self, indent)
        return model

    def flow(self, function: cst.FunctionDef) -> Flow:
        flow = self._flows.get(id(function))
        if flow is None:
            flow = self._flows[id(function)] = Flow(function)
        return flow

    def private_attribute(self, classdef: cst.ClassDef, name: str) -> bool:
        """Whether only ``classdef``'s own methods can reach ``self.<name>`` in this file.

        Not so when a class of this file inherits from it, or when ``obj.<name>`` is read on
        some object other than ``self`` (``self.encoder.relu`` uses an encoder's ``relu`` from
        outside its class). One walk of the file answers both, on first need.
        """
        if self._subclassed is None or self._foreign_attributes is None:
            subclassed: Set[str] = set()
            foreign: Set[str] = set()
            for node in walk(self.module):
                node_type = type(node)
                if node_type is cst.Attribute:
                    head = node.value  # type: ignore[attr-defined]
                    while type(head) is cst.Attribute:
                        head = head.value  # type: ignore[attr-defined]
                    root = head.value if type(head) is cst.Name else None  # type: ignore[attr-defined]
                    own = root == "self" and head is node.value  # type: ignore[attr-defined]
                    if not own and root not in self.imported:
                        foreign.add(node.attr.value)  # type: ignore[attr-defined]
                elif node_type is cst.ClassDef:
                    for base in node.bases:  # type: ignore[attr-defined]
                        dotted = dotted_name(base.value)
                        if dotted is not None:
                            subclassed.add(dotted.rsplit(".", 1)[-1])
            self._subclassed, self._foreign_attributes = subclassed, foreign
        return classdef.name.value not in self._subclassed and name not in self._foreign_attributes

    def functional_prefix(self, bindings_qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[str]:
        """How this file can spell ``torch.nn.functional``: ``F``, ``nn.functional`` or None."""
        candidates: List[Tuple[int, str]] = []
        for statement in self.module.body:
            for node in _import_names(statement):
                qualified = bindings_qualify(cst.Name(node))
                if qualified == "torch.nn.functional":
                    candidates.append((0, node))
                elif qualified == "torch.nn":
                    candidates.append((1, node + ".functional"))
                elif qualified == "torch":
                    candidates.append((2, node + ".nn.functional"))
        return min(candidates)[1] if candidates else None


def _import_names(statement: cst.CSTNode) -> List[str]:
    if not isinstance(statement, cst.SimpleStatementLine):
        return []
    names = []
    for small in statement.body:
        if isinstance(small, (cst.Import, cst.ImportFrom)) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                dotted = dotted_name(bound)  # type: ignore[arg-type]
                if dotted is not None and "." not in dotted:
                    names.append(dotted)
    return names



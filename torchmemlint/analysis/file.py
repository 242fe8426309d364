"""``FileAnalysis``: the per-file entry point of the shared analysis (``FileContext.analysis``)."""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.tree import NodeIndex, children, node_index, nodes_of

from torchmemlint.analysis.autograd import ScopeWalk
from torchmemlint.analysis.callables import CallableModel
from torchmemlint.analysis.chosen_functions import ChosenFunctions
from torchmemlint.analysis.classes import ClassModel, Resolver
from torchmemlint.analysis.dead_arms import DeadArms
from torchmemlint.analysis.children import Children
from torchmemlint.analysis.container_helpers import ContainerHelpers
from torchmemlint.analysis.factories import Factories
from torchmemlint.analysis.flow import Flow
from torchmemlint.analysis.layer_lists import enclosing_definitions, LayerLists
from torchmemlint.analysis.names import Bindings, dotted_name
from torchmemlint.analysis.syntax import block_indent, block_statements, sole_return
from torchmemlint.analysis.values import FileValues, FunctionValues
from torchmemlint.analysis.vocabulary import KIND_BY_FUNCTION



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
        text: Optional[str] = None,
    ) -> None:
        self.module = module
        self.text = text  # the parsed source, when known: see may_contain
        self.bindings = bindings
        self.qualify = qualify if qualify is not None else bindings.qualify
        # module-level names bound by imports
        self.imported = frozenset(name for name, q in bindings.names.items() if q is not None)
        self.layer_lists = LayerLists(module)
        # layer factories (`act_layer()`, `partial(nn.X, ...)()`): defaults and aliases are
        # module-level expressions, qualified with the module's bindings
        self.factories = Factories(module, bindings.qualify)
        self.factories.links = lambda: self.links  # (set by the context after this: read when asked)
        self.factories.choices = lambda: self.choices
        self.resolver = Resolver(
            self.qualify, self.layer_lists, self.factories, Children(module, bindings.qualify),
            ContainerHelpers(module, bindings.qualify),
        )
        self._scopes: Optional[ScopeWalk] = None
        self._callables: Optional[CallableModel] = None
        self._class_indents: Optional[Dict[int, str]] = None
        self._classes: Dict[int, ClassModel] = {}
        self._flows: Dict[int, Flow] = {}
        self._subclassed: Optional[Set[str]] = None
        self._subclasses: Dict[int, List[ClassModel]] = {}  # id(ClassDef) -> its subclasses in the file
        self._foreign_attributes: Optional[Set[str]] = None
        self._held_reads: Dict[str, List[cst.Attribute]] = {}
        self._import_names: Optional[List[str]] = None
        self._values: Optional[FileValues] = None
        self._dead: Optional[DeadArms] = None
        self._index: Optional[NodeIndex] = None
        self._choices: Optional[ChosenFunctions] = None
        # The file's project (``analysis/links.py``: where a name the file does not define
        # comes from), set by the context that lints it; None: the file alone.
        self.links: Optional[Any] = None

    def close(self) -> None:
        """Drop every part built (``FileContext.close``): they refer to each other."""
        for part in (self._scopes, self._values):
            if part is not None:
                part.close()
        if self._callables is not None:  # (the class models it keeps refer back to it)
            self._callables.__dict__.clear()
        self.__dict__.clear()

    @property
    def index(self) -> NodeIndex:
        """The file's nodes in pre-order with parents, subtree ranges and nodes by type
        (``tree.NodeIndex``), built once per file: the engine's traversal uses it too."""
        if self._index is None:  # (held here: ``tree.node_index`` keeps only weak references)
            self._index = node_index(self.module)
        return self._index

    @property
    def choices(self) -> ChosenFunctions:
        """What a value is chosen to be by constant keys (``ChosenFunctions``: locals, lookups
        of literal dicts, one-``return`` functions, also of other project files), one for the
        file: the layer factories and the activation sites ask it."""
        if self._choices is None:
            self._choices = ChosenFunctions(self, frozenset(KIND_BY_FUNCTION))
        return self._choices

    @property
    def dead(self) -> DeadArms:
        """The arms of the file that cannot run (``analysis/dead_arms.py``)."""
        if self._dead is None:
            self._dead = DeadArms(self.module, self.index)
        return self._dead

    def may_contain(self, *words: str) -> bool:
        """False only when the source is known and holds none of ``words``: a fact that needs
        one of them written in the file (an identifier, a call) cannot be there."""
        return self.text is None or any(word in self.text for word in words)

    @property
    def scopes(self) -> ScopeWalk:
        """Every scope of the file with its autograd state, loops, calls and assignments."""
        if self._scopes is None:
            self._scopes = ScopeWalk(self.module, self.bindings, self.may_contain)
            self._scopes.links = self.links
            self._scopes.run(self.bindings)
        return self._scopes

    def class_model(self, node: cst.ClassDef) -> ClassModel:
        """How the methods of a class use ``self.x``; what ``self.x`` holds
        (``attribute_part``/``attribute_sequence``) and where it is called (``calls``)."""
        model = self._classes.get(id(node))
        if model is None:
            model = self._classes[id(node)] = ClassModel(node, self, self.class_indent(node))
        return model

    def class_indent(self, node: cst.ClassDef) -> str:
        """Indentation of a class statement: the body indents of the statements around it."""
        if self._class_indents is None:
            self._class_indents = {}
            self._index_classes(self.module.body, "")
        return self._class_indents.get(id(node), "")

    def _index_classes(self, statements, indent: str) -> None:
        for statement in statements:
            if not isinstance(statement, cst.BaseCompoundStatement):
                continue
            if type(statement) is cst.ClassDef:
                self._class_indents[id(statement)] = indent  # type: ignore[index]
            body = getattr(statement, "body", None)  # a `match` has cases, not a body
            inner = indent + block_indent(body, self.module) if type(body) is cst.IndentedBlock else indent
            for child in children(statement):
                if isinstance(child, cst.BaseSuite):
                    self._index_classes(block_statements(child), inner)
                elif isinstance(child, cst.BaseCompoundStatement):  # elif
                    self._index_classes([child], inner)
                elif type(child) in (cst.Else, cst.ExceptHandler, cst.ExceptStarHandler, cst.Finally, cst.MatchCase):
                    for grandchild in children(child):
                        if isinstance(grandchild, cst.BaseSuite):
                            self._index_classes(block_statements(grandchild), inner)

    @property
    def callables(self) -> CallableModel:
        """What calling an expression runs (checkpointed callables, blocks, single ops)."""
        if self._callables is None:
            self._callables = CallableModel(self.module, self.bindings, self.factories, self.text)
            self._callables.links = self.links
        return self._callables

    def flow(self, function: cst.FunctionDef) -> Flow:
        flow = self._flows.get(id(function))
        if flow is None:
            flow = self._flows[id(function)] = Flow(function)
        return flow

    @property
    def value_graphs(self) -> FileValues:
        """The value graphs of the file's functions (``analysis/values.py``), built on need."""
        if self._values is None:
            self._values = FileValues(self)
        return self._values

    def values(self, function: cst.FunctionDef) -> FunctionValues:
        """The value graph of one function: each tensor value, the normalised operation that
        made it and from which values (``analysis/values.py``)."""
        return self.value_graphs.of(function)

    def subclasses(self, classdef: cst.ClassDef) -> List[ClassModel]:
        """The top-level classes of this file that derive from ``classdef``, directly or through
        one another (``class Sub(Base)``, ``class Deeper(Sub)``), by name."""
        known = self._subclasses.get(id(classdef))
        if known is not None:
            return known
        names, found = {classdef.name.value}, []
        classes = [c for c in self.module.body if type(c) is cst.ClassDef and c is not classdef]
        grown = True
        while grown:
            grown = False
            for node in classes:
                if node.name.value not in names and any(type(b.value) is cst.Name and b.value.value in names for b in node.bases):
                    names.add(node.name.value)
                    found.append(self.class_model(node))
                    grown = True
        self._subclasses[id(classdef)] = found
        return found

    def private_attribute(self, classdef: cst.ClassDef, name: str, subclasses_read: bool = False) -> bool:
        """Whether only ``classdef``'s own methods can reach ``self.<name>`` in this file.

        Not so when a class of this file inherits from it (unless ``subclasses_read``: the
        asker has read their uses of it too), or when ``obj.<name>`` is read on some object
        other than ``self`` (``self.encoder.relu`` uses an encoder's ``relu`` from outside its
        class). One walk of the file answers both, on first need.
        """
        if self._subclassed is None or self._foreign_attributes is None:
            subclassed: Set[str] = set()
            foreign: Set[str] = set()
            held: Dict[str, List[cst.Attribute]] = {}  # ``self.gnn.activation``: read through a module held
            dotted_modules: Set[int] = set()  # ``from einops.layers.torch import ...``: a module's name
            for node in nodes_of(self.module, cst.Attribute, cst.ClassDef, cst.Import, cst.ImportFrom):
                node_type = type(node)
                if node_type in (cst.Import, cst.ImportFrom):
                    dotted_modules.update(id(inner) for inner in nodes_of(node, cst.Attribute))
                elif node_type is cst.Attribute and id(node) not in dotted_modules:
                    head = node.value  # type: ignore[attr-defined]
                    while type(head) is cst.Attribute:
                        head = head.value  # type: ignore[attr-defined]
                    root = head.value if type(head) is cst.Name else None  # type: ignore[attr-defined]
                    own = root == "self" and head is node.value  # type: ignore[attr-defined]
                    if own or root in self.imported:
                        continue
                    inner = node.value  # type: ignore[attr-defined]
                    if root == "self" and type(inner) is cst.Attribute and inner.value is head:
                        held.setdefault(node.attr.value, []).append(inner)  # type: ignore[attr-defined]
                    else:
                        foreign.add(node.attr.value)  # type: ignore[attr-defined]
                elif node_type is cst.ClassDef:
                    for base in node.bases:  # type: ignore[attr-defined]
                        dotted = dotted_name(base.value)
                        if dotted is not None:
                            subclassed.add(dotted.rsplit(".", 1)[-1])
            self._subclassed, self._foreign_attributes, self._held_reads = subclassed, foreign, held
        if name in self._foreign_attributes or not (subclasses_read or classdef.name.value not in self._subclassed):
            return False
        return all(self._holds_another_class(holder, classdef) for holder in self._held_reads.get(name, ()))

    def _holds_another_class(self, holder: cst.Attribute, classdef: cst.ClassDef) -> bool:
        """``self.gnn`` (of ``self.gnn.activation``) is given, in its class, only instances of
        other classes of this file than ``classdef`` and its subclasses (``Other(...)``, or an
        alternative constructor, ``Other.load_from_checkpoint(...)``): that read is theirs."""
        _, owner = enclosing_definitions(self.module, holder)
        if owner is None:
            return False
        mine = {classdef.name.value} | {sub.node.name.value for sub in self.subclasses(classdef)}
        classes = {c.name.value: c for c in self.module.body if type(c) is cst.ClassDef}
        others = set(classes) - mine

        def other_class(func: cst.BaseExpression) -> bool:
            if type(func) is cst.Attribute:
                func = func.value
            return type(func) is cst.Name and func.value in others

        def given_others(owner: cst.ClassDef, attribute: str, depth: int) -> bool:
            assignments = self.class_model(owner).assignments.get(attribute, [])
            return bool(assignments) and all(held(a.value, depth) for a in assignments)

        def held(value: Optional[cst.BaseExpression], depth: int) -> bool:
            if type(value) is cst.Call:
                return other_class(value.func)
            # ``Other.load_from_checkpoint(...).as_pretrained``: what another class of the file
            # holds (an attribute, or a property returning ``self.<attribute>``), when that
            # class is given only instances of other classes there too
            if type(value) is not cst.Attribute or type(value.value) is not cst.Call or depth > 2:
                return False
            func = value.value.func
            func = func.value if type(func) is cst.Attribute else func
            if type(func) is not cst.Name or func.value not in others:
                return False
            other = classes[func.value]
            name = value.attr.value
            returned = _returned_self_attribute(other, name)
            return given_others(other, returned or name, depth + 1)

        return given_others(owner, holder.attr.value, 0)

    def functional_prefix(self, bindings_qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Optional[str]:
        """How this file can spell ``torch.nn.functional``: ``F``, ``nn.functional`` or None."""
        candidates: List[Tuple[int, str]] = []
        if self._import_names is None:  # the file's imported names, once (asked per call)
            # (also an optional import's ``try:`` body: ``try: from torch.nn import functional
            # as F`` / ``except ImportError: F = object``, which ``Bindings`` reads as the import)
            statements = [
                inner for statement in self.module.body
                for inner in (statement.body.body if type(statement) is cst.Try else [statement])  # type: ignore[attr-defined]
            ]
            self._import_names = [node for statement in statements for node in _import_names(statement)]
        for node in self._import_names:
            qualified = bindings_qualify(cst.Name(node))
            if qualified == "torch.nn.functional":
                candidates.append((0, node))
            elif qualified == "torch.nn":
                candidates.append((1, node + ".functional"))
            elif qualified == "torch":
                candidates.append((2, node + ".nn.functional"))
        return min(candidates)[1] if candidates else None


def _import_names(statement: cst.CSTNode) -> List[str]:
    if type(statement) is not cst.SimpleStatementLine:
        return []
    names = []
    for small in statement.body:
        if type(small) in (cst.Import, cst.ImportFrom) and type(small.names) is not cst.ImportStar:
            for alias in small.names:
                bound = alias.asname.name if alias.asname else alias.name
                dotted = dotted_name(bound)  # type: ignore[arg-type]
                if dotted is not None and "." not in dotted:
                    names.append(dotted)
    return names


def _returned_self_attribute(classdef: cst.ClassDef, name: str) -> Optional[str]:
    """``attr`` when the method or property ``name`` of ``classdef`` is ``return self.attr``."""
    for statement in classdef.body.body:
        if type(statement) is cst.FunctionDef and statement.name.value == name:
            value = sole_return(statement)
            if type(value) is cst.Attribute and type(value.value) is cst.Name and value.value.value == "self":
                return value.attr.value
    return None

"""What the calls of a module's ``forward`` in its file pass a parameter (``analysis/flags.py``).

A module's ``forward`` is called through ``__call__``: ``self.attend(q, k, v, mask=mask)``
where ``__init__`` set ``self.attend = Attend(...)``. Its calls are known when every reference
to the class outside its own body is such a construction assigned to one attribute
(``self.<holder> = Cls(...)``; not subclassed, passed, stored or called as a local), or named as a
type only (an annotation, an ``isinstance`` test whose module is then only read or set, never
called or passed on), and every use of those attributes is a call, an assignment, a member read
or set (``self.attn.query = prune(...)``: no ``forward`` runs), or a ``return`` from a method no
call of the file makes (``get_decoder``: handed to callers the file does not show, as another
file's calls are not shown); or a local instance put into a module list of the class that
builds it (``attn = Cls(...)``, ``self.layers.append(ModuleList([attn, ff]))``) that is only
iterated, its elements only called (``for attn, ff in self.layers: attn(x)``:
``looped_instances.py``); or the elements of a module list a comprehension builds
(``built_lists.py``). The class's own methods calling ``self(...)`` or ``self.forward(...)`` are
calls too; a class that names itself in its body (builds a child of its kind) is not known. A
holder of the same name that another class sets for something else is not one of them; a
subclass of the holder's class reads the holder's. A class never named in its file: its calls
are other files' ([]). Anything else: not known (None).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.analysis.built_lists import appended_list, built_list, element_calls, list_building
from torchmemlint.analysis.handed_instances import handed_out
from torchmemlint.analysis.looped_instances import looped_calls, placed
from torchmemlint.tree import walk

Passed = List[Tuple[Optional[cst.BaseExpression], Optional[cst.FunctionDef]]]


def forward_passed(graph: Any, function: cst.FunctionDef, param: cst.Param) -> Optional[Passed]:
    """What each call of ``function`` (the ``forward`` of ``graph``'s class) made through an
    attribute holding an instance passes for ``param`` (None: left at the default), with the
    function that makes the call; None when the calls are not known (see the module doc)."""
    calls = forward_calls(graph, function)
    return None if calls is None else _passed(function, param, calls)


def passed_elsewhere(graph: Any, function: cst.FunctionDef, param: cst.Param) -> Passed:
    """What the calls of ``function`` (the ``forward`` of ``graph``'s top-level class) in the
    project files importing the class by name pass for ``param``, each with that call's caller
    in its own file (relation_module1's ``self.self_attn[i](f, f, f, output_attn=True)``);
    empty where no such call is read (a file importing the module itself is not read)."""
    analysis = graph.file.analysis
    classdef, links = graph.classdef, analysis.links
    if classdef is None or links is None or analysis.callables.classes.get(classdef.name.value) is not classdef:
        return []
    importing = links.importing(classdef.name.value) if links.may_name(classdef.name.value) else None
    found: Passed = []
    for theirs, names in importing or ():
        for local in names:
            calls = instance_calls(theirs, local)
            found.extend(_passed(function, param, calls or []) or [])
    return found


def forward_calls(graph: Any, function: cst.FunctionDef) -> Optional[List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]]:
    """The arguments of each call of ``function`` (the ``forward`` of ``graph``'s class) in its
    file, with the function making it; None when they are not known (see the module doc)."""
    classdef = graph.classdef
    if function is not graph.function or classdef is None:
        return None
    analysis = graph.file.analysis
    name = classdef.name.value
    if analysis.callables.classes.get(name) is not classdef:
        return None
    own = _own_calls(classdef, name)
    if own is None:
        return None  # the class names itself in its body (a child of its kind, ``type(self)(...)``)
    calls = instance_calls(analysis, name, classdef)
    return None if calls is None else [*calls, *own]


def instance_calls(analysis: Any, name: str, skip: Optional[cst.ClassDef] = None) -> Optional[List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]]:
    """The calls in the file of ``analysis`` of the instances of the class it knows as ``name``
    (defined there: ``skip``, whose body is not read; or imported by that name, ``from .module
    import TransformerLayer``), as the module doc says; [] when the file never builds or names
    it; None when they are not known."""
    nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]] = []
    _collect(analysis.module, skip, None, nodes)
    references = sum(
        1 for node, where in nodes
        if type(node) is cst.Name and node.value == name and not _typed(analysis.index, node, where) and type(analysis.index.above(node)) is not cst.ImportAlias
    )
    if not references:
        return []  # never built, subclassed or named in the file: its other calls are other files'
    holders: Set[str] = set()
    lists: Set[str] = set()  # ``self.layers``, into which a local instance is put (``ModuleList([attn, ff])``)
    built: Set[str] = set()  # ``self.layer = nn.ModuleList([Cls(c) for _ in range(n)])`` (``built_lists.py``)
    builds: Set[int] = set()
    appended: Set[str] = set()  # ``self.layers = nn.ModuleList()`` and its ``append``s (``built_lists.py``)
    factory_calls: List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]] = []  # (``handed_instances.py``)
    handed = False
    owners: Dict[str, Set[int]] = {}  # the classes whose methods assign each holder
    for node, where in nodes:
        if type(node) is cst.Assign and (attribute := built_list(node, name)) is not None:
            built.add(attribute)
            builds.add(id(node))
            references -= 1
        elif type(node) is cst.Call and (attribute := appended_list(node, name)) is not None:
            appended.add(attribute)  # ``self.layers.append(LFM2Block(config))``
            references -= 1
        elif type(node) is cst.Assign and type(node.value) is cst.Call and type(node.value.func) is cst.Name and node.value.func.value == name:
            target = node.targets[0].target if len(node.targets) == 1 else None
            if type(target) is cst.Attribute:
                holders.add(target.attr.value)
                owner = _class_of(analysis, where)
                family = owners.setdefault(target.attr.value, set())
                family.add(id(owner))
                family.update(id(sub.node) for sub in (analysis.subclasses(owner) if owner is not None else ()))  # (they read the holder's)
            elif type(target) is cst.Name and where is not None and (held := placed(where, target.value)) is not None:
                lists.add(held)
            elif type(target) is cst.Name and (made := handed_out(analysis, where, node)) is not None:
                factory_calls.extend(made)  # ``model = Model(config); return model`` in a factory
                handed = True
            else:
                return None
            references -= 1
    if appended:
        building = list_building(analysis, nodes, appended)
        if building is None or appended & built:
            return None
        built |= appended
        builds |= building
        # (``isinstance(layer, LFM2Block)`` of an element the loop calls: ``element_calls`` has its calls)
        references -= sum(1 for node, where in nodes if type(node) is cst.Name and node.value == name and _tested_element(analysis.index, node, where, built))
    if references or not (holders or lists or built or handed) or len(holders) + len(lists) + len(built) != len(holders | lists | built):
        return None  # the class is also used otherwise (a base, a local instance, a factory)
    ours = _holders_read(analysis, nodes, holders, owners)
    calls: List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]] = [
        (node.args, where) for node, where in nodes if type(node) is cst.Call and type(node.func) is cst.Attribute and ours(node.func, where)
    ]
    # (a member of the instance read or set, ``self.attn.heads``, ``self.attn.query = prune(...)``,
    # runs no forward; ``self.attn.forward(...)`` would, and is not such a read; nor does binding
    # the attribute, to an instance or anything else: its calls are then more than the
    # instance's; nor ``return self.decoder``, which hands it to callers the file does not show,
    # as another file's calls are not shown)
    uses = sum(1 for node, where in nodes if type(node) is cst.Attribute and ours(node, where) and not _member_read(analysis, node, where))
    if uses != len(calls):
        return None  # an attribute read otherwise (passed on, put in a list, returned to the file's own callers)
    if lists and (looped := looped_calls(nodes, lists)) is None:
        return None
    calls += [(call.args, where) for call, where in looped] if lists else []
    if built and (elements := element_calls(analysis, nodes, built, builds)) is None:
        return None
    calls += elements if built else []
    return calls + factory_calls


def _passed(function: cst.FunctionDef, param: cst.Param, calls: List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]) -> Optional[Passed]:
    """What each of ``calls`` (arguments, caller) passes ``function``'s ``param``."""
    params = [*function.params.posonly_params, *function.params.params][1:]
    index = next((i for i, p in enumerate(params) if p is param), None)
    found: Passed = []
    for args, where in calls:
        if any(arg.star for arg in args):
            return None
        positional = [arg.value for arg in args if arg.keyword is None]
        keywords = {arg.keyword.value: arg.value for arg in args if arg.keyword is not None}
        value = keywords.get(param.name.value)
        if value is None and index is not None and index < len(positional):
            value = positional[index]
        found.append((value, where))
    return found


def _collect(node: cst.CSTNode, skip: Optional[cst.ClassDef], function: Optional[cst.FunctionDef], out: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]]) -> None:
    """Every node of ``node`` but ``skip``'s, with the function it is in."""
    for child in node.children:
        if child is skip:
            continue
        out.append((child, function))
        _collect(child, skip, child if type(child) is cst.FunctionDef else function, out)


def _member_read(analysis: Any, node: cst.Attribute, where: Optional[cst.FunctionDef]) -> bool:
    """``node`` (``self.attn``) is bound, the object of a member access other than its
    ``forward``, or returned by a method no call of the file makes (``get_decoder``)."""
    above = analysis.index.above(node)
    if type(above) is cst.AssignTarget:
        return True
    if type(above) is cst.Return:
        return where is not None and not _called_by_name(analysis, where.name.value)
    return type(above) is cst.Attribute and above.value is node and above.attr.value not in ("forward", "__call__")


def _called_by_name(analysis: Any, name: str) -> bool:
    """A call of the file names ``name`` (``get_decoder()``, ``self.get_decoder()``), or the name is read otherwise."""
    index = analysis.index
    for kind in (cst.Name, cst.Attribute):
        for at in index.positions(kind):
            node = index.order[at]
            if (node.value if kind is cst.Name else node.attr.value) == name and type(index.order[index.parent[at]]) is not cst.FunctionDef:
                return True  # (not the ``def``'s own name)
    return False


def _own_calls(classdef: cst.ClassDef, name: str) -> Optional[List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]]]:
    """The calls the class's methods make of their own instance (``self(x, flag=True)``,
    ``self.forward(x)``); None when the class names itself in its body (but in
    ``super(Cls, self)``)."""
    found: List[Tuple[Sequence[cst.Arg], Optional[cst.FunctionDef]]] = []
    for method in classdef.body.body if type(classdef.body) is cst.IndentedBlock else ():
        if type(method) is not cst.FunctionDef or not method.params.params:
            continue
        me = method.params.params[0].name.value
        nodes = walk(method)
        supers = {id(node.args[0].value) for node in nodes if type(node) is cst.Call and type(node.func) is cst.Name and node.func.value == "super" and node.args}
        for node in nodes:
            if type(node) is cst.Name and node.value == name and id(node) not in supers:  # (``super(Cls, self)`` builds nothing)
                return None
            if type(node) is not cst.Call:
                continue
            func = node.func
            if (type(func) is cst.Name and func.value == me) or (
                type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == me and func.attr.value in ("forward", "__call__")
            ):
                found.append((node.args, method))
    return found


def _class_of(analysis: Any, function: Optional[cst.FunctionDef]) -> Optional[cst.ClassDef]:
    """The class ``function`` is a method of."""
    index = analysis.index
    here = index.find(function) if function is not None else None
    scope = index.scope[here] if here is not None else -1
    node = index.order[scope] if scope >= 0 else None
    return node if type(node) is cst.ClassDef else None


def _holders_read(analysis: Any, nodes: List[Tuple[cst.CSTNode, Optional[cst.FunctionDef]]], holders: Set[str], owners: Dict[str, Set[int]]):
    """Whether an attribute node, in a function, may be one of the ``holders``: not when it is
    ``self.<holder>`` in a method of a class that is not one of the holder's ``owners`` and sets
    ``self.<holder>`` itself (``self.attention = ASTAttention(config)`` in another class: an
    attribute of the same name that holds something else)."""
    own: Dict[str, Set[int]] = {}
    for node, where in nodes:
        if type(node) is cst.AssignTarget and type(node.target) is cst.Attribute and node.target.attr.value in holders and _of_self(node.target, where):
            own.setdefault(node.target.attr.value, set()).add(id(_class_of(analysis, where)))

    def ours(node: cst.Attribute, where: Optional[cst.FunctionDef]) -> bool:
        name = node.attr.value
        if name not in holders:
            return False
        if not _of_self(node, where):
            return True
        cls = id(_class_of(analysis, where))
        return cls in owners[name] or cls not in own.get(name, ())

    return ours


def _of_self(node: cst.Attribute, where: Optional[cst.FunctionDef]) -> bool:
    """``node`` is ``self.<name>`` in a method ``where`` whose first parameter is ``self``."""
    params = where.params.params if where is not None else ()
    return bool(params) and type(node.value) is cst.Name and node.value.value == params[0].name.value


def _tested_element(index: Any, node: cst.Name, where: Optional[cst.FunctionDef], built: Set[str]) -> bool:
    """``node`` is the class of ``isinstance(layer, Cls)`` where ``layer`` is what a ``for`` of
    ``where`` binds from a module list ``self.<built>`` (``for i, layer in enumerate(self.layers)``)."""
    above = index.above(node)
    call = index.above(above) if type(above) is cst.Arg else None
    if where is None or not _is_isinstance(call) or len(call.args) != 2 or call.args[1] is not above:  # type: ignore[union-attr]
        return False
    tested = call.args[0].value
    if type(tested) is not cst.Name:
        return False
    for loop in walk(where.body):
        if type(loop) is not cst.For:
            continue
        source, target = loop.iter, loop.target
        if type(source) is cst.Call and type(source.func) is cst.Name and source.func.value == "enumerate" and len(source.args) == 1 and type(target) is cst.Tuple and len(target.elements) == 2:
            source, target = source.args[0].value, target.elements[1].value
        if type(source) is cst.Attribute and source.attr.value in built and type(target) is cst.Name and target.value == tested.value:
            return True
    return False


def _typed(index: Any, node: cst.Name, where: Optional[cst.FunctionDef]) -> bool:
    """``node`` names the class as a type only: an annotation (``module: Encoder``) or the class
    of an ``isinstance`` test whose module (a name) the function only reads, sets or calls members
    of other than ``forward`` (``if isinstance(module, Encoder): module.gradient_checkpointing =
    value``), or hands to the base class's method of the same name (transformers'
    ``super()._init_weights(module)``), never calls or passes on otherwise."""
    above = index.above(node)
    if type(above) is cst.Annotation:
        return True
    if type(above) is not cst.Arg or above.value is not node or above.keyword is not None or where is None:
        return False
    call = index.above(above)
    if type(call) is not cst.Call or type(call.func) is not cst.Name or call.func.value != "isinstance" or len(call.args) != 2 or call.args[0] is above:
        return False
    tested = call.args[0].value
    if type(tested) is not cst.Name:
        return False
    for read in walk(where.body):
        if type(read) is not cst.Name or read.value != tested.value:
            continue
        parent = index.above(read)
        if type(parent) is cst.Arg and parent.value is read and _is_isinstance(index.above(parent)):
            continue  # (this test, or another of the same module: ``elif isinstance(module, Model)``)
        if (type(parent) is cst.For and parent.target is read) or type(parent) is cst.Param:
            continue  # ``for module in self.modules():``, ``def _init_weights(self, module)``
        if type(parent) is cst.Attribute and parent.value is read and parent.attr.value not in ("forward", "__call__"):
            continue  # ``module.gradient_checkpointing = value``, ``module.init_index()`` (its own calls of itself: ``_own_calls``)
        if type(parent) is cst.Arg and parent.value is read and _super_same(index, parent, where):
            continue  # ``super()._init_weights(module)``: the base class's hook of the same name
        return False
    return True


def _is_isinstance(call: Optional[cst.CSTNode]) -> bool:
    return type(call) is cst.Call and type(call.func) is cst.Name and call.func.value == "isinstance"


def _super_same(index: Any, arg: cst.Arg, where: cst.FunctionDef) -> bool:
    """``arg`` is given to ``super().<the enclosing method's name>(...)``."""
    call = index.above(arg)
    func = call.func if type(call) is cst.Call else None
    return (
        type(func) is cst.Attribute and func.attr.value == where.name.value and type(func.value) is cst.Call
        and type(func.value.func) is cst.Name and func.value.func.value == "super"
    )

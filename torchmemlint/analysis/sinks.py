"""Where a model's output goes: followed through one function's statement flow (``Flow``:
which assignment reaches which read), through the operations that keep a graph (arithmetic,
indexing, ``.cpu()``, ``torch.*``, another call of the model, a list it is appended to) to
the places that end it: saved (``torch.save``, ``save_image``), printed or logged, turned into
numbers (``.item()``, ``.tolist()``, ``.numpy()``, ``float()``, ``.argmax()``, a comparison),
detached (``.detach()``, ``.data``), written to a metric. Anything else ends the answer:
returned or yielded (the caller may train on it), stored on an object, passed to a function
whose effect is not known, captured by a nested function.

Asked by TML501 for model calls in functions that never backpropagate (GAN sampling
functions, ``greedy_decode(model, ...)``): a graph that reaches only such sinks is recorded
for nothing."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Set, Tuple

import libcst as cst

from torchmemlint.analysis.flow import ENTRY, Flow
from torchmemlint.analysis.names import dotted_name
from torchmemlint.tree import children, walk

# a tensor's attributes that carry no graph (`.data` is detached)
_PLAIN_ATTRIBUTES = frozenset(
    {"data", "shape", "dtype", "device", "ndim", "is_cuda", "requires_grad", "grad_fn", "layout"}
)
# methods whose result carries no graph: numbers, detached copies, indices, booleans
SINK_METHODS = frozenset(
    {"item", "tolist", "numpy", "detach", "detach_", "argmax", "argmin", "argsort", "size", "dim",
     "numel", "nonzero", "eq", "ne", "gt", "lt", "ge", "le", "isnan", "isinf", "isfinite", "any",
     "all", "long", "int", "bool", "byte", "char", "short", "nelement", "element_size", "count_nonzero",
     "equal", "allclose", "data_ptr", "__len__", "multinomial"}
)
# how a reach names a detach (TML501 asks for one where only a name says "model")
DETACHING = frozenset({"`.detach()`", "`.data`", "`.detach_()`"})
# functions (qualified) whose result carries no graph or that consume a tensor for good
SINK_FUNCTIONS = frozenset(
    {"print", "float", "int", "bool", "torch.save", "torch.argmax", "torch.argmin", "torch.argsort", "torch.eq", "torch.ne",
     "torch.equal", "torch.allclose", "torch.isclose", "torch.isnan", "torch.isinf",
     "torch.isfinite", "torch.count_nonzero", "torch.nonzero", "torch.numel", "torch.multinomial",
     "torchvision.utils.save_image", "torchvision.io.write_png", "torchvision.io.write_jpeg",
     "torchvision.io.write_video"}
)
# builtins that read a tensor's size or text: an end, but not one that says the output is all
# the function wants (a finding needs one of the others)
# attributes of torch's named-tuple results that hold indices (`torch.topk(p, k).indices`)
_INDEX_ATTRIBUTES = frozenset({"indices"})
# calls returning (values, indices): the values keep the graph, the indices do not; indices
# of a sampling call (`topk`, `kthvalue`) say the output was only wanted for them (strong),
# those of `max(1)` / `sort` ... end the graph without saying so (a finding needs another sink)
_WITH_INDICES = frozenset({"topk", "sort", "max", "min", "kthvalue", "mode", "median", "nanmedian", "cummax", "cummin"})
_SAMPLED_INDICES = frozenset({"topk", "kthvalue"})
_WEAK_FUNCTIONS = frozenset({"len", "str", "repr", "format", "isinstance", "type", "id"})
STRONG_METHODS = SINK_METHODS - {"size", "dim", "numel", "nelement", "element_size", "data_ptr", "__len__"}
STRONG_NAMES = frozenset({"print", "float", "int", "bool", "save", "save_image", "write_png", "write_jpeg", "write_video",
                          "multinomial", "topk", "kthvalue"})
_SINK_MODULES = ("numpy.", "matplotlib.", "PIL.", "cv2.", "imageio.", "skimage.", "scipy.", "sklearn.",
                 "logging.", "wandb.", "mlflow.", "torchmetrics.", "pandas.", "json.", "pickle.")
# a called name that consumes what it is given: saving, printing, logging, plotting, metrics
SINK_MODULE_ROOTS = tuple(prefix.rstrip(".") for prefix in _SINK_MODULES)  # `import numpy as np`
# (``log`` is logging, not a logarithm: ``log_prob``, ``log_softmax``, ``log_likelihood`` ... compute)
_MATH_AFTER_LOG = (
    r"prob|probs|probability|probabilities|softmax|sigmoid|likelihood|likelihoods|lik|density|det|abs_det_jacobian|"
    r"partition|normali[sz]er|sum_?exp|std|var|variance|scale|sigma|ratio|pdf|cdf|pmf|posterior|prior|marginal|"
    r"evidence|odds|weight|weights|alpha|beta|p|q|mean|z|norm|eps|lambda|scales|var_?s"
)
SINK_WORDS = re.compile(
    r"(?i)(?:^|_)(?:save|saves|savefig|print|log(?!_(?:" + _MATH_AFTER_LOG + r")(?:$|_))|logs|write|writes|imsave|imwrite|imshow|show|plot|display|"
    r"dump|add_(?:image|images|scalar|scalars|histogram|figure|video|audio|text|embedding|pr_curve)|"
    r"metric|metrics|score|accuracy|acc|psnr|ssim|lpips|bleu|fid|info|debug|warning)(?:$|_)"
)
# methods by which a metric object (named so: `acc`, `metric`) takes a batch's output
_METRIC_METHODS = frozenset({"update", "add", "add_batch", "accumulate"})
_NESTED = (cst.Lambda, cst.FunctionDef, cst.ClassDef)
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)


# comparison operators that compare a tensor's values (elementwise): their result is a bool tensor
VALUE_COMPARISONS = (cst.LessThan, cst.GreaterThan, cst.LessThanEqual, cst.GreaterThanEqual, cst.Equal, cst.NotEqual)


def tensor_comparison(node: cst.CSTNode) -> bool:
    """A ``Comparison`` (or one ``ComparisonTarget``) with an operator that compares values."""
    targets = node.comparisons if type(node) is cst.Comparison else [node]
    return any(type(target.operator) in VALUE_COMPARISONS for target in targets)


def metric_call(dotted: Optional[str]) -> bool:
    """``acc.update``, ``metric.add_batch``: a metric object (named so) takes a batch's output."""
    receiver, _, method = (dotted or "").rpartition(".")
    return method in _METRIC_METHODS and sink_name(receiver)


def sink_name(name: Optional[str]) -> bool:
    """Whether a called name (its last part) consumes what it is given (``save_image``,
    ``writer.add_image``, ``logger.info``, ``psnr``)."""
    return bool(name) and bool(SINK_WORDS.search(name.rsplit(".", 1)[-1]))  # type: ignore[union-attr]


@dataclass
class Reach:
    """Where a value goes: ``sinks`` (how the code names each), or ``escape`` (why the answer
    is "not only sinks")."""

    sinks: List[str] = field(default_factory=list)
    escape: Optional[str] = None
    strong: bool = False  # saved, printed, logged, made a number or detached somewhere
    returned: bool = False  # (a helper's parameter) handed back to the caller
    # ``.numpy()`` read it with its graph (no detach on the way): torch raises there for a tensor
    # that requires grad, so the value carries none (a model that turns autograd off itself)
    attached_numpy: bool = False

    @property
    def only_sinks(self) -> bool:
        return self.escape is None and self.strong


@dataclass(frozen=True)
class Helper:
    """A same-file function (or, ``bound``, a method called on ``self``) a call runs, and its
    statement flow."""

    function: cst.FunctionDef
    flow: Flow
    bound: bool = False
    # a function of another project file: that file's names (None: this file's)
    qualify: Optional[Callable[[cst.BaseExpression], Optional[str]]] = None
    local_functions: Optional[Set[str]] = None


HELPER_DEPTH = 2  # helpers followed inside helpers, at most


class _Escape(Exception):
    pass


def bound_parameter(helper: Helper, call: cst.Call, arg: cst.Arg) -> Optional[str]:
    """The parameter of ``helper`` that the argument ``arg`` of ``call`` binds; None where it
    goes to ``*args``/``**kwargs`` or comes through a star."""
    params = helper.function.params
    names = [p.name.value for p in (*params.posonly_params, *params.params)]
    if helper.bound:
        names = names[1:]
    if arg.star:
        return None
    if arg.keyword is not None:
        keyword = arg.keyword.value
        return keyword if keyword in names or keyword in {p.name.value for p in params.kwonly_params} else None
    positional = [a for a in call.args if a.keyword is None]
    if any(a.star for a in positional):
        return None
    position = next(i for i, a in enumerate(positional) if a is arg)
    return names[position] if position < len(names) else None


class SinkFollower:
    """Follows one value through a function (``Flow``), read by read."""

    def __init__(
        self,
        flow: Flow,
        qualify: Callable[[cst.BaseExpression], Optional[str]],
        is_model_call: Callable[[cst.Call], bool],
        local_functions: Set[str],
        helper: Optional[Callable[[cst.Call], Optional[Helper]]] = None,
        depth: int = 0,
    ) -> None:
        self.flow = flow
        self.qualify = qualify
        self.is_model_call = is_model_call
        self.local_functions = local_functions
        self.helper = helper  # a same-file function or method a call runs, when known
        self.depth = depth
        self.returning = False  # following a helper's parameter: a return hands it back
        self._no_tensor: Set[int] = set()  # returns where the parameter is known to be no tensor
        # `v, ix = topk(...)` met: (sampled, the indices' target, its statement)
        self._unpacked_indices: List[Tuple[bool, cst.BaseExpression, int]] = []
        self._in_indices = False  # following indices already (``_indices_reach``): not again
        self._parents: Dict[int, Dict[int, cst.CSTNode]] = {}

    def reach(self, start: cst.CSTNode, statement: cst.CSTNode) -> Reach:
        result = Reach()
        if not self.flow.reliable:
            result.escape = "the function uses global/nonlocal"
            return result
        index = self.flow.statement_index(statement)
        if index is None:
            result.escape = "not in the function's flow"
            return result
        return self._follow([(start, index)], result)

    def reach_parameter(self, name: str) -> Reach:
        """Where the parameter ``name`` goes in this (helper) function; a ``return`` of it (or
        of what is computed from it) sets ``returned`` instead of ending the answer."""
        self.returning = True
        self._no_tensor = no_tensor_returns(self.flow.function, name, self.qualify)
        result = Reach()
        if not self.flow.reliable or name in self.flow.captured:
            result.escape = "a helper whose flow is not followed"
            return result
        todo: List[Tuple[cst.CSTNode, int]] = []
        for number, node in enumerate(self.flow.nodes):
            if name in node.reads and any(d.index == ENTRY for d in self.flow.definitions(name, number)):
                todo.extend((read, number) for read in self._reads(number, name))
        return self._follow(todo, result)

    def _follow(self, todo: List[Tuple[cst.CSTNode, int]], result: Reach) -> Reach:
        seen: Set[Tuple[int, int]] = set()
        try:
            while todo:
                node, where = todo.pop()
                if (id(node), where) in seen:
                    continue
                seen.add((id(node), where))
                if len(seen) > 400:
                    raise _Escape("too many uses to follow")
                todo.extend(self._step(node, where, result))
        except _Escape as escape:
            result.escape = str(escape)
        for sampled, target, where in self._unpacked_indices:
            # `_, idx = torch.max(p, dim=1)`: the indices carry no graph, wherever they go;
            # what they reach (`idx.data`, `.item()`) still says what the output was for
            result.sinks.append("indices")
            # (indices that flow back into the model, `ys = cat((ys, idx))` feeding the next
            # decode step, meet the same call again: followed once, not recursively)
            result.strong = result.strong or sampled or (
                not self._in_indices and self._indices_reach(target, where).strong
            )
        self._unpacked_indices = []
        return result

    def _indices_reach(self, target: cst.BaseExpression, where: int, flowing: bool = False) -> Reach:
        """Where the indices bound to ``target`` in statement ``where`` go (``flowing``: the
        indices are the expression ``target`` itself, read on in that statement)."""
        follower = SinkFollower(self.flow, self.qualify, self.is_model_call, self.local_functions)
        follower._in_indices = True
        reach = Reach()
        try:
            reads = [(target, where)] if flowing else follower._bound(target, where)
        except _Escape:
            return reach
        return follower._follow(reads, reach)

    # -- one use ----------------------------------------------------------------------------------
    def _parent_map(self, where: int) -> Dict[int, cst.CSTNode]:
        parents = self._parents.get(where)
        if parents is None:
            parents = {}
            stack = [self.flow.nodes[where].statement]
            while stack:
                node = stack.pop()
                for child in children(node):
                    parents[id(child)] = node
                    stack.append(child)
            self._parents[where] = parents
        return parents

    def _step(self, node: cst.CSTNode, where: int, result: Reach) -> List[Tuple[cst.CSTNode, int]]:
        """What ``node`` (a tensor carrying the graph, in statement ``where``) flows into."""
        parents = self._parent_map(where)
        parent = parents.get(id(node))
        kind = type(parent)
        if parent is None or kind in _NESTED:
            raise _Escape("used where the flow is not followed")
        if kind is cst.Attribute:
            if parent.value is not node:
                raise _Escape("attribute name")
            attr = parent.attr.value
            indices = attr in _INDEX_ATTRIBUTES and self._returns_indices(node)
            if attr in _PLAIN_ATTRIBUTES or indices:
                result.sinks.append(f"`.{attr}`")
                # detached on purpose, or sampled indices (`topk(...).indices`): no graph
                result.strong = result.strong or attr == "data" or (indices and self._sampled(node))
                return []
            call = parents.get(id(parent))
            if type(call) is cst.Call and call.func is parent:
                if attr in SINK_METHODS or sink_name(attr):
                    result.attached_numpy = result.attached_numpy or attr == "numpy"
                    result.sinks.append(f"`.{attr}()`")
                    result.strong = result.strong or attr not in SINK_METHODS or attr in STRONG_METHODS
                    return []
                if attr in ("append", "extend", "insert"):
                    # a list holding the output gets another item: the list still goes only
                    # where its later reads take it (`data_t.append(...)`; `torch.cat(data_t)`)
                    return []
                if attr == "add":
                    raise _Escape("a method of the value stores something in it")
                return [(call, where)]  # .cpu(), .softmax(1), .view(...): still the graph
            return [(parent, where)]  # `out.logits`, `out.sample`
        if kind is cst.Subscript:
            if parent.value is node:
                if self._indices_of(node, parent):  # (``torch.max(out, 1)[1]``: what the indices reach says what the output was for)
                    result.sinks.append("indices")
                    result.strong = result.strong or self._sampled(node) or (not self._in_indices and self._indices_reach(parent, where, True).strong)
                    return []
                return [(parent, where)]
            result.sinks.append("an index")
            return []
        if kind in (cst.SubscriptElement, cst.Index, cst.Slice):
            result.sinks.append("an index")
            return []
        if kind in (cst.BinaryOperation, cst.UnaryOperation, cst.BooleanOperation):
            return [(parent, where)]
        if kind in (cst.Comparison, cst.ComparisonTarget):
            result.sinks.append("a comparison")
            # `<`, `>=`, `==` ... give a bool tensor, as `.ge()` / `torch.eq` do: made a number,
            # as strong as they are (`is None`, `in` say nothing of the values)
            result.strong = result.strong or tensor_comparison(parent)
            return []
        if kind is cst.IfExp:
            if parent.test is node:
                result.sinks.append("a condition")
                return []
            return [(parent, where)]
        if kind in (cst.FormattedStringExpression,):
            result.sinks.append("an f-string")
            return []
        if kind in (cst.Element, cst.StarredElement, cst.DictElement):
            container = parents.get(id(parent))
            if kind is cst.DictElement and parent.value is not node:
                raise _Escape("a dictionary key")
            return [(container, where)] if container is not None else []
        if kind is cst.Arg:
            return self._argument(parent, parents, where, result)
        if kind is cst.CompFor:
            if parent.iter is not node:
                raise _Escape("a comprehension target")
            return self._comprehension(parent, parents, where)
        if kind is cst.CompIf:
            result.sinks.append("a condition")
            return []
        if kind in _COMPREHENSIONS:
            element = parent.value if kind is cst.DictComp else parent.elt  # type: ignore[union-attr]
            if element is not node:
                raise _Escape("a comprehension key")
            return [(parent, where)]  # a list (generator) of what the element is
        if kind in (cst.Assign, cst.AnnAssign, cst.AugAssign):
            return self._assigned(parent, node, where)
        if kind is cst.Expr:
            return []  # a value dropped
        if kind in (cst.If, cst.While):
            result.sinks.append("a condition")
            return []
        if kind is cst.For and parent.iter is node:
            return self._bound(_values_target(parent.iter, parent.target), where)
        if kind is cst.AssignTarget and type(node) is cst.Subscript:
            return []  # `logits[logits < v] = -inf`: written into, the value's later reads are followed
        if kind is cst.Return and self.returning:
            result.returned = result.returned or id(parent) not in self._no_tensor
            return []
        if kind in (cst.Return, cst.Yield, cst.Await):
            raise _Escape("returned to the caller")
        raise _Escape(f"used in a {kind.__name__}")

    def _comprehension(
        self, compfor: cst.CompFor, parents: Dict[int, cst.CSTNode], where: int
    ) -> List[Tuple[cst.CSTNode, int]]:
        """``[p.cpu().numpy() for p in preds]``: the reads of ``p`` in the comprehension."""
        names = {n.value for n in _walk_names(_values_target(compfor.iter, compfor.target))}
        if not names:
            raise _Escape("a comprehension target")
        comprehension = parents.get(id(compfor))
        while type(comprehension) is cst.CompFor:
            comprehension = parents.get(id(comprehension))
        if type(comprehension) not in _COMPREHENSIONS:
            raise _Escape("a comprehension")
        found: List[Tuple[cst.CSTNode, int]] = []
        stack: List[cst.CSTNode] = [comprehension]
        while stack:
            item = stack.pop()
            if type(item) is cst.CompFor:  # its target binds names, it does not read them
                stack.extend(n for n in children(item) if n is not item.target)
                continue
            if type(item) is cst.Name and item.value in names and not _is_target(item, parents) \
                    and not (type(parents.get(id(item))) is cst.Attribute and parents[id(item)].attr is item):
                found.append(item)
                continue
            stack.extend(children(item))
        return [(read, where) for read in found]

    def _argument(
        self, arg: cst.Arg, parents: Dict[int, cst.CSTNode], where: int, result: Reach
    ) -> List[Tuple[cst.CSTNode, int]]:
        call = parents.get(id(arg))
        if type(call) is not cst.Call:
            raise _Escape("an argument")
        func = call.func
        if self.is_model_call(call):
            return [(call, where)]  # the model again (an encoder's memory to the decoder)
        dotted = dotted_name(func) if type(func) in (cst.Name, cst.Attribute) else None
        qualified = self.qualify(func) if dotted is not None else None
        if (dotted or "").startswith("torch.") and (qualified or "").endswith("." + (dotted or "")):
            qualified = dotted  # `torch` from a star import (`from fastai.callback.all import *`)
        if qualified is None and type(func) is cst.Name and (
            func.value in SINK_FUNCTIONS or func.value in _WEAK_FUNCTIONS
        ) and func.value not in self.local_functions:
            qualified = func.value
        if qualified in _WEAK_FUNCTIONS:
            result.sinks.append(f"`{qualified}`")
            return []
        if qualified in SINK_FUNCTIONS or (qualified or "").startswith(_SINK_MODULES):
            result.sinks.append(f"`{dotted or qualified}`")
            result.strong = True
            return []
        if metric_call(dotted):  # `acc.update(y_pred, y)`, `metric.add(out)`: a metric object takes it
            result.sinks.append(f"`{dotted}`")
            result.strong = True
            return []
        if type(func) is cst.Name and func.value == "zip" and qualified in (None, "builtins.zip") and not arg.keyword and not arg.star:
            loop = parents.get(id(call))  # `for prob, pos in zip(values, indices)`: its item of each row
            target = loop.target if type(loop) is cst.For and loop.iter is call else None  # type: ignore[union-attr]
            position = next(i for i, a in enumerate(call.args) if a is arg)
            if type(target) in (cst.Tuple, cst.List) and len(target.elements) == len(call.args) and not any(a.star or a.keyword for a in call.args):  # type: ignore[union-attr]
                return self._bound(target.elements[position].value, where)  # type: ignore[union-attr]
            raise _Escape("passed to `zip`")
        if type(func) is cst.Attribute and func.attr.value in ("append", "extend", "insert", "add") \
                and not (qualified or "").startswith("torch."):  # `torch.add(a, b)` is arithmetic
            return self._stored_in(func.value, where)
        if qualified is not None and qualified.startswith("torch") and not (
            type(func) is cst.Name and func.value in self.local_functions
        ):
            return [(call, where)]  # torch.cat, F.interpolate, make_grid: still the graph
        # a method of the class called on ``self`` is read first, whatever its name says
        # (``self.score_func(h, r, t)`` computes the model's score, no metric); where its reading
        # is lost (``self._save_to_midi(seq, path)`` hands it to a library), its name decides
        helper = self.helper(call) if self.helper is not None and type(func) is cst.Attribute else None
        named = dotted is not None and sink_name(dotted) and not (type(func) is cst.Name and func.value in self.local_functions)
        if named and helper is not None:
            try:
                return self._through_helper(helper, arg, call, where, result)
            except _Escape:
                pass
        if named:
            result.sinks.append(f"`{dotted}`")
            result.strong = True
            return []
        if helper is None and self.helper is not None:
            helper = self.helper(call)
        if helper is not None:
            return self._through_helper(helper, arg, call, where, result)
        raise _Escape(f"passed to `{dotted or 'a call'}`")

    def _through_helper(
        self, helper: Helper, arg: cst.Arg, call: cst.Call, where: int, result: Reach
    ) -> List[Tuple[cst.CSTNode, int]]:
        """``fake = self._apply_activate(fake)``: the helper is followed from the parameter
        the argument binds; what it returns computed from it is the call's value here."""
        if self.depth >= HELPER_DEPTH or arg.star:
            raise _Escape("passed to a helper not followed")
        name = bound_parameter(helper, call, arg)
        if name is None:
            raise _Escape("passed to a helper's *args or **kwargs")
        qualify, local, nested = (self.qualify, self.local_functions, self.helper) if helper.qualify is None else (
            helper.qualify, helper.local_functions or set(), None  # another file's: its names, its helpers not followed
        )
        inner = SinkFollower(helper.flow, qualify, lambda _call: False, local, nested, self.depth + 1).reach_parameter(name)
        if inner.escape is not None:
            raise _Escape(f"{inner.escape} in `{helper.function.name.value}`")
        result.sinks.extend(inner.sinks)
        result.strong = result.strong or inner.strong
        return [(call, where)] if inner.returned else []

    def _stored_in(self, container: cst.BaseExpression, where: int) -> List[Tuple[cst.CSTNode, int]]:
        """``outs.append(out)``: every later read of the local list ``outs`` holds it."""
        if type(container) is not cst.Name:
            raise _Escape("appended to a list that is not a local name")
        name = container.value
        reaching = self.flow.definitions(name, where)
        if not reaching or any(d.index < 0 for d in reaching) or name in self.flow.captured:
            raise _Escape("appended to a list from outside the function")
        found: List[Tuple[cst.CSTNode, int]] = []
        for number, node in enumerate(self.flow.nodes):
            if name not in node.reads or number == where:
                continue
            for read in self._reads(number, name):
                found.append((read, number))
        return found

    def _indices_of(self, node: cst.CSTNode, subscript: cst.Subscript) -> bool:
        """``torch.topk(p, k)[1]``: the indices of a call that returns (values, indices)."""
        if not self._returns_indices(node) or len(subscript.slice) != 1:
            return False
        index = subscript.slice[0].slice
        return type(index) is cst.Index and type(index.value) is cst.Integer and index.value.value == "1"

    @staticmethod
    def _sampled(node: cst.CSTNode) -> bool:
        return type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value in _SAMPLED_INDICES

    def _returns_indices(self, node: cst.CSTNode) -> bool:
        return returns_indices(node, self.qualify)

    def _assigned(self, statement: cst.CSTNode, node: cst.CSTNode, where: int) -> List[Tuple[cst.CSTNode, int]]:
        if type(statement) is cst.Assign:
            if statement.value is not node:
                raise _Escape("an assignment target")
            found = []
            for target in statement.targets:
                bound = target.target
                if (
                    type(bound) in (cst.Tuple, cst.List) and len(bound.elements) == 2
                    and self._returns_indices(node)
                ):  # `values, indices = torch.topk(...)`: only the values keep the graph
                    self._unpacked_indices.append((self._sampled(node), bound.elements[1].value, where))
                    bound = bound.elements[0].value
                found.extend(self._bound(bound, where))
            return found
        if type(statement) is cst.AugAssign and statement.target is node:
            if type(node) is cst.Subscript:
                return []  # `logits[:, tok] /= penalty`: written into in place, as `logits[m] = x`
            # `logits /= temperature`: in place, the name still holds the value
            return self._bound(statement.target, where)
        if statement.value is not node:  # type: ignore[attr-defined]
            raise _Escape("an assignment target")
        return self._bound(statement.target, where)  # type: ignore[attr-defined]

    def _bound(self, target: cst.BaseExpression, where: int) -> List[Tuple[cst.CSTNode, int]]:
        """The reads that the names bound by ``target`` at statement ``where`` reach."""
        names: List[str] = []
        stack = [target]
        while stack:
            item = stack.pop()
            if type(item) is cst.Name:
                names.append(item.value)
            elif type(item) in (cst.Tuple, cst.List):
                stack.extend(element.value for element in item.elements)  # type: ignore[attr-defined]
            elif type(item) is cst.StarredElement:
                stack.append(item.value)
            else:
                raise _Escape("stored on an object")  # `self.x = out`, `d[k] = out`
        found: List[Tuple[cst.CSTNode, int]] = []
        for name in names:
            if name in self.flow.captured:
                raise _Escape("read by a nested function")
            for number, node in enumerate(self.flow.nodes):
                if name not in node.reads:
                    continue
                if not any(d.index == where for d in self.flow.definitions(name, number)):
                    continue
                found.extend((read, number) for read in self._reads(number, name))
        return found

    def _reads(self, number: int, name: str) -> List[cst.Name]:
        """The ``Name`` nodes that read ``name`` in statement ``number`` (a compound
        statement: in its header only)."""
        statement = self.flow.nodes[number].statement
        if type(statement) in (cst.If, cst.While):
            roots: List[cst.CSTNode] = [statement.test]  # type: ignore[attr-defined]
        elif type(statement) is cst.For:
            roots = [statement.iter]
        elif type(statement) is cst.With:
            roots = [item.item for item in statement.items]
        elif type(statement) in (cst.SimpleStatementLine, cst.SimpleStatementSuite):
            roots = [statement]
        else:
            raise _Escape(f"read in a {type(statement).__name__}")
        parents = self._parent_map(number)
        found: List[cst.Name] = []
        stack = list(roots)
        while stack:
            node = stack.pop()
            if type(node) is cst.Name and node.value == name:
                parent = parents.get(id(node))
                if type(parent) is cst.Attribute and parent.attr is node:
                    continue
                if type(parent) is cst.Arg and parent.keyword is node:
                    continue
                if _is_target(node, parents):
                    continue
                found.append(node)
                continue
            stack.extend(children(node))
        return found


def _values_target(iterated: cst.BaseExpression, target: cst.BaseExpression) -> cst.BaseExpression:
    """What of ``target`` the output reaches when the loop iterates ``iterated``: for
    ``for k, v in out.items()`` only ``v`` (the keys of a model's output dict are its names)."""
    if (
        type(iterated) is cst.Call and type(iterated.func) is cst.Attribute and iterated.func.attr.value == "items"
        and not iterated.args and type(target) in (cst.Tuple, cst.List) and len(target.elements) == 2  # type: ignore[union-attr]
    ):
        return target.elements[1].value  # type: ignore[union-attr]
    return target


def _is_target(node: cst.Name, parents: Dict[int, cst.CSTNode]) -> bool:
    """``node`` is (part of) what an assignment binds."""
    child: cst.CSTNode = node
    parent = parents.get(id(node))
    while type(parent) in (cst.Tuple, cst.List, cst.Element, cst.StarredElement):
        child, parent = parent, parents.get(id(parent))  # type: ignore[assignment]
    if type(parent) is cst.AssignTarget:
        return True
    if type(parent) in (cst.AnnAssign, cst.AugAssign) and parent.target is child:  # type: ignore[union-attr]
        return type(parent) is cst.AnnAssign
    if type(parent) is cst.For and parent.target is child:  # type: ignore[union-attr]
        return True
    return False


def _walk_names(target: cst.CSTNode) -> List[cst.Name]:
    """The names a ``for`` target binds (``p``, ``(a, b)``)."""
    found: List[cst.Name] = []
    stack = [target]
    while stack:
        item = stack.pop()
        if type(item) is cst.Name:
            found.append(item)
        elif type(item) in (cst.Tuple, cst.List):
            stack.extend(element.value for element in item.elements)  # type: ignore[attr-defined]
        elif type(item) is cst.StarredElement:
            stack.append(item.value)
    return found


def returns_indices(node: cst.CSTNode, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> bool:
    """``torch.topk(...)``, ``x.max(dim=1)``, ``p.sort(-1)``: a call returning (values,
    indices) (``max``/``min``/``median`` only with a ``dim``)."""
    if type(node) is not cst.Call:
        return False
    func = node.func
    if type(func) is not cst.Attribute:
        return False
    name = func.attr.value
    qualified = qualify(func)
    if qualified is not None and not qualified.startswith("torch."):
        return False
    if name not in _WITH_INDICES:
        return False
    arguments = [a for a in node.args if a.keyword is None] if qualified is None else [
        a for a in node.args if a.keyword is None][1:]
    if name in ("max", "min", "median", "nanmedian"):  # `torch.max(a, b)` is elementwise
        dim = arguments[0].value if arguments else None
        if type(dim) is cst.UnaryOperation:
            dim = dim.expression
        return type(dim) is cst.Integer or any(a.keyword is not None and a.keyword.value == "dim" for a in node.args)
    return True


def indices_target(statement: cst.CSTNode, value: Optional[cst.BaseExpression], qualify) -> Optional[str]:
    """`_, idx = torch.topk(p, 1)`, `v, i = out.max(dim=1)`: the name an assignment binds to
    the indices of a call that returns (values, indices) (``returns_indices``); they carry no
    graph."""
    if type(statement) is not cst.Assign or len(statement.targets) != 1:
        return None
    target = statement.targets[0].target
    if type(target) not in (cst.Tuple, cst.List) or len(target.elements) != 2:
        return None
    if value is None or not returns_indices(value, qualify):
        return None
    return dotted_name(target.elements[1].value)


# what ``isinstance`` may test a value against that no tensor is (numpy's arrays, Python's values)
_NO_TENSOR_TYPES = frozenset({
    "numpy.ndarray", "list", "tuple", "dict", "int", "float", "bool", "str", "bytes", "numpy.generic",
})


def no_tensor_returns(function: Optional[cst.CSTNode], name: str, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> Set[int]:
    """The ``return`` statements of ``function`` inside an ``if`` arm that only a value of
    ``name`` that is no tensor enters (``if not isinstance(tensor, torch.Tensor):``, ``if
    isinstance(tensor, np.ndarray):``), the arm never rebinding ``name``: a helper converting
    its input (``tensor_to_numpy``) hands back the input there, never a tensor."""
    found: Set[int] = set()
    if type(function) is not cst.FunctionDef:
        return found
    for node in walk(function.body):
        if type(node) is not cst.If or not _excludes_tensor(node.test, name, qualify):
            continue
        arm = walk(node.body)
        if any(type(n) is cst.AssignTarget and type(n.target) is cst.Name and n.target.value == name for n in arm):
            continue
        found.update(id(n) for n in arm if type(n) is cst.Return)
    return found


def _excludes_tensor(test: cst.BaseExpression, name: str, qualify: Callable[[cst.BaseExpression], Optional[str]]) -> bool:
    negated = type(test) is cst.UnaryOperation and type(test.operator) is cst.Not
    call = test.expression if negated else test  # type: ignore[attr-defined]
    if type(call) is not cst.Call or len(call.args) != 2 or dotted_name(call.func) != "isinstance":
        return False
    value, kinds = call.args[0].value, call.args[1].value
    if type(value) is not cst.Name or value.value != name:
        return False
    types = [e.value for e in kinds.elements] if type(kinds) is cst.Tuple else [kinds]
    qualified = [qualify(t) or dotted_name(t) for t in types]
    if negated:  # ``not isinstance(x, torch.Tensor)``
        return any(q in ("torch.Tensor", "torch.nn.Parameter") for q in qualified)
    return all(q in _NO_TENSOR_TYPES for q in qualified)

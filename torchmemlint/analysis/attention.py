"""Hand-written ("eager") attention in a function: ``softmax(q @ kᵀ * scale [+ mask]) [dropout] @ v``.

``AttentionSites(analysis).sites()`` finds, in every function of the file, a product with
``v`` whose left operand is, through local names of the same block, an optional dropout of a
softmax over the last dimension of a q·kᵀ product (``q @ k.transpose(-2, -1)``,
``torch.matmul``, ``torch.bmm``, ``k.mT``, or ``einsum('b h i d, b h j d -> b h i j', q, k)``),
optionally scaled (``* s``, ``/ s``) and masked (``masked_fill(cond, -inf)`` in place or not,
``+ mask``, either one under an ``if`` with no ``else``).  Each site says what
``F.scaled_dot_product_attention`` needs to compute the same thing (query, key, value, scale,
mask, dropout probability) and which statements computed the scores, or why no such call
can be written (``reason``).  A site whose intermediate tensors (the scores, the weights)
are read anywhere else in the function - returned, stored on ``self``, appended - is not a
site: SDPA never materialises the weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple

import libcst as cst

from torchmemlint.analysis.names import dotted_name
from torchmemlint.analysis.syntax import nodes_of, walk
from torchmemlint.tree import node_index

SOFTMAX = frozenset({"torch.nn.functional.softmax", "torch.softmax", "torch.Tensor.softmax"})
DROPOUT_FUNCTIONS = frozenset({"torch.nn.functional.dropout", "torch.dropout"})
MATMUL = frozenset({"torch.matmul", "torch.bmm"})
EINSUM = frozenset({"torch.einsum"})
DROPOUT_MODULE = "torch.nn.Dropout"
CASTS = frozenset({"to", "type_as", "type", "float", "half", "bfloat16", "double"})


@dataclass
class AttentionSite:
    function: cst.FunctionDef
    product: cst.BaseExpression  # the ``weights @ v`` expression
    statement: cst.CSTNode  # its statement
    query: Optional[cst.BaseExpression] = None
    key: Optional[cst.BaseExpression] = None
    value: Optional[cst.BaseExpression] = None
    scale: Optional[str] = None  # the scale= argument (None: none was applied, so 1.0)
    mask: Optional[str] = None  # the attn_mask= argument
    dropout: Optional[str] = None  # the dropout_p= argument
    removable: List[cst.CSTNode] = field(default_factory=list)  # statements SDPA replaces
    reason: str = ""  # why no SDPA call can be written ("" when one can)
    has_dropout: bool = False
    has_mask: bool = False
    rank: Optional[int] = None  # the tensors' rank when the code says (einsum)

    @property
    def fixable(self) -> bool:
        return not self.reason


class _Giveup(Exception):
    """The expression is not eager attention."""


class _NoFix(Exception):
    """Eager attention, but no SDPA call reproduces it (``args[0]``: why)."""


def _code(node: cst.CSTNode) -> str:
    return cst.Module([]).code_for_node(node)


def _int(node: cst.BaseExpression) -> Optional[int]:
    if type(node) is cst.Integer:
        return int(node.value)
    if type(node) is cst.UnaryOperation and type(node.operator) is cst.Minus:
        inner = _int(node.expression)
        return None if inner is None else -inner
    return None


def _args(call: cst.Call) -> Tuple[List[cst.BaseExpression], Dict[str, cst.BaseExpression]]:
    positional, keywords = [], {}
    for arg in call.args:
        if arg.star:
            raise _Giveup()
        if arg.keyword is not None:
            keywords[arg.keyword.value] = arg.value
        else:
            positional.append(arg.value)
    return positional, keywords


def _strip(node: cst.BaseExpression) -> cst.BaseExpression:
    """The expression without redundant parentheses (libcst keeps them on the node)."""
    if node.lpar:
        return node.with_changes(lpar=[], rpar=[])
    return node


def _names_read(node: cst.CSTNode) -> Set[str]:
    return {n.value for n in walk(node) if type(n) is cst.Name}


def _assigned_names(statement: cst.CSTNode) -> Set[str]:
    names: Set[str] = set()
    for node in walk(statement):
        targets: Sequence[cst.CSTNode] = ()
        if type(node) is cst.Assign:
            targets = [t.target for t in node.targets]
        elif type(node) in (cst.AugAssign, cst.AnnAssign):
            targets = [node.target]
        elif type(node) in (cst.For, cst.CompFor):
            targets = [node.target]
        elif type(node) is cst.WithItem and node.asname is not None:
            targets = [node.asname.name]
        for target in targets:
            for name in walk(target):
                if type(name) is cst.Name:
                    names.add(name.value)
    return names


NEGATIVE_FILLS = ("inf", "1e9", "1e4", "1e10", "1e8", "10000", "1000000000", "finfo", "max_neg", "neg")


def _is_negative_fill(node: cst.BaseExpression) -> bool:
    """``float('-inf')``, ``-1e9``, ``-torch.finfo(x.dtype).max``, ``torch.finfo(d).min``, ..."""
    text = _code(node).replace(" ", "").lower()
    if text.startswith("-") or "'-inf'" in text or '"-inf"' in text or text.endswith(".min"):
        return any(marker in text for marker in NEGATIVE_FILLS)
    return False


def _einsum_spec(call: cst.Call) -> Optional[Tuple[List[str], List[str], List[str]]]:
    positional, _ = _args(call)
    if len(positional) != 3 or type(positional[0]) is not cst.SimpleString:
        return None
    spec = positional[0].evaluated_value
    if not isinstance(spec, str) or "->" not in spec or "..." in spec:
        return None
    inputs, output = spec.replace(" ", "").split("->")
    parts = inputs.split(",")
    if len(parts) != 2:
        return None
    return list(parts[0]), list(parts[1]), list(output)


class _Block:
    """One block of statements, searched backwards for the statements that built a name."""

    def __init__(self, statements: Sequence[cst.CSTNode], node: Optional[cst.CSTNode] = None) -> None:
        self.statements = list(statements)
        self.node = node


_BLOCK_WALK = (cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.IndentedBlock)


class AttentionSites:
    """The eager-attention sites of one file (see the module doc)."""

    def __init__(self, analysis: "object") -> None:
        self.analysis = analysis
        self._sites: Optional[List[AttentionSite]] = None
        self._classes: Dict[int, cst.ClassDef] = {}

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.analysis.qualify(node)  # type: ignore[attr-defined]

    def sites(self) -> List[AttentionSite]:
        if self._sites is None:
            self._sites = []
            # every site needs a softmax, which is only recognised by a name holding "softmax"
            # (F.softmax, torch.softmax, x.softmax, an import alias of them): no such text, no site
            if not self.analysis.may_contain("softmax"):  # type: ignore[attr-defined]
                return self._sites
            for function, classdef in self._functions(self.analysis.module, None):  # type: ignore[attr-defined]
                self._sites.extend(self._function_sites(function, classdef))
        return self._sites

    def _functions(self, node: cst.CSTNode, classdef: Optional[cst.ClassDef]) -> Iterator[Tuple[cst.FunctionDef, Optional[cst.ClassDef]]]:
        """Every function of the file in pre-order, with the class it is directly a method of
        (from the file's shared index)."""
        index = node_index(node)
        order, scope = index.order, index.scope
        for here in index.positions(cst.FunctionDef):
            inside = scope[here]
            owner = order[inside] if inside >= 0 and type(order[inside]) is cst.ClassDef else classdef
            yield order[here], owner  # type: ignore[misc]

    # -- one function --------------------------------------------------------------------------
    def _function_sites(self, function: cst.FunctionDef, classdef: Optional[cst.ClassDef]) -> List[AttentionSite]:
        found = []
        fallback = self._fallback_blocks(function)
        for block in self._blocks(function.body):
            if block.node is not None and id(block.node) in fallback:
                continue
            for index, statement in enumerate(block.statements):
                if type(statement) is not cst.SimpleStatementLine:
                    continue
                for node in nodes_of(statement, cst.BinaryOperation, cst.Call):  # what _product reads
                    operands = self._product(node)
                    if operands is None:
                        continue
                    site = self._site(function, classdef, block, index, node, operands)
                    if site is not None:
                        found.append(site)
        return found

    def _blocks(self, suite: cst.BaseSuite) -> Iterator[_Block]:
        statements = list(suite.body) if type(suite) is cst.IndentedBlock else [suite]
        yield _Block(statements, suite)
        for statement in statements:
            if type(statement) in (cst.FunctionDef, cst.ClassDef):
                continue
            for child in nodes_of(statement, *_BLOCK_WALK):  # the nodes the walk acts on
                if child is not statement and type(child) is not cst.IndentedBlock:
                    break
                if type(child) is cst.IndentedBlock and child is not suite:
                    yield _Block(child.body, child)  # type: ignore[attr-defined]

    def _fallback_blocks(self, function: cst.FunctionDef) -> Set[int]:
        """The blocks of an ``if``/``else`` one of whose branches calls
        ``scaled_dot_product_attention`` (timm's ``if self.fused_attn: ... else: <eager>``):
        the eager branch is a fallback the code already offers SDPA for."""
        blocks: Set[int] = set()
        if not self.analysis.may_contain("scaled_dot_product_attention"):  # type: ignore[attr-defined]
            return blocks
        for node in nodes_of(function.body, cst.If):
            if any(
                (dotted_name(call.func) or "").endswith("scaled_dot_product_attention")  # type: ignore[attr-defined]
                for call in nodes_of(node, cst.Call)
            ):
                blocks.update(id(b) for b in nodes_of(node, cst.IndentedBlock))
        return blocks

    def _product(self, node: cst.CSTNode) -> Optional[Tuple[cst.BaseExpression, cst.BaseExpression, str]]:
        """(weights, value, kind) of ``weights @ value`` and its spellings."""
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:
            return node.left, node.right, "matmul"
        if type(node) is cst.Call:
            qualified = self.qualify(node.func)
            try:
                positional, keywords = _args(node)
            except _Giveup:
                return None
            if qualified in MATMUL and len(positional) == 2 and not keywords:
                return positional[0], positional[1], "matmul"
            if (
                type(node.func) is cst.Attribute and node.func.attr.value == "matmul"
                and qualified not in MATMUL and len(positional) == 1 and not keywords
                and type(node.func.value) is cst.Name
            ):
                return node.func.value, positional[0], "matmul"
            if qualified in EINSUM:
                spec = _einsum_spec(node)
                if spec is not None:
                    left, right, out = spec
                    # b..i j, b..j d -> b..i d
                    if (
                        len(left) == len(right) == len(out) >= 2 and left[:-2] == right[:-2] == out[:-2]
                        and left[-1] == right[-2] and out[-2] == left[-2] and out[-1] == right[-1]
                        and len(set(left[-2:] + right[-1:])) == 3
                    ):
                        return positional[1], positional[2], "einsum"
        return None

    def _site(
        self, function: cst.FunctionDef, classdef: Optional[cst.ClassDef], block: _Block, index: int,
        product: cst.CSTNode, operands: Tuple[cst.BaseExpression, cst.BaseExpression, str],
    ) -> Optional[AttentionSite]:
        weights, value, _ = operands
        site = AttentionSite(function, product, block.statements[index], value=value)  # type: ignore[arg-type]
        trace = _Trace(self, block, index, classdef, function)
        try:
            trace.weights(weights, index)
        except _Giveup:
            return None
        except _NoFix as reason:
            site.reason = str(reason)
        if trace.softmax is None:
            return None
        if trace.nofix and not site.reason:
            site.reason = trace.nofix
        if self._escapes(function, trace, block, index, product):
            return None
        site.has_dropout, site.has_mask = trace.has_dropout, trace.has_mask
        site.removable = [block.statements[i] for i in sorted(trace.statements)]
        if site.reason:
            return site
        site.query, site.key = trace.query, trace.key
        site.scale, site.mask, site.dropout = trace.scale, trace.mask, trace.dropout
        site.rank = trace.rank
        if trace.rank not in (None, 3, 4):
            site.reason = "the tensors are %d-D; CUDA's fused kernels take 4-D (batch, heads, L, E)" % trace.rank
        elif trace.rank == 3 and trace.mask is not None:
            site.reason = "3-D tensors with a mask: the mask's dims for SDPA's 4-D form are not known"
        elif trace.mask_count > 1:
            site.reason = "more than one mask is applied to the scores"
        elif self._rebound_between(block, trace, index):
            site.reason = "a name the scores are computed from is assigned again before the product with v"
        return site

    def _escapes(self, function: cst.FunctionDef, trace: "_Trace", block: _Block, index: int, product: cst.CSTNode) -> bool:
        """Is a tensor of the chain (scores, weights) read outside it after it starts?"""
        if not trace.names:
            return False
        chain = {id(node) for i in trace.statements for node in walk(block.statements[i])}
        first = min(trace.statements | {index})
        start = block.statements[first]
        final = block.statements[index]
        seen_start = seen_final = False
        watched = set(trace.names)
        for node in walk(function.body):
            if node is start:
                seen_start = True
            if not isinstance(node, cst.BaseStatement) or id(node) in chain:
                continue
            if type(node) is cst.SimpleStatementLine and seen_start:
                if node is final:
                    reads = _loads(_without(node, product))
                    # ``attn = attn @ v``: after it, ``attn`` is the output, not the weights
                    rebound = _plain_targets(node) & watched
                    seen_final = True
                else:
                    reads = _loads(node)
                    rebound = set()
                if reads & watched:
                    return True
                if seen_final:
                    watched -= rebound
                    if not watched:
                        return False
        return False

    def _rebound_between(self, block: _Block, trace: "_Trace", index: int) -> bool:
        """Is a name the SDPA call reads (in q, k, scale, mask, dropout) assigned again
        between the statement that read it and the product with v?"""
        for position, names in trace.reads:
            for between in range(position + 1, index):
                if between not in trace.statements and _assigned_names(block.statements[between]) & names:
                    return True
        return False


def _plain_targets(statement: cst.CSTNode) -> Set[str]:
    """Names a plain ``name = ...`` statement binds."""
    names: Set[str] = set()
    for small in getattr(statement, "body", ()):
        if type(small) is cst.Assign:
            names.update(t.target.value for t in small.targets if type(t.target) is cst.Name)
    return names


def _loads(statement: cst.CSTNode) -> Set[str]:
    """Names a statement reads: every name but the plain targets it assigns."""
    stored = set()
    for small in getattr(statement, "body", ()):
        if type(small) is cst.Assign:
            stored.update(id(t.target) for t in small.targets if type(t.target) is cst.Name)
    return {n.value for n in walk(statement) if type(n) is cst.Name and id(n) not in stored}


def _without(statement: cst.CSTNode, product: cst.CSTNode) -> cst.CSTNode:
    """The statement with the product replaced by a placeholder name (for counting reads)."""

    class _Drop(cst.CSTTransformer):
        def on_leave(self, original: cst.CSTNode, updated: cst.CSTNode):  # type: ignore[no-untyped-def]
            return cst.Name("_") if original is product else updated

    return statement.visit(_Drop())


class _Trace:
    """Follows the weights of a product back to the q·kᵀ scores, collecting SDPA's arguments."""

    def __init__(self, sites: AttentionSites, block: _Block, index: int, classdef: Optional[cst.ClassDef], function: cst.FunctionDef) -> None:
        self.sites = sites
        self.block = block
        self.classdef = classdef
        self.function = function
        self.statements: Set[int] = set()
        self.names: Set[str] = set()
        self.softmax: Optional[cst.Call] = None
        self.query: Optional[cst.BaseExpression] = None
        self.key: Optional[cst.BaseExpression] = None
        self.query_node: Optional[cst.BaseExpression] = None
        self.key_node: Optional[cst.BaseExpression] = None
        self.scale: Optional[str] = None
        self.mask: Optional[str] = None
        self.dropout: Optional[str] = None
        self.mask_count = 0
        self.has_dropout = False
        self.has_mask = False
        self.rank: Optional[int] = None  # known for einsum
        self.nofix: Optional[str] = None
        self.reads: List[Tuple[int, Set[str]]] = []  # (statement, names) the SDPA call moves

    def qualify(self, node: cst.BaseExpression) -> Optional[str]:
        return self.sites.qualify(node)

    # -- following local names -----------------------------------------------------------------
    def _definition(self, name: str, before: int) -> Tuple[int, cst.BaseExpression, List[Tuple[int, cst.CSTNode, Optional[str]]]]:
        """The statement that assigns ``name`` last before ``before`` in the block, its value,
        and the in-place changes made to it in between (index, node, condition)."""
        changes: List[Tuple[int, cst.CSTNode, Optional[str]]] = []
        for position in range(before - 1, -1, -1):
            statement = self.block.statements[position]
            condition = None
            inner = statement
            if type(statement) is cst.If and statement.orelse is None:
                body = list(statement.body.body) if type(statement.body) is cst.IndentedBlock else []
                if name in _assigned_names(statement) or self._mutates(statement, name):
                    touching = [b for b in body if name in _assigned_names(b) or self._mutates(b, name)]
                    if len(touching) != 1:
                        raise _Giveup()
                    if len(body) != 1:  # other statements in the ``if`` (preparing the mask)
                        self.nofix = "the `if` that applies the mask runs other statements too"
                    inner, condition = touching[0], _code(statement.test)
            elif type(statement) is not cst.SimpleStatementLine:
                if name in _assigned_names(statement):
                    raise _Giveup()
                continue
            if type(inner) is not cst.SimpleStatementLine or len(inner.body) != 1:
                if name in _assigned_names(statement):
                    raise _Giveup()
                continue
            small = inner.body[0]
            if type(small) is cst.Assign and len(small.targets) == 1:
                target = small.targets[0].target
                if type(target) is cst.Name and target.value == name:
                    if condition is not None:
                        changes.append((position, small, condition))  # ``if c: s = s.masked_fill(...)``
                        continue
                    return position, small.value, changes
            if type(small) is cst.AugAssign and type(small.target) is cst.Name and small.target.value == name:
                changes.append((position, small, condition))
                continue
            if type(small) is cst.Expr and self._mutates(inner, name):
                changes.append((position, small, condition))
                continue
            if name in _assigned_names(statement):
                raise _Giveup()
        raise _Giveup()

    @staticmethod
    def _mutates(statement: cst.CSTNode, name: str) -> bool:
        for node in walk(statement):
            if (
                type(node) is cst.Call and type(node.func) is cst.Attribute
                and type(node.func.value) is cst.Name and node.func.value.value == name
                and node.func.attr.value.endswith("_")
            ):
                return True
        return False

    def _follow(self, node: cst.BaseExpression, before: int) -> Tuple[cst.BaseExpression, int]:
        """A local name's assigned value (the in-place masks applied after it are recorded)."""
        node = _strip(node)
        if type(node) is not cst.Name:
            return node, before
        position, value, changes = self._definition(node.value, before)
        self.statements.add(position)
        self.names.add(node.value)
        for change_position, change, condition in changes:
            self.statements.add(change_position)
            self._change(node.value, change, condition, change_position)
        return _strip(value), position

    # -- the chain -----------------------------------------------------------------------------
    def weights(self, node: cst.BaseExpression, before: int) -> None:
        node, before = self._follow(node, before)
        if (
            type(node) is cst.Call and type(node.func) is cst.Attribute
            and node.func.attr.value in CASTS and self.qualify(node.func) is None
        ):
            try:
                self.weights(node.func.value, before)
            except _NoFix:
                pass
            raise _NoFix("the weights are cast (`.%s(...)`) before the product with v" % node.func.attr.value)
        if type(node) is cst.Call:
            dropped = self._dropout(node, before)
            if dropped is not None:
                self.has_dropout = True
                inner, probability = dropped
                inner, before = self._follow(inner, before)
                if probability is None:
                    self._softmax(inner, before)
                    raise _NoFix("the dropout applied to the weights is not a known nn.Dropout or F.dropout")
                self.dropout = probability
                node = inner
        self._softmax(node, before)

    def _softmax(self, node: cst.BaseExpression, before: int) -> None:
        if type(node) is not cst.Call:
            raise _Giveup()
        qualified = self.qualify(node.func)
        positional, keywords = _args(node)
        method = type(node.func) is cst.Attribute and node.func.attr.value == "softmax" and qualified is None
        if qualified in SOFTMAX and not method:
            if not positional:
                raise _Giveup()
            scores, rest = positional[0], positional[1:]
        elif method:
            scores, rest = node.func.value, positional  # type: ignore[union-attr]
        else:
            raise _Giveup()
        dim = keywords.get("dim", rest[0] if rest else None)
        if dim is None or _int(dim) != -1:
            raise _Giveup()
        self.softmax = node
        if set(keywords) - {"dim"} or len(rest) > 1:
            self._scores(scores, before, record=False)
            raise _NoFix("the softmax takes a dtype")
        self._scores(scores, before)

    def _scores(self, node: cst.BaseExpression, before: int, record: bool = True) -> None:
        node, before = self._follow(node, before)
        node = _strip(node)
        # masks around the scaled product
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "masked_fill":
            positional, keywords = _args(node)
            if len(positional) == 2 and not keywords:
                self._bool_mask(positional[0], positional[1], None, before)
                return self._scores(node.func.value, before, record)
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.Add:
            for scores, mask in ((node.left, node.right), (node.right, node.left)):
                if self._is_scaled_product(scores, before):
                    self._additive_mask(mask, None, before)
                    return self._scores(scores, before, record)
        self._scaled_product(node, before, record)

    def _is_scaled_product(self, node: cst.BaseExpression, before: int) -> bool:
        saved = (set(self.statements), set(self.names), self.query, self.key, self.scale, self.query_node, self.key_node, list(self.reads))
        try:
            self._scaled_product(_strip(self._follow(node, before)[0]), before, True)
            return True
        except (_Giveup, _NoFix):
            return False
        finally:
            (self.statements, self.names, self.query, self.key, self.scale, self.query_node, self.key_node, self.reads) = saved

    def _scaled_product(self, node: cst.BaseExpression, before: int, record: bool) -> None:
        node = _strip(node)
        if type(node) is cst.BinaryOperation and type(node.operator) in (cst.Multiply, cst.Divide):
            for product, scale in ((node.left, node.right), (node.right, node.left)):
                if type(node.operator) is cst.Divide and product is node.right:
                    break
                try:
                    self._product(_strip(self._follow(product, before)[0]), before)
                except _Giveup:
                    continue
                self.reads.append((before, _names_read(scale)))
                tensor = self._tensor_attribute(scale)
                if tensor is not None:
                    raise _NoFix("the scale `self.%s` is a tensor; SDPA's scale is a number" % tensor)
                text = _code(_strip(scale))
                if type(node.operator) is cst.Divide:
                    text = "1.0 / %s" % (text if _simple(scale) else "(%s)" % text)
                self.scale = text if self.scale is None else "(%s) * (%s)" % (self.scale, text)
                return
            raise _Giveup()
        self._product(node, before)

    def _product(self, node: cst.BaseExpression, before: int) -> None:
        node = _strip(node)
        if type(node) is cst.BinaryOperation and type(node.operator) is cst.MatrixMultiply:
            query, transposed = node.left, node.right
        elif type(node) is cst.Call and self.qualify(node.func) in MATMUL:
            positional, keywords = _args(node)
            if len(positional) != 2 or keywords:
                raise _Giveup()
            query, transposed = positional
        elif (
            type(node) is cst.Call and type(node.func) is cst.Attribute
            and node.func.attr.value == "matmul" and self.qualify(node.func) is None
        ):
            positional, keywords = _args(node)
            if len(positional) != 1 or keywords:
                raise _Giveup()
            query, transposed = node.func.value, positional[0]
        elif type(node) is cst.Call and self.qualify(node.func) in EINSUM:
            spec = _einsum_spec(node)
            if spec is None:
                raise _Giveup()
            left, right, out = spec
            # b..i d, b..j d -> b..i j
            if not (
                len(left) == len(right) == len(out) >= 2 and left[:-2] == right[:-2] == out[:-2]
                and left[-1] == right[-1] and out[-2:] == [left[-2], right[-2]]
                and len({left[-2], right[-2], left[-1]}) == 3
            ):
                raise _Giveup()
            positional, _ = _args(node)
            self.rank = len(out)
            self.query_node = self.query = positional[1]
            self.key_node = self.key = positional[2]
            self.reads.append((before, _names_read(positional[1]) | _names_read(positional[2])))
            return
        else:
            raise _Giveup()
        key = self._untransposed(transposed, before)
        self.reads.append((before, _names_read(query) | _names_read(key)))
        self.query_node, self.query = query, query
        self.key_node, self.key = key, key

    def _untransposed(self, node: cst.BaseExpression, before: int) -> cst.BaseExpression:
        node = _strip(node)
        if type(node) is cst.Name:
            value, _ = self._follow(node, before)
            return self._untransposed(value, before)
        if type(node) is cst.Attribute and node.attr.value == "mT":
            return node.value
        if type(node) is cst.Call and type(node.func) is cst.Attribute and node.func.attr.value == "transpose":
            positional, keywords = _args(node)
            dims = sorted(_int(a) for a in positional) if len(positional) == 2 and not keywords and all(_int(a) is not None for a in positional) else None  # type: ignore[type-var]
            if dims == [-2, -1]:
                return node.func.value
        raise _Giveup()

    # -- masks ---------------------------------------------------------------------------------
    def _change(self, name: str, change: cst.CSTNode, condition: Optional[str], position: int) -> None:
        if type(change) is cst.Assign:
            value = _strip(change.value)
            if type(value) is cst.Call and type(value.func) is cst.Attribute and value.func.attr.value == "masked_fill":
                positional, keywords = _args(value)
                base = _strip(value.func.value)
                if len(positional) == 2 and not keywords and type(base) is cst.Name and base.value == name:
                    return self._bool_mask(positional[0], positional[1], condition, position)
            if type(value) is cst.BinaryOperation and type(value.operator) is cst.Add:
                for base, mask in ((value.left, value.right), (value.right, value.left)):
                    if type(base) is cst.Name and base.value == name:
                        return self._additive_mask(mask, condition, position)
            raise _Giveup()
        if type(change) is cst.AugAssign and type(change.operator) is cst.AddAssign:
            return self._additive_mask(change.value, condition, position)
        if type(change) is cst.Expr and type(change.value) is cst.Call:
            call = change.value
            if type(call.func) is cst.Attribute and call.func.attr.value == "masked_fill_":
                positional, keywords = _args(call)
                if len(positional) == 2 and not keywords:
                    return self._bool_mask(positional[0], positional[1], condition, position)
        raise _Giveup()

    def _set_mask(self, text: str, condition: Optional[str], reads: Set[str], position: int) -> None:
        self.has_mask = True
        self.mask_count += 1
        self.reads.append((position, reads))
        if condition is None or condition == "%s is not None" % text:
            self.mask = text  # ``if mask is not None: s = s + mask``: None already means no mask
        else:
            self.mask = "%s if %s else None" % (_parenthesised(text), condition)

    def _additive_mask(self, mask: cst.BaseExpression, condition: Optional[str], position: int) -> None:
        self._set_mask(_code(_strip(mask)), condition, _names_read(mask), position)

    def _bool_mask(self, where: cst.BaseExpression, fill: cst.BaseExpression, condition: Optional[str], position: int) -> None:
        """``masked_fill(where, -inf)``: SDPA's boolean mask says where to attend, the negation."""
        if not _is_negative_fill(fill):
            raise _Giveup()
        self._set_mask(_negated(_strip(where)), condition, _names_read(where) | _names_read(fill), position)

    def _dropout(self, node: cst.Call, before: int) -> Optional[Tuple[cst.BaseExpression, Optional[str]]]:
        """(input, dropout_p text or None when unknown) when ``node`` is a dropout call."""
        qualified = self.qualify(node.func)
        positional, keywords = _args(node)
        if qualified in DROPOUT_FUNCTIONS:
            if not positional:
                raise _Giveup()
            probability = keywords.get("p", positional[1] if len(positional) > 1 else None)
            training = keywords.get("training", keywords.get("train", positional[2] if len(positional) > 2 else None))
            p_text = "0.5" if probability is None else _code(_strip(probability))
            for part in (probability, training):
                if part is not None:
                    self.reads.append((before, _names_read(part)))
            if training is None:
                return positional[0], (p_text if qualified.endswith("functional.dropout") else None)
            return positional[0], "%s if %s else 0.0" % (p_text, _code(_strip(training)))
        func = node.func
        if (
            type(func) is cst.Attribute and type(func.value) is cst.Name
            and self.function.params.params and func.value.value == self.function.params.params[0].name.value
            and len(positional) == 1 and not keywords
        ):
            part = self._attribute_layer(func.attr.value)
            if part == DROPOUT_MODULE:
                owner = func.value.value
                return positional[0], "%s.%s.p if %s.training else 0.0" % (owner, func.attr.value, owner)
            if "drop" in func.attr.value.lower():
                return positional[0], None
        return None

    def _tensor_attribute(self, node: cst.BaseExpression) -> Optional[str]:
        """A ``self.x`` in ``node`` that ``__init__`` makes a tensor (``nn.Parameter``, ``torch.*``)."""
        if self.classdef is None or not self.function.params.params:
            return None
        owner = self.function.params.params[0].name.value
        model = self.sites.analysis.class_model(self.classdef)  # type: ignore[attr-defined]
        for attribute in walk(node):
            if (
                type(attribute) is cst.Attribute and type(attribute.value) is cst.Name
                and attribute.value.value == owner
            ):
                assignment = model.single_assignment(attribute.attr.value)
                value = assignment.value if assignment is not None else None
                if type(value) is cst.Call and (self.qualify(value.func) or "").startswith("torch."):
                    return attribute.attr.value
                if assignment is None and model.assignments.get(attribute.attr.value):
                    return None
        return None

    def _attribute_layer(self, name: str) -> Optional[str]:
        if self.classdef is None:
            return None
        part = self.sites.analysis.class_model(self.classdef).attribute_part(name)  # type: ignore[attr-defined]
        if part is None or part.layer is None:
            return None
        return part.layer.qualified


def _simple(node: cst.BaseExpression) -> bool:
    return type(node) in (cst.Name, cst.Attribute, cst.Integer, cst.Float, cst.Call, cst.Subscript) or bool(node.lpar)


def _parenthesised(text: str) -> str:
    return text if text.isidentifier() else "(%s)" % text


def _negated(where: cst.BaseExpression) -> str:
    """The boolean mask that keeps what ``masked_fill(where, -inf)`` does not fill."""
    if type(where) is cst.Comparison and len(where.comparisons) == 1:
        target = where.comparisons[0]
        flipped = {cst.Equal: "!=", cst.NotEqual: "==", cst.Is: None}.get(type(target.operator))
        if flipped:
            return "%s %s %s" % (_code(where.left), flipped, _code(target.comparator))
    if type(where) is cst.UnaryOperation and type(where.operator) is cst.BitInvert:
        return _code(_strip(where.expression)) if not where.expression.lpar else _code(where.expression)
    if type(where) is cst.Call and dotted_name(where.func) in ("torch.logical_not",):
        return _code(where.args[0].value)
    return "~%s" % _parenthesised_expression(where)


def _parenthesised_expression(node: cst.BaseExpression) -> str:
    text = _code(node)
    return text if type(node) in (cst.Name, cst.Attribute, cst.Call, cst.Subscript) or node.lpar else "(%s)" % text


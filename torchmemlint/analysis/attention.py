"""Hand-written ("eager") attention, asked of the value graph (``analysis/values.py``).

A site is a contraction ``O`` of weights ``W`` with a value ``V`` over one axis, where ``W`` is,
through dropout, casts, axis relabelling, same-file helpers and modules of unknown kind, a
softmax over that axis (by name, or written out: an ``exp`` divided by its sum over the axis), and the softmax's input is, through scales, mask fills, additions,
the subtraction of a maximum over that axis (``s - s.amax(-1, keepdim=True)``: the softmax is
the same), casts and helpers, a contraction ``S`` of two tensors in which that axis comes from one of them
(the keys; the other gives the queries). The spelling does not matter: the graph has already
turned ``@``/``matmul``/``bmm``/``einsum``, ``F.softmax``/``nn.Softmax``/aliases, transposes and
permutes into these operations. A site whose intermediate values (the scores, the weights)
are read by anything else - returned, stored, appended, logged - is not a site: SDPA never
materialises the weights; but a return behind a flag off by default (``if return_attn:``,
``flag_returns.py``) and another softmax of the same scores that is itself attention
(``_sibling``: bidirectional cross-attention) are no such reads, each a site without a fix.
Nor is the eager path of a function that computes the same attention
with ``F.scaled_dot_product_attention`` on another path (timm's ``if self.fused_attn:``
fallback; ``analysis/fallback.py``).

The functions asked are those that mention a contraction or call a same-file helper that does
(``contractions.py``): a helper's product is a site of its own function when that says it is
one, else of its callers' graphs (the helper run with what they pass), at the call that passes
the scores when a caller computes them (each call weighs its own), else at the product.

Each site says what ``F.scaled_dot_product_attention`` needs to compute the same thing (query,
key and value text, scale, mask, dropout probability, whether the output is transposed) and
which statements computed the scores, or why no such call can be written (``reason``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Dict, List, Optional, Set, Tuple

import libcst as cst
from torchmemlint.analysis.built_behind_flags import built_only_behind_flags

from torchmemlint.analysis.handed_out import handed_out
from torchmemlint.analysis.attention_text import _bare, _code, _first, _negated, _oriented, _parenthesised, _simple, _sliced, _tensor_attribute
from torchmemlint.analysis.attribute_calls import arm_off
from torchmemlint.analysis.axes import Axis, CatAxis, arm_axis
from torchmemlint.analysis.axis_kinds import small_weights
from torchmemlint.analysis.attention_site import AttentionSite, chain_deleted
from torchmemlint.analysis.attention_statements import removable_statements
from torchmemlint.analysis.contractions import calls_contracting_helper, may_hold_softmax, mentions_contraction
from torchmemlint.analysis.fallback import sdpa_fallback
from torchmemlint.analysis.flag_returns import dropped_by_callers, kept_behind_flag, returned_behind_flag
from torchmemlint.analysis.foreign import foreign_inspects, foreign_result, foreign_steps
from torchmemlint.analysis.ranks import rank as value_rank
from torchmemlint.analysis.similarity import similarity as _similarity
from torchmemlint.analysis.syntax import _scope_of
from torchmemlint.analysis.unread import unread
from torchmemlint.analysis.values import FunctionValues, Value
from torchmemlint.tree import path_to, walk

if TYPE_CHECKING:
    from torchmemlint.analysis.file import FileAnalysis

LARGE_NEGATIVE = -1.0e4  # a fill at or below this is a mask (SDPA's boolean mask: where to attend)
WEIGHT_STEPS = frozenset({"dropout", "cast", "relabel", "same", "helper", "module", "join", "reshape", "scale", "activation", "add", "fill"})
SCORE_STEPS = frozenset({"scale", "fill", "add", "cast", "relabel", "same", "helper", "module", "join", "reshape"})
TENSOR_OPS = frozenset({"contract", "softmax", "linear", "module", "layer", "cat", "fill", "dropout", "reshape", "relabel", "attention"})


class _NoSite(Exception):
    """Not a site; ``args[0]``, when given, why an eager attention is left alone by design."""


class AttentionSites:
    """The eager-attention sites of one file (see the module doc)."""

    def __init__(self, analysis: "FileAnalysis") -> None:
        self.analysis = analysis
        self._sites: Optional[List[AttentionSite]] = None
        self.quiet: List[Tuple[cst.FunctionDef, cst.CSTNode, str]] = []  # (function, product, why): by design
        self._prefixes: Dict[int, Optional[str]] = {}

    def functional_prefix(self, site: AttentionSite) -> Optional[str]:
        """How the fix spells ``torch.nn.functional`` at ``site`` (``F``, ``nn.functional``,
        ``torch.nn.functional``, an import of the file that no enclosing function's own name
        shadows), None when there is none."""
        function = site.function
        if id(function) not in self._prefixes:
            scope = self.analysis.bindings
            for node in path_to(self.analysis.module, function) or [function]:
                if type(node) in (cst.FunctionDef, cst.Lambda):  # the scopes the engine opens
                    scope = _scope_of(node, scope)  # type: ignore[arg-type]
            self._prefixes[id(function)] = self.analysis.functional_prefix(scope.qualify)
        return self._prefixes[id(function)]

    def sites(self) -> List[AttentionSite]:
        if self._sites is None:
            self._sites = []
            found: Dict[int, List[Tuple[bool, AttentionSite]]] = {}  # id(product node) -> (in its own function, site)
            if self.analysis.text is not None and not may_hold_softmax(self.analysis.text):
                return self._sites
            graphs = self.analysis.value_graphs
            mentions: Dict[int, bool] = {}
            callers_quiet: Dict[int, Tuple[cst.FunctionDef, cst.CSTNode, str]] = {}  # id(a helper's product) -> why a caller leaves it
            built: Dict[int, bool] = {}
            owners = {id(function): classdef for function, classdef in graphs.functions()}
            for function, classdef in graphs.functions():
                if not mentions_contraction(function, mentions) and not calls_contracting_helper(graphs, function, classdef, mentions):
                    continue
                if classdef is not None and built_only_behind_flags(self.analysis, classdef, built):
                    continue  # its methods never run unless a caller turns the flag on (``built_behind_flags.py``)
                graph = self.analysis.values(function)
                for value in (*graph.values, *graph.inlined):  # a helper's product: the scores may be the caller's
                    if value.op == "contract":
                        question = _Question(graph, value)
                        helper_class = owners.get(id(value.function)) if value.function is not function else None
                        if helper_class is not None and helper_class is not classdef and built_only_behind_flags(self.analysis, helper_class, built):
                            continue  # (a held module's forward that never runs: its class is built only behind a flag)
                        site = question.site()
                        if "foreign" in value.info and (site is None or not question.weighed_here()):
                            continue  # another file's product is its own file's, unless the weights are this file's
                        if site is not None:
                            found.setdefault(id(value.node), []).append((value.function is function, site))
                        elif question.why and value.function is function:
                            self.quiet.append((function, value.node, question.why))  # type: ignore[arg-type]
                        elif question.why and not any(v.op == "attention" for v in self.analysis.values(value.function).values):
                            # a caller runs the helper where it leaves it alone (its SDPA switch's eager arm; not
                            # a switch inside the helper, which the helper's own question reads with its flags)
                            callers_quiet.setdefault(id(value.node), (value.function, value.node, question.why))
            alone = {id(product) for _, product, _ in self.quiet}  # left alone by design in its own function: in its callers too
            for key, candidates in found.items():  # a product in a helper: its own function's site, else its callers'
                own = [site for mine, site in candidates if mine]
                if own and key in callers_quiet and len(own) == len(candidates):  # every caller of the file runs it as a fallback
                    self.quiet.append(callers_quiet[key])  # type: ignore[arg-type]
                    continue
                if own or key in alone:
                    self._sites.extend(own[:1])
                    continue
                anchors: Set[int] = set()  # each caller whose scores the helper weighs: a site of its own, at its call
                for _, site in candidates:
                    if id(site.at) not in anchors:
                        anchors.add(id(site.at))
                        self._sites.append(site)
            position = self.analysis.index.position
            self._sites.sort(key=lambda site: position.get(id(site.at), -1))
        return self._sites


class _Question:
    """Is ``product`` the end of an eager attention in ``graph``? (``site()``)"""

    def __init__(self, graph: FunctionValues, product: Value, asking: frozenset = frozenset()) -> None:
        self.graph = graph
        self.product = product
        self.asking = asking  # id()s of the softmaxes whose questions asked this one (``_sibling``)
        self.chain: Dict[int, Value] = {}
        self.reasons: List[str] = []
        self.masks: List[str] = []
        self.scales: List[str] = []
        self.dropout: Optional[str] = None
        self.has_dropout = False
        self.texts: List[cst.CSTNode] = []  # expressions the SDPA call re-evaluates
        self.memo: Dict[int, Value] = {}  # id(a scores value) -> the contraction it comes from
        self.why = ""  # after ``site()`` found none: why an eager attention there is left alone
        self.zero_fills: List[Value] = []  # scores filled with 0 or more: a guard after a mask, else no attention
        self.negative_fills = 0  # scores filled with a negative number: masked
        self.scaled = 0  # how many scales the path from the softmax back to the scores passed
        self.assumed: Optional[int] = None  # the scores' rank, taken from one operand (``_axis_at``)
        self.key_axis: Optional[Axis] = None  # the first part's key axis, when the scores are concatenated (``_catted``)

    def site(self) -> Optional[AttentionSite]:
        why = ""
        for side in (0, 1):
            self.__init__(self.graph, self.product, self.asking)  # type: ignore[misc]
            try:
                return self._site(side)
            except _NoSite as stop:
                why = why or (stop.args[0] if stop.args else "")
        self.why = why
        return None

    # -- the weights ---------------------------------------------------------------------------
    def _site(self, side: int) -> AttentionSite:
        product = self.product
        contracted = product.info["contracted"]
        specs, known = product.info["specs"], product.info["known"]
        if len(contracted) != 1 or known[side] is None:
            raise _NoSite()
        letter = contracted[0]
        axis = known[side][list(specs[side]).index(letter)]
        if axis is None:
            raise _NoSite()
        weights, values = product.inputs[side], product.inputs[1 - side]
        softmax = self._weights(weights, axis)
        if softmax.function is not self.graph.function:  # a helper returns the weights
            self.reasons.insert(0, "the softmax is computed in `%s`, another function; the fix rewrites one function" % softmax.function.name.value)  # type: ignore[union-attr]
        weights_side = set(self.chain)  # the softmax and what follows it up to the product with v
        scores = self._scores(softmax.inputs[0], axis)
        if self.zero_fills and not self.negative_fills:
            raise _NoSite()  # (a fill with 0 or more masks nothing; only beside a masking fill is it a guard)
        if self.zero_fills:
            self.reasons.insert(0, "the masked scores are also filled with 0 where `%s`; SDPA has no such step" % _code(_bare(self.zero_fills[0].info["where"])))
        if scores.function is product.function is softmax.function is not self.graph.function:  # all in a helper: q, k laid out by the caller
            self.reasons[0] = "q and k are known to be laid out alike only where `%s` calls `%s`; the fix rewrites one function" % (self.graph.function.name.value, product.function.name.value)  # type: ignore[union-attr]
        self.reasons[:0] = foreign_steps(self.chain.values())  # through another file's code: no fix (``foreign.py``)
        key_side = 0 if (self.key_axis or axis).side == "left" else 1  # a part's keys, when the scores are concatenated
        scores_side = set(self.chain) - weights_side
        if self._escapes(weights_side) or self._escapes(scores_side, kept=False):
            raise _NoSite("the scores or weights are also read elsewhere (returned, stored, logged): SDPA never makes them")
        if self._escapes(scores_side):  # the scores only handed out as they are: ``return out, state, scores``
            self.reasons.insert(0, "the scores before the softmax are also returned or kept; "
                                "F.scaled_dot_product_attention can replace the softmax and the product with v, not them")
        fallback = sdpa_fallback(self.graph, product, (scores.inputs[1 - key_side], scores.inputs[key_side], values))
        if fallback:
            raise _NoSite(fallback)
        if not _similarity(self.graph, scores):
            raise _NoSite()
        if (small := small_weights(self.graph, scores, key_side)):  # channel or linear attention, one learned query (``axis_kinds.py``)
            raise _NoSite(small)
        graph = self.graph
        site = AttentionSite(graph.function, product.node, product.statement)  # type: ignore[arg-type]
        if product.function is not graph.function:  # run in a helper this function calls with its scores or weights
            calls = [v for v in graph.values if v.info.get("helper") is not None and any(id(i) in self.chain for i in v.inputs)]
            calls = [v for v in calls if v.inputs[0] is product] or calls  # (the one returning the product: `self.matmul_qkv(p, v)`)
            site.anchor = calls[0].node if len(calls) == 1 else None  # (one that takes q, k, v: reported in the helper)
        site.has_dropout, site.has_mask = self.has_dropout, bool(self.masks)
        chosen = scores.info.get("choices") or product.info.get("choices")
        if chosen:  # ``f"b h i d, {kv} -> b h i j"`` with ``kv = "b j d" if k.ndim == 3 else "b h j d"``
            self.reasons.append("the einsum's spec is chosen at run time (one of `%s`); the fix writes one layout" % "`, `".join(chosen))
        if softmax.info.get("extra"):
            self.reasons.append("the softmax takes a dtype")
        if not self.reasons:
            self._layout(site, scores, key_side, side, values, axis)
        if not self.reasons:
            removable_statements(self, site)
        if not self.reasons and len(self.masks) > 1:
            self.reasons.append("more than one mask is applied to the scores")
        if not self.reasons and self._rebound():
            self.reasons.append("a name the scores are computed from is assigned again before the product with v")
        if not self.reasons and chain_deleted(self.graph, self.chain):  # ``del q, k, v, attention`` (GMAN): no read, but the fix removes the name
            self.reasons.append("a `del` names the scores or the weights; the fix removes the statements that bind them")
        site.reason = self.reasons[0] if self.reasons else ""
        site.mask = self.masks[0] if self.masks else None
        if self.scales:
            site.scale = self.scales[0] if len(self.scales) == 1 else " * ".join("(%s)" % s for s in self.scales)
        site.dropout = self.dropout
        return site

    def _add(self, value: Value) -> None:
        self.chain[id(value)] = value

    def _weights(self, value: Value, axis: object) -> Value:
        """The softmax over ``axis`` that ``value`` is made from."""
        self._add(value)
        if value.op == "softmax":
            over = value.info.get("axis")
            if over is None and isinstance(value.info.get("dim"), int) and value.info["dim"] >= 0 and value.inputs:
                over = self._axis_at(value.inputs[0], value.info["dim"])
            if over is not axis:
                raise _NoSite()
            for part in value.info.get("parts", ()):  # written in place, slice by slice (writes.py)
                self._add(part)
            if value.info.get("in_place"):
                self.reasons.append("the softmax is written in place into slices of the scores; the fix does not rewrite that")
            if value.info.get("epsilon") is not None:
                self.reasons.append("the softmax adds %g to its sum; SDPA's softmax adds nothing" % value.info["epsilon"])
            return value
        if value.op not in WEIGHT_STEPS or not value.inputs:
            raise _NoSite()
        if value.op == "join":
            return self._join(value, lambda arm, index: self._weights(arm, arm_axis(axis, value, index)), "weights")
        if value.op == "dropout":
            self.has_dropout = True
            self._dropout(value)
        elif value.op == "cast":
            self.reasons.append("the weights are cast (`.%s(...)`) before the product with v" % value.info.get("method"))
        elif value.op == "helper" and (made := foreign_result(self.graph, value)) is not None and made.op in WEIGHT_STEPS | {"softmax"}:
            return self._weights(made, axis)  # ``softmax(s, dim=-1)`` imported from another file of the project (``nan_to_num(softmax(s))`` too)
        elif value.op in ("helper", "module", "activation"):  # a step that keeps their shape: ``self.quantise(p)``
            self.reasons.append("the weights pass through `%s`, which SDPA cannot run" % _code(getattr(value.node, "func", value.node))[:60])  # type: ignore[arg-type]
            if value.op == "helper" and value.info.get("assumed") and value.info.get("helper") is not None and len(value.inputs) > 1:
                return self._weights(value.inputs[1], axis)  # a helper run whose result's axes are not known: its argument's, conservatively
        elif value.op == "relabel" and not value.info.get("swap"):
            self.reasons.append("the weights' axes are permuted before the product with v")
        elif value.op in ("scale", "fill"):  # ``gate * softmax(s)``, ``torch.where(any_key, w, 0)``: SDPA scales or masks the scores
            self.reasons.append("the weights are %s (`%s`) before the product with v; SDPA's scale is the scores'" % ("scaled" if value.op == "scale" else "filled", _code(value.node)[:60]))  # type: ignore[arg-type]
        elif value.op == "add":  # ``alpha * eye + beta * softmax(s) - gamma * c`` (shaped attention): the sum is what v is weighed by
            self.reasons.append("the weights are added to (`%s`) before the product with v; SDPA cannot compute the sum" % _code(value.node)[:60])  # type: ignore[arg-type]
        elif value.op == "reshape":  # the axes known through it (``w.unsqueeze(1)``: values.py)
            self.reasons.append("the weights are reshaped (`%s`) before the product with v" % _code(value.node)[:60])
        return self._weights(value.inputs[0], axis)

    def _axis_at(self, scores: Value, dim: int) -> object:
        """The axis at index ``dim`` (from the start) of scores whose rank the code does not show:
        that of the contraction they come from (through elementwise steps), when one of its
        operands' rank is shown and the other's is not (``matmul(q.permute(0, 2, 1), k)``):
        a batched matmul's operands are taken to have one rank (``self.assumed``)."""
        shown = value_rank(self.graph, scores)
        if shown is not None:  # ``matmul(q, k)`` of two 4-D views: 4-D scores
            return scores.axis(dim - shown) if 0 <= dim < shown else None
        value = scores
        for _ in range(16):
            if value.op == "contract":
                break
            if value.op not in ("scale", "fill", "add", "cast", "same", "join") or not value.inputs:
                return None
            value = value.inputs[0]
        if value.op != "contract" or value.info.get("spelling") not in ("@", "torch.matmul", "matmul"):
            return None
        ranks = {value_rank(self.graph, v) for v in value.inputs}
        known = [r for r in ranks if r is not None]
        if len(known) != 1 or None not in ranks or known[0] < 3:
            return None
        self.assumed = known[0]
        return scores.axis(dim - known[0])

    def _join(self, value: Value, follow, what: str) -> Value:  # type: ignore[no-untyped-def]
        """An ``if``/``else`` join: every arm that leads to the same value; fixed only when
        one arm is the other with a mask applied under the ``if``'s test."""
        found, failed, arms = [], 0, []
        for index, arm in enumerate(value.inputs):
            saved = (dict(self.chain), list(self.reasons), list(self.masks), list(self.scales), dict(self.memo))
            try:
                found.append(follow(arm, index))
                arms.append(index)
            except _NoSite:
                self.chain, self.reasons, self.masks, self.scales, self.memo = saved  # type: ignore[assignment]
                failed += 1
        if not found:
            raise _NoSite()
        if value.info.get("held") is not None and failed:  # ``self.attn_fn`` holds the softmax or another function by a flag
            held = _code(value.node.func)  # type: ignore[union-attr]
            if all(arm_off(self.graph, value, index) for index in arms):
                raise _NoSite("`%s` holds the softmax only behind a flag off by default" % held)
            self.reasons.insert(0, "the %s are those of `%s`, which holds the softmax or another function by a constructor flag" % (what, held))
            return found[0]
        if any(f is not found[0] for f in found):  # each arm its own computation: a value of either
            if failed or not all(  # ``softmax = torch.softmax if c else F.softmax``: the same one
                f.op == "softmax" and f.inputs[0] is found[0].inputs[0] and not f.info.get("extra") for f in found
            ):
                self.reasons.append("the %s come from different computations in the branches of an `if`" % what)
            return found[0]
        if failed or not (self._conditional_mask(value) or self._conditional_scale(value)):
            self.reasons.append("the %s come from different computations in the branches of an `if`" % what)
        return found[0]

    def _conditional_mask(self, join: Value) -> bool:
        """``if c: s = s.masked_fill(m, -inf)`` (no ``else``): the mask is ``m if c else None``."""
        test = join.info.get("test")
        if test is None or len(join.inputs) != 2 or sorted(map(bool, join.info.get("branches", ()))) != [False, True] or not self.masks:
            return False
        masked, plain = join.inputs if join.info["branches"][0] else join.inputs[::-1]
        if masked.op not in ("fill", "add") or masked.inputs[0] is not plain:
            return False
        condition = _code(test)
        self.texts.append(test)
        if condition != "%s is not None" % self.masks[-1]:  # ``if mask is not None: s = s + mask``: None is no mask
            self.masks[-1] = "%s if %s else None" % (_parenthesised(self.masks[-1]), condition)
        return True

    def _conditional_scale(self, join: Value) -> bool:
        """``if c: s = s * scale`` (no ``else``): SDPA's scale is ``scale if c else 1.0``."""
        test = join.info.get("test")
        if test is None or len(join.inputs) != 2 or sorted(map(bool, join.info.get("branches", ()))) != [False, True] or len(self.scales) != 1:
            return False
        scaled, plain = join.inputs if join.info["branches"][0] else join.inputs[::-1]
        if scaled.op != "scale" or scaled.inputs[0] is not plain:
            return False
        self.texts.append(test)
        self.scales[-1] = "%s if %s else 1.0" % (_parenthesised(self.scales[-1]), _code(test))
        return True

    def _dropout(self, value: Value) -> None:
        call = value.info.get("call")
        layer = value.info.get("layer")
        owner = self.graph.self_name
        if call is not None:  # F.dropout(x, p, training)
            args = [a for a in call.args if a.keyword is None]
            keywords = {a.keyword.value: a.value for a in call.args if a.keyword is not None}
            probability = keywords.get("p", args[1].value if len(args) > 1 else None)
            training = keywords.get("training", keywords.get("train", args[2].value if len(args) > 2 else None))
            p_text = "0.5" if probability is None else _code(_bare(probability))
            self.texts.extend(part for part in (probability, training) if part is not None)
            if training is None and not self.graph.file.bindings.qualify(call.func) == "torch.nn.functional.dropout":
                self.reasons.append("the dropout applied to the weights is not a known nn.Dropout or F.dropout")
            self.dropout = p_text if training is None else "%s if %s else 0.0" % (p_text, _code(_bare(training)))
        elif layer is not None and layer[0] is not None and owner is not None:
            attribute, position, count = layer
            where = "%s.%s" % (owner, attribute) if count == 1 else "%s.%s[%d]" % (owner, attribute, position)
            if count > 1 and not self._indexable(attribute, count):
                self.reasons.append("the dropout is inside `%s.%s`, which is not an nn.Sequential of its layers" % (owner, attribute))
            self.dropout = "%s.p if %s.training else 0.0" % (where, owner)
        else:
            self.reasons.append("the dropout applied to the weights is not a known nn.Dropout or F.dropout")

    def _indexable(self, attribute: str, count: int) -> bool:
        classdef = self.graph.classdef
        if classdef is None:
            return False
        assignment = self.graph.file.analysis.class_model(classdef).single_assignment(attribute)
        value = assignment.value if assignment is not None else None
        sequential = type(value) is cst.Call and self.graph.file.bindings.qualify(value.func) == "torch.nn.Sequential"
        return sequential and len(value.args) == count and not any(a.star for a in value.args)  # type: ignore[union-attr]

    # -- the scores ----------------------------------------------------------------------------
    def _scores(self, value: Value, axis: object) -> Value:
        """The contraction whose output ``axis`` came from one operand (the keys)."""
        if id(value) in self.memo:  # the other arm of an ``if`` reached it already
            return self.memo[id(value)]
        self._add(value)
        found = self.memo[id(value)] = self._score_step(value, axis)
        return found

    def _score_step(self, value: Value, axis: object) -> Value:
        if value.op == "contract":
            if value.position(axis) is None or getattr(axis, "side", "") not in ("left", "right") or not value.info["contracted"]:  # type: ignore[arg-type]
                raise _NoSite()
            return value
        if value.op == "cat" and isinstance(axis, CatAxis) and value.position(axis) is not None:
            return self._catted(value, axis)
        if value.op == "cat" and value.inputs and value.inputs[0].op == "parts":  # ``torch.cat([f(s) for s in sim.split(n, 1)], 1)``
            self._add(value.inputs[0])
            self.reasons.append("the scores are split, changed part by part and concatenated again")
            return self._scores(value.inputs[0].inputs[0], axis)
        if value.op == "part" and value.inputs[0].inputs:  # one part of the split scores stands for them
            self._add(value.inputs[0])
            return self._scores(value.inputs[0].inputs[0], axis)
        if value.op not in SCORE_STEPS or not value.inputs:
            raise _NoSite()
        if value.op == "join":
            return self._join(value, lambda arm, index: self._scores(arm, arm_axis(axis, value, index)), "scores")
        if value.op == "fill":
            fill = value.info["fill"]
            number = fill.info.get("number") if fill.op == "constant" else None
            if number is None:
                self.reasons.append("the value the scores are filled with is not known to be a large negative number")
            elif math.isnan(number):
                raise _NoSite()
            elif number >= 0:  # masks nothing; after a mask (``torch.where(has_any, s, zeros_like(s))``) a guard of rows with no key
                self.zero_fills.append(value)
                return self._scores(value.inputs[0], axis)
            elif number > LARGE_NEGATIVE:  # ``masked_fill_(eye, -100)``: nearly no weight there, not none
                self.reasons.append("the scores are filled with %g, not a large negative number; SDPA's boolean mask would give those places no weight at all" % number)
            self.negative_fills += 1
            where = _bare(value.info["where"])  # ``torch.where(c, s, -inf)`` keeps ``s`` where ``c``: the mask is ``c``
            self.masks.append(_code(where) if value.info.get("keep") else _negated(where))
            self.texts.append(value.info["where"])
        elif value.op == "add":
            other = value.info.get("other")
            if value.info.get("subtract") and len(value.inputs) == 2 and self._along(value.inputs[1], axis):
                return self._scores(value.inputs[0], axis)  # ``s - s.amax(-1, keepdim=True)``: softmax is the same
            subtract = bool(value.info.get("subtract"))
            from_it = subtract and (value.info.get("reversed") or type(value.node) is cst.BinaryOperation and value.node.left is other)  # ``c - s``: -s
            number = value.inputs[1].info.get("number") if len(value.inputs) == 2 and value.inputs[1].op == "constant" else None
            if isinstance(number, float) and math.isfinite(number) and not from_it:
                return self._scores(value.inputs[0], axis)  # ``s + 1.0``, ``s - c``: the softmax is the same
            if other is None or from_it:
                self.reasons.append("the scores are subtracted from another value")
            elif self.scaled:  # ``(s + bias) * scale``: SDPA adds its mask after scaling
                self.reasons.append("the scores are scaled after a tensor is added to them; SDPA adds its mask after the scale")
            else:  # ``s - t`` is ``s + (-t)``: an additive mask
                text = _code(_bare(other))
                self.masks.append("-%s" % (text if _simple(other) else "(%s)" % text) if subtract else text)
                self.texts.append(other)
        elif value.op == "scale":
            self._scale(value)
            self.scaled += 1
            try:
                return self._scores(value.inputs[0], axis)
            finally:
                self.scaled -= 1
        elif value.op == "cast":
            self.reasons.append("the scores are cast (`.%s(...)`) before the softmax" % value.info.get("method"))
        elif value.op in ("helper", "module"):
            self.reasons.append("the scores pass through `%s`, which SDPA cannot run" % _code(value.node.func))  # type: ignore[union-attr]
        elif value.op == "relabel":
            self.reasons.append("the scores are transposed before the softmax")
        elif value.op == "reshape":  # reached with the key axis known: another arm of an ``if`` kept it
            self.reasons.append("the scores are reshaped (`%s`) before the softmax" % _code(value.node)[:60])
        return self._scores(value.inputs[0], axis)

    def _catted(self, value: Value, axis: CatAxis) -> Value:
        """``torch.cat((global_scores, local_scores), dim=-1)`` along the key axis: each part a
        q·k contraction over its own keys; the first stands for them (no fix: SDPA takes one key tensor)."""
        self._add(value.inputs[0])  # the tuple of the parts
        first = len(self.reasons)
        found = [self._scores(part, part_axis) for part, part_axis in zip(value.inputs[0].info["elements"], axis.parts)]
        self.key_axis = axis.parts[0]
        self.reasons.insert(first, "the scores are %d q·k products concatenated along the key axis; SDPA takes one key tensor" % len(found))
        return found[0]

    def _along(self, value: Value, axis: object) -> bool:
        """Is ``value`` constant along ``axis`` (a reduction over it that keeps the dim, through
        ``.detach()``, casts, ``.values``/``[0]`` of ``max``)? Subtracting it leaves the softmax
        over ``axis`` as it is; its steps join the chain (SDPA needs none of them)."""
        steps = []
        for _ in range(8):
            steps.append(value)
            if value.op in ("same", "cast") and value.inputs:
                value = value.inputs[0]
            elif value.op == "member" and value.info.get("name") == "values" and value.inputs and value.inputs[0].op == "reduce":
                value = value.inputs[0]
            elif value.op == "index" and value.inputs and value.inputs[0].op == "reduce" and _first(value.node):
                value = value.inputs[0]
            else:
                break
        if value.op != "reduce" or not value.info.get("keepdim") or value.info.get("axis") is not axis or axis is None:
            return False
        if value.info.get("pair") and steps[-1] is value and (len(steps) < 2 or steps[-2].op not in ("member", "index")):
            return False  # ``x.max(-1, keepdim=True)`` itself is the (values, indices) pair
        for step in steps:
            self._add(step)
        return True

    def _scale(self, value: Value) -> None:
        factor_node = value.info.get("factor")
        factor = value.inputs[1] if len(value.inputs) > 1 else None
        if factor is None or factor_node is None:
            self.reasons.append("the scores are scaled in place")
            return
        tensor = _tensor_attribute(self.graph, factor)
        if tensor is not None:
            self.reasons.append("the scale `%s` is a tensor; SDPA's scale is a number" % tensor)
        elif factor.op in TENSOR_OPS or _sliced(factor):
            self.reasons.append("the scores are multiplied by a tensor")
        text = _code(_bare(factor_node))
        if value.info.get("divide"):
            text = "1.0 / %s" % (text if _simple(factor_node) else "(%s)" % text)
        self.scales.append(text)
        self.texts.append(factor_node)

    # -- whether it is one -----------------------------------------------------------------------
    def _escapes(self, among: Set[int], kept: bool = True) -> bool:
        """Does anything outside the chain read one of its values whose id is in ``among``
        (``kept=False``: a computation, not a return or a store)?"""
        seen: Set[int] = set()
        return any(self._read_outside(value, seen, kept) for key, value in self.chain.items() if key in among)

    def _read_outside(self, value: Value, seen: Set[int], kept: bool = True) -> bool:
        for consumer in self.graph.consumers(value):
            if isinstance(consumer, str):
                if consumer not in ("test", "meta") and (kept or consumer not in ("return", "store")) and not self._flagged(value, consumer):
                    return True
            elif consumer is self.product or id(consumer) in self.chain or consumer.op == "meta" or self._inside_step(consumer):
                continue
            elif self._into_product_helper(consumer):
                continue  # the scores passed to the helper that applies the softmax and the product (its values are here)
            elif consumer.op == "helper" and foreign_inspects(self.graph, consumer, value):
                continue  # ``check_mask_broadcasts(scores, mask)``: another file's function reading only their shape
            elif consumer.op == "join":
                if id(consumer) not in seen and not self._flagged(value, consumer):  # (``if not flag: w = None``)
                    seen.add(id(consumer))
                    if self._read_outside(consumer, seen, kept):
                        return True
            elif not kept and handed_out(self.graph, consumer, 4):
                continue  # ``return out, scores``, ``self.kept = scores.detach()``
            elif self._sibling(consumer) or self._other_arm(consumer) or self._apart(consumer) or self._flagged(value, consumer):
                continue
            elif consumer.inputs and consumer.inputs[0] is value and (consumer.info.get("method") or consumer.op == "fill" and not consumer.info["inplace"]) and unread(self.graph, consumer):
                continue  # ``s.mask_fill(m, v)``, ``s.masked_fill(m, v)`` alone on its line: a method of the scores whose result nothing takes
            elif not self._alternative(consumer, 8):
                return True
        return False

    def _inside_step(self, consumer: Value) -> bool:
        """``consumer`` is computed inside a helper run that is a step of the chain (a quantiser's
        ``floor(x / self.s)``, run inline for ``self.attn_quan(p)``)."""
        site = consumer.info.get("site")
        if site is None or (consumer.op == "call" and not (consumer.info.get("qualified") or "").startswith("torch.")):
            return False  # (``maps.append(attn)`` inside the helper keeps them)
        return any(value.node is site[0] and value.op == "helper" for value in self.chain.values())

    def weighed_here(self) -> bool:
        """Is the softmax of the chain this file's (not one run in another file's code)?"""
        return any(value.op == "softmax" and "foreign" not in value.info for value in self.chain.values())

    def _into_product_helper(self, consumer: Value) -> bool:
        """``consumer`` is the helper whose run makes the product, or a list handed only to it
        (``self.final_matmul([weights, v])``, whose forward unpacks the list)."""
        if consumer.op == "tuple":  # (an argument of the call, not what a helper returns: ``return out, weights``)
            readers = self.graph.consumers(consumer)
            return bool(readers) and all(
                not isinstance(r, str) and type(r.node) is cst.Call and any(arg.value is consumer.node for arg in r.node.args)
                and self._into_product_helper(r) for r in readers
            )
        return consumer.op == "helper" and consumer.info.get("helper") is self.product.function

    def _flagged(self, value: Value, consumer: object) -> bool:
        """Is ``consumer`` a return of ``value`` only while a flag off by default is set (``flag_returns.py``)?"""
        test = returned_behind_flag(self.graph, value, consumer) or kept_behind_flag(self.graph, value, consumer)
        if test is not None:
            self._reason("the scores or weights are also returned or kept when `%s` is set; SDPA does not make them" % _code(test))
        elif dropped_by_callers(self.graph, value, consumer):  # ``x, _ = attention(q, k, v)`` at every call
            self._reason("the weights are also returned, to callers that drop them; the fix would change what the function returns")
            return True
        return test is not None

    def _sibling(self, consumer: Value) -> bool:
        """Is ``consumer`` another softmax of the scores that is itself attention (the question
        of another product of the graph reaches it), weighing its own values: a bidirectional
        cross-attention's ``sim.softmax(dim=-1)`` and ``sim.softmax(dim=-2)``?"""
        if consumer.op != "softmax":
            return False
        if id(consumer) not in self.asking:  # (one that asked this question: attention, as it asks)
            asking = self.asking | {id(v) for v in self.chain.values() if v.op == "softmax"} | {id(consumer)}
            questions = (_Question(self.graph, v, asking) for v in (*self.graph.values, *self.graph.inlined) if v.op == "contract" and v is not self.product)
            if not any(q.site() is not None and id(consumer) in q.chain for q in questions):
                return False
        self._reason("the scores also feed another softmax, itself attention (`%s`); the fix would remove the scores it reads" % _code(consumer.node)[:60])  # type: ignore[arg-type]
        return True

    def _other_arm(self, consumer: Value) -> bool:
        """Is ``consumer`` a product of the weights in the other arm of an ``if`` than this
        one, itself the end of this attention (``if use_bf16: out = einsum(attn, v.float())``,
        ``else: out = einsum(attn, v)``)? The two never run together; the fix writes one arm."""
        for _ in range(3):  # ``weights.float() @ v.float()``: through a cast read by nothing else
            following = self.graph.consumers(consumer) if consumer.op in ("cast", "same") else ()
            if len(following) != 1 or isinstance(following[0], str):
                break
            consumer = following[0]
        index = self.graph.file.analysis.index  # (also a ``try``'s product and its ``except``'s, ``attn.half() @ v``)
        if consumer.op != "contract" or not (index.exclusive(consumer.statement, self.product.statement) or index.try_and_handler(consumer.statement, self.product.statement)):
            return False
        if id(consumer) not in self.asking:  # (one that asked this question: attention, as it asks)
            if _Question(self.graph, consumer, self.asking | {id(self.product)}).site() is None:
                return False
            if (index.find(consumer.node) or 0) < (index.find(self.product.node) or 0):  # type: ignore[arg-type]
                raise _NoSite("the first arm's product with the values reports this attention")
        self._reason("the weights are multiplied with the values in two arms (of an `if`, or a `try` and its `except`); the fix writes one")
        return True

    def _apart(self, consumer: Value) -> bool:
        """Is ``consumer`` in another arm of an ``if`` than the softmax and the product with v
        (``if g: torch.cat((s, s_g), -1)`` / ``else: softmax(s) @ v``)? The fix would remove its scores."""
        index, here = self.graph.file.analysis.index, self.graph.function
        ends = [v.statement for v in (*self.chain.values(), self.product) if v.function is here and (v is self.product or v.op in ("softmax", "helper"))]
        if consumer.statement is None or consumer.function is not here or not ends or not all(index.exclusive(consumer.statement, end) for end in ends):
            return False
        self._reason("the scores are also read in another arm of an `if` (`%s`); the fix would remove them" % _code(consumer.node)[:60])  # type: ignore[arg-type]
        return True

    def _reason(self, text: str) -> None:
        if text not in self.reasons:
            self.reasons.append(text)

    def _alternative(self, value: Value, depth: int) -> bool:
        """Does ``value`` only reach a join of the chain (another arm of its ``if``: the two
        never run together) or a join nothing reads, or a slice of the scores it is written back into (``s[..., 1:, 1:]
        = s[..., 1:, 1:] + bias``, as a relative-position helper does: the scores are changed,
        not kept)?"""
        consumers = self.graph.consumers(value)
        if not consumers and (value.info.get("target") or value.op == "join" or unread(self.graph, value)):
            return True  # ``s[..., 1:, 1:] = ...``: the slice of the scores written (its value below); a join or a name nothing reads
        if not consumers or depth == 0:
            return False
        for consumer in consumers:
            if isinstance(consumer, str):
                if consumer in ("test", "meta"):
                    continue
                if consumer == "store" and any(id(into) in self.chain for into in value.info.get("into", ())):
                    self.reasons.append("a slice of the scores or the weights is overwritten in place; SDPA takes an additive mask, not a write")
                    continue
                return False
            if consumer.op == "join" and id(consumer) in self.chain:
                continue
            if id(consumer) in self.chain and value.op in ("module", "call") and not (value.info.get("method") or value.info.get("qualified")):
                self.reasons.append("the scores are given to `%s`, whose result is added to them; SDPA cannot compute it" % _code(value.node)[:60])  # type: ignore[arg-type]
                continue  # a module run on the scores (a bias sized by them: ``alibi(sim) + sim``), feeding them only
            if consumer.op == "meta" or not self._alternative(consumer, depth - 1):
                if consumer.op != "meta":
                    return False
        return True

    # -- the SDPA call -------------------------------------------------------------------------
    def _layout(self, site: AttentionSite, scores: Value, key_side: int, side: int, values: Value, axis: object) -> None:
        """SDPA's q, k, v (…, L, E) / (…, S, E) / (…, S, Ev) from the two contractions' layouts."""
        product = self.product
        s_specs, o_specs = scores.info["specs"], product.info["specs"]
        q_spec, k_spec, s_out = list(s_specs[1 - key_side]), list(s_specs[key_side]), list(s_specs[2])
        w_spec, v_spec, o_out = list(o_specs[side]), list(o_specs[1 - side]), list(o_specs[2])
        feature = scores.info["contracted"]
        j_s = [letter for letter in s_out if letter != "..."][scores.position(axis)]  # type: ignore[index, arg-type]
        query_letters = [l for l in s_out if l in q_spec and l not in k_spec]
        heads = [l for l in query_letters if l != s_out[-2]]
        if len(feature) == 1 and s_out[-1] == j_s and len(query_letters) > 1 and all(l in s_out[:-2] for l in heads) and s_out[0] in heads:
            self.reasons.append(  # ``"blhe,she->bhls"``: keys (prototypes, a memory) without the batch axis
                "q has a batch axis that k has not (`%s`: one k and v for every batch entry); "
                "F.scaled_dot_product_attention takes k and v with q's batch axis (expanded), which the fix does not write"
                % s_out[0]
            )
            return
        if len(feature) == 1 and s_out[-1] == j_s and len(query_letters) > 1 and all(l in s_out[:-2] for l in heads):
            self.reasons.append(
                "q has an axis that k has not (multi-query attention: one k and v for every head); the "
                "memory-efficient CUDA kernel of F.scaled_dot_product_attention needs as many heads in k and v "
                "as in q, and with enable_gqa=True only the flash kernel (fp16/bf16, no mask) runs it"
            )
            return
        if len(feature) != 1 or len(query_letters) != 1 or s_out[-1] != j_s or s_out[-2] != query_letters[0]:
            self.reasons.append("the scores' layout has no F.scaled_dot_product_attention equivalent")
            return
        d, i, j = feature[0], query_letters[0], j_s
        batch = s_out[:-2]
        contracted = product.info["contracted"][0]
        w_query = [l for l in w_spec if l not in v_spec]
        v_feature = [l for l in v_spec if l not in w_spec]
        if len(w_query) != 1 or len(v_feature) != 1 or w_spec[-2:] not in ([w_query[0], contracted], [contracted, w_query[0]]):
            self.reasons.append("the product with v has no F.scaled_dot_product_attention equivalent")
            return
        e, i_o = v_feature[0], w_query[0]
        parts = [(q_spec, (i, d)), (k_spec, (j, d)), (v_spec, (contracted, e)), (o_out, (i_o, e)), (w_spec, (i_o, contracted) if w_spec[-1] == contracted else (contracted, i_o))]
        o_batch = [l for l in o_out if l not in (i_o, e)]
        if any(sorted(spec[-2:]) != sorted(pair) or len(spec) != len(batch) + 2 for spec, pair in parts) or any(
            spec[:-2] != batch for spec in (q_spec, k_spec) if "..." not in spec
        ) or ("..." not in v_spec and (v_spec[:-2] != w_spec[:-2] or o_batch != w_spec[:-2])):
            self.reasons.append("the einsum's batch axes differ between q, k and v; SDPA's must match")
            return
        operands = scores.info["operands"]
        q_node, k_node = operands[1 - key_side], operands[key_side]
        v_node = product.info["operands"][1 - side]
        site.operands = (q_node, k_node, v_node)
        site.transposed = o_out[-1] != e
        self.texts.extend((q_node, k_node, v_node))
        spellings = (scores.info["spelling"], product.info["spelling"])
        rank: Optional[int] = None
        explicit = [len(spec) for spelling, spec in zip(spellings, (s_out, o_out)) if spelling == "einsum" and "..." not in spec]
        if {"torch.bmm", "bmm"} & set(spellings):  # the rank is in the code
            rank = 3
        elif {"torch.mm", "mm"} & set(spellings) or (scores.inputs[key_side].rank == 2 and scores.inputs[key_side].op == "relabel"):
            rank = 2  # (`q @ k.transpose(0, 1)`: matrices, ``values.FunctionValues._contract``)
        elif explicit:
            rank = explicit[0]
        else:  # `@`/`matmul`, an einsum over `...`: the rank where the value graph shows it (q, k and v agree)
            ranks = {value_rank(self.graph, v) for v in (scores.inputs[1 - key_side], scores.inputs[key_side], product.inputs[1 - side])}
            rank = ranks.pop() if len(ranks) == 1 else self.assumed
        site.query = _oriented(q_node, q_spec[-1] != d, rank)
        site.key = _oriented(k_node, k_spec[-1] != d, rank)
        site.value = _oriented(v_node, v_spec[-1] != e, rank)
        if rank is not None:
            site.rank = rank
            if rank not in (None, 3, 4):
                self.reasons.append("the tensors are %d-D; CUDA's fused kernels take 4-D (batch, heads, L, E)" % rank)
            elif rank == 3 and self.masks:
                self.reasons.append("3-D tensors with a mask: the mask's dims for SDPA's 4-D form are not known")

    def _rebound(self) -> bool:
        """Is a name the SDPA call reads bound to another value at the product with v?"""
        before = self.graph.snapshots.get(id(self.product.statement), {})
        for text in self.texts:
            if text is None:
                continue
            for name in walk(text):
                if type(name) is cst.Name:
                    read = self.graph.names.get(id(name))
                    if read is not None and name.value in before and before[name.value] is not read:
                        return True
        return False


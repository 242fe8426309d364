"""Suggested variants for findings without a fix: the source edited as the finding's message
suggests (the stem max-pool kept), so that profile can measure what the suggestion saves."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider




# -- suggested variants for findings without a fix -----------------------------------------

_STEM_ACTIVATIONS = frozenset({"relu", "act1", "relu1", "relu2", "relu3"})


def keep_stem_pool(text: str, row: int, column: int) -> Optional[Tuple[str, str]]:
    """The source with a ResNet stem's downsampling put back, for a TML3xx
    finding at ``row:column``, and what was changed; None when the code
    matches no known pattern.

    In order: a flagged ``<x>.maxpool = nn.Identity()`` (or empty
    ``Sequential()``) statement is removed; a flagged stride-1
    ``<x>.conv1 = nn.Conv2d(...)`` gets stride 2 (a ``<x>.conv1.stride = ...``
    statement is removed).  For the one stem rebuilt without its pool as
    ``Sequential(P.conv1, P.bn1, P.relu, ...)`` in the flagged definition, the
    single call of ``P.layer1`` (or of an alias ``self.x = P.layer1``) becomes
    ``f(P.maxpool(h))``, else ``P.maxpool`` goes into the ``Sequential`` after
    the activation.  A flagged ``P.layer1(h)`` becomes ``P.layer1(P.maxpool(h))``.
    The pool is assumed to be ``maxpool``, as in torchvision's and timm's ResNets; a SENet
    stem (``P.layer0.conv1, ..., P.layer0.relu1``) feeds ``P.layer1`` through ``P.layer0.pool``,
    and a single ``list(P.children())[:3]`` becomes ``[:4]`` (the pool is child 3).
    """
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    module = wrapper.module

    def covers(node: cst.CSTNode) -> bool:
        return positions[node].start.line <= row <= positions[node].end.line

    finder = _StemFinder()
    module.visit(finder)
    for line in finder.assignments:
        if covers(line):
            assign = line.body[0]
            assert isinstance(assign, cst.Assign)
            target = assign.targets[0].target
            assert isinstance(target, cst.Attribute)
            if target.attr.value == "maxpool" and _is_no_op(assign.value):
                return _rewrite(module, line, cst.RemoveFromParent(), "removed `%s = ...`" % _dotted(target))
            if (
                target.attr.value == "conv1" and isinstance(assign.value, cst.Call)
                and _dotted(assign.value.func).endswith("Conv2d")  # not `self.conv1 = Sequential(stem)`
            ):
                return _rewrite(module, assign.value, _with_stride_two(assign.value),
                                "`%s` with stride 2" % _dotted(target))
            if target.attr.value == "stride" and _dotted(target.value).endswith(".conv1"):
                return _rewrite(module, line, cst.RemoveFromParent(), "removed `%s = ...`" % _dotted(target))
    enclosing = next((node for node in module.body if covers(node)), None)
    stems = [call for call in finder.stems if enclosing is not None and _inside(positions, call, enclosing)]
    slices = [node for node in finder.children_slices if enclosing is not None and _inside(positions, node, enclosing)]
    if not stems and len(slices) == 1:
        # ``list(r.children())[:3]`` stops before the pool (index 3 in a ResNet): take it too
        bounds = slices[0].slice[0].slice
        assert isinstance(bounds, cst.Slice)
        wider = slices[0].with_changes(
            slice=[slices[0].slice[0].with_changes(slice=bounds.with_changes(upper=cst.Integer("4")))]
        )
        return _rewrite(module, slices[0], wider, "`%s` up to the pool" % module.code_for_node(wider))
    if len(stems) == 1:
        # Feed layer1 through the pool where the class calls it (under an alias such
        # as ``self.conv1 = self.encoder.layer1``), so the stem's output, often a
        # UNet's first skip, stays what it was; else put the pool into the stem.
        owner = stems[0].args[0].value.value  # type: ignore[attr-defined]
        if _dotted(owner).endswith(".layer0"):  # a SENet stem: its pool is layer0.pool
            senet = owner
            layer1 = _dotted(owner)[: -len(".layer0")] + ".layer1"
            feeds = [
                call for call in finder.one_argument_calls
                if _dotted(call.func) in {layer1} | {
                    alias for alias, value, node in finder.aliases
                    if value == layer1 and _inside(positions, node, enclosing)  # type: ignore[arg-type]
                } and _inside(positions, call, enclosing)  # type: ignore[arg-type]
            ]
            if len(feeds) == 1:
                return _rewrite(module, feeds[0], _through_pool(feeds[0], senet, "pool"),
                                "`%s` fed through `%s.pool`" % (_dotted(feeds[0].func), _dotted(senet)))
            return None
        layer1 = _dotted(owner) + ".layer1"
        names = {layer1} | {
            alias for alias, value, node in finder.aliases
            if value == layer1 and _inside(positions, node, enclosing)  # type: ignore[arg-type]
        }
        feeds = [
            call for call in finder.one_argument_calls
            if _dotted(call.func) in names and _inside(positions, call, enclosing)  # type: ignore[arg-type]
        ]
        local_owner = isinstance(owner, cst.Name) and owner.value != "self"
        if len(feeds) == 1 and local_owner:
            # ``encoder = ResNet()`` is a local of __init__, gone by forward: keep its
            # pool as an attribute (no parameters: the state_dict is unchanged) next
            # to the alias of layer1, and feed the alias through it.
            aliases = [
                node for alias, value, node in finder.aliases
                if value == layer1 and alias == _dotted(feeds[0].func) and alias.startswith("self.")
                and _inside(positions, node, enclosing)  # type: ignore[arg-type]
            ]
            if len(aliases) == 1:
                keep = cst.parse_statement("self._stem_pool = %s.maxpool\n" % owner.value)
                fed = _through_pool(feeds[0], cst.Name("self"), "_stem_pool")
                new_code = module.visit(_Replace({
                    id(aliases[0]): cst.FlattenSentinel([aliases[0], keep]), id(feeds[0]): fed,
                })).code
                return new_code, "`%s` fed through `%s.maxpool` (kept as `self._stem_pool`)" % (
                    _dotted(feeds[0].func), owner.value)
        elif len(feeds) == 1:
            return _rewrite(module, feeds[0], _through_pool(feeds[0], owner),
                            "`%s` fed through `%s.maxpool`" % (_dotted(feeds[0].func), _dotted(owner)))
        return _rewrite(module, stems[0], _with_pool(stems[0]), "`%s.maxpool` added to the stem" % _dotted(owner))
    for call in finder.one_argument_calls:
        start = positions[call].start
        if (start.line, start.column + 1) == (row, column) and _dotted(call.func).endswith(".layer1"):
            owner = call.func.value  # type: ignore[attr-defined]
            return _rewrite(module, call, _through_pool(call, owner),
                            "`%s` fed through `%s.maxpool`" % (_dotted(call.func), _dotted(owner)))
    return None


def _rewrite(module: cst.Module, old: cst.CSTNode, new: Any, what: str) -> Tuple[str, str]:
    return module.visit(_Replace({id(old): new})).code, what


def _through_pool(call: cst.Call, owner: cst.BaseExpression, pool_name: str = "maxpool") -> cst.Call:
    """``f(h)`` -> ``f(owner.maxpool(h))``."""
    argument = call.args[0].with_changes(comma=cst.MaybeSentinel.DEFAULT)
    pool = cst.Call(cst.Attribute(owner, cst.Name(pool_name)), [argument])
    return call.with_changes(args=[cst.Arg(pool)])


def _inside(positions: Any, node: cst.CSTNode, outer: cst.CSTNode) -> bool:
    inner, around = positions[node], positions[outer]
    return around.start.line <= inner.start.line and inner.end.line <= around.end.line


def _dotted(node: cst.BaseExpression) -> str:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        return "%s.%s" % (_dotted(node.value), node.attr.value)
    return ""


def _is_no_op(value: cst.BaseExpression) -> bool:
    if not isinstance(value, cst.Call):
        return False
    name = _dotted(value.func)
    return name.endswith("Identity") or (name.endswith("Sequential") and not value.args)


def _with_stride_two(conv: cst.Call) -> cst.Call:
    args = list(conv.args)
    for index, arg in enumerate(args):
        keyword = arg.keyword.value if arg.keyword else None
        if keyword == "stride" or (keyword is None and index == 3):
            args[index] = arg.with_changes(value=cst.Integer("2"))
            return conv.with_changes(args=args)
    args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return conv.with_changes(args=args + [cst.Arg(cst.Integer("2"), keyword=cst.Name("stride"))])


def _with_pool(stem: cst.Call) -> cst.Call:
    args = list(stem.args)
    index = next(i for i, arg in enumerate(args) if arg.value.attr.value in _STEM_ACTIVATIONS)  # type: ignore
    owner = args[index].value.value  # type: ignore[attr-defined]
    pool = cst.Arg(
        cst.Attribute(owner, cst.Name("maxpool")),
        comma=args[index].comma if index + 1 < len(args) else cst.MaybeSentinel.DEFAULT,
    )
    args[index] = args[index].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    return stem.with_changes(args=args[: index + 1] + [pool] + args[index + 1:])


class _StemFinder(cst.CSTVisitor):
    """Assignments to ``<x>.maxpool``/``<x>.conv1``/``<x>.conv1.stride``, stems rebuilt
    as a ``Sequential`` of one owner's parts without a pool, and one-argument calls."""

    def __init__(self) -> None:
        self.assignments: List[cst.SimpleStatementLine] = []
        self.stems: List[cst.Call] = []
        self.one_argument_calls: List[cst.Call] = []
        # (alias, aliased, statement) for ``self.conv1 = self.encoder.layer1``
        self.aliases: List[Tuple[str, str, cst.SimpleStatementLine]] = []
        self.children_slices: List[cst.Subscript] = []

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        statement = node.body[0] if len(node.body) == 1 else None
        if (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.value, cst.Attribute)
        ):
            self.aliases.append((_dotted(statement.targets[0].target), _dotted(statement.value), node))
        if (
            isinstance(statement, cst.Assign)
            and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Attribute)
            and statement.targets[0].target.attr.value in ("maxpool", "conv1", "stride")
        ):
            self.assignments.append(node)

    def visit_Subscript(self, node: cst.Subscript) -> None:
        """``list(x.children())[:3]``: the children of a ResNet up to its activation."""
        inner = node.value
        if not (isinstance(inner, cst.Call) and _dotted(inner.func) == "list" and len(inner.args) == 1):
            return
        call = inner.args[0].value
        if not (isinstance(call, cst.Call) and _dotted(call.func).endswith(".children")):
            return
        bounds = node.slice[0].slice if len(node.slice) == 1 else None
        if (
            isinstance(bounds, cst.Slice) and bounds.step is None
            and isinstance(bounds.upper, cst.Integer) and bounds.upper.value == "3"
        ):
            self.children_slices.append(node)

    def visit_Call(self, node: cst.Call) -> None:
        if len(node.args) == 1 and node.args[0].keyword is None and not node.args[0].star:
            self.one_argument_calls.append(node)
        if not _dotted(node.func).endswith("Sequential") or not node.args:
            return
        values = [arg.value for arg in node.args]
        if any(arg.star or not isinstance(arg.value, cst.Attribute) for arg in node.args):
            return
        owners = {_dotted(value.value) for value in values}  # type: ignore[attr-defined]
        names = [value.attr.value for value in values]  # type: ignore[attr-defined]
        if (
            len(owners) == 1
            and names[0] == "conv1"
            and any(name in _STEM_ACTIVATIONS for name in names)
            and not any("pool" in name for name in names)
        ):
            self.stems.append(node)


class _Replace(cst.CSTTransformer):
    """Replace (or remove) nodes of the visited tree, found by identity."""

    def __init__(self, replacements: Dict[int, Any]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return self.replacements.get(id(original_node), updated_node)


# -- TML603: a hand-written checkpoint autograd.Function -----------------------------------

_FIXED_APPLY = '''\
class {name}:
    """torchmemlint variant: torch.utils.checkpoint.checkpoint in place of the hand-written Function."""

    @staticmethod
    def apply({params}):
        import torch.utils.checkpoint as _checkpoint_module

        return _checkpoint_module.checkpoint({function}, *{inputs}, use_reentrant=False)
'''
_PLAIN_APPLY = '''\
class {name}:
    """torchmemlint reference: the segment run plainly, without checkpointing."""

    @staticmethod
    def apply({params}):
        return {function}(*{inputs})
'''


def checkpoint_function_variants(text: str, row: int) -> Optional[Tuple[str, str, str]]:
    """For a TML603 finding at ``row`` (the class name): the source with the hand-written
    ``autograd.Function`` replaced by a class of the same name whose ``apply`` calls
    ``torch.utils.checkpoint.checkpoint(function, *inputs, use_reentrant=False)``, the source
    with an ``apply`` that runs the segment plainly (the reference for gradients), and what
    was changed; None when ``forward``'s signature is not one of latent-diffusion's
    ``(ctx, run_function, length, *args)`` (inputs ``args[:length]``, then the parameters)
    or ``(ctx, run_function, *args)``.
    """
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    module = wrapper.module
    classes = [node for node in module.body if isinstance(node, cst.ClassDef)
               and positions[node.name].start.line == row]
    if len(classes) != 1:
        return None
    classdef = classes[0]
    forward = next((item for item in classdef.body.body if isinstance(item, cst.FunctionDef)
                    and item.name.value == "forward"), None)
    if forward is None:
        return None
    plain = [param.name.value for param in forward.params.params]
    star = forward.params.star_arg
    if not isinstance(star, cst.Param) or forward.params.kwonly_params or forward.params.star_kwarg:
        return None
    if len(plain) == 3:  # (ctx, run_function, length, *args)
        params = "%s, %s, *%s" % (plain[1], plain[2], star.name.value)
        inputs = "%s[:%s]" % (star.name.value, plain[2])
    elif len(plain) == 2:  # (ctx, run_function, *args)
        params = "%s, *%s" % (plain[1], star.name.value)
        inputs = star.name.value
    else:
        return None
    fields = {"name": classdef.name.value, "params": params, "function": plain[1], "inputs": inputs}
    fixed = _rewrite(module, classdef, cst.parse_statement(_FIXED_APPLY.format(**fields)), "")[0]
    reference = _rewrite(module, classdef, cst.parse_statement(_PLAIN_APPLY.format(**fields)), "")[0]
    what = "`%s.apply(%s)` runs torch.utils.checkpoint.checkpoint(%s, *%s, use_reentrant=False)" % (
        classdef.name.value, params, plain[1], inputs)
    return fixed, reference, what


# -- TML604: the module torch.utils.checkpoint called ------------------------------------

_CHECKPOINT_KEYWORDS = frozenset({
    "use_reentrant", "preserve_rng_state", "context_fn", "determinism_check", "debug",
})
# ``torch.utils.checkpoint(module)``, meant to wrap it: its forward runs under checkpoint
# (the module itself is kept, so its parameters keep their names).
_WRAP_MODULE = (
    "(lambda _m: (setattr(_m, 'forward', __import__('functools').partial("
    "__import__('torch.utils.checkpoint', fromlist=['checkpoint']).checkpoint, _m.forward, "
    "use_reentrant=False)), _m)[1])"
)


def checkpoint_module_variants(
    text: str, locations: List[Tuple[int, int]]
) -> Optional[Tuple[str, str, str]]:
    """For the TML604 findings at ``locations`` (row, 1-based column of the called
    ``torch.utils.checkpoint``): the source with every one of those calls fixed, the source
    with each run without checkpointing (the reference), and what was changed; None when a
    call has no argument.

    ``checkpoint(f, *args)`` becomes ``checkpoint.checkpoint(f, *args, use_reentrant=False)``
    and, in the reference, ``f(*args)``; ``checkpoint(module)`` (meant to wrap it) becomes the
    module with its ``forward`` run under non-reentrant checkpoint and, in the reference, the
    module itself.
    """
    wrapper = MetadataWrapper(cst.parse_module(text))
    positions = wrapper.resolve(PositionProvider)
    module = wrapper.module
    calls = [node for node in _calls(module) if (
        positions[node.func].start.line, positions[node.func].start.column + 1) in set(locations)]
    if len(calls) != len(set(locations)) or any(not call.args for call in calls):
        return None
    fixed: Dict[int, Any] = {}
    reference: Dict[int, Any] = {}
    forms = []
    for call in calls:
        positional = [arg for arg in call.args if arg.keyword is None]
        if len(positional) == 1 and len(call.args) == 1 and not positional[0].star:
            wrapped = cst.Call(cst.parse_expression(_WRAP_MODULE), [positional[0]])
            fixed[id(call)] = wrapped
            reference[id(call)] = call.args[0].value
            forms.append("`%s` wrapped (its forward under checkpoint)" % module.code_for_node(call.args[0].value))
            continue
        args = [arg.with_changes(comma=cst.MaybeSentinel.DEFAULT) for arg in call.args]
        args = [arg.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                for arg in args[:-1]] + args[-1:]
        keywords = {arg.keyword.value for arg in args if arg.keyword is not None}
        extra = [] if "use_reentrant" in keywords else [
            cst.Arg(cst.Name("False"), keyword=cst.Name("use_reentrant"), equal=cst.AssignEqual(
                whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))]
        fixed[id(call)] = call.with_changes(
            func=cst.Attribute(call.func, cst.Name("checkpoint")), args=args + extra)
        kept = [arg for arg in args[1:] if arg.keyword is None or arg.keyword.value not in _CHECKPOINT_KEYWORDS]
        if kept:
            kept[-1] = kept[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        reference[id(call)] = cst.Call(args[0].value, kept)
        forms.append("`%s.checkpoint(..., use_reentrant=False)`" % module.code_for_node(call.func))
    return (module.visit(_Replace(fixed)).code, module.visit(_Replace(reference)).code, "; ".join(forms))


def _calls(module: cst.Module) -> List[cst.Call]:
    found: List[cst.Call] = []

    class _Collect(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            found.append(node)

    module.visit(_Collect())
    return found


# -- TML605: the training step under autocast ---------------------------------------------

_AUTOCAST_TARGET = '''

# torchmemlint variant: the model built by `{name}` runs its forward under
# torch.autocast(<the inputs' device type>, dtype=torch.bfloat16).
def _torchmemlint_autocast(_target):
    import torch as _torch

    def wrap(model):
        plain = model.forward

        def forward(*inputs, **named):
            tensors = [t for t in list(inputs) + list(named.values()) if isinstance(t, _torch.Tensor)]
            device_type = tensors[0].device.type if tensors else "cpu"
            with _torch.autocast(device_type, dtype=_torch.bfloat16):
                return plain(*inputs, **named)

        model.forward = forward
        return model

    if isinstance(_target, _torch.nn.Module):  # a module instance: wrapped in place
        return wrap(_target)

    def build(*args, **kwargs):
        return wrap(_target(*args, **kwargs))

    return build


{name} = _torchmemlint_autocast({name})
'''


def autocast_variant(text: str, name: str) -> Optional[str]:
    """The source with the target ``name`` (a top-level class or factory) rebound to a factory
    whose model runs ``forward`` under bfloat16 autocast (the instance's ``forward`` is
    replaced: parameter names stay the same; a module instance is wrapped in place); None for
    a dotted target."""
    if not name.isidentifier():
        return None
    return text.rstrip("\n") + "\n" + _AUTOCAST_TARGET.format(name=name)

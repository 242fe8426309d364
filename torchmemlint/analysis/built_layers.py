"""The one layer a project's builder makes, for ``CallableModel.single_op``
(``analysis/callables.py``): a function of this or another project file whose every ``return``
builds the same single op (LDM's ``def Normalize(c): return torch.nn.GroupNorm(32, c)``); a
classmethod builder (OLMo's ``LayerNorm.build(config)``, ``Activation.build(config)``) whose
every ``return`` builds one cheap layer, whichever the configuration chooses (``cast(T, GELU())``
read as ``GELU()``); and a class of the project that is one cheap layer itself: a subclass of a
torch single-op layer that keeps its ``forward`` (``class GELU(nn.GELU)``), a class whose
``forward`` only forwards to one (``def forward(self, x): return self.conv(x)``), or a leaf
module (``leaf_op``): its constructors (its own and its bases') build no module, only
parameters and plain values, and its ``forward`` (with the methods of ``self`` it calls) runs
elementwise and normalisation work only: torch's activation and norm functions, tensor
methods, arithmetic, no contraction (``@``, ``matmul``, ``linear``, ``conv``), no loop, no
function of unknown cost (an imported kernel, ``flash_attn_func``), no held module. Such a
class keeps a few tensors of its input's size for backward, as a torch norm or activation
does."""

from __future__ import annotations

from typing import Any, List, Optional

import libcst as cst

from torchmemlint.analysis.checkpoints import (
    agreed, _F, IDENTITY, _last_part, _NN, _PARAMETERLESS_FUNCTIONS, _PARAMETERLESS_MODULES, _PARAMETRIC_MODULES,
    _single_return_call, SingleOp,
)
from torchmemlint.analysis.classes import Env, InitModel
from torchmemlint.analysis.inheritance import bases, method_definition
from torchmemlint.analysis.syntax import _scope_of, _walk_types, self_path
from torchmemlint.analysis.vocabulary import VIEWS

MAX_DEPTH = 3
# torch's norm functions: elementwise work over the input, with at most an affine parameter
_NORM_FUNCTIONS = frozenset(_F + name for name in ("layer_norm", "group_norm", "rms_norm", "normalize"))
# torch functions that contract a tensor with another (the work a checkpoint is for)
_CONTRACTIONS = frozenset({
    "matmul", "mm", "bmm", "einsum", "baddbmm", "addmm", "addbmm", "tensordot", "linear", "bilinear",
    "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "mv",
    "scaled_dot_product_attention", "multi_head_attention_forward", "cdist", "inner", "outer",
})
_PARAMETER_BUILDERS = ("torch.nn.Parameter", "torch.nn.parameter.Parameter")
# tensor methods that only relabel or reshape, or read a size (no work backward needs a tensor for)
_VIEWS = VIEWS | {"size", "dim"}
_CAST = "typing.cast"


def built_op(models: Any, call: cst.Call, env: Env, depth: int) -> Optional[SingleOp]:
    """The one cheap layer ``call`` builds, whatever its arguments; None where it may build
    anything else (``models``: the file's ``CallableModel``)."""
    model, builder = models, models.local_function(call.func, env)
    owner = models.local_class(call.func, env) if builder is None else None
    if owner is not None:
        return class_op(models, owner, depth)
    if builder is None:
        found_class = models.foreign(call.func, env, "class", package=True)
        if found_class is not None:  # `MaskedConv1d(...)` of another project file
            other, node = found_class
            return class_op(other, other.model(node, other.root), depth + 1)
    if builder is None and type(call.func) is cst.Attribute and models.local_class(call.func.value, env) is not None:
        return _classmethod_op(models, call.func, env, depth)
    if builder is None:
        found = models.foreign(call.func, env, "function")
        if found is not None:
            model, builder = found
    if builder is None:
        return None
    inner = Env(_scope_of(builder, model.root), None, None, builder)
    returned = [node.value for node in _walk_types(builder.body, (cst.Return,))]
    if not returned or any(type(value) is not cst.Call for value in returned):
        return None
    return agreed([model.single_op(value, inner, depth + 1) for value in returned])


def class_op(models: Any, owner: InitModel, depth: int) -> Optional[SingleOp]:
    """The one cheap layer an instance of ``owner`` (a class of ``models``'s file) is."""
    found = method_definition(models, owner, "forward")
    if found is None:  # `class GELU(nn.GELU)`: torch's forward
        return _torch_base_op(owner)
    other, base, forward = found
    inner = _single_return_call(forward, skip=1)
    if inner is not None:  # `def forward(self, x): return self.conv(x)`
        return other.single_op(inner.func, owner.method_env(forward) if base is owner else base.method_env(forward), depth + 1)
    if base is owner:
        wrapped = _wrapped_base_op(other, owner, forward) or _one_held_op(other, owner, forward, depth)
        if wrapped is not None:
            return wrapped
    return leaf_op(models, owner)


def _one_held_op(models: Any, owner: InitModel, forward: cst.FunctionDef, depth: int) -> Optional[SingleOp]:
    """A class whose ``forward`` runs one module it holds, once, and otherwise only views of
    its result (``x = self.proj(x)``; ``return x.flatten(2).transpose(1, 2), x.shape``): that
    module's op. Elementwise work after it (``F.gelu(self.fc(x))``) keeps its own input for
    backward, which a checkpoint would drop: no single op."""
    env = owner.method_env(forward)
    if _walk_types(forward.body, (cst.For, cst.While, cst.BinaryOperation, cst.UnaryOperation, cst.AugAssign, cst.Lambda, cst.FunctionDef)):
        return None
    held = []
    for call in _walk_types(forward.body, (cst.Call,)):
        func = call.func  # type: ignore[attr-defined]
        path = self_path(func, env.self_name)
        if path is not None and len(path) == 1 and method_definition(models, owner, path[0]) is None:
            held.append(call)
        elif type(func) is not cst.Attribute or func.attr.value not in _VIEWS or self_path(func.value, env.self_name) is not None:
            return None  # anything but a view of a tensor
    if len(held) != 1:
        return None
    op = models.single_op(held[0].func, env, depth + 1)  # type: ignore[attr-defined]
    return None if op is None or op is IDENTITY else op


def _wrapped_base_op(models: Any, owner: InitModel, forward: cst.FunctionDef) -> Optional[SingleOp]:
    """A subclass of one torch single-op layer whose constructor builds nothing itself and whose
    ``forward`` runs its base's once, around elementwise work and views (``x = x * mask;
    return super().forward(x.transpose(1, 2)).transpose(1, 2)``): that layer."""
    op = _torch_base_op(owner)
    if op is None or len(owner.node.bases) != 1 or any(
        type(value) is cst.Call for values in owner.attributes.values() for value in values
    ):
        return None
    supers = [call for call in _walk_types(forward.body, (cst.Call,)) if _super_forward(call.func)]  # type: ignore[attr-defined]
    if len(supers) != 1:
        return None
    env = owner.method_env(forward)
    return op if _elementwise(models, owner, forward, env, 0, allowed=supers[0]) else None


def _super_forward(func: cst.BaseExpression) -> bool:
    return (
        type(func) is cst.Attribute and func.attr.value == "forward" and type(func.value) is cst.Call
        and type(func.value.func) is cst.Name and func.value.func.value == "super"
    )


def either(ops: List[Optional[SingleOp]]) -> Optional[SingleOp]:
    """One cheap layer whichever of ``ops`` is built (``LayerNorm or RMSLayerNorm``)."""
    if not ops or any(op is None for op in ops):
        return None
    names = list(dict.fromkeys(op.name for op in ops))  # type: ignore[union-attr]
    return SingleOp(
        " or ".join(names), any(op.parametric for op in ops), any(op.stateful for op in ops)  # type: ignore[union-attr]
    )


def _classmethod_op(models: Any, func: cst.Attribute, env: Env, depth: int) -> Optional[SingleOp]:
    """``LayerNorm.build(config)``: a classmethod of a class of this file (or inherited from a
    base) whose every ``return`` builds one cheap layer."""
    owner = models.local_class(func.value, env)
    if owner is None or depth > MAX_DEPTH * 2:
        return None
    found = method_definition(models, owner, func.attr.value)
    if found is None or not _is_classmethod(found[2]):
        return None
    other, base, method = found
    inner = Env(_scope_of(method, base.scope), None, None, method)
    returned = [node.value for node in reversed(_walk_types(method.body, (cst.Return,)))]  # (source order)
    ops = []
    for value in returned:
        if type(value) is cst.Call and inner.qualify(value.func) == _CAST and len(value.args) == 2:
            value = value.args[1].value  # `cast(Activation, GELU(approximate="none"))`
        if type(value) is not cst.Call:
            return None
        ops.append(other.single_op(value, inner, depth + 1))
    return either(ops)


def _is_classmethod(method: cst.FunctionDef) -> bool:
    return any(type(d.decorator) is cst.Name and d.decorator.value == "classmethod" for d in method.decorators)


def _torch_base_op(owner: InitModel) -> Optional[SingleOp]:
    for base in owner.node.bases:
        qualified = owner.scope.qualify(base.value)
        if qualified in _PARAMETRIC_MODULES or qualified in _PARAMETERLESS_MODULES:
            return SingleOp(owner.name, qualified in _PARAMETRIC_MODULES, "BatchNorm" in qualified)  # type: ignore[operator]
    return None


def leaf_op(models: Any, owner: InitModel) -> Optional[SingleOp]:
    """``owner`` as one cheap layer: a leaf module whose ``forward`` does elementwise and
    normalisation work only (see the module's docstring); None otherwise."""
    known = owner.__dict__.get("_leaf_op", False)
    if known is not False:
        return known
    owner.__dict__["_leaf_op"] = None  # (a class met again while it is read is no leaf)
    parametric = _leaf_constructors(models, owner, 0)
    found = method_definition(models, owner, "forward")
    op = None
    if parametric is not None and found is not None:
        other, base, forward = found
        env = owner.method_env(forward) if base is owner else Env(_scope_of(forward, base.scope), owner, owner.self_name, forward)
        if _elementwise(other, owner, forward, env, 0):
            works = _walk_types(forward.body, (cst.Call, cst.BinaryOperation, cst.UnaryOperation))
            op = SingleOp(owner.name, parametric) if works else IDENTITY  # `return x`: runs nothing
    owner.__dict__["_leaf_op"] = op
    return op


def _leaf_constructors(models: Any, model: InitModel, depth: int) -> Optional[bool]:
    """Whether the constructors of ``model`` and its bases build parameters (None: they build
    a module, or a base is not ``nn.Module`` or such a class)."""
    if depth > MAX_DEPTH or model.attribute_appends:  # (`children`: also what `super().__init__` is given)
        return None
    env = model.init_env()
    parametric = False
    for values in model.attributes.values():
        for value in values:
            for call in [value, *_walk_types(value, (cst.Call,))]:
                if type(call) is not cst.Call:
                    continue
                qualified = env.qualify(call.func)
                if qualified in _PARAMETER_BUILDERS:
                    parametric = True
                elif qualified is None and _builtin(models, call.func, env):  # type: ignore[attr-defined]
                    continue
                elif qualified is None or qualified.startswith(_NN) or not qualified.startswith("torch."):
                    return None  # a module, or something of unknown kind
    found = bases(models, model)
    for base in model.node.bases:
        if model.scope.qualify(base.value) == _NN + "Module":
            continue
        inherited = next((pair for pair in found if pair[1].node.name.value == _dotted_tail(base.value)), None)
        if inherited is None:
            return None
        deeper = _leaf_constructors(inherited[0], inherited[1], depth + 1)
        if deeper is None:
            return None
        parametric = parametric or deeper
    init = model.methods.get("__init__")
    for call in _walk_types(init.body, (cst.Call,)) if init is not None else ():
        path = self_path(call.func, model.self_name)  # `self.register_parameter("bias", None)`
        if path is not None and path[0] in ("register_parameter",):
            parametric = parametric or len(call.args) == 2
        elif path is not None and path[0] in ("add_module", "register_module", "append", "extend"):
            return None
    return parametric


def _dotted_tail(node: cst.BaseExpression) -> Optional[str]:
    if type(node) is cst.Name:
        return node.value
    return node.attr.value if type(node) is cst.Attribute else None


def _elementwise(
    models: Any, owner: InitModel, function: cst.FunctionDef, env: Env, depth: int, allowed: Optional[cst.Call] = None
) -> bool:
    """Whether ``function`` (``forward`` or a method it calls on ``self``) runs only
    elementwise and normalisation work on tensors (``allowed``: a call not counted as work)."""
    if depth > MAX_DEPTH:
        return False
    body = function.body
    if _walk_types(body, (cst.For, cst.While, cst.Raise, cst.Yield, cst.Lambda, cst.FunctionDef)):
        return False  # a loop, an abstract `raise NotImplementedError`, a closure
    for node in _walk_types(body, (cst.BinaryOperation, cst.AugAssign)):
        operator = node.operator  # type: ignore[attr-defined]
        if type(operator) in (cst.MatrixMultiply, cst.MatrixMultiplyAssign):
            return False
    for call in _walk_types(body, (cst.Call,)):
        if call is allowed or (allowed is not None and call is allowed.func.value):  # type: ignore[attr-defined]
            continue  # (`super()` of the allowed `super().forward(...)`)
        func = call.func  # type: ignore[attr-defined]
        path = self_path(func, env.self_name)
        if path is not None:
            if len(path) != 1:
                return False  # `self.proj.weight.t()`... a held module's method
            found = method_definition(models, owner, path[0])
            if found is None:
                return False  # a held module or callable
            other, base, method = found
            method_env = Env(_scope_of(method, base.scope), owner, env.self_name, method)
            if method is function or not _elementwise(other, owner, method, method_env, depth + 1):
                return False
            continue
        qualified = env.qualify(func)
        if qualified is not None:
            if not _cheap_torch(qualified):
                return False
        elif type(func) is cst.Attribute:
            receiver = func.value
            if func.attr.value in _CONTRACTIONS or (
                type(receiver) is cst.Call and type(receiver.func) is cst.Name and receiver.func.value == "super"
            ):
                return False  # `x.matmul(w)`; `super().forward(x)`: the base's forward, not read here
        elif not _builtin(models, func, env):
            return False  # a function of unknown cost
    return True


def _builtin(models: Any, func: cst.BaseExpression, env: Env) -> bool:
    """``func`` names no binding of the file: a builtin (``isinstance``, ``super``, ``float``)."""
    return type(func) is cst.Name and not env.scope.is_bound(func.value) and func.value not in models.functions and func.value not in models.classes


def _cheap_torch(qualified: str) -> bool:
    if qualified.startswith(_F):
        return qualified in _PARAMETERLESS_FUNCTIONS or qualified in _NORM_FUNCTIONS
    if not qualified.startswith("torch.") or qualified.startswith((_NN, "torch.utils.", "torch.autograd.", "torch.ops.")):
        return False
    return _last_part(qualified) not in _CONTRACTIONS

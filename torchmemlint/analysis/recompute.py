"""Hand-written checkpoint functions: ``torch.autograd.Function`` subclasses that keep the
function they were given and run it again in ``backward`` (latent-diffusion's and
guided-diffusion's ``CheckpointFunction``), and whether they restore the RNG state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, List, Optional, Set

import libcst as cst

from torchmemlint.analysis.syntax import nodes_of

AUTOGRAD_FUNCTION = "torch.autograd.Function"
RNG_MARKERS = (
    "get_rng_state", "set_rng_state", "fork_rng", "preserve_rng_state", "get_device_states",
    "set_device_states", "manual_seed", "CheckpointFunction.", "seed",
)


@dataclass
class RecomputingFunction:
    """An ``autograd.Function`` whose ``backward`` calls ``ctx.<attribute>``, the function
    ``forward`` was given."""

    classdef: cst.ClassDef
    attribute: str  # ``ctx.run_function``
    call: cst.Call  # the call in backward
    restores_rng: bool


def _method(classdef: cst.ClassDef, name: str) -> Optional[cst.FunctionDef]:
    for statement in classdef.body.body:  # type: ignore[union-attr]
        if type(statement) is cst.FunctionDef and statement.name.value == name:
            return statement
    return None


def _params(function: cst.FunctionDef) -> List[str]:
    return [p.name.value for p in function.params.params] + (
        [function.params.star_arg.name.value] if type(function.params.star_arg) is cst.Param else []
    )


def recomputing_functions(
    module: cst.Module, qualify: Callable[[cst.BaseExpression], Optional[str]]
) -> List[RecomputingFunction]:
    found = []
    for node in nodes_of(module, cst.ClassDef):
        if not any(qualify(base.value) == AUTOGRAD_FUNCTION for base in node.bases):
            continue
        forward, backward = _method(node, "forward"), _method(node, "backward")
        if forward is None or backward is None or not forward.params.params or not backward.params.params:
            continue
        ctx_forward = forward.params.params[0].name.value
        function_params: Set[str] = set(_params(forward)[1:])
        stored: Set[str] = set()
        assigns = nodes_of(forward, cst.Assign)
        for assign in assigns:
            if type(assign.value) is cst.Name and assign.value.value in function_params:
                for target in assign.targets:
                    t = target.target
                    if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == ctx_forward:
                        stored.add(t.attr.value)
        # only a function forward runs too is rerun in backward (not a separate backward_op)
        source: dict = {}
        for assign in assigns:
            if type(assign.value) is cst.Name:
                for target in assign.targets:
                    t = target.target
                    if type(t) is cst.Attribute and type(t.value) is cst.Name and t.value.value == ctx_forward:
                        source[t.attr.value] = assign.value.value
        ran: Set[str] = set()
        for call in nodes_of(forward, cst.Call):
            func = call.func
            if type(func) is cst.Attribute and type(func.value) is cst.Name and func.value.value == ctx_forward:
                ran.add(func.attr.value)
            elif type(func) is cst.Name:
                ran.update(attr for attr, param in source.items() if param == func.value)
        stored &= ran
        ctx_backward = backward.params.params[0].name.value
        for call in nodes_of(backward, cst.Call):
            func = call.func
            if (
                type(func) is cst.Attribute and type(func.value) is cst.Name
                and func.value.value == ctx_backward and func.attr.value in stored
            ):
                text = cst.Module([]).code_for_node(node)
                restores = any(marker in text for marker in RNG_MARKERS[:6])
                found.append(RecomputingFunction(node, func.attr.value, call, restores))  # type: ignore[arg-type]
                break
    return found

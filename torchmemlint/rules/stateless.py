"""TML1xx: parameter-free layers kept as module attributes (a style choice, not a memory cost)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import libcst as cst

from torchmemlint.analysis.classes import Assignment, ClassModel
from torchmemlint.analysis.stateless import called_only_attributes
from torchmemlint.analysis.syntax import is_literal
from torchmemlint.analysis.vocabulary import NN, short_name

from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule


@dataclass(frozen=True)
class Functional:
    """The ``F.*`` function a parameter-free module's ``forward`` calls, and how to call it."""

    function: str
    params: Tuple[str, ...]  # the module's constructor parameters, in order
    training: bool = False  # forward passes ``self.training``


def _table() -> Dict[str, Functional]:
    activations = {
        "ReLU": ("relu", "inplace"), "ReLU6": ("relu6", "inplace"),
        "LeakyReLU": ("leaky_relu", "negative_slope inplace"), "ELU": ("elu", "alpha inplace"),
        "CELU": ("celu", "alpha inplace"), "SELU": ("selu", "inplace"), "GELU": ("gelu", "approximate"),
        "SiLU": ("silu", "inplace"), "Mish": ("mish", "inplace"), "Hardswish": ("hardswish", "inplace"),
        "Hardsigmoid": ("hardsigmoid", "inplace"), "Hardtanh": ("hardtanh", "min_val max_val inplace"),
        "Threshold": ("threshold", "threshold value inplace"), "Sigmoid": ("sigmoid", ""),
        "Tanh": ("tanh", ""), "Softmax": ("softmax", "dim"), "LogSoftmax": ("log_softmax", "dim"),
        "Softmin": ("softmin", "dim"), "Softplus": ("softplus", "beta threshold"),
        "AvgPool1d": ("avg_pool1d", "kernel_size stride padding ceil_mode count_include_pad"),
        "Upsample": ("interpolate", "size scale_factor mode align_corners recompute_scale_factor"),
        "PixelShuffle": ("pixel_shuffle", "upscale_factor"),
        "PixelUnshuffle": ("pixel_unshuffle", "downscale_factor"),
    }
    table = {NN + name: Functional(function, tuple(params.split())) for name, (function, params) in activations.items()}
    for n in ("1d", "2d", "3d"):
        table[NN + "MaxPool" + n] = Functional(
            "max_pool" + n, ("kernel_size", "stride", "padding", "dilation", "return_indices", "ceil_mode")
        )
        table[NN + "AdaptiveAvgPool" + n] = Functional("adaptive_avg_pool" + n, ("output_size",))
        table[NN + "AdaptiveMaxPool" + n] = Functional("adaptive_max_pool" + n, ("output_size", "return_indices"))
        table[NN + "Dropout" + n] = Functional("dropout" + n, ("p", "inplace"), training=True)
    for n in ("2d", "3d"):
        table[NN + "AvgPool" + n] = Functional(
            "avg_pool" + n,
            ("kernel_size", "stride", "padding", "ceil_mode", "count_include_pad", "divisor_override"),
        )
    table[NN + "RReLU"] = Functional("rrelu", ("lower", "upper", "inplace"), training=True)
    for name, function in (("Dropout", "dropout"), ("AlphaDropout", "alpha_dropout"),
                           ("FeatureAlphaDropout", "feature_alpha_dropout")):
        table[NN + name] = Functional(function, ("p", "inplace"), training=True)
    return table


STATELESS: Dict[str, Functional] = _table()


class StatelessModuleAttribute(Rule):
    """
    ## What it does
    Flags parameter-free modules (`nn.MaxPool2d`, `nn.ReLU`, `nn.Dropout`, `nn.Upsample`, ...)
    kept as attributes of a module whose methods only ever call them. Off by default: it is a
    style preference, never a memory problem. Modules inside `nn.Sequential` / `nn.ModuleList`
    and nested sub-modules are never flagged.

    ## Why is this bad?
    It is not, for memory: `self.pool = nn.MaxPool2d(2)` and `F.max_pool2d(x, 2)` run the same
    kernel and autograd keeps the same tensors. torchsummary shows a lower "Forward/backward pass
    size" for functional code only because it adds up the outputs of the modules it hooks and
    cannot see `F.*` calls; for the same reason it makes nested sub-modules look costly. The
    functional spelling simply keeps the stateless op next to its use.

    ## Example
    ```python
    import torch.nn as nn


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 64, 3, padding=1)
            self.pool = nn.MaxPool2d(2)

        def forward(self, x):
            return self.pool(self.conv(x))
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    import torch.nn.functional as F


    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 64, 3, padding=1)

        def forward(self, x):
            return F.max_pool2d(self.conv(x), kernel_size=2)
    ```

    ## Fix safety
    Unsafe: the fix rewrites every call to the `F.*` function (dropout gets
    `training=self.training`) and removes the attribute. Outputs and gradients are identical
    (tests/test_module_rules.py), but hooks, `print(model)`, quantization fusion and code that
    reaches `model.pool` from outside no longer see the module. Fixed only when the constructor
    arguments are literals, and only when nothing else in the project can reach the attribute:
    no other file reads `.pool` or names `"pool"` in a string (`getattr`, `fuse_modules`), no
    subclass uses or deletes `self.pool`, and no file walks modules' children in order
    (`IntermediateLayerGetter`, timm's `features_only`, `children()`), since removing a module
    changes what such a walk returns. The project is the files linted and the other modules of
    their packages (tests/test_project.py).

    ## Measured
    A 4-conv net with `nn.MaxPool2d`/`nn.ReLU` attributes vs `F.max_pool2d`/`F.relu`,
    1x3x512x704: 214,466,560 B saved for backward and a 254,558,984 B activation peak in both,
    bit-identical numerics (`benchmarks/memory_figures.py`, `benchmarks/results/
    memory_figures.json`, b_stateless_vs_functional, exact bytes on CPU, torch 2.13.0).
    Summaries that add up the outputs of every module (torchsummary's "Forward/backward pass
    size") count the attribute version as larger; the measured memory is the same.
    """

    code = "TML101"
    needs = (tuple(sorted({qualified.rsplit(".", 1)[-1] for qualified in STATELESS})),)
    name = "stateless-module-attribute"
    summary = "Parameter-free module kept as an attribute (0 B of memory; style only)"
    default_enabled = False
    needs_project = True
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        for found in called_only_attributes(self.context.analysis, frozenset(STATELESS)):
            functional = STATELESS[found.qualified]
            name = found.assignment.name
            fix = self._fix(found.model, found.assignment, functional, found.functional)
            if fix is not None and self.context.project.attribute_reached(
                self.context.filename, found.classdef.name.value, name
            ):
                fix = None  # another file, a subclass or a feature extractor may reach it
            self.report(
                found.node,
                f"`self.{name}` ({short_name(found.qualified)}) has no parameters or buffers and is only "
                f"called. `F.{functional.function}` in forward changes no autograd memory (measured "
                "0 B); torchsummary shows less for functional code only because it sums the outputs "
                "of hooked modules and cannot see `F.*` calls",
                fix,
            )

    def _fix(
        self, model: ClassModel, assignment: Assignment, functional: Functional, prefix: Optional[str]
    ) -> Optional[FixSpec]:
        call = assignment.value
        if prefix is None or type(call) is not cst.Call or assignment.alone:
            return None
        keywords = _keywords(call, functional)
        if keywords is None:
            return None
        edits: List[NodeEdit] = []
        for reference in model.calls(assignment.name):
            use = reference.call
            assert use is not None
            if len(use.args) != 1 or use.args[0].keyword is not None or use.args[0].star:
                return None
            arguments = [self.code_for(use.args[0].value)]
            arguments += [f"{name}={value}" for name, value in keywords]
            if functional.training:
                arguments.append(f"training={model.self_name(reference.method)}.training")
            edits.append(NodeEdit(use, f"{prefix}.{functional.function}({', '.join(arguments)})"))
        comments = "".join(
            f"{assignment.indent}{line.comment.value}\n" if line.comment else "\n"
            for line in assignment.statement.leading_lines
        )
        edits.append(NodeEdit(assignment.statement, comments))
        return FixSpec(Applicability.UNSAFE, f"Call `{prefix}.{functional.function}` instead", tuple(edits))


def _keywords(call: cst.Call, functional: Functional) -> Optional[List[Tuple[str, str]]]:
    """The constructor's arguments as ``(name, literal code)``; None if one is not a literal."""
    found: List[Tuple[str, str]] = []
    positional = 0
    for arg in call.args:
        if arg.star:
            return None
        if arg.keyword is None:
            if positional >= len(functional.params):
                return None
            name = functional.params[positional]
            positional += 1
        else:
            name = arg.keyword.value
            if name not in functional.params:
                return None
        if not is_literal(arg.value):
            return None
        found.append((name, cst.Module([]).code_for_node(arg.value)))
    return found

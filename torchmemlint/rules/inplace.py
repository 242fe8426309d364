"""TML2xx: ``inplace=True`` on activations and dropout: where it saves memory, where it saves
nothing, where it corrupts results, and where it costs memory."""

from __future__ import annotations

import re
from typing import Dict, FrozenSet, List, NamedTuple, Optional, Union

import libcst as cst

from torchmemlint.analysis.activation_calls import never_drops
from torchmemlint.analysis.activations import activation_sites, Placement, Site, Use
from torchmemlint.analysis.placing import may_import_factories
from torchmemlint.analysis.syntax import argument, has_star_args, literal_number
from torchmemlint.analysis.vocabulary import INPLACE_WORDS, Saves, activation_words, whole_words

from torchmemlint.findings import Applicability
from torchmemlint.rules.base import FixAvailability, FixSpec, NodeEdit, Rule
from torchmemlint.rules.inplace_docs import TML201_DOCUMENTATION

# How a finding's layer may be fixed: True (edit its construction), None (not at all), or the
# placement whose call passes the factory's ``inplace`` parameter
Fixable = Union[bool, None, Placement]


# -- fixes -----------------------------------------------------------------------------------------
def set_inplace(rule: Rule, site: Site) -> Optional[NodeEdit]:
    """An edit that adds ``inplace=True`` to ``site`` (module or functional form), or that
    calls the in-place ``torch`` function (``torch.selu_``)."""
    call = site.node
    if site.form == "torch":  # ``torch.selu(x)`` -> ``torch.selu_(x)`` (what ``F.selu(x, inplace=True)`` runs)
        return NodeEdit(call.func.attr, call.func.attr.value + "_") if type(call.func) is cst.Attribute else None
    position = site.inplace_position()
    if position is None or has_star_args(site.arguments) or site.foreign or site.configured:
        return None
    existing = argument(site.arguments, position, "inplace")  # a partial's preset ones too
    if existing is not None:
        if any(arg is existing for arg in call.args):
            return NodeEdit(existing.value, "True")
        if existing.keyword is None:
            return None  # positional in a partial: a keyword in the call would clash
        # preset by a partial that other calls share: override it in this call only
    return _add_keyword(rule, call, "True")


def set_switch(rule: Rule, placement: Placement) -> Optional[NodeEdit]:
    """An edit that passes True for the factory's ``inplace`` parameter at ``placement``."""
    assert placement.switch is not None
    if placement.switch_arg is not None:
        return NodeEdit(placement.switch_arg.value, "True")
    return _add_keyword(rule, placement.node, "True", placement.switch)


def _add_keyword(rule: Rule, call: cst.Call, value: str, keyword: str = "inplace") -> NodeEdit:
    """An edit that passes ``inplace=<value>`` (or another keyword) to ``call``."""
    if call.args:
        return NodeEdit(call.args[-1].value, f", {keyword}={value}", "after")
    keyword_arg = cst.Arg(
        value=cst.Name(value),
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace("")),
    )
    return NodeEdit(call, rule.code_for(call.with_changes(args=[keyword_arg])))


def drop_inplace(rule: Rule, site: Site) -> Optional[NodeEdit]:
    """An edit that makes ``site`` out of place, keeping everything else as written."""
    call = site.node
    func = call.func
    if site.foreign or site.configured:
        return None  # the construction is another file's, or a config's
    if site.form in ("underscore", "method"):
        if type(func) is not cst.Attribute:
            return None  # `from torch import relu_`: the out-of-place name may not be imported
        return NodeEdit(func.attr, func.attr.value[:-1])
    position = site.inplace_position()
    existing = argument(site.arguments, position, "inplace") if position is not None else None
    if existing is None:
        return None
    if not any(arg is existing for arg in call.args):
        # preset by a partial that other calls share: override it in this call only
        return _add_keyword(rule, call, "False") if existing.keyword is not None else None
    args = list(call.args)
    index = args.index(existing)
    if existing.keyword is None and index != len(args) - 1:
        return NodeEdit(existing.value, "False")  # a positional argument in the middle
    del args[index]
    if args and index == len(args):
        args[-1] = args[-1].with_changes(comma=existing.comma)
    return NodeEdit(call, rule.code_for(call.with_changes(args=args)))


def _negative_parameter(site: Site, placement: Optional[Placement] = None) -> Optional[bool]:
    """For LeakyReLU / ELU / CELU / RReLU: whether a slope parameter is negative (None: unknown);
    for a factory's layer, with what ``placement`` passes for the factory's own parameters.

    In place, these activations rebuild their gradient from the result, which torch refuses for
    negative slopes (RuntimeError in backward).
    """
    kind = site.kind
    assert kind is not None
    params = kind.module_params if site.form == "module" else kind.functional_params
    offset = 0 if site.form == "module" else 1
    negative: Optional[bool] = False
    for name in ("negative_slope", "alpha", "lower", "upper"):
        if name not in params:
            continue
        if placement is not None and name in placement.bound:  # ``leaky(-0.2)``
            value = placement.bound[name]
            if value is None:
                negative = None
                continue
        else:
            arg = argument(site.arguments, params.index(name) + offset, name)
            # or a keyword of a ``**params`` whose default dict the site read
            value = arg.value if arg is not None else (site.spread or {}).get(name)
        if value is None:
            continue
        number = literal_number(value)
        if number is None:
            negative = None
        elif number < 0:
            return True
    return negative


class Placed(NamedTuple):
    """A layer a finding names: its site, the place a factory's call puts it (None: the site
    itself), how the message names it, its uses there, and how it may be fixed."""

    site: Site
    placement: Optional[Placement]
    label: str
    uses: List[Use]
    fixable: Fixable

    def negative(self) -> Optional[bool]:
        """Whether a slope is negative here; for the factory's own edit, at any of its places."""
        if self.fixable is True and self.placement is not None:
            found = [_negative_parameter(self.site, p) for p in self.site.placements]
            return True if True in found else (None if None in found else False)
        return _negative_parameter(self.site, self.placement)


# -- rules -----------------------------------------------------------------------------------------
class _MissingInplace(Rule):
    """Shared by TML201 and TML202: activations that could run in place without risk."""

    saves: FrozenSet[Saves] = frozenset()
    # a module class or a layer factory of another file of the project is followed there; a
    # factory's fix is offered only where no other file imports it; what importers pass a
    # function's ``**kwargs`` is read in their texts (``factories._passed_elsewhere``)
    needs_project = True
    project_facts = frozenset({"imports", "importers", "importer_texts"})

    def visit_Module(self, node: cst.Module) -> None:
        analysis = activation_sites(self.context)
        file = analysis.file
        placed: Dict[int, List[Placed]] = {}
        for site in analysis.sites():
            kind = site.kind
            if kind is None or kind.saves not in self.saves or kind.name == "threshold":
                continue
            if site.inplace is None and site.placements and site.placements[0].switch is not None:
                for placement in site.placements:  # ``act(inplace=False)``: each call chooses
                    if placement.inplace is False and self._qualifies(file, site, placement, placement.complete, placement.privates, placement.uses):
                        placed.setdefault(id(placement.node), []).append(
                            Placed(site, placement, placement.label or site.label, placement.uses, None if placement.forwarded else placement)
                        )
                continue
            if site.inplace is not False:
                continue
            if site.placements:  # a factory's layer: judged where each call of it puts it
                good = [p for p in site.placements if self._qualifies(file, site, p, p.complete, p.privates, p.uses)]
                # the edit of the factory changes every place: offered when each one qualifies
                whole = site.every_placement and len(good) == sum(not p.off for p in site.placements)  # (a call never building it: no place)
                for placement in good:
                    placed.setdefault(id(placement.node), []).append(
                        Placed(site, placement, placement.label or site.label, placement.uses, True if whole else None)
                    )
                continue
            if self._qualifies(file, site, None, site.complete, site.privates, site.uses):
                self._report(site.node, [Placed(site, None, site.label, site.uses, True)])
        for group in placed.values():  # one finding per place, for every layer the factory may return
            self._report(group[0].placement.node, group)  # type: ignore[union-attr]

    def _qualifies(self, file, site: Site, placement: Optional[Placement], complete: bool, privates, uses: List[Use]) -> bool:
        """Every way the layer runs is known, and each takes a fresh tensor nothing else reads;
        no slope is negative (in place, backward would raise)."""
        if not complete or not all(file.private_attribute(*private) for private in privates):
            return False
        if placement is not None and placement.off:
            return False  # (the call never builds this layer of the factory)
        live = [use for use in uses if not use.dead]  # (a result nothing reads keeps nothing either way)
        if uses and not live:
            return False
        if Saves.INPUT in self.saves and live and all(use.to_dropout for use in live):
            return False  # a dropout keeps only its mask: in place keeps as many tensors (TML201)
        if any(use.to_inplace for use in uses):
            return False  # in place, its kept result would be changed by what follows: backward raises
        return all(use.single_use and use.fresh for use in uses) and not _negative_parameter(site, placement)

    def _fix(self, layers: List[Placed], title: str, safe) -> Optional[FixSpec]:
        """The edits that pass ``inplace=True`` to each layer (None: one cannot be given one);
        SAFE when ``safe(layer)`` holds for each."""
        edits = []
        for layer in layers:
            if isinstance(layer.fixable, Placement):  # the factory's parameter, at this call
                edit = set_switch(self, layer.fixable)
            else:
                edit = set_inplace(self, layer.site) if layer.fixable else None
            if edit is None:
                return None
            edits.append(edit)
        applicability = Applicability.SAFE if all(safe(layer) for layer in layers) else Applicability.UNSAFE
        return FixSpec(applicability, title, tuple(edits))

    def _report(self, at: cst.CSTNode, layers: List[Placed]) -> None:
        raise NotImplementedError


class MissingInplaceSavesMemory(_MissingInplace):
    __doc__ = TML201_DOCUMENTATION  # its documentation: rules/inplace_docs.py

    code = "TML201"
    # whole words: "elu" is in every "relu" and "ELU" in every "GELU"
    _WORDS = re.compile(r"(?:%s)\b" % "|".join(activation_words(Saves.INPUT)))  # whole_words
    name = "missing-inplace-saves-memory"
    summary = "LeakyReLU/ELU/CELU/SELU/RReLU out of place after a layer that allows in place"
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("safe", "unsafe")
    saves = frozenset({Saves.INPUT})

    @classmethod
    def may_apply(cls, text: str) -> bool:
        return super().may_apply(text) and any(True for _ in whole_words(cls._WORDS, text))

    @classmethod
    def may_apply_at(cls, text: str, path: Optional[str]) -> bool:
        # a layer a factory of another project file returns may be placed here unnamed
        return cls.may_apply(text) or (Rule.may_apply.__func__(cls, text) and may_import_factories(  # type: ignore
            text, path, cls.code, lambda other: any(True for _ in whole_words(cls._WORDS, other))
        ))

    def _report(self, at: cst.CSTNode, layers: List[Placed]) -> None:
        # through a factory default, a caller elsewhere may pass a layer without `inplace`
        torch_forms = sorted({layer.site.name for layer in layers if layer.site.form == "torch"})
        title = f"Call `torch.{torch_forms[0]}_`" if torch_forms else "Pass `inplace=True`"
        fix = self._fix(layers, title, lambda layer: (
            layer.site.kind.name in ("leaky_relu", "rrelu") and layer.negative() is False and layer.site.certain
        ))
        label = " or ".join(dict.fromkeys(layer.label for layer in layers))
        sources = ", ".join(sorted({p.description for layer in layers for u in layer.uses for p in u.producers}))
        self.report(
            at,
            f"{label} runs out of place. It follows {sources}, where in place is safe; "
            "out of place it keeps its input for backward "
            "and the next layer keeps its output, two tensors of this size; with `inplace=True` "
            "autograd keeps only the result (measured -25 % / -28 % training peak for resnet18 / "
            "resnet50 with LeakyReLU)",
            fix,
        )


class MissingInplaceNoSaving(_MissingInplace):
    """
    ## What it does
    Flags `ReLU`, `ReLU6`, `Hardtanh`, `SiLU`, `Hardswish`, `Hardsigmoid` and `Mish` (modules or
    `F.*` calls) that could run in place without risk. Off by default: it is not a training
    memory saving.

    ## Why is this bad?
    Mostly it is not. In training, in place saves nothing: ReLU keeps its output either way, and
    for the others autograd keeps a copy of the input when they run in place. Only the forward
    pass loses one temporary tensor, which can lower the peak of inference (`no_grad`) code.

    ## Example
    ```python
    import torch.nn as nn


    class Features(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU())

        def forward(self, x):
            return self.features(x)
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Features(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(nn.Conv2d(3, 64, 3), nn.ReLU(inplace=True))

        def forward(self, x):
            return self.features(x)
    ```

    ## Fix safety
    Safe: adds `inplace=True` only where the input comes from a layer that does not need its
    output in backward and nothing else reads it; outputs and gradients are bit-identical for all
    seven activations (tests/test_module_rules.py).

    ## Measured
    torchvision resnet18 / resnet50, batch 8x3x224x224, every activation ReLU or SiLU: training
    peak 205,873,832 / 732,940,968 B (ReLU) with and without `inplace=True`, to the byte; only the
    forward peak drops (-754,428 B for resnet18) (`benchmarks/memory_figures.py`,
    `benchmarks/results/memory_figures.json`, a_inplace_activations). Under `no_grad` the
    removed forward transient can lower an inference peak on some nets; this project has not
    measured how much.
    """

    code = "TML202"
    _NEEDS = activation_words(Saves.OUTPUT, Saves.CLONE)
    name = "missing-inplace-no-saving"
    summary = "ReLU-like activation out of place: in place would save no training memory"
    default_enabled = False
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("safe",)
    saves = frozenset({Saves.OUTPUT, Saves.CLONE})

    @classmethod
    def may_apply(cls, text: str) -> bool:
        return super().may_apply(text) and any(word in text for word in cls._NEEDS)

    @classmethod
    def may_apply_at(cls, text: str, path: Optional[str]) -> bool:
        # a layer a factory of another project file returns may be placed here unnamed
        return cls.may_apply(text) or (Rule.may_apply.__func__(cls, text) and may_import_factories(  # type: ignore
            text, path, cls.code, lambda other: any(word in other for word in cls._NEEDS)
        ))

    def _report(self, at: cst.CSTNode, layers: List[Placed]) -> None:
        site = layers[0].site
        assert site.kind is not None
        reason = (
            "ReLU keeps its output for backward either way"
            if site.kind.saves is Saves.OUTPUT
            else "in place, autograd keeps a copy of the input instead"
        )
        fix = self._fix(layers, "Pass `inplace=True`", lambda layer: layer.site.certain)
        label = " or ".join(dict.fromkeys(layer.label for layer in layers))
        self.report(
            at,
            "Running this activation in place would save no training memory. "
            f"{label} could run in place, but {reason} (measured 0 B of training peak); it "
            "only drops a forward temporary, which can lower an inference peak",
            fix,
        )


class UnsafeInplace(Rule):
    """
    ## What it does
    Flags in-place activations (`inplace=True` modules and `F.*` calls, `F.relu_`, `x.relu_()`)
    whose input (a) is read again later in the function (after a bare `p.sigmoid_()`
    statement, which rebinds nothing, later reads of `p` want the activated value: only another
    name still holding the tensor, such as `skip = p`, counts), (b) comes from an op that keeps its
    output for backward (sigmoid, tanh, softmax, log_softmax, exp, sqrt, rsqrt, relu, or another
    in-place activation), or (c) is `forward`'s own argument. For a module attribute every place
    that calls it is judged, and so is every call of a Sequential it starts
    (`rep.append(self.relu)` ... `self.rep = nn.Sequential(*rep)`, or a Sequential a function
    of the file builds and returns into `self.<name>`, or one of a list joined by `+` from lists
    built per arm of an `if`, `down + [submodule] + up`, tests/test_inplace_held_out14.py). A read in the other arm of an `if` or
    of `a if c else b` is not after it; a loop that reads the same tensor again each round is.
    Branches join: a tensor made and passed to the activation in one arm of an
    `if`/`elif`/`else`, `a if c else b` or `try`/`except`/`else`, then read after the branch
    (`conv9_3 = self.model9(conv9_up)` in both arms, `feature_map["conv9_up"] = conv9_up`
    after them), is read again (tests/test_inplace_branches.py). An in-place dropout whose
    probability is 0 (a literal, or a parameter defaulting to 0 that every call in the file
    leaves so: TML204's test) overwrites nothing and is not reported
    (tests/test_module_rules.py).

    ## Why is this bad?
    (a) `out = self.act(x); return out + x` adds the activated tensor to itself: outputs and
    gradients are silently wrong. (b) Backward needs the overwritten values and raises
    `RuntimeError: one of the variables needed for gradient computation has been modified by an
    inplace operation`. (c) The caller's tensor is modified behind its back (and a leaf that
    requires grad raises).

    ## Example
    ```python
    import torch.nn as nn


    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.relu = nn.ReLU(inplace=True)
            self.conv = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            out = self.relu(x)
            return self.conv(out) + x
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Residual(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.relu = nn.ReLU()
            self.conv = nn.Conv2d(c, c, 3, padding=1)

        def forward(self, x):
            out = self.relu(x)
            return self.conv(out) + x
    ```

    ## Fix safety
    The fix drops `inplace` (or the trailing underscore). Safe for (b) and (c): the forward
    result is the same and backward no longer raises; for (c) the caller's tensor is left
    alone. Unsafe for (a): the fix changes the outputs, from the silently wrong ones to the ones
    the code describes.

    ## Measured
    tests/test_module_rules.py reproduces both failures: `F.relu(torch.sigmoid(x), inplace=True)`
    raises in backward, and an in-place activation before a residual addition changes the output
    (a ResNet-style block, and an Xception-style block whose spliced in-place ReLU runs on the
    shortcut's input; CPU).
    """

    code = "TML203"
    # `inplace` is only ever known True from a literal `True`, or from an `x_` form
    needs = (("True",) + INPLACE_WORDS, activation_words() + INPLACE_WORDS)
    needs_project = True  # a layer factory of another file of the project is followed there
    project_facts = frozenset({"imports"})

    @classmethod
    def may_apply_at(cls, text: str, path: Optional[str]) -> bool:
        # a layer a factory of another project file returns may be placed here unnamed
        return cls.may_apply(text) or (
            (not cls.needs_torch or "torch" in text)
            and may_import_factories(text, path, cls.code, lambda other: Rule.may_apply.__func__(cls, other))  # type: ignore
        )
    name = "unsafe-inplace"
    summary = "In-place activation on a tensor that is reused, saved for backward, or the caller's"
    fix_availability = FixAvailability.SOMETIMES
    fix_applicability = ("safe", "unsafe")

    def visit_Module(self, node: cst.Module) -> None:
        analysis = activation_sites(self.context)
        for site in analysis.sites():
            if site.inplace is not True or never_drops(analysis.file, site):  # p = 0: nothing is overwritten
                continue
            problems = [(use, _problem(use)) for use in site.uses]
            problems = [(use, problem) for use, problem in problems if problem is not None]
            if not problems:
                continue
            edit = drop_inplace(self, site)
            fix = None
            if edit is not None:
                reused = any(use.reused for use, _ in problems)
                applicability = Applicability.UNSAFE if reused else Applicability.SAFE
                fix = FixSpec(applicability, "Run it out of place", (edit,))
            for use, problem in problems:
                self.report(use.anchor, f"in-place {site.label} {problem}", fix)


def _problem(use: Use) -> Optional[str]:
    saver = use.output_saver()
    if saver is not None:
        return (
            "breaks backward. "
            f"It overwrites the output of {saver.description}, which autograd keeps for backward: "
            "backward raises \"one of the variables needed for gradient computation has been "
            "modified by an inplace operation\""
        )
    shown = f"`{use.name}`" if use.name else "its input"
    if use.reused:
        return (
            "gives wrong results. "
            f"It overwrites {shown}, which is read again afterwards: the later code silently sees "
            "the activated values (wrong outputs and gradients)"
        )
    if use.caller_tensor is not None:
        return (
            "modifies the caller's tensor. "
            f"It overwrites `{use.caller_tensor}`, the tensor `forward` received: the caller's "
            "tensor is modified (and a leaf that requires grad raises)"
        )
    return None


class InplaceDropout(Rule):
    """
    ## What it does
    Flags `nn.Dropout(inplace=True)`, `F.dropout(..., inplace=True)` and `torch.dropout_`.

    ## Why is this bad?
    It costs memory on CUDA instead of saving it. Out of place, CUDA runs a fused dropout kernel
    that keeps a 1-byte boolean mask for backward; in place, dropout keeps a float32 mask
    (4 bytes per element). The output of either is kept by the next layer anyway. On the CPU
    both keep the float32 mask, so the difference only shows on a GPU.

    Quiet when the probability is 0 (no mask is drawn): a literal `p=0.0`, or a parameter whose
    default is 0 and that every call of its function (or class) in the file leaves at 0; for a
    class its file never builds, every construction in the files importing it (none: its default);
    through builders that pass their `**kwargs` on (`iresnet50(**kwargs)` -> `IResNet(...,
    **kwargs)`), what the calls of the builders pass, in the file or in the files importing them
    (tests/test_tml204_builder_callers.py).

    ## Example
    ```python
    import torch.nn as nn


    class Head(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.drop = nn.Dropout(0.1, inplace=True)

        def forward(self, x):
            return self.drop(self.fc(x))
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Head(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc = nn.Linear(d, d)
            self.drop = nn.Dropout(0.1)

        def forward(self, x):
            return self.drop(self.fc(x))
    ```

    ## Fix safety
    Unsafe: the fix drops `inplace`. The masks have the same distribution, but on CUDA the two
    variants run different kernels, so the same seed need not draw the same mask (on the CPU they
    are identical: tests/test_module_rules.py).

    ## Measured
    CPU estimate of CUDA (fake tensors with CUDA's dropout kernel emulated, torch 2.13.0),
    Linear-Dropout(0.5)-Linear at 1024x256 (`tests/dynamic/test_emulation.py`): out of place,
    dropout keeps a 1-byte mask per element; in place it runs the kernel that keeps 4-byte
    float noise, 3 bytes more per element (786,432 B more saved for backward here). Not yet
    measured on a GPU in this repository; the CPU equality of the two variants' outputs is
    checked in tests/test_module_rules.py.
    """

    code = "TML204"
    needs = (("Dropout", "dropout"), ("True", "dropout_"))
    needs_project = True  # a probability the files constructing the class, or calling its builders, pass
    project_facts = frozenset({"imports", "importer_texts"})
    name = "inplace-dropout"
    summary = "Dropout with `inplace=True` keeps a float mask instead of CUDA's 1-byte mask"
    fix_availability = FixAvailability.ALWAYS
    fix_applicability = ("unsafe",)

    def visit_Module(self, node: cst.Module) -> None:
        analysis = activation_sites(self.context)
        for site in analysis.sites():
            if site.name != "dropout" or site.inplace is not True or never_drops(analysis.file, site, by_default=True):
                continue
            edit = drop_inplace(self, site)
            fix = FixSpec(Applicability.UNSAFE, "Run dropout out of place", (edit,)) if edit else None
            self.report(
                site.node,
                f"in-place {site.label} keeps a float32 mask for backward. That is 4 bytes per "
                "element, "
                "where out-of-place dropout on CUDA keeps a 1-byte mask: +0.75 activation per "
                "dropout on a GPU (fake-CUDA measurement); drop `inplace=True`",
                fix,
            )

"""TML3xx: downsampling removed in front of a deep (ResNet-style) encoder.

The rule asks ``analysis/stems.py`` where a ResNet-style encoder's stem pool is dropped and
words each answer.
"""

from __future__ import annotations

import libcst as cst

from torchmemlint.analysis.stems import POOL_REPLACED, STRIDE_ONE, StemPoolDrop, dropped_stem_pools

from torchmemlint.rules.base import Rule

FACTOR_TEXT = (
    "every later activation is 4x larger (measured x2.30 saved activations for a resnet34 "
    "UNet, x3.28 resnet101, x3.44 resnet152; batch 64 at 128x128: resnet101 4.1 -> 11.8 GiB, "
    "resnet152 5.3 -> 15.9 GiB)"
)
ADVICE = (
    "keep the pool, use a stride-2 stem conv, or checkpoint the high-resolution stages; keeping the "
    "pool (or a stride-2 conv) halves the output's height and width, so a model that must return "
    "the input's resolution needs one more upsampling stage"
)


class DroppedStemPool(Rule):
    """
    ## What it does
    Flags a ResNet-style encoder (torchvision or timm `resnet*`, `resnext*`, `wide_resnet*`,
    also picked by name from a dict of such constructors or by `getattr(torchvision.models,
    name)`, or any object whose `conv1`, `bn1`, `relu`, `maxpool`, `layer1`..`layer4` are used) whose stem
    max-pool is dropped: the stem is rebuilt as `nn.Sequential(enc.conv1, enc.bn1, enc.relu)`
    and fed straight into `enc.layer1`, `enc.maxpool` is replaced by `nn.Identity()`, or
    `enc.conv1` is replaced by a stride-1 convolution. Also followed: a SENet-style stem
    rebuilt from `enc.layer0.conv1 ... relu1` without `enc.layer0.pool`, the children of a
    torchvision/timm ResNet or of a ResNet class of the same file sliced past the pool
    (`nn.Sequential(*list(resnet.children())[:3])`, then `[4:8]`), and a local Sequential put
    into another (`stem[0] = nn.Conv2d(6, 64, ...)`; `nn.Sequential(stem, body)`). A class
    counts as a ResNet when it derives, directly or through classes of the project (this file,
    another file of its package, a script's sibling file), from torchvision's or timm's
    `ResNet` or from a project class that builds `conv1`, a max-pool `maxpool` and `layer1`
    in `__init__` (`tests/test_project_rules.py`). A constructor stored on `self` and built
    later counts as what it was given (`self.base_model = {"resnet18": resnet18, ...}[name]`,
    then `self.encoder = self.base_model(**kw)` in that or another method, or in a subclass):
    a ResNet among the dict's constructors, beside the project's own encoders but beside no
    torchvision or timm model that is not one (`tests/test_downsampling_stored.py`). A model
    picked from a models package by name (`torchvision.models.__dict__[name]`,
    `vars(models)[name]`), `timm.create_model(name)` where the replacement runs only under
    `if "resnet" in name` (or `name.startswith("resnet")`), and a function handed the model that
    replaces both its `conv1` and its `maxpool` count too (`tests/test_downsampling_helpers.py`).

    ## Why is this bad?
    The stem pool halves the height and width before `layer1`. Without it every later stage
    works at twice the resolution and keeps 4x larger activations for backward, which is where
    most of the training memory of a ResNet encoder (and of the UNet decoder on top of it) goes.
    A model that fitted in 8 GB may then run out of memory; it is a real cost, not a bug.

    ## Example
    ```python
    import torch.nn as nn
    import torchvision


    class UNetEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet34()
            self.stem = nn.Sequential(self.encoder.conv1, self.encoder.bn1, self.encoder.relu)
            self.enc1 = self.encoder.layer1

        def forward(self, x):
            return self.enc1(self.stem(x))
    ```

    ## Use instead
    ```python
    import torch.nn as nn
    import torchvision


    class UNetEncoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torchvision.models.resnet34()
            self.stem = nn.Sequential(
                self.encoder.conv1, self.encoder.bn1, self.encoder.relu, self.encoder.maxpool
            )
            self.enc1 = self.encoder.layer1

        def forward(self, x):
            return self.enc1(self.stem(x))
    ```
    If the higher resolution is wanted, budget for it: a smaller batch, mixed precision, or
    `torch.utils.checkpoint` around the high-resolution stages.

    ## Fix safety
    No fix: putting the pool back changes the architecture (receptive field, output size). A
    UNet whose decoder upsamples back to the input's size then returns H/2 x W/2 instead of
    H x W: add an upsampling stage (e.g. `nn.Upsample(scale_factor=2)` before the head) to
    restore it. `torchmemlint profile` measures the variant that keeps the pool and says when
    its output shape differs; such a variant is never reported as confirmed
    (`tests/dynamic/test_profile_inputs.py`).

    ## Measured
    UNet with a torchvision-style resnet34 encoder, 4x3x128x128: saved for backward
    96,151,808 -> 220,801,280 B without the pool (x2.30); resnet101 x3.28, resnet152 x3.44; at
    batch 64 (with Adam state) 1.85 -> 3.70, 4.10 -> 11.80 and 5.26 -> 15.91 GiB
    (`benchmarks/memory_figures.py`, `benchmarks/results/memory_figures.json`, c_stem_pool).
    """

    code = "TML301"
    # what analysis/stems.py starts from: `x.layer1` / `x.children()` in a class, `x.maxpool = `, `x.conv1 = `
    needs = (("layer1", "children", "maxpool", "conv1"),)
    needs_project = True  # an encoder's base class may be defined in another file
    project_facts = frozenset({"imports"})
    name = "dropped-stem-pool"
    summary = "ResNet stem max-pool dropped before layer1: every later activation is 4x larger"

    def visit_Module(self, node: cst.Module) -> None:
        for drop in dropped_stem_pools(self.context.analysis):
            self.report(drop.node, _message(drop))


def _message(drop: StemPoolDrop) -> str:
    base = drop.base
    if drop.kind == POOL_REPLACED:
        return (
            f"`{base}.maxpool` is replaced by a no-op: every later activation is 4x larger. "
            f"Layer1 to layer4 of this ResNet-style "
            f"encoder run at twice the height and width, so {FACTOR_TEXT}; {ADVICE}"
        )
    if drop.kind == STRIDE_ONE:
        return (
            f"`{base}.conv1` has stride 1: every later activation is 4x larger. A ResNet stem "
            f"has stride 2; the stem and every stage after it run at twice the height and width, so {FACTOR_TEXT}; {ADVICE}"
        )
    stem = ", ".join(f"`{base}.{name}`" for name in drop.walked)
    return (
        f"`{base}.{drop.pool}` is dropped: every later activation is 4x larger. "
        f"The stem ({stem}) feeds `{base}.layer1` directly, so "
        f"layer1 to layer4 run at twice the height and width and {FACTOR_TEXT}; {ADVICE}"
    )

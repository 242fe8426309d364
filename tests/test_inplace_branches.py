"""TML203 where the tensor an in-place activation overwrites is made and consumed in the arms
of a branch and read after it: the value graph joins the arms (``if``/``else``,
``if``/``elif``/``else``, ``a if c else b``, ``try``/``except``/``else``), and a join counts as
a later read when the arm that ran the activation reaches it and something reads the join.
Forms: an ``nn.Sequential`` whose first layer is ``nn.ReLU(True)`` called in both arms on a
tensor returned in a dict afterwards (colorization networks), a module-list element, a
functional call. Look-alikes stay quiet: the tensor not read after the branch, rebound in
both arms before the read, an out-of-place ReLU, a read in the other arm of a ternary or an
``if``, a join the activation's arm does not reach.

The CLI runs once, as a subprocess, over every case; each case must report exactly the rows
marked ``# expect: CODE``.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI


CASES: Dict[str, str] = {
    # a colorization network: the same in-place Sequential in both arms, the input kept
    "if_else_feature_map": '''
        import torch.nn as nn


        class ColorizationNet(nn.Module):
            def __init__(self, classification=True):
                super().__init__()
                self.classification = classification
                self.model9up = nn.ConvTranspose2d(256, 128, 4, 2, 1)
                self.model2short9 = nn.Conv2d(128, 128, 3, padding=1)
                self.model9 = nn.Sequential(nn.ReLU(True), nn.Conv2d(128, 128, 3, padding=1), nn.ReLU(True))

            def forward(self, conv8_3, conv2_2):
                if self.classification:
                    conv9_up = self.model9up(conv8_3.detach()) + self.model2short9(conv2_2.detach())
                    conv9_3 = self.model9(conv9_up)  # expect: TML203
                else:
                    conv9_up = self.model9up(conv8_3) + self.model2short9(conv2_2)
                    conv9_3 = self.model9(conv9_up)  # expect: TML203
                feature_map = {}
                feature_map["conv9_up"] = conv9_up
                return conv9_3, feature_map


        class NotKept(nn.Module):
            """The same, but nothing reads ``conv9_up`` after the branch."""

            def __init__(self, classification=True):
                super().__init__()
                self.classification = classification
                self.model9up = nn.ConvTranspose2d(256, 128, 4, 2, 1)
                self.model2short9 = nn.Conv2d(128, 128, 3, padding=1)
                self.model9 = nn.Sequential(nn.ReLU(True), nn.Conv2d(128, 128, 3, padding=1))

            def forward(self, conv8_3, conv2_2):
                if self.classification:
                    conv9_up = self.model9up(conv8_3.detach()) + self.model2short9(conv2_2.detach())
                    conv9_3 = self.model9(conv9_up)
                else:
                    conv9_up = self.model9up(conv8_3) + self.model2short9(conv2_2)
                    conv9_3 = self.model9(conv9_up)
                return conv9_3


        class Rebound(nn.Module):
            """``up`` is bound again in both arms before the read: the read sees another tensor."""

            def __init__(self):
                super().__init__()
                self.up = nn.Conv2d(8, 8, 3, padding=1)
                self.proj = nn.Conv2d(8, 8, 1)
                self.block = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1))

            def forward(self, x, flag: bool):
                if flag:
                    up = self.up(x)
                    out = self.block(up)
                    up = self.proj(out)
                else:
                    up = self.up(x * 2)
                    out = self.block(up)
                    up = self.proj(out) * 2
                return out, up


        class OutOfPlace(nn.Module):
            """The same form as ``ColorizationNet`` with an out-of-place ReLU."""

            def __init__(self, classification=True):
                super().__init__()
                self.classification = classification
                self.model9up = nn.ConvTranspose2d(256, 128, 4, 2, 1)
                self.model9 = nn.Sequential(nn.ReLU(), nn.Conv2d(128, 128, 3, padding=1))

            def forward(self, conv8_3):
                if self.classification:
                    conv9_up = self.model9up(conv8_3.detach())
                    conv9_3 = self.model9(conv9_up)
                else:
                    conv9_up = self.model9up(conv8_3)
                    conv9_3 = self.model9(conv9_up)
                return conv9_3, {"conv9_up": conv9_up}
    ''',
    "elif_chain": '''
        import torch.nn as nn
        import torch.nn.functional as F


        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Conv2d(8, 8, 3, padding=1)
                self.b = nn.Conv2d(8, 8, 1)
                self.act = nn.ReLU(inplace=True)

            def forward(self, x, mode: str):
                if mode == "a":
                    h = self.a(x)
                    y = self.act(h)  # expect: TML203
                elif mode == "b":
                    h = self.b(x)
                    y = F.relu(h, inplace=True)  # expect: TML203
                else:
                    h = x * 2
                    y = h
                return y, h
    ''',
    "ternary": '''
        import torch
        import torch.nn.functional as F


        def gated(x, use_act: bool):
            h = x * 2
            y = F.relu(h, inplace=True) if use_act else h  # read in the other arm only
            return y


        def gated_kept(x, use_act: bool):
            h = x * 2
            y = F.relu(h, inplace=True) if use_act else torch.zeros_like(h)  # expect: TML203
            return y + h


        def optional(x, flag: bool):
            h = x * 2
            if flag:
                h = F.relu(h, inplace=True)  # the join after it holds the result or `h` untouched
            return h
    ''',
    "try_else": '''
        import torch.nn as nn


        class Fallback(nn.Module):
            def __init__(self):
                super().__init__()
                self.fast = nn.Conv2d(8, 8, 3, padding=1)
                self.slow = nn.Conv2d(8, 8, 3, padding=1)
                self.block = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 1))

            def forward(self, x):
                try:
                    h = self.fast(x)
                except RuntimeError:
                    h = self.slow(x)
                    out = self.block(h)  # expect: TML203
                else:
                    out = self.block(h)  # expect: TML203
                return out, h


        class FallbackQuiet(nn.Module):
            def __init__(self):
                super().__init__()
                self.fast = nn.Conv2d(8, 8, 3, padding=1)
                self.slow = nn.Conv2d(8, 8, 3, padding=1)
                self.block = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 1))

            def forward(self, x):
                try:
                    h = self.fast(x)
                except RuntimeError:
                    h = self.slow(x)
                    out = self.block(h)
                else:
                    out = self.block(h)
                return out
    ''',
    # the activation runs before the branch, or in a `try` body that a handler may follow
    "before_the_arms": '''
        import torch
        import torch.nn as nn
        import torch.nn.functional as F


        def before(x, reset: bool):
            h = x * 2
            y = F.relu(h, inplace=True)  # expect: TML203
            if reset:
                h = torch.zeros(1)
            return y, h


        def before_unread(x, reset: bool):
            h = x * 2
            y = F.relu(h, inplace=True)
            if reset:
                h = torch.zeros(1)
            return y


        class Handler(nn.Module):
            def __init__(self):
                super().__init__()
                self.block = nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 1))
                self.proj = nn.Conv2d(8, 8, 1)

            def forward(self, x):
                h = x * 2
                out = None
                try:
                    out = self.block(h)  # expect: TML203
                    h = self.proj(out)
                except RuntimeError:
                    pass
                return out, h
    ''',
    "module_list_element": '''
        import torch.nn as nn


        class Decoder(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Conv2d(8, 8, 3, padding=1)
                self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
                self.blocks = nn.ModuleList(
                    [nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1)) for _ in range(2)]
                )

            def forward(self, x, upsample: bool):
                if upsample:
                    h = self.up(x)
                    out = self.blocks[0](h)  # expect: TML203
                else:
                    h = self.down(x)
                    out = self.blocks[1](h)  # expect: TML203
                return out + h


        class DecoderQuiet(nn.Module):
            def __init__(self):
                super().__init__()
                self.up = nn.Conv2d(8, 8, 3, padding=1)
                self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
                self.blocks = nn.ModuleList(
                    [nn.Sequential(nn.ReLU(inplace=True), nn.Conv2d(8, 8, 3, padding=1)) for _ in range(2)]
                )

            def forward(self, x, upsample: bool):
                if upsample:
                    h = self.up(x)
                    out = self.blocks[0](h)
                else:
                    h = self.down(x)
                    out = self.blocks[1](h)
                return out
    ''',
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_branches"), CASES, "TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(found, name):
    assert set(found[name]) == marked(CASES[name])

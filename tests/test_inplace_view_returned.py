"""TML201 reads a project module whose ``forward`` returns a view of a layer's output, also
through a view method whose axes the value graph does not read (``.movedim(-1, self.dim)``):
deepSTRF's ``CausalLayerNorm``, ``return self.ln(x.movedim(self.dim, -1)).movedim(-1,
self.dim)``, a LayerNorm over a non-trailing axis, placed before ``nn.LeakyReLU`` in a
Sequential, here as in the project (imported by ``from``, and through a module alias,
``layers.CausalLayerNorm``). In place, the activation writes into the LayerNorm output, which
LayerNorm's backward does not read: measured below (one tensor less kept, outputs and
gradients equal). A view whose base something else reads stays unknown.
"""

from __future__ import annotations

import pytest
import torch

from marked_cases import project_findings

LAYERS = '''import torch.nn as nn


class CausalLayerNorm(nn.Module):
    def __init__(self, normalized_shape, dim=1):
        super().__init__()
        self.dim = dim
        self.ln = nn.LayerNorm(normalized_shape)

    def forward(self, x):
        return self.ln(x.movedim(self.dim, -1)).movedim(-1, self.dim)


class KeptNorm(nn.Module):
    def __init__(self, normalized_shape, dim=1):
        super().__init__()
        self.dim = dim
        self.ln = nn.LayerNorm(normalized_shape)
        self.kept = None

    def forward(self, x):
        y = self.ln(x.movedim(self.dim, -1))
        self.kept = y
        return y.movedim(-1, self.dim)
'''

ZOO = '''import torch.nn as nn

import pkg.layers as layers
from pkg.layers import CausalLayerNorm, KeptNorm


class ConvNet(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.core = nn.Sequential(
            nn.Conv2d(c, c, 3),
            layers.CausalLayerNorm(c, dim=1),
            nn.LeakyReLU(0.1),
            nn.Conv2d(c, c, 3),
            CausalLayerNorm(c, dim=1),
            nn.LeakyReLU(0.1),
            nn.Conv2d(c, c, 3),
            KeptNorm(c, dim=1),
            nn.LeakyReLU(0.1),
            nn.Conv2d(c, c, 3),
        )

    def forward(self, x):
        return self.core(x)
'''


@pytest.mark.slow
def test_a_module_returning_a_view_of_its_norm_is_read_across_files(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    (package / "layers.py").write_text(LAYERS, encoding="utf-8")
    (package / "zoo.py").write_text(ZOO, encoding="utf-8")
    assert project_findings(tmp_path, "TML201") == {("zoo.py", 13), ("zoo.py", 16)}


class _CausalLayerNorm(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.ln = torch.nn.LayerNorm(c)

    def forward(self, x):
        return self.ln(x.movedim(1, -1)).movedim(-1, 1)


def _net(inplace: bool) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Conv2d(4, 8, 3), _CausalLayerNorm(8), torch.nn.LeakyReLU(0.1, inplace=inplace), torch.nn.Conv2d(8, 4, 3),
    )


def test_in_place_after_a_returned_view_keeps_one_tensor_less_and_changes_nothing():
    x = torch.randn(2, 4, 12, 12, generator=torch.Generator().manual_seed(1), requires_grad=True)
    kept, results = [], []
    for inplace in (False, True):
        stored = {}

        def pack(tensor):
            stored[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
            return tensor

        net = _net(inplace)
        x.grad = None
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            y = net(x)
        y.square().sum().backward()
        kept.append(sum(stored.values()))
        results.append((y.detach(), x.grad.clone(), net[0].weight.grad))
    assert kept[0] - kept[1] == 2 * 8 * 10 * 10 * 4  # the LayerNorm output, float32
    for a, b in zip(*results):
        assert torch.equal(a, b)

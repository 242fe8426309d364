"""TML201 looks through a dropout before the activation: ``Linear, LayerNorm, Dropout(p),
LeakyReLU()`` (bernn's encoders), ``h = self.drop(self.fc(x)); F.leaky_relu(h)``. A dropout
that makes a new tensor keeps only its mask, so in training what it returns is a fresh tensor
no backward reads; in evaluation, or with ``p=0``, it returns its input itself. Either way
the activation may run in place when what made the dropout's input allows it and nothing else
reads that input: out of place it keeps the dropout's output besides its own result (measured
below: saved-tensor bytes, and outputs and gradients equal in place, in training and in
evaluation).

Look-alikes stay quiet: a ReLU before the dropout (in evaluation the dropout hands on the
output ReLU keeps), a dropout whose input is read again, an in-place dropout, a dropout first
in a Sequential (what it is given is not known there).
"""

from __future__ import annotations

from typing import Dict

import pytest
import torch

from marked_cases import Found, lint_cases, marked

CASES: Dict[str, str] = {
    "sequential_after_norm_and_dropout": '''
        import torch.nn as nn

        class Encoder2(nn.Module):
            def __init__(self, in_shape: int, layer1: int, layer2: int, dropout: float) -> None:
                super(Encoder2, self).__init__()
                self.linear1 = nn.Sequential(
                    nn.Linear(in_shape, layer1),
                    nn.LayerNorm(layer1),
                    nn.Dropout(dropout),
                    nn.LeakyReLU(),  # expect: TML201
                )
                self.linear2 = nn.Sequential(nn.Linear(layer1, layer2), nn.LayerNorm(layer2))

            def forward(self, x):
                return self.linear2(self.linear1(x))
    ''',
    "list_built_in_a_loop": '''
        import torch.nn as nn

        class Encoder3(nn.Module):
            def __init__(self, sizes, dropout=0.2):
                super().__init__()
                blocks = []
                for a, b in zip(sizes[:-1], sizes[1:]):
                    blocks.append(nn.Sequential(
                        nn.Linear(a, b), nn.BatchNorm1d(b), nn.Dropout(dropout),
                        nn.ELU(),  # expect: TML201
                    ))
                self.blocks = nn.ModuleList(blocks)
                self.head = nn.Linear(sizes[-1], 1)

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return self.head(x)
    ''',
    "forward_statements": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class Tower(nn.Module):
            def __init__(self, n, h, p=0.2):
                super().__init__()
                self.fc = nn.Linear(n, h)
                self.drop = nn.Dropout(p)
                self.out = nn.Linear(h, h)

            def forward(self, x):
                h = self.drop(self.fc(x))
                h = F.leaky_relu(h, 0.2)  # expect: TML201
                return self.out(h)

        class Functional(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.fc = nn.Linear(n, h)
                self.out = nn.Linear(h, h)

            def forward(self, x):
                h = F.dropout(self.fc(x), 0.1, self.training)
                return self.out(F.elu(h))  # expect: TML201

        class EndsInDropout(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.block = nn.Sequential(nn.Linear(n, h), nn.Dropout(0.1))
                self.out = nn.Linear(h, h)

            def forward(self, x):
                return self.out(F.elu(self.block(x)))  # expect: TML201
    ''',
    "look_alikes": '''
        import torch.nn as nn
        import torch.nn.functional as F

        class AfterRelu(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.fc = nn.Linear(n, h)
                self.out = nn.Linear(h, h)

            def forward(self, x):
                h = F.dropout(F.relu(self.fc(x)), 0.1, self.training)
                return self.out(F.elu(h))

        class InputReadAgain(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.fc = nn.Linear(n, h)
                self.out = nn.Linear(h, h)

            def forward(self, x):
                z = self.fc(x)
                h = F.dropout(z, 0.1, self.training)
                return self.out(F.elu(h)) + z

        class ReluInSequence(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(n, h), nn.ReLU(), nn.Dropout(0.1), nn.ELU(), nn.Linear(h, h))

            def forward(self, x):
                return self.seq(x)

        class FirstInSequence(nn.Module):
            def __init__(self, h):
                super().__init__()
                self.seq = nn.Sequential(nn.Dropout(0.1), nn.ELU(), nn.Linear(h, h))

            def forward(self, x):
                return self.seq(x)
    ''',
    "in_place_dropout": '''
        import torch.nn as nn

        class Seq(nn.Module):
            def __init__(self, n, h):
                super().__init__()
                self.seq = nn.Sequential(nn.Linear(n, h), nn.Dropout(0.1, inplace=True), nn.ELU(), nn.Linear(h, h))

            def forward(self, x):
                return self.seq(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_after_dropout"), CASES, "TML201")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


def _encoder(inplace: bool, p: float) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.LayerNorm(32), torch.nn.Dropout(p),
        torch.nn.LeakyReLU(inplace=inplace), torch.nn.Linear(32, 8),
    )


def _saved_bytes(model: torch.nn.Module, x: torch.Tensor) -> int:
    stored = {}

    def pack(tensor):
        stored[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        torch.manual_seed(1)
        model(x)
    return sum(stored.values())


def test_in_place_after_a_dropout_keeps_one_tensor_less():
    x = torch.randn(64, 16)
    out_of_place, in_place = _saved_bytes(_encoder(False, 0.3).train(), x), _saved_bytes(_encoder(True, 0.3).train(), x)
    assert out_of_place - in_place == 64 * 32 * 4  # the dropout's output, float32


@pytest.mark.parametrize("mode, p", [("train", 0.3), ("train", 0.0), ("eval", 0.3)])
def test_in_place_after_a_dropout_changes_no_output_or_gradient(mode, p):
    outputs = []
    for inplace in (False, True):
        model = _encoder(inplace, p)
        model.train(mode == "train")
        x = torch.randn(64, 16, generator=torch.Generator().manual_seed(2), requires_grad=True)
        torch.manual_seed(3)
        y = model(x)
        y.square().sum().backward()
        outputs.append((y.detach(), x.grad, model[0].weight.grad))
    for a, b in zip(*outputs):
        assert torch.equal(a, b)


def test_in_place_saves_nothing_where_only_a_slice_of_the_result_is_added():
    """``acc += F.leaky_relu(h)[:n]``: the slice's addition keeps nothing, so in place the
    activation keeps its result instead of its input: as many bytes (TML201 stays quiet)."""
    kept = []
    for inplace in (False, True):
        stored = {}

        def pack(tensor):
            stored[tensor.untyped_storage().data_ptr()] = tensor.untyped_storage().nbytes()
            return tensor

        torch.manual_seed(0)
        linear = torch.nn.Linear(16, 32)
        acc = torch.zeros(48, 32)
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            acc += torch.nn.functional.leaky_relu(linear(torch.randn(64, 16)), inplace=inplace)[:48]
        kept.append(sum(stored.values()))
    assert kept[0] == kept[1]

"""TML501 on a module class's batched inference methods (densityflow2's ``code()``, a loop over
a ``DataLoader`` with autograd on, each batch's ``self._code(X_batch)`` only converted to numpy):
the private method runs the class's submodules, also when it first calls another method of the
class that leaves autograd alone (``self._get_basal_embedding(xs)``), and when what it returns is
computed from a submodule's output (``dist.Dirichlet(alpha.exp()).mean``, ``torch.matmul(ns,
cb)`` after an ``if``/``else``); the converter of another file hands back its input only where
that input is no tensor (``if not isinstance(tensor, torch.Tensor): ... return tensor``).

Look-alikes stay quiet: a method whose helper runs under ``no_grad`` (what it returns may carry
no graph), a method returning only the length of an output, and a converter that hands back a
tensor input as it is (the output may leave the function still attached)."""

from __future__ import annotations

from marked_cases import project_findings

UTILS = """import numpy as np
import torch


def tensor_to_numpy(tensor):
    if not isinstance(tensor, torch.Tensor):
        if isinstance(tensor, np.ndarray):
            return tensor
        raise ValueError("Input must be a torch Tensor.")
    tensor = tensor.detach()
    if tensor.is_cuda:
        tensor = tensor.cpu()
    numpy_array = tensor.numpy()
    return numpy_array


def maybe_numpy(value):
    if isinstance(value, torch.Tensor):
        return value
    return np.asarray(value)
"""

MODEL = """import numpy as np
import pyro.distributions as dist
import torch
import torch.nn as nn
from torch.utils.data import DataLoader

from .utils import maybe_numpy, tensor_to_numpy


class DensityFlow(nn.Module):
    def __init__(self, d, k):
        super().__init__()
        self.encoder_zn = nn.Linear(d, d)
        self.encoder_n = nn.Linear(d, k)
        self.codebook = nn.Parameter(torch.randn(k, d))

    def _get_basal_embedding(self, xs):
        return self.encoder_zn(xs)

    def _prepare(self, xs):
        with torch.no_grad():
            return xs * 2

    def _code(self, xs):
        zns = self._get_basal_embedding(xs)
        alpha = self.encoder_n(zns)
        return alpha

    def _soft_assignments(self, xs):
        alpha = self._code(xs)
        alpha = dist.Dirichlet(alpha.exp()).mean
        return alpha

    def _codebook_map(self, xs, soft_assign):
        if soft_assign:
            ns = self._soft_assignments(xs)
        else:
            ns = self._code(xs)
        zs = torch.matmul(ns, self.codebook)
        return zs

    def _prepared_code(self, xs):
        zns = self._prepare(xs)
        return self.encoder_n(zns)

    def _width(self, xs):
        return len(self.encoder_n(xs))

    def code(self, xs, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        A = []
        for X_batch, _ in dataloader:
            X_batch = X_batch.to(self.get_device())
            a = self._code(X_batch)  # expect
            A.append(tensor_to_numpy(a))
        A = np.concatenate(A)
        return A

    def soft_assignments(self, xs, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        A = []
        for X_batch, _ in dataloader:
            a = self._soft_assignments(X_batch)  # expect
            A.append(tensor_to_numpy(a))
        return np.concatenate(A)

    def codebook_map(self, xs, soft_assign=True, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        Z = []
        for X_batch, _ in dataloader:
            zns = self._codebook_map(X_batch, soft_assign)  # expect
            Z.append(tensor_to_numpy(zns))
        return np.concatenate(Z)

    def prepared_code(self, xs, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        A = []
        for X_batch, _ in dataloader:
            A.append(tensor_to_numpy(self._prepared_code(X_batch)))
        return np.concatenate(A)

    def widths(self, xs, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        return [self._width(X_batch) for X_batch, _ in dataloader]

    def raw_code(self, xs, batch_size=1024):
        dataloader = DataLoader(xs, batch_size=batch_size, shuffle=False)
        A = []
        for X_batch, _ in dataloader:
            A.append(maybe_numpy(self._code(X_batch)))
        return A
"""


def test_batched_inference_through_the_classs_own_methods(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "utils.py").write_text(UTILS)
    (package / "model.py").write_text(MODEL)
    expected = {("model.py", n) for n, line in enumerate(MODEL.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 3
    assert project_findings(tmp_path, "TML501") == expected

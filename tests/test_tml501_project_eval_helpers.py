"""TML501: a function of another file of the project that builds a network, loads its weights,
calls ``.eval()`` on it and returns it (mag_net's ``net.model(material, waveform)``) hands back a
module in evaluation mode, as a helper of the file itself does: the caller's loop running it with
autograd on is reported. Look-alikes: a helper of another file that returns the module in
training mode, and one that switches it back to training before returning it."""

from __future__ import annotations

from marked_cases import project_findings, write_package

NET = """import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)


def model(material, device="cpu"):
    state_dict = torch.load(material)
    network = Net().double().to(device)
    network.load_state_dict(state_dict, strict=True)
    network.eval()
    return network


def trainable(material):
    network = Net()
    network.load_state_dict(torch.load(material))
    return network


def switched_back(material):
    network = Net()
    network.eval()
    network.train()
    return network
"""

CORE = """import numpy as np
import torch

from .net import model, switched_back, trainable


def core_losses(freqs, flux, material):
    nn = model(material=material)
    out = []
    for f in freqs:
        out.append(nn(torch.from_numpy(np.array([f, flux]))).item())
    return out


def trained_losses(freqs, flux, material):
    nn = trainable(material)
    out = []
    for f in freqs:
        out.append(nn(torch.from_numpy(np.array([f, flux]))).item())
    return out


def switched_losses(freqs, flux, material):
    nn = switched_back(material)
    out = []
    for f in freqs:
        out.append(nn(torch.from_numpy(np.array([f, flux]))).item())
    return out
"""


def test_eval_helper_of_another_file(tmp_path):
    write_package(tmp_path, {"magnet/net.py": NET, "magnet/core.py": CORE})
    found = project_findings(tmp_path, "TML501")
    assert found == {("core.py", 11)}

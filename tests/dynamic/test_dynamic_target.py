from __future__ import annotations

import sys

import pytest
from torch import nn

from torchmemlint.dynamic.errors import DynamicError
from torchmemlint.dynamic.target import load_target

pytestmark = pytest.mark.slow  # torch training steps (the dynamic mode)

MODEL_SOURCE = """
import torch.nn as nn

class Net(nn.Module):
    def __init__(self, width=4):
        super().__init__()
        self.fc = nn.Linear(width, 2)

def build(width):
    return Net(width)

def broken():
    raise ValueError("bad config\\nsecond line")

not_a_model = 3
"""


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.py"
    path.write_text(MODEL_SOURCE)
    return path


def test_loads_class_and_factory_from_file_with_args(model_file):
    before = set(sys.modules)
    net = load_target("%s:Net" % model_file, {"width": 6})
    assert isinstance(net, nn.Module) and net.fc.in_features == 6
    assert load_target("%s:build" % model_file, [5]).fc.in_features == 5
    assert "model" not in set(sys.modules) - before


def test_loads_dotted_module_target():
    seq = load_target("torch.nn:Sequential")
    assert isinstance(seq, nn.Sequential)


@pytest.mark.parametrize(
    "spec, message",
    [
        ("{file}:Missing", "target not found"),
        ("{dir}/nope.py:Net", "target not found: no file"),
        ("no_such_pkg_xyz.models:Net", "target not found: no module named"),
        ("{file}:broken", "constructing .* failed: ValueError: bad config$"),
        ("{file}:not_a_model", "not a module class or factory"),
        ("{file}", "must look like"),
    ],
)
def test_errors_are_one_line_dynamic_errors(model_file, spec, message):
    spec = spec.format(file=model_file, dir=model_file.parent)
    with pytest.raises(DynamicError, match=message) as info:
        load_target(spec)
    assert "\n" not in str(info.value)

"""TML201 follows ``inplace`` through a factory's own ``**kwargs``: sppppgnet's
``get_activation(name, **kwargs)`` returns ``nn.LeakyReLU(**kwargs)`` for its default
``"leaky"``, and ``ResConvBlock`` builds ``self.activation = get_activation(activation)``
passing no ``inplace``: the layer runs out of place after a BatchNorm, as ``nn.LeakyReLU()``
written there would (``placing.forwarded_switch``, ``forwarded_inplace``). The finding offers no
edit: another arm takes the same keywords and no ``inplace`` (``nn.GELU(**kwargs)``).

Look-alikes stay quiet: a call passing ``inplace=True`` through the keywords, and one spreading
options of its own (``**options``: not known).

The CLI runs as a subprocess; each case must report exactly the rows marked ``# expect: CODE``,
none with a fix.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked

pytestmark = pytest.mark.slow  # starts the CLI

FACTORY = """import torch
from torch import nn


def get_activation(name: str, **kwargs):
    \"\"\"Return an activation function from its name.\"\"\"
    if name == 'relu':
        return nn.ReLU(**kwargs)
    elif name == 'leaky':
        return nn.LeakyReLU(**kwargs)
    elif name == 'gelu':
        return nn.GELU(**kwargs)
    elif name == 'linear':
        return nn.Identity()
    else:
        raise ValueError(f'{{name=}} is unsupported.')


class ResConvBlock(nn.Module):
    def __init__(self, channels, activation="leaky", options=None):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.norm1 = nn.BatchNorm1d(channels)
        self.conv2 = nn.Conv1d(channels, channels, 3, padding=1)
        self.activation = get_activation(activation{extra}){mark}

    def forward(self, x):
        out = self.activation(self.norm1(self.conv1(x)))
        return self.conv2(out)
"""

CASES = {
    "keywords_left_to_the_layer": FACTORY.format(extra="", mark="  # expect: TML201"),
    "inplace_passed_through": FACTORY.format(extra=", inplace=True", mark=""),
    "options_of_its_own": FACTORY.format(extra=", **(options or {})", mark=""),
}


@pytest.fixture(scope="module")
def found(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("forwarded_kwargs"), CASES, "TML201")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows_without_a_fix(found, name):
    assert set(found[name]) == marked(CASES[name])
    assert all(fix is None for fix in found[name].values())


NORM_FACTORY = '''
import torch
from torch import nn


def get_norm(name="batch", *args, **kwargs):
    if name == "batch":
        return nn.BatchNorm1d(*args, **kwargs)
    elif name is None:
        return nn.Identity()
    raise ValueError(name)


class Block(nn.Module):
    def __init__(self, channels, norm="batch"):
        super().__init__()
        self.conv1 = nn.Conv1d(channels, channels, 3, padding=1)
        self.norm1 = get_norm(norm, channels)
        self.conv2 = nn.Conv1d(channels, channels, 3, padding=1)
        self.act = nn.LeakyReLU()

    def forward(self, x):
        return self.conv2(self.act(self.norm1(self.conv1(x))))
'''


def test_a_producer_described_with_code_spans_keeps_them_whole():
    """The message sets ```get_norm``, which returns ... or ``nn.Identity``` whole inside the
    attribute's parentheses (it once lost its first and last backtick)."""
    from marked_cases import lint_in_process  # (in process: the message is what is read)
    from torchmemlint.config import Settings
    from torchmemlint.engine import lint_source

    assert set(lint_in_process(NORM_FACTORY, ["TML201"])) == {(20, "TML201")}
    message = lint_source(NORM_FACTORY, "case.py", Settings(select=("TML201",)))[0].message
    assert "`self.norm1` (`get_norm`, which returns nn.BatchNorm1d or `nn.Identity`)" in message
    assert message.count("`") % 2 == 0

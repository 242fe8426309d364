"""TML201 on an activation a helper returns out of a table keyed by a name: the form real code
uses most to choose an activation by configuration (insurance-dependent-fs' ``_activation``,
allin1's ``get_activation_function``, telekinesis' ``_resolve_activation``)::

    def _activation(name):
        mapping = {"elu": nn.ELU(), "relu": nn.ReLU(), "tanh": nn.Tanh()}
        if name not in mapping:
            raise ValueError(name)
        return mapping[name]

Each entry is a layer the helper returns when the key is its label
(``returned_locals.table_entry``): judged where each call puts it, only at calls whose key may
be that label (a literal, a parameter's default and what the constructions pass, a config
dataclass field's default: ``factory_arms``). Also ``return {...}[name]`` and
``mapping.get(name)``, and a helper defined in another file of the project
(``from .acts import get_act``), whose arms are now read at each call as well: an ``if``/``elif``
factory of another file called with ``"relu"`` does not build its ``nn.ELU()`` there; a key read
from a config class of another file (``cfg.act_conv``, ``cfg: Config`` imported from
``.config``) is that class's field default (allin1's ``act_conv='elu'``, ``act_transformer='gelu'``).

Quiet: a key that picks another entry (a literal, a default, a config field default; also
through ``self._activation = activation`` and a case fold into a local of its own,
``activation_lower = activation.lower()``, cph-imgclassification's ``_get_activation``), a table
the helper does not return an item of (it returns the whole table, or items by two different
keys), and an entry whose call is followed by a dropout that drops.
"""

from __future__ import annotations

from typing import Dict

import pytest

from marked_cases import Found, lint_cases, marked, project_findings

pytestmark = pytest.mark.slow  # starts the CLI

HELPER = '''
        from dataclasses import dataclass

        import torch.nn as nn


        def _activation(name: str) -> nn.Module:
            mapping = {"elu": nn.ELU(), "relu": nn.ReLU(), "lrelu": nn.LeakyReLU(0.1)}
            if name not in mapping:
                raise ValueError(name)
            return mapping[name]
'''

CASES: Dict[str, str] = {
    "literal_keys": HELPER + '''

        class Trunk(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(
                    nn.Linear(8, 16), nn.BatchNorm1d(16), _activation("elu"),  # expect: TML201
                    nn.Linear(16, 16), _activation("relu"),
                    nn.Linear(16, 4),
                )

            def forward(self, x):
                return self.net(x)
    ''',
    "default_and_construction": HELPER + '''

        class Block(nn.Module):
            def __init__(self, dim, activation="relu"):
                super().__init__()
                self.fc = nn.Linear(dim, dim)
                self.act = _activation(activation)  # expect: TML201
                self.out = nn.Linear(dim, dim)

            def forward(self, x):
                return self.out(self.act(self.fc(x)))


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = Block(8)
                self.b = Block(8, activation="lrelu")

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "default_picks_another": HELPER + '''

        class Block(nn.Module):
            def __init__(self, dim, activation="relu"):
                super().__init__()
                self.fc = nn.Linear(dim, dim)
                self.act = _activation(activation)
                self.out = nn.Linear(dim, dim)

            def forward(self, x):
                return self.out(self.act(self.fc(x)))
    ''',
    "config_fields": HELPER + '''

        @dataclass
        class Config:
            width: int = 8
            act_conv: str = "elu"
            act_head: str = "relu"


        class Embed(nn.Module):
            def __init__(self, cfg: Config):
                super().__init__()
                self.conv = nn.Conv1d(cfg.width, cfg.width, 3)
                self.act = _activation(cfg.act_conv)  # expect: TML201
                self.head = nn.Linear(cfg.width, cfg.width)
                self.head_act = _activation(cfg.act_head)
                self.out = nn.Linear(cfg.width, 2)

            def forward(self, x):
                x = self.act(self.conv(x))
                return self.out(self.head_act(self.head(x.transpose(1, 2))))
    ''',
    "inline_and_get": '''
        import torch.nn as nn


        def pick(name):
            return {"elu": nn.ELU(), "relu": nn.ReLU()}[name]


        def pick_or_identity(name):
            acts = {"celu": nn.CELU(), "relu": nn.ReLU()}
            return acts.get(name, nn.Identity())


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Linear(4, 4), pick("elu"), nn.Linear(4, 4))  # expect: TML201
                self.b = nn.Sequential(nn.Linear(4, 4), pick_or_identity("celu"), nn.Linear(4, 4))  # expect: TML201
                self.c = nn.Sequential(nn.Linear(4, 4), pick("relu"), nn.Linear(4, 4))

            def forward(self, x):
                return self.c(self.b(self.a(x)))
    ''',
    "not_an_item_returned": '''
        import torch.nn as nn


        def all_acts():
            table = {"elu": nn.ELU(), "relu": nn.ReLU()}
            return table


        def two_keys(first, second, pick_first):
            table = {"elu": nn.ELU(), "relu": nn.ReLU()}
            if pick_first:
                return table[first]
            return table[second]


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Sequential(nn.Linear(4, 4), all_acts()["elu"], nn.Linear(4, 4))
                self.b = nn.Sequential(nn.Linear(4, 4), two_keys("relu", "elu", True), nn.Linear(4, 4))

            def forward(self, x):
                return self.b(self.a(x))
    ''',
    "held_attribute_and_folded_key": '''
        import torch.nn as nn


        class ModelFactory(nn.Module):
            def __init__(self, hidden, activation: str = "relu"):
                super().__init__()
                self._activation = activation
                self._build(hidden)

            def _build(self, hidden):
                act = self._get_activation(self._activation)
                self.fc = nn.Sequential(nn.Linear(hidden, hidden), nn.BatchNorm1d(hidden), act, nn.Linear(hidden, 2))

            def _get_activation(self, activation: str) -> nn.Module:
                activation_map = {"relu": nn.ReLU(), "leaky_relu": nn.LeakyReLU(), "elu": nn.ELU()}
                activation_lower = activation.lower()
                if activation_lower not in activation_map:
                    raise ValueError(activation)
                return activation_map[activation_lower]

            def forward(self, x):
                return self.fc(x)


        class Elu(nn.Module):
            def __init__(self, hidden, activation: str = "relu"):
                super().__init__()
                self._activation = activation
                act = self._activation_of(self._activation)  # expect: TML201
                self.fc = nn.Sequential(nn.Linear(hidden, hidden), act, nn.Linear(hidden, 2))

            def _activation_of(self, activation: str) -> nn.Module:
                activation_map = {"relu": nn.ReLU(), "elu": nn.ELU()}
                activation_lower = activation.lower()
                return activation_map[activation_lower]

            def forward(self, x):
                return self.fc(x)


        model = Elu(8, activation="ELU")
    ''',
    "dropout_after": HELPER + '''

        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(8, 16), _activation("elu"), nn.Dropout(0.3), nn.Linear(16, 4))

            def forward(self, x):
                return self.net(x)
    ''',
}


@pytest.fixture(scope="module")
def findings(tmp_path_factory) -> Dict[str, Found]:
    return lint_cases(tmp_path_factory.mktemp("inplace_returned_tables"), CASES, "TML201,TML203")


@pytest.mark.parametrize("name", sorted(CASES))
def test_reports_exactly_the_marked_rows(findings, name):
    assert set(findings[name]) == marked(CASES[name])


ACTS = """import torch.nn as nn


def get_act(name):
    if name == "relu":
        return nn.ReLU()
    elif name == "elu":
        return nn.ELU()
    raise ValueError(name)


def table_act(name):
    mapping = {"relu": nn.ReLU(), "lrelu": nn.LeakyReLU(0.2)}
    if name not in mapping:
        raise ValueError(name)
    return mapping[name]
"""

CONFIG = """from dataclasses import dataclass


@dataclass
class Config:
    width: int = 4
    act_conv: str = "lrelu"
    act_transformer: str = "relu"
"""

MODEL = """import torch.nn as nn
from .acts import get_act, table_act
from .config import Config


class M(nn.Module):
    def __init__(self, act="relu", head="relu"):
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(3, 4), get_act("relu"),
            nn.Linear(4, 4), get_act("elu"),  # expect
            nn.Linear(4, 4), get_act(act),  # expect
            nn.Linear(4, 4), get_act(head),
            nn.Linear(4, 4), table_act("lrelu"),  # expect
            nn.Linear(4, 4), table_act("relu"),
            nn.Linear(4, 4),
        )

    def forward(self, x):
        return self.net(x)


model = M(act="elu")


class FromConfig(nn.Module):
    def __init__(self, cfg: Config):
        super().__init__()
        self.conv = nn.Linear(cfg.width, cfg.width)
        self.act = table_act(cfg.act_conv)  # expect
        self.dense = nn.Linear(cfg.width, cfg.width)
        self.dense_act = table_act(cfg.act_transformer)
        self.out = nn.Linear(cfg.width, 2)

    def forward(self, x):
        return self.out(self.dense_act(self.dense(self.act(self.conv(x)))))
"""


def test_helpers_of_another_file_are_read_at_each_call(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "acts.py").write_text(ACTS)
    (package / "config.py").write_text(CONFIG)
    (package / "model.py").write_text(MODEL)
    expected = {("model.py", n) for n, line in enumerate(MODEL.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 4
    assert project_findings(tmp_path, "TML201") == expected


NAMESPACE_CONFIG = """from dataclasses import dataclass


@dataclass
class MLPConfig:
    hidden: int = 8
    activation: str = "elu"


@dataclass
class HeadConfig:
    activation: str = "relu"
"""

NAMESPACE_MODELS = """import torch.nn as nn

from telekinesis.rlbotics.config import HeadConfig, MLPConfig


def _resolve_activation(act_name):
    activations = {"relu": nn.ReLU(), "elu": nn.ELU()}
    return activations[act_name]


class MLP(nn.Module):
    def __init__(self, width, activation="relu"):
        super().__init__()
        act = _resolve_activation(activation)  # expect
        self.net = nn.Sequential(nn.Linear(width, width), act, nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)


class Head(nn.Module):
    def __init__(self, width, activation="relu"):
        super().__init__()
        act = _resolve_activation(activation)
        self.net = nn.Sequential(nn.Linear(width, width), act, nn.Linear(width, 1))

    def forward(self, x):
        return self.net(x)


class Model(nn.Module):
    def __init__(self, cfg: MLPConfig, head: HeadConfig):
        super().__init__()
        self.mlp = MLP(cfg.hidden, activation=cfg.activation)
        self.head = Head(cfg.hidden, activation=head.activation)

    def forward(self, x):
        return self.mlp(x) + self.head(x)
"""


def test_a_config_class_imported_through_a_namespace_package(tmp_path):
    # ``telekinesis/`` has no ``__init__.py``: ``telekinesis.rlbotics.config`` is the package's
    # own ``config`` module, imported through the namespace package that holds it
    package = tmp_path / "telekinesis" / "rlbotics"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "config.py").write_text(NAMESPACE_CONFIG)
    (package / "models.py").write_text(NAMESPACE_MODELS)
    expected = {("models.py", n) for n, line in enumerate(NAMESPACE_MODELS.splitlines(), 1) if line.endswith("# expect")}
    assert len(expected) == 1
    assert project_findings(tmp_path, "TML201") == expected

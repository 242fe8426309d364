"""Layer factories (``act_layer=nn.X`` defaults, ``functools.partial`` and their aliases) as the
shared analysis resolves them, and as both class-model facets see them: the TML2xx activation
sites (``Resolver.part``) and what a checkpointed callable runs (``CallableModel.contents``,
TML403). Driven through the real engine."""

from __future__ import annotations

import libcst as cst
import pytest

from torchmemlint.analysis.factories import Factories
from torchmemlint.analysis.names import Bindings
from torchmemlint.config import Settings
from torchmemlint.engine import lint_source


def _factories(code: str):
    module = cst.parse_module(code)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    return module, Factories(module, bindings.qualify)


def _call_in(module: cst.Module, text: str):
    for node in _walk(module):
        if isinstance(node, cst.Call) and module.code_for_node(node) == text:
            return node
    raise AssertionError(text)


def _walk(node):
    yield node
    for child in node.children:
        yield from _walk(child)


def _function(module: cst.Module, name: str) -> cst.FunctionDef:
    return next(n for n in _walk(module) if isinstance(n, cst.FunctionDef) and n.name.value == name)


@pytest.mark.parametrize(
    "code, call, function, qualified, certain",
    [
        # default, never called in the file: taken, but not certain
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.LeakyReLU):\n"
         "        self.act = act_layer()\n", "act_layer()", "__init__", "torch.nn.LeakyReLU", False),
        # every call agrees, one passes the caller's own parameter down
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\n"
         "def build(act=nn.ELU):\n    return [B(), B(act_layer=act)]\nbuild()\n",
         "act_layer()", "__init__", "torch.nn.ELU", True),
        # a partial written in place, and a module-level alias of one
        ("import torch.nn as nn\nfrom functools import partial\nx = partial(nn.LeakyReLU, 0.1)()\n",
         "partial(nn.LeakyReLU, 0.1)()", None, "torch.nn.LeakyReLU", True),
        ("import functools\nimport torch.nn as nn\nDrop = functools.partial(nn.Dropout, inplace=True)\n"
         "x = Drop(0.1)\n", "Drop(0.1)", None, "torch.nn.Dropout", True),
        # a local alias in the function
        ("import torch.nn as nn\nfrom functools import partial\ndef f():\n"
         "    act = partial(nn.SELU)\n    return act()\n", "act()", "f", "torch.nn.SELU", True),
    ],
)
def test_factories_resolve_to_the_torch_layer(code, call, function, qualified, certain):
    module, factories = _factories(code)
    scope = _function(module, function) if function else None
    found = factories.layer(_call_in(module, call), scope)
    assert found is not None and found.qualified == qualified and found.certain is certain


@pytest.mark.parametrize(
    "code, call, function",
    [
        # a call in the file passes another layer
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\nB(act_layer=nn.GELU)\n", "act_layer()", "__init__"),
        # a call passes something that is not followed
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\nB(act_layer=get_act('elu'))\n", "act_layer()", "__init__"),
        # `**kwargs` at a call site
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\nB(**cfg)\n", "act_layer()", "__init__"),
        # rebound in the function
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        act_layer = get_act_layer(act_layer)\n        self.act = act_layer()\n",
         "act_layer()", "__init__"),
        # subclassed in the file: super().__init__ may pass another layer
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\nclass C(B):\n    pass\n", "act_layer()", "__init__"),
        # not a torch layer class: a partial of a project class, torch.nn.init
        ("from functools import partial\nx = partial(MyAct, 0.1)()\n", "partial(MyAct, 0.1)()", None),
        ("import torch.nn as nn\nfrom functools import partial\nx = partial(nn.init.normal_, std=1)()\n",
         "partial(nn.init.normal_, std=1)()", None),
        # a classmethod builds the class with `cls(...)`: what it passes is not read
        ("import torch.nn as nn\nclass B(nn.Module):\n    def __init__(self, act_layer=nn.ELU):\n"
         "        self.act = act_layer()\n    @classmethod\n    def gelu(cls):\n"
         "        return cls(act_layer=nn.GELU)\n", "act_layer()", "__init__"),
        # an alias assigned twice at module level
        ("import torch.nn as nn\nAct = nn.ELU\nAct = nn.GELU\nx = Act()\n", "Act()", None),
    ],
)
def test_factories_stay_unknown_when_not_certain(code, call, function):
    module, factories = _factories(code)
    scope = _function(module, function) if function else None
    assert factories.layer(_call_in(module, call), scope) is None


_CHECKPOINTED = (
    "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c, norm_layer={norm}):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
    "        self.norm = norm_layer(c)\n\n"
    "    def forward(self, x):\n"
    "        return self.norm(self.conv(x))\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.block = Block(8)\n\n"
    "    def forward(self, x):\n"
    "        return checkpoint(self.block, x, use_reentrant=False)\n"
)


@pytest.mark.parametrize(
    "norm, reported",
    [
        ("nn.BatchNorm2d", True),
        ("partial(nn.BatchNorm2d, momentum=0.01)", True),
        ("partial(nn.BatchNorm2d, track_running_stats=False)", False),
        ("nn.GroupNorm", False),
        ("None", False),
    ],
)
def test_checkpoint_facet_sees_batchnorm_built_by_a_factory(norm, reported):
    code = _CHECKPOINTED.format(norm=norm)
    if "partial" in norm:
        code = "from functools import partial\n" + code
    findings = lint_source(code, "model.py", Settings(select=("TML403",)))
    assert bool(findings) is reported, [f.message for f in findings]


def test_inplace_facet_and_checkpoint_facet_agree_on_one_factory():
    """The same `act_layer` default is a LeakyReLU to TML201 and a layer to the block size."""
    code = (
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, c, act_layer=nn.LeakyReLU, norm_layer=nn.BatchNorm2d):\n"
        "        super().__init__()\n"
        "        self.body = nn.Sequential(nn.Conv2d(c, c, 3), norm_layer(c), act_layer(0.1))\n"
    )
    findings = lint_source(code, "model.py", Settings(select=("TML201",)))
    assert [f.code for f in findings] == ["TML201"]
    assert "`act_layer`'s default" in findings[0].message
    assert findings[0].fix is not None and findings[0].fix.applicability.value == "unsafe"


# -- layer lists built in branches and loops (LayerLists.order) ------------------------------------
from torchmemlint.analysis.children import Children  # noqa: E402
from torchmemlint.analysis.layer_lists import LayerLists, Order  # noqa: E402


def _relation(code: str, function: str = "make"):
    """(first, pairs, last, may be empty) of ``layers`` at the splice, as source text."""
    module = cst.parse_module(code)
    lists = LayerLists(module)
    fn = _function(module, function)
    splice = next(n for n in _walk(fn) if isinstance(n, cst.SimpleStatementLine) and "Sequential" in module.code_for_node(n))
    order = lists.order(fn, "layers", splice)
    if order is None:
        return None
    text = module.code_for_node
    return (
        sorted(text(e) for e in order.first),
        sorted((text(a), text(b)) for a, b in order.pairs),
        sorted(text(e) for e in order.last),
        order.nullable,
    )


def test_branches_give_what_may_follow_what():
    code = (
        "def make(bn):\n"
        "    layers = [conv()]\n"
        "    if bn:\n"
        "        layers.append(norm())\n"
        "    layers += [act()]\n"
        "    return nn.Sequential(*layers)\n"
    )
    assert _relation(code) == (
        ["conv()"], [("conv()", "act()"), ("conv()", "norm()"), ("norm()", "act()")], ["act()"], False,
    )


def test_a_loop_runs_to_a_fixpoint():
    code = (
        "def make(n):\n"
        "    layers = [stem()]\n"
        "    for _ in range(n):\n"
        "        layers.extend([conv(), act()])\n"
        "    return nn.Sequential(*layers)\n"
    )
    assert _relation(code) == (
        ["stem()"], [("act()", "conv()"), ("conv()", "act()"), ("stem()", "conv()")], ["act()", "stem()"], False,
    )


def test_many_branches_are_not_enumerated_and_nothing_is_dropped():
    """2**12 orders: the relation has 12 + 1 first elements and 78 pairs, read in one pass."""
    branches = "".join(f"    if f{i}:\n        layers.append(m{i}())\n" for i in range(12))
    code = "def make(*f):\n    layers = []\n" + branches + "    return nn.Sequential(*layers)\n"
    first, pairs, last, empty = _relation(code)
    assert len(first) == 12 and len(pairs) == 66 and len(last) == 12 and empty
    assert ("m0()", "m11()") in pairs and ("m11()", "m0()") not in pairs


def test_xception_rep_slice_and_first_replaced():
    """`rep = rep[1:]` drops the first layer of every order, `rep[0] = x` replaces it: the
    in-place ReLU that started each order is first in none any more."""
    code = (
        "def make(reps, start_with_relu):\n"
        "    layers = []\n"
        "    for i in range(reps):\n"
        "        layers.append(relu())\n"
        "        layers.append(sep())\n"
        "        layers.append(bn())\n"
        "    if not start_with_relu:\n"
        "        layers = layers[1:]\n"
        "    else:\n"
        "        layers[0] = plain_relu()\n"
        "    return nn.Sequential(*layers)\n"
    )
    first, pairs, last, _ = _relation(code)
    assert first == ["plain_relu()", "sep()"]
    assert ("bn()", "relu()") in pairs and ("plain_relu()", "sep()") in pairs
    assert last == ["bn()"]


def test_a_helper_list_bound_then_extended_in_a_loop():
    code = (
        "def stem(c):\n"
        "    out = [conv()]\n"
        "    if c:\n"
        "        out.append(norm())\n"
        "    return out\n\n"
        "def make(n):\n"
        "    layers = stem(n)\n"
        "    for _ in range(n):\n"
        "        layers += block()\n"
        "        layers = layers + [act()]\n"
        "    return nn.Sequential(*layers)\n\n"
        "def block():\n"
        "    return [conv2(), norm2()]\n"
    )
    first, pairs, last, _ = _relation(code)
    assert first == ["conv()"]
    assert ("norm()", "conv2()") in pairs and ("conv()", "conv2()") in pairs
    assert ("norm2()", "act()") in pairs and ("act()", "conv2()") in pairs
    assert last == ["act()", "conv()", "norm()"]


@pytest.mark.parametrize(
    "body",
    [
        "    for v in cfg:\n        if v:\n            break\n        layers.append(conv())\n",
        "    try:\n        layers.append(conv())\n    except ValueError:\n        pass\n",
        "    layers = layers[::2]\n",
        "    layers = layers[:cfg]\n",
        "    layers.pop(1)\n",
        "    layers[1] = conv()\n",
        "    register(layers)\n",
        "    if flag:\n        return layers\n",
    ],
)
def test_lists_touched_in_other_ways_are_not_followed(body):
    code = "def make(cfg, flag):\n    layers = [conv()]\n" + body + "    return nn.Sequential(*layers)\n"
    assert _relation(code) is None


@pytest.mark.parametrize(
    "code, expected",
    [
        # the splice in an early return: what follows it (another append, a ``try``) cannot change it
        ("def make(flag):\n    layers = [conv()]\n    if flag:\n        return nn.Sequential(*layers)\n"
         "    try:\n        layers.append(act())\n    except ValueError:\n        pass\n    return layers\n",
         (["conv()"], [], ["conv()"], False)),
        # another value in an arm that does not reach the splice (``self.proj = nn.Linear(...)``)
        ("def make(n):\n    if n == 1:\n        layers = nn.Linear(4, 4)\n    else:\n        layers = [conv()]\n"
         "        layers.append(act())\n        layers = nn.Sequential(*layers)\n    return layers\n",
         (["conv()"], [("conv()", "act()")], ["act()"], False)),
        # ``if len(layers) > 0:`` reads the list; a loop over a list written out runs at least once
        ("def make():\n    layers = []\n    for c in [8, 16]:\n        layers.append(conv())\n    layers.append(act())\n"
         "    if len(layers) > 0:\n        return nn.Sequential(*layers)\n",
         (["conv()"], [("conv()", "act()"), ("conv()", "conv()")], ["act()"], False)),
    ],
)
def test_lists_read_up_to_the_splice(code, expected):
    assert _relation(code) == expected


def test_one_order_only_when_the_relation_is_a_path():
    a, b, c = object(), object(), object()
    assert Order.sequence([a, b, c]).single() == [a, b, c]
    assert Order.empty().single() == []
    assert Order.sequence([a, b]).union(Order.sequence([a, b])).single() == [a, b]
    assert Order.sequence([a, b]).union(Order.sequence([a, c])).single() is None
    assert Order.sequence([a, a]).single() is None
    assert Order.of(a).union(Order.empty()).single() is None


@pytest.mark.parametrize(
    "code, expected",
    [
        ("import torchvision\ndef f():\n    r = torchvision.models.resnet50()\n    return list(r.children())[:3]\n",
         ("r", ["conv1", "bn1", "relu"])),
        ("import timm\ndef f():\n    r = timm.create_model('resnet50d')\n    return list(r.children())[4:-2]\n",
         ("r", ["layer1", "layer2", "layer3", "layer4"])),
        ("import torchvision\ndef f():\n    r = torchvision.models.vgg16()\n    return list(r.children())[:3]\n", None),
        ("def f(r):\n    return list(r.children())[:3]\n", None),
        ("import torchvision\ndef f():\n    r = torchvision.models.resnet50()\n    return list(r.children())[::2]\n", None),
    ],
)
def test_children_of_known_resnets_in_registration_order(code, expected):
    module = cst.parse_module(code)
    bindings = Bindings()
    bindings.bind_statements(module.body)
    fn = _function(module, "f")
    ret = next(n for n in _walk(fn) if isinstance(n, cst.Return))
    assert Children(module, bindings.qualify).sliced(ret.value, fn) == expected


# -- constructors picked by name, keywords spelled out of a literal dict ----------------------
TABLES = '''
import torchvision
import torchvision.models as tvm
from torchvision.models import resnet50

TABLE = {"r18": tvm.resnet18, "r50": resnet50}


def pick(name, table):
    a = {"r18": torchvision.models.resnet18, "r34": tvm.resnet34}[name]()
    b = TABLE[name]()
    c = getattr(tvm, name)()
    d = getattr(torchvision.models, "resnet101")()
    chosen = TABLE[name]
    e = chosen()
    f = table[name]()
    g = {"r18": tvm.resnet18, **table}[name]()
    h = {"r18": tvm.resnet18, "mine": make}[name]()
'''


@pytest.mark.parametrize(
    "call, expected",
    [
        ('{"r18": torchvision.models.resnet18, "r34": tvm.resnet34}[name]()',
         ["torchvision.models.resnet18", "torchvision.models.resnet34"]),
        ("TABLE[name]()", ["torchvision.models.resnet18", "torchvision.models.resnet50"]),
        ("getattr(tvm, name)()", ["torchvision.models."]),
        ('getattr(torchvision.models, "resnet101")()', ["torchvision.models.resnet101"]),
        ("chosen()", ["torchvision.models.resnet18", "torchvision.models.resnet50"]),
        ("table[name]()", None),  # a parameter: any table
        ('{"r18": tvm.resnet18, **table}[name]()', None),
        ('{"r18": tvm.resnet18, "mine": make}[name]()', None),  # `make` is not known
    ],
)
def test_possible_callees_of_a_constructor_table(call, expected):
    from torchmemlint.analysis.callees import possible_callees

    module, factories = _factories(TABLES)
    node = _call_in(module, call)
    assert possible_callees(node.func, factories.qualify, module, _function(module, "pick")) == expected


SPELLED = '''
def build(device=None, dtype=None, params={"act": "LeakyReLU", "slope": 0.1}, **kwargs):
    dd = {"device": device, "dtype": dtype}
    ee = dict(device=device)
    changed = {"device": device}
    changed["norm_layer"] = None
    copied = copy.deepcopy(params)
    copied["period"] = 2
    updated = dict(params)
    updated.update(kwargs)
    keyed = params.copy()
    keyed[name] = 1
    Layer(1, **dd)
    Layer(2, **ee)
    Layer(3, **changed)
    Layer(4, **kwargs)
    Layer(5, **copied)
    Layer(6, **updated)
    Layer(7, **keyed)
    Layer(8, **params)
'''


@pytest.mark.parametrize(
    "call, keywords",
    [("Layer(1, **dd)", ["device", "dtype"]), ("Layer(2, **ee)", ["device"]),
     ("Layer(3, **changed)", ["device", "norm_layer"]), ("Layer(4, **kwargs)", None),
     # a copy of a parameter's default dict, with a key set by a literal: the default's keywords
     ("Layer(5, **copied)", ["act", "slope", "period"]),
     ("Layer(6, **updated)", None),  # ``.update(...)``: anything
     ("Layer(7, **keyed)", None),  # a computed key
     ("Layer(8, **params)", ["act", "slope"])],
)
def test_a_literal_dict_spread_into_a_call_is_read_as_its_keywords(call, keywords):
    from torchmemlint.analysis.factories import spelled_out

    module, _ = _factories(SPELLED)
    node = spelled_out(_call_in(module, call), _function(module, "build"))
    if keywords is None:
        assert any(arg.star == "**" for arg in node.args)
    else:
        assert [arg.keyword.value for arg in node.args if arg.keyword is not None] == keywords

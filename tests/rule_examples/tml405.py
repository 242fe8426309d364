"""Examples of TML405 (DeepStackWithoutCheckpoint): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


_VIT = (
    "import torch.nn as nn\n"
    "{imports}\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, dim):\n"
    "        super().__init__()\n"
    "        self.norm = nn.LayerNorm(dim)\n"
    "        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.GELU(), nn.Linear(dim, dim))\n"
    "\n"
    "    def forward(self, x):\n"
    "        return x + self.mlp(self.norm(x))\n"
    "\n"
    "class Encoder(nn.Module):\n"
    "    def __init__(self, depth={depth}, dim=64):\n"
    "        super().__init__()\n"
    "        self.blocks = nn.ModuleList([Block(dim) for _ in range(depth)])\n"
    "\n"
    "    def forward(self, x):\n"
    "        for block in self.blocks:\n"
    "            x = {call}\n"
    "        return x\n"
)

VALID = (
    _VIT.format(
        imports="from torch.utils.checkpoint import checkpoint",
        depth=12,
        call="checkpoint(block, x, use_reentrant=False)",
    ),
    _VIT.format(imports="", depth=3, call="block(x)"),
    # Depth given by the caller only: the count is unknown.
    _VIT.format(imports="", depth="depth", call="block(x)").replace("depth=depth", "depth"),
    # Single torch layers are not blocks worth checkpointing (see TML402).
    "import torch.nn as nn\n"
    "class Mlp(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layers = nn.ModuleList([nn.Linear(8, 8) for _ in range(6)])\n"
    "\n"
    "    def forward(self, x):\n"
    "        for layer in self.layers:\n"
    "            x = layer(x)\n"
    "        return x\n",
    # Checkpointing decided elsewhere in the class (timm's grad_checkpointing flag).
    _VIT.format(imports="", depth=12, call="block(x)").replace(
        "        super().__init__()\n        self.blocks",
        "        super().__init__()\n"
        "        self.grad_checkpointing = False\n"
        "        self.blocks",
    ),
)

INVALID = (
    Invalid(_VIT.format(imports="", depth=12, call="block(x)"), line=18, column=22),
    Invalid(
        _VIT.format(imports="", depth=3, call="block(x)"),
        options=(("checkpoint-min-blocks", 3),),
    ),
    Invalid(
        "import torch.nn as nn\n"
        "from mylib import Bottleneck\n"
        "class ResNetLike(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.stem = nn.Conv2d(3, 64, 7, 2, 3)\n"
        "        self.layer1 = self._make_layer(64)\n"
        "        self.layer2 = self._make_layer(128)\n"
        "        self.layer3 = self._make_layer(256)\n"
        "        self.layer4 = Bottleneck(512)\n"
        "\n"
        "    def _make_layer(self, planes):\n"
        "        return nn.Sequential(Bottleneck(planes), Bottleneck(planes))\n"
        "\n"
        "    def forward(self, x):\n"
        "        x = self.stem(x)\n"
        "        x = self.layer1(x)\n"
        "        x = self.layer2(x)\n"
        "        x = self.layer3(x)\n"
        "        x = self.layer4(x)\n"
        "        return x\n",
        line=17,
    ),
    Invalid(
        "from torch import nn\n"
        "def block(c):\n"
        "    conv = nn.Conv2d(c, c, 3, padding=1)\n"
        "    return nn.Sequential(\n"
        "        conv, nn.BatchNorm2d(c), nn.ReLU(), nn.Conv2d(c, c, 1), nn.ReLU()\n"
        "    )\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        layers = []\n"
        "        for _ in range(8):\n"
        "            layers.append(block(16))\n"
        "        self.body = nn.Sequential(*layers)\n"
        "\n"
        "    def forward(self, x):\n"
        "        return self.body(x)\n",
        line=16,
    ),
)

"""Examples of TML504 (ListOnSelfInForward): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.maps = []\n\n    def forward(self, x):\n"
    "        self.maps = []\n        h = self.conv(x)\n        self.maps.append(h)\n"
    "        return h\n",
    "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.maps = []\n\n    def forward(self, x):\n"
    "        h = self.conv(x)\n        self.maps.append(h.detach().cpu())\n"
    "        self.shapes.append(h.shape)\n        return h\n",
    "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.maps = []\n\n    def forward(self, x):\n"
    "        self.maps.append(self.conv(x))\n        return x\n\n    def reset(self):\n"
    "        self.maps.clear()\n",
)

INVALID = (
    Invalid(
        "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.maps = []\n\n    def forward(self, x):\n"
        "        h = torch.relu(self.conv(x))\n        self.maps.append(h.detach())\n"
        "        return h\n",
        line=11,
        column=9,
    ),
)

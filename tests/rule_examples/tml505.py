"""Examples of TML505 (TensorOnSelfInForward): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n    def __init__(self):\n"
    "        super().__init__()\n        self.register_buffer('ema', torch.zeros(3))\n\n"
    "    def forward(self, x):\n        self.ema = self.ema * 0.9 + x.mean(0)\n"
    "        self.last_shape = x.shape\n        self.cached = x.detach().cpu()\n"
    "        return x\n",
)

INVALID = (
    Invalid(
        "import torch\nfrom torch import nn\n\nclass Net(nn.Module):\n"
        "    def forward(self, x):\n        self.features = self.backbone(x)\n"
        "        return self.head(self.features)\n",
        line=6,
        column=9,
    ),
)

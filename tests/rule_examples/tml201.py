"""Examples of TML201 (MissingInplaceSavesMemory): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # already in place
    "import torch.nn as nn\n"
    "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.LeakyReLU(0.1, inplace=True))\n",
    # ReLU saves nothing by going in place (TML202, off by default)
    "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n",
    # the input is used again: in place would corrupt the residual
    "import torch.nn as nn\nimport torch.nn.functional as F\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(8, 8, 3, padding=1)\n\n"
    "    def forward(self, x):\n"
    "        y = self.conv(x)\n"
    "        z = F.elu(y)\n"
    "        return z + y\n",
    # sigmoid keeps its output: in place after it would raise in backward
    "import torch\nimport torch.nn.functional as F\n\n"
    "def gate(x):\n"
    "    return F.leaky_relu(torch.sigmoid(x))\n",
    # a custom block before: what it keeps is unknown
    "import torch.nn as nn\nblock = nn.Sequential(MyBlock(), nn.LeakyReLU())\n",
    # a look-alike class
    "import torch\nclass LeakyReLU:\n    pass\nblock = [torch.nn.Conv2d(3, 8, 3), LeakyReLU()]\n",
    # the attribute is called on forward's own argument
    "import torch.nn as nn\n\n"
    "class Head(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.act = nn.LeakyReLU()\n\n"
    "    def forward(self, x):\n"
    "        return self.act(x)\n",
)

INVALID = (
    Invalid(
        "import torch.nn as nn\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1))\n",
        fixed="import torch.nn as nn\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1, inplace=True))\n",
        line=2,
        column=62,
    ),
    Invalid(
        "from torch.nn import LeakyReLU as Act, Conv2d, Module\n\n"
        "class Block(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = Conv2d(8, 8, 3)\n"
        "        self.act = Act()\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv(x)\n"
        "        x = self.act(x)\n"
        "        return x\n",
        fixed="from torch.nn import LeakyReLU as Act, Conv2d, Module\n\n"
        "class Block(Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = Conv2d(8, 8, 3)\n"
        "        self.act = Act(inplace=True)\n\n"
        "    def forward(self, x):\n"
        "        x = self.conv(x)\n"
        "        x = self.act(x)\n"
        "        return x\n",
        line=7,
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n\n"
        "def decode(a, b, conv):\n"
        "    y = torch.cat([a, b], 1)\n"
        "    return conv(F.elu(y, alpha=0.5))\n",
        fixed="import torch\nimport torch.nn.functional as F\n\n"
        "def decode(a, b, conv):\n"
        "    y = torch.cat([a, b], 1)\n"
        "    return conv(F.elu(y, alpha=0.5, inplace=True))\n",
    ),
    Invalid(
        "import torch.nn as nn\nhead = nn.Sequential(nn.Linear(8, 8), nn.SELU(inplace=False))\n",
        fixed="import torch.nn as nn\nhead = nn.Sequential(nn.Linear(8, 8), nn.SELU(inplace=True))\n",
    ),
)

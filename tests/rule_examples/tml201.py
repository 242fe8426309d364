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
    # a list built in a loop: the order of its layers is not certain, stays quiet
    "import torch.nn as nn\n\n"
    "def make(n):\n"
    "    layers = []\n"
    "    for _ in range(n):\n"
    "        layers.append(nn.Conv2d(8, 8, 3))\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # a list that follows a custom block: what it keeps is unknown
    "import torch.nn as nn\n\n"
    "def make():\n"
    "    layers = [MyBlock()]\n"
    "    layers += [nn.LeakyReLU(0.2)]\n"
    "    return nn.Sequential(*layers)\n",
    # a list passed in from outside: its contents are not known here
    "import torch.nn as nn\n\n"
    "def make(layers):\n"
    "    layers.append(nn.LeakyReLU(0.2))\n"
    "    return nn.Sequential(*layers)\n",
    # a helper defined twice (which one runs is not certain)
    "import torch.nn as nn\n\n"
    "def layers():\n"
    "    return [nn.Conv2d(3, 8, 3), nn.LeakyReLU(0.2)]\n\n"
    "def layers():\n"
    "    return [MyBlock(), nn.LeakyReLU(0.2)]\n\n"
    "net = nn.Sequential(*layers())\n",
    # spliced list already in place
    "import torch.nn as nn\n\n"
    "def make():\n"
    "    layers = [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.2, inplace=True)]\n"
    "    return nn.Sequential(*layers)\n",
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
    # layers collected in a list, then spliced
    Invalid(
        "import torch.nn as nn\n\n"
        "class Down(nn.Module):\n"
        "    def __init__(self, cin, cout):\n"
        "        super().__init__()\n"
        "        layers = [nn.Conv2d(cin, cout, 4, 2, 1), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2)]\n"
        "        self.model = nn.Sequential(*layers)\n\n"
        "    def forward(self, x):\n"
        "        return self.model(x)\n",
        fixed="import torch.nn as nn\n\n"
        "class Down(nn.Module):\n"
        "    def __init__(self, cin, cout):\n"
        "        super().__init__()\n"
        "        layers = [nn.Conv2d(cin, cout, 4, 2, 1), nn.BatchNorm2d(cout), nn.LeakyReLU(0.2, inplace=True)]\n"
        "        self.model = nn.Sequential(*layers)\n\n"
        "    def forward(self, x):\n"
        "        return self.model(x)\n",
        line=6,
        column=72,
    ),
    # `layers.append(...)` and `layers += [...]`
    Invalid(
        "import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 3)]\n"
        "    layers += [nn.BatchNorm2d(cout)]\n"
        "    layers.append(nn.LeakyReLU(0.2))\n"
        "    return nn.Sequential(*layers)\n",
        fixed="import torch.nn as nn\n\n"
        "def block(cin, cout, normalize=True):\n"
        "    layers = [nn.Conv2d(cin, cout, 3)]\n"
        "    layers += [nn.BatchNorm2d(cout)]\n"
        "    layers.append(nn.LeakyReLU(0.2, inplace=True))\n"
        "    return nn.Sequential(*layers)\n",
        line=6,
    ),
    # a helper method returns the list (`layers.extend`), spliced in __init__
    Invalid(
        "import torch.nn as nn\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Sequential(*self.make_enc_modules(3, 16))\n\n"
        "    def make_enc_modules(self, cin, cout):\n"
        "        modules = []\n"
        "        modules.extend([nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), nn.ELU()])\n"
        "        return modules\n\n"
        "    def forward(self, x):\n"
        "        return self.enc(x)\n",
        fixed="import torch.nn as nn\n\n"
        "class Encoder(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.enc = nn.Sequential(*self.make_enc_modules(3, 16))\n\n"
        "    def make_enc_modules(self, cin, cout):\n"
        "        modules = []\n"
        "        modules.extend([nn.Conv2d(cin, cout, 3), nn.BatchNorm2d(cout), nn.ELU(inplace=True)])\n"
        "        return modules\n\n"
        "    def forward(self, x):\n"
        "        return self.enc(x)\n",
        line=10,
    ),
    # a list spliced into two Sequentials is reported once
    Invalid(
        "import torch.nn as nn\n\n"
        "def stem():\n"
        "    return [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1)]\n\n"
        "a = nn.Sequential(*stem())\n"
        "b = nn.Sequential(*stem(), nn.Conv2d(8, 8, 3))\n",
        fixed="import torch.nn as nn\n\n"
        "def stem():\n"
        "    return [nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.LeakyReLU(0.1, inplace=True)]\n\n"
        "a = nn.Sequential(*stem())\n"
        "b = nn.Sequential(*stem(), nn.Conv2d(8, 8, 3))\n",
    ),
)

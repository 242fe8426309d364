"""Examples of TML101 (StatelessModuleAttribute): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # inside a Sequential it must be a module
    "import torch.nn as nn\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.body = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n\n"
    "    def forward(self, x):\n"
    "        return self.body(x)\n",
    # a nested custom module is never flagged
    "import torch.nn as nn\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.block = DoubleConv(3, 8)\n\n"
    "    def forward(self, x):\n"
    "        return self.block(x)\n",
    # also handed to a Sequential: the module object is needed
    "import torch.nn as nn\n\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.act = nn.ReLU()\n"
    "        self.body = nn.Sequential(nn.Conv2d(3, 8, 3), self.act)\n\n"
    "    def forward(self, x):\n"
    "        return self.act(self.body(x))\n",
    # a look-alike ReLU
    "import torch\n\nclass ReLU:\n    def __call__(self, x):\n        return x\n\n"
    "class Net(torch.nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.act = ReLU()\n\n"
    "    def forward(self, x):\n"
    "        return self.act(x)\n",
)

INVALID = (
    Invalid(
        "import torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n"
        "        # downsampling\n"
        "        self.pool = nn.MaxPool2d(2, stride=2)\n\n"
        "    def forward(self, x):\n"
        "        return self.pool(self.conv(x))\n",
        fixed="import torch.nn as nn\nimport torch.nn.functional as F\n\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv = nn.Conv2d(3, 8, 3)\n"
        "        # downsampling\n\n"
        "    def forward(self, x):\n"
        "        return F.max_pool2d(self.conv(x), kernel_size=2, stride=2)\n",
        line=9,
        column=21,
    ),
    Invalid(
        "import torch.nn as nn\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 2)\n"
        "        self.drop = nn.Dropout(0.2)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(self.drop(x))\n",
        fixed="import torch.nn as nn\n\n"
        "class Head(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = nn.Linear(8, 2)\n\n"
        "    def forward(self, x):\n"
        "        return self.fc(nn.functional.dropout(x, p=0.2, training=self.training))\n",
    ),
    # arguments computed in __init__ cannot move to forward: reported, not fixed
    Invalid(
        "import torch.nn as nn\n\n"
        "class Up(nn.Module):\n"
        "    def __init__(self, factor):\n"
        "        super().__init__()\n"
        "        self.up = nn.Upsample(scale_factor=factor)\n\n"
        "    def forward(self, x):\n"
        "        return self.up(x)\n",
    ),
)

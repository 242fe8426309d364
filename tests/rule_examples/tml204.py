"""Examples of TML204 (InplaceDropout): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch.nn as nn\ndrop = nn.Dropout(0.1)\n",
    "import torch.nn as nn\ndrop = nn.Dropout2d(0.1, inplace=True)\n",  # no fused kernel
    "import torch.nn.functional as F\n\ndef f(x):\n    return F.dropout(x, 0.1, inplace=False)\n",
    "from mylib import Dropout\ndrop = Dropout(0.1, inplace=True)\n",
    # p = 0: no mask is drawn
    # defaulting to 0 and built nowhere in this file (nor in a file importing it): its default draws no mask
    "import torch.nn as nn\n\nclass Block(nn.Module):\n    def __init__(self, dim, drop=0.0):\n        super().__init__()\n        self.drop = nn.Dropout(drop, inplace=True)\n",
    "import torch.nn as nn\ndrop = nn.Dropout(p=0.0, inplace=True)\n",
    "import torch.nn.functional as F\n\ndef f(x):\n    return F.dropout(x, 0, True, True)\n",
    # a parameter defaulting to 0 that every call in the file leaves at 0
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, dim, drop=0.0):\n"
    "        super().__init__()\n"
    "        self.drop = nn.Dropout(drop, inplace=True)\n\n"
    "blocks = [Block(8), Block(8, 0.0), Block(8, drop=0)]\n",
    "import torch.nn.functional as F\n\n"
    "def f(x, p=0.0):\n"
    "    return F.dropout(x, p, True, True)\n\n"
    "y = f(1)\n",
    # p = 0 through a factory: `partial(nn.Dropout, inplace=True)` called with a 0 default
    "import torch.nn as nn\nfrom functools import partial\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, dim, drop_layer=partial(nn.Dropout, inplace=True), drop_rate=0.):\n"
    "        super().__init__()\n"
    "        self.drop = drop_layer(drop_rate)\n\n"
    "blocks = [Block(8), Block(8, drop_rate=0.0)]\n",
    "import torch.nn as nn\nfrom functools import partial\n"
    "drop = partial(nn.Dropout, p=0.0, inplace=True)()\n",
    # a 0-default passed down from the caller's own 0-default parameter
    "import torch.nn as nn\n\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, dim, drop=0.0):\n"
    "        super().__init__()\n"
    "        self.drop = nn.Dropout(drop, inplace=True)\n\n"
    "class Model(nn.Module):\n"
    "    def __init__(self, drop_rate=0.):\n"
    "        super().__init__()\n"
    "        self.blocks = [Block(8, drop=drop_rate), Block(8, drop_rate)]\n\n"
    "model = Model()\n",
    # a partial that is not a torch dropout
    "from functools import partial\nfrom mylib import Dropout\n"
    "drop = partial(Dropout, 0.1, inplace=True)()\n",
)

INVALID = (
    Invalid(
        "import torch.nn as nn\ndrop = nn.Dropout(0.1, inplace=True)\n",
        fixed="import torch.nn as nn\ndrop = nn.Dropout(0.1)\n",
        line=2,
        column=8,
    ),
    Invalid(
        "import torch.nn as nn\ndrop = nn.Dropout(0.1, True)\n",
        fixed="import torch.nn as nn\ndrop = nn.Dropout(0.1)\n",
    ),
    Invalid(
        "import torch.nn.functional as F\n\n"
        "def f(x, training):\n"
        "    return F.dropout(x, 0.1, training, inplace=True)\n",
        fixed="import torch.nn.functional as F\n\n"
        "def f(x, training):\n"
        "    return F.dropout(x, 0.1, training)\n",
    ),
    Invalid(
        "import torch\n\ndef f(x):\n    return torch.dropout_(x * 2, 0.1, True)\n",
        fixed="import torch\n\ndef f(x):\n    return torch.dropout(x * 2, 0.1, True)\n",
    ),
    # a parameter defaulting to 0, but one call in the file passes 0.1
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.0):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop, inplace=True)\n\n"
        "blocks = [Block(8), Block(8, 0.1)]\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.0):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop)\n\n"
        "blocks = [Block(8), Block(8, 0.1)]\n",
    ),
    # defaulting to 0.1, and never built in this file: its default draws a mask
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.1):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop, inplace=True)\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.1):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop)\n",
    ),
    # a dropout spliced from a list built by a helper
    Invalid(
        "import torch.nn as nn\n\n"
        "def head(dim):\n"
        "    layers = [nn.Linear(dim, dim)]\n"
        "    layers.append(nn.Dropout(0.1, inplace=True))\n"
        "    return layers\n\n"
        "net = nn.Sequential(*head(8))\n",
        fixed="import torch.nn as nn\n\n"
        "def head(dim):\n"
        "    layers = [nn.Linear(dim, dim)]\n"
        "    layers.append(nn.Dropout(0.1))\n"
        "    return layers\n\n"
        "net = nn.Sequential(*head(8))\n",
    ),
    # `partial(nn.Dropout, inplace=True)`: the fix overrides the partial in this call only
    Invalid(
        "import functools\nimport torch.nn as nn\n\n"
        "Drop = functools.partial(nn.Dropout, inplace=True)\n"
        "head = nn.Sequential(nn.Linear(8, 8), Drop(0.1))\n",
        fixed="import functools\nimport torch.nn as nn\n\n"
        "Drop = functools.partial(nn.Dropout, inplace=True)\n"
        "head = nn.Sequential(nn.Linear(8, 8), Drop(0.1, inplace=False))\n",
        line=5,
        column=39,
    ),
    # passed down, but the model is built with drop_rate=0.1 in this file
    Invalid(
        "import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.0):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop, inplace=True)\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, drop_rate=0.):\n"
        "        super().__init__()\n"
        "        self.blocks = [Block(8, drop=drop_rate)]\n\n"
        "model = Model(drop_rate=0.1)\n",
        fixed="import torch.nn as nn\n\n"
        "class Block(nn.Module):\n"
        "    def __init__(self, dim, drop=0.0):\n"
        "        super().__init__()\n"
        "        self.drop = nn.Dropout(drop)\n\n"
        "class Model(nn.Module):\n"
        "    def __init__(self, drop_rate=0.):\n"
        "        super().__init__()\n"
        "        self.blocks = [Block(8, drop=drop_rate)]\n\n"
        "model = Model(drop_rate=0.1)\n",
    ),
)

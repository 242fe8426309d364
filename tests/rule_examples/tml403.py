"""Examples of TML403 (BatchNormInCheckpoint): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


_BLOCK = (
    "import torch.nn as nn\n"
    "{imports}\n"
    "class Block(nn.Module):\n"
    "    def __init__(self, c):\n"
    "        super().__init__()\n"
    "        self.conv = nn.Conv2d(c, c, 3, padding=1)\n"
    "        self.norm = {norm}\n"
    "\n"
    "    def forward(self, x):\n"
    "        return self.norm(self.conv(x))\n"
    "\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.block = Block(8)\n"
    "\n"
    "    def forward(self, x):\n"
    "        return {call}\n"
)

VALID = (
    _BLOCK.format(
        imports="from torch.utils.checkpoint import checkpoint",
        norm="nn.GroupNorm(4, c)",
        call="checkpoint(self.block, x, use_reentrant=False)",
    ),
    _BLOCK.format(
        imports="from torch.utils.checkpoint import checkpoint",
        norm="nn.BatchNorm2d(c, track_running_stats=False)",
        call="checkpoint(self.block, x, use_reentrant=False)",
    ),
    # timm's checkpoint_seq with skip_last=True runs the last element without checkpoint.
    "import torch.nn as nn\nfrom timm.models import checkpoint_seq\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layers = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n"
    "\n"
    "    def forward(self, x):\n"
    "        return checkpoint_seq(self.layers, x, skip_last=True)\n",
    # A relative `checkpoint` that is not timm's `_manipulate`.
    _BLOCK.format(
        imports="from .helpers import checkpoint",
        norm="nn.BatchNorm2d(c)",
        call="checkpoint(self.block, x)",
    ),
    _BLOCK.format(
        imports="import deepspeed",
        norm="nn.LayerNorm(c)",
        call="deepspeed.checkpointing.checkpoint(self.block, x)",
    ),
    _BLOCK.format(
        imports="def checkpoint(function, *args):\n    return function(*args)",
        norm="nn.BatchNorm2d(c)",
        call="checkpoint(self.block, x)",
    ),
    "import torch\nimport torch.nn.functional as F\n"
    "def step(x, mean, var):\n"
    "    return F.batch_norm(x, mean, var, training=False)\n"
    "y = torch.utils.checkpoint.checkpoint(step, x, m, v, use_reentrant=False)\n",
    # The last segment of checkpoint_sequential runs without checkpoint: [conv] | [bn, relu].
    "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
    "class Net(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.layers = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU())\n"
    "\n"
    "    def forward(self, x):\n"
    "        return checkpoint_sequential(self.layers, 2, x, use_reentrant=False)\n",
    # A local class named BatchNorm2d is not torch's.
    "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint\n"
    "class BatchNorm2d(nn.Module):\n    pass\n"
    "y = checkpoint(\n"
    "    nn.Sequential(nn.Conv2d(3, 3, 1), BatchNorm2d()), x, use_reentrant=False\n"
    ")\n",
    _BLOCK.format(
        imports="from timm.models import checkpoint\nfrom timm.layers import ConvNormAct",
        norm="ConvNormAct(c, c, 3, norm_layer=nn.GroupNorm)",
        call="checkpoint(self.block, x)",
    ),
)

INVALID = (
    Invalid(
        _BLOCK.format(
            imports="import torch.utils.checkpoint as cp",
            norm="nn.BatchNorm2d(c)",
            call="cp.checkpoint(self.block, x, use_reentrant=False)",
        ),
        line=18,
        column=30,
    ),
    Invalid(
        _BLOCK.format(
            imports="from torch.utils.checkpoint import checkpoint as ckpt",
            norm="nn.Sequential(nn.ReLU(), nn.BatchNorm2d(c))",
            call="ckpt(self.block, x, use_reentrant=False)",
        ),
    ),
    Invalid(
        "import torch.nn as nn\nfrom torch.utils.checkpoint import checkpoint_sequential\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = nn.Sequential(\n"
        "            nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU()\n"
        "        )\n"
        "\n"
        "    def forward(self, x):\n"
        "        return checkpoint_sequential(self.layers, 3, x, use_reentrant=False)\n",
    ),
    Invalid(
        "import torch\nimport torch.nn.functional as F\n"
        "def step(x, mean, var):\n"
        "    return F.batch_norm(x, mean, var, training=True)\n"
        "y = torch.utils.checkpoint.checkpoint(step, x, m, v, use_reentrant=False)\n",
    ),
    Invalid(
        _BLOCK.format(
            imports="import deepspeed",
            norm="nn.BatchNorm2d(c)",
            call="deepspeed.checkpointing.checkpoint(self.block, x)",
        ),
    ),
    # timm's own files: `from ._manipulate import checkpoint_seq`.
    Invalid(
        "import torch.nn as nn\nfrom ._manipulate import checkpoint_seq\n"
        "class Net(nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.layers = nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8))\n"
        "\n"
        "    def forward(self, x):\n"
        "        return checkpoint_seq(self.layers, x)\n",
        line=9,
        column=31,
    ),
    Invalid(
        _BLOCK.format(
            imports="from timm.models.helpers import checkpoint_seq",
            norm="nn.BatchNorm2d(c)",
            call="checkpoint_seq([self.block, self.block], x, flatten=True)",
        ),
    ),
    Invalid(
        "import torch.nn as nn\n"
        "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
        "block = checkpoint_wrapper(nn.Sequential(nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8)))\n",
    ),
    # timm's ConvNormAct holds a BatchNorm2d unless the call picks another norm layer.
    Invalid(
        _BLOCK.format(
            imports="from timm.models import checkpoint\nfrom timm.layers import ConvNormAct",
            norm="ConvNormAct(c, c, 3)",
            call="checkpoint(self.block, x)",
        ),
    ),
)

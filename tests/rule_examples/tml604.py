"""Examples of TML604 (CheckpointModuleCalled): VALID code gives no finding, INVALID code gives one."""

from torchmemlint.rules.base import Invalid

VALID = (
    "import torch\nimport torch.utils.checkpoint\n\n\ndef f(self, x):\n"
    "    return torch.utils.checkpoint.checkpoint(self.inc, x, use_reentrant=False)\n",
    "import torch\nfrom torch.utils.checkpoint import checkpoint\n\n\ndef f(self, x):\n"
    "    return checkpoint(self.inc, x, use_reentrant=False)\n",
    "import torch\nfrom torch.utils import checkpoint\n\n\ndef f(self, x):\n"
    "    return checkpoint.checkpoint_sequential(self.blocks, 2, x)\n",
    # a local function called checkpoint
    "import torch\n\n\ndef checkpoint(fn, x):\n    return fn(x)\n\n\ny = checkpoint(torch.relu, torch.ones(1))\n",
)

INVALID = (
    # Pytorch-UNet's use_checkpointing(): the out-of-memory fallback
    Invalid(
        "import torch\nimport torch.nn as nn\n\n\nclass UNet(nn.Module):\n    def use_checkpointing(self):\n"
        "        self.inc = torch.utils.checkpoint(self.inc)\n        self.down1 = torch.utils.checkpoint(self.down1)\n",
        line=7,
        column=20,
    ),
    Invalid(
        "import torch\nfrom torch.utils import checkpoint\n\n\ndef forward(self, x):\n"
        "    return checkpoint(self.block, x)\n",
    ),
    Invalid(
        "import torch\nimport torch.utils.checkpoint as cp\n\n\ndef forward(self, x):\n    return cp(self.block, x)\n",
    ),
)

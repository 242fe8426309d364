"""Examples of TML401 (CheckpointWithoutUseReentrant): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "from torch.utils.checkpoint import checkpoint\n"
    "y = checkpoint(block, x, use_reentrant=False)\n",
    "import torch\ny = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=True)\n",
    "def checkpoint(f, x):\n    return f(x)\ny = checkpoint(block, x)\n",
    "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x, **kwargs)\n",
    "import deepspeed\ny = deepspeed.checkpointing.checkpoint(block, x)\n",
    # timm's wrappers are non-reentrant by default; torch's module wrapper too.
    "from timm.models import checkpoint, checkpoint_seq\n"
    "y = checkpoint(block, x)\ny = checkpoint_seq(blocks, x)\n",
    "from ._manipulate import checkpoint\ny = checkpoint(block, x)\n",
    "from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import checkpoint_wrapper\n"
    "block = checkpoint_wrapper(block)\n",
    # an attribute bound to something else than a checkpointing function, in every arm
    "class Net:\n"
    "    def __init__(self, run, opts):\n"
    "        self.maybe_ckpt = run if 'ffn' in opts else lambda f, x: f(x)\n"
    "    def forward(self, x):\n"
    "        return self.maybe_ckpt(self.fc, x)\n",
)

INVALID = (
    Invalid(
        "from torch.utils.checkpoint import checkpoint\ny = checkpoint(block, x)\n",
        fixed="from torch.utils.checkpoint import checkpoint\n"
        "y = checkpoint(block, x, use_reentrant=False)\n",
        line=2,
        column=5,
    ),
    Invalid(
        "import torch.utils.checkpoint as cp\ny = cp.checkpoint_sequential(seq, 2, x)\n",
        fixed="import torch.utils.checkpoint as cp\n"
        "y = cp.checkpoint_sequential(seq, 2, x, use_reentrant=False)\n",
    ),
    Invalid(
        "from torch.utils.checkpoint import checkpoint as ckpt\ny = ckpt(block, x)\n",
        fixed="from torch.utils.checkpoint import checkpoint as ckpt\n"
        "y = ckpt(block, x, use_reentrant=False)\n",
    ),
    Invalid(
        "import torch\n" "y = torch.utils.checkpoint.checkpoint(\n    block,\n    x,\n)\n",
        fixed="import torch\n"
        "y = torch.utils.checkpoint.checkpoint(\n    block,\n    x, use_reentrant=False,\n)\n",
    ),
    # an attribute bound to torch's checkpoint in one arm: the other arm takes no
    # `use_reentrant`, so no fix is offered
    Invalid(
        "from torch.utils.checkpoint import checkpoint\n"
        "class Net:\n"
        "    def __init__(self, opts):\n"
        "        self.maybe_ckpt = checkpoint if 'ffn' in opts else lambda f, x: f(x)\n"
        "    def forward(self, x):\n"
        "        return self.maybe_ckpt(self.fc, x)\n",
        line=6,
        column=16,
    ),
    # bound to it alone: the keyword is added at the call
    Invalid(
        "import torch.utils.checkpoint as cp\n"
        "class Net:\n"
        "    def __init__(self):\n"
        "        self.ckpt = cp.checkpoint\n"
        "    def forward(self, x):\n"
        "        return self.ckpt(self.fc, x)\n",
        fixed="import torch.utils.checkpoint as cp\n"
        "class Net:\n"
        "    def __init__(self):\n"
        "        self.ckpt = cp.checkpoint\n"
        "    def forward(self, x):\n"
        "        return self.ckpt(self.fc, x, use_reentrant=False)\n",
    ),
)

"""Examples of TML202 (MissingInplaceNoSaving): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(inplace=True))\n",
    # after sigmoid, in place would raise in backward
    "import torch.nn as nn\nblock = nn.Sequential(nn.Sigmoid(), nn.ReLU())\n",
    # LeakyReLU is TML201's
    "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.LeakyReLU())\n",
    "import keras\nblock = [keras.layers.Conv2D(8, 3), keras.layers.ReLU()]\n",
)

INVALID = (
    Invalid(
        "import torch.nn as nn\nblock = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU())\n",
        fixed="import torch.nn as nn\n"
        "block = nn.Sequential(nn.Conv2d(3, 8, 3), nn.ReLU(inplace=True))\n",
        line=2,
        column=43,
    ),
    Invalid(
        "import torch.nn.functional as F\n\n"
        "def head(x, weight):\n"
        "    h = F.linear(x, weight)\n"
        "    return F.silu(h)\n",
        fixed="import torch.nn.functional as F\n\n"
        "def head(x, weight):\n"
        "    h = F.linear(x, weight)\n"
        "    return F.silu(h, inplace=True)\n",
    ),
)

"""Examples of TML204 (InplaceDropout): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    "import torch.nn as nn\ndrop = nn.Dropout(0.1)\n",
    "import torch.nn as nn\ndrop = nn.Dropout2d(0.1, inplace=True)\n",  # no fused kernel
    "import torch.nn.functional as F\n\ndef f(x):\n    return F.dropout(x, 0.1, inplace=False)\n",
    "from mylib import Dropout\ndrop = Dropout(0.1, inplace=True)\n",
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
)

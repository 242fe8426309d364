"""Examples of TML601 (EagerAttention): VALID code gives no finding, INVALID code gives one (and its fix)."""

from torchmemlint.rules.base import Invalid


VALID = (
    # the weights are returned (SDPA cannot give them)
    'import math\nimport torch\n\n\ndef attention(query, key, value):\n    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size(-1))\n    p_attn = scores.softmax(dim=-1)\n    return torch.matmul(p_attn, value), p_attn\n',
    # the weights are stored for visualisation
    'import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def forward(self, q, k, v):\n        attn = (q @ k.transpose(-2, -1)) * self.scale\n        attn = attn.softmax(dim=-1)\n        self.attention_map = attn\n        return attn @ v\n',
    # the weights are appended to a list
    'import torch\n\n\ndef attend(q, k, v, maps):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n    out = attn @ v\n    maps.append(attn)\n    return out\n',
    # the scores feed a loss too
    'import torch\n\n\ndef attend(q, k, v):\n    scores = q @ k.transpose(-2, -1)\n    attn = scores.softmax(-1)\n    return attn @ v, scores.pow(2).mean()\n',
    # softmax over another dimension
    'import torch\n\n\ndef attend(q, k, v):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=1)\n    return attn @ v\n',
    # no kᵀ: a softmax classifier times a matrix
    'import torch.nn.functional as F\n\n\ndef mix(logits, w, v):\n    probs = F.softmax(logits @ w, dim=-1)\n    return probs @ v\n',
    # k transposed on other dimensions
    'import torch\n\n\ndef attend(q, k, v):\n    attn = torch.softmax(q @ k.transpose(1, 2), dim=-1)\n    return attn @ v\n',
    # already SDPA
    'import torch.nn.functional as F\n\n\ndef attend(q, k, v, mask):\n    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)\n',
    # a mask filled with a non-negative value (not a -inf mask)
    'import torch\n\n\ndef attend(q, k, v, mask):\n    scores = q @ k.transpose(-2, -1)\n    scores = scores.masked_fill(mask, 0.0)\n    return scores.softmax(-1) @ v\n',
    # the weights are reassigned in a loop before the product
    'import torch\n\n\ndef attend(q, k, v, steps):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n    for _ in range(steps):\n        attn = attn @ attn\n    return attn @ v\n',
    # timm: the eager branch is the fallback of `if self.fused_attn:` SDPA
    'import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attention(nn.Module):\n    def forward(self, q, k, v):\n        if self.fused_attn:\n            x = F.scaled_dot_product_attention(q, k, v, dropout_p=self.attn_drop.p if self.training else 0.)\n        else:\n            q = q * self.scale\n            attn = q @ k.transpose(-2, -1)\n            attn = attn.softmax(dim=-1)\n            attn = self.attn_drop(attn)\n            x = attn @ v\n        return x\n',
    # look-alikes: linear attention (softmax of q and k themselves), attention pooling, a
    # classification head times prototypes, softmax over the queries, weights returned (einsum)
    'import torch\nimport torch.nn as nn\n\n\nclass LinearAttention(nn.Module):\n    def forward(self, q, k, v):\n        q = q.softmax(dim=-2)\n        k = k.softmax(dim=-1)\n        context = torch.einsum("b h d n, b h e n -> b h d e", k, v)\n        return torch.einsum("b h d e, b h d n -> b h e n", context, q)\n\n\nclass AttentionPool(nn.Module):\n    def forward(self, x):\n        attn = self.to_attn_logits(x).softmax(dim=-1)\n        return (x * attn).sum(dim=-1)\n\n\nclass Classifier(nn.Module):\n    def forward(self, x, prototypes):\n        probs = self.head(x).softmax(dim=-1)\n        return probs @ prototypes\n\n\ndef inverted(q, k, v):\n    attn = torch.einsum("b i d, b j d -> b i j", q, k).softmax(dim=-2)\n    return torch.einsum("b i j, b j d -> b i d", attn, v)\n\n\ndef returned(q, k, v):\n    attn = torch.einsum("b i d, b j d -> b i j", q, k).softmax(dim=-1)\n    return torch.einsum("b i j, b j d -> b i d", attn, v), attn\n',
    # voicebox's Attend with SDPA the default (`flash=True`): the eager path is the fallback
    'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attend(nn.Module):\n    def __init__(self, dropout=0.0, flash=True):\n        super().__init__()\n        self.dropout = dropout\n        self.attn_dropout = nn.Dropout(dropout)\n        self.flash = flash\n\n    def flash_attn(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)\n\n    def forward(self, q, k, v, mask=None):\n        scale = q.shape[-1] ** -0.5\n        if self.flash:\n            return self.flash_attn(q, k, v)\n        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * scale\n        if mask is not None:\n            sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)\n        attn = sim.softmax(dim=-1)\n        attn = self.attn_dropout(attn)\n        return torch.einsum("b h i j, b h j d -> b h i d", attn, v)\n',
)

INVALID = (
    # minGPT: scale around the product, a causal buffer mask, nn.Dropout, `@ v`
    Invalid(
        "import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass CausalSelfAttention(nn.Module):\n    def __init__(self, n_embd, n_head, block_size, pdrop):\n        super().__init__()\n        self.c_attn = nn.Linear(n_embd, 3 * n_embd)\n        self.attn_drop = nn.Dropout(pdrop)\n        self.n_head = n_head\n\n    def forward(self, x):\n        B, T, C = x.size()\n        q, k, v = self.c_attn(x).split(C, dim=2)\n        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))\n        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float('-inf'))\n        att = F.softmax(att, dim=-1)\n        att = self.attn_drop(att)\n        y = att @ v\n        return y.transpose(1, 2).contiguous().view(B, T, C)\n",
        fixed='import math\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass CausalSelfAttention(nn.Module):\n    def __init__(self, n_embd, n_head, block_size, pdrop):\n        super().__init__()\n        self.c_attn = nn.Linear(n_embd, 3 * n_embd)\n        self.attn_drop = nn.Dropout(pdrop)\n        self.n_head = n_head\n\n    def forward(self, x):\n        B, T, C = x.size()\n        q, k, v = self.c_attn(x).split(C, dim=2)\n        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.bias[:, :, :T, :T] != 0, dropout_p=self.attn_drop.p if self.training else 0.0, scale=1.0 / math.sqrt(k.size(-1)))\n        return y.transpose(1, 2).contiguous().view(B, T, C)\n',
    ),
    # The Annotated Transformer's function: mask under `if mask is not None`, -1e9 fill (weights not returned)
    Invalid(
        'import math\nimport torch\n\n\ndef attention(query, key, value, mask=None):\n    d_k = query.size(-1)\n    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)\n    if mask is not None:\n        scores = scores.masked_fill(mask == 0, -1e9)\n    p_attn = scores.softmax(dim=-1)\n    return torch.matmul(p_attn, value)\n',
        fixed='import math\nimport torch\n\n\ndef attention(query, key, value, mask=None):\n    d_k = query.size(-1)\n    return torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=(mask != 0) if mask is not None else None, scale=1.0 / math.sqrt(d_k))\n',
    ),
    # latent-diffusion CrossAttention: einsum both ways, in-place masked_fill_ with -finfo.max;
    # 3-D tensors with a mask: reported, no fix
    Invalid(
        "import torch\nfrom torch import nn, einsum\n\n\nclass CrossAttention(nn.Module):\n    def forward(self, x, context=None, mask=None):\n        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)\n        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale\n        if mask is not None:\n            sim.masked_fill_(~mask, -torch.finfo(sim.dtype).max)\n        attn = sim.softmax(dim=-1)\n        out = einsum('b i j, b j d -> b i d', attn, v)\n        return self.to_out(out)\n",
        fixed=None,
    ),
    # one expression, k.mT, an aliased functional module
    Invalid(
        'import math\nimport torch\nimport torch.nn.functional as Fn\n\n\ndef attend(q, k, v, d):\n    return torch.softmax(q @ k.mT / math.sqrt(d), -1) @ v\n',
        fixed='import math\nimport torch\nimport torch.nn.functional as Fn\n\n\ndef attend(q, k, v, d):\n    return Fn.scaled_dot_product_attention(q, k, v, scale=1.0 / math.sqrt(d))\n',
    ),
    # method matmul, additive mask in place (+=), F.dropout with training=
    Invalid(
        'import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attention(nn.Module):\n    def __init__(self, dim, heads=8, dropout=0.0):\n        super().__init__()\n        self.dropout = dropout\n        self.qkv = nn.Linear(dim, dim * 3)\n\n    def forward(self, x, bias):\n        q, k, v = self.qkv(x).chunk(3, dim=-1)\n        scores = q.matmul(k.transpose(-1, -2))\n        scores += bias\n        weights = F.dropout(F.softmax(scores, dim=-1), p=self.dropout, training=self.training)\n        return weights.matmul(v)\n',
        fixed='import torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attention(nn.Module):\n    def __init__(self, dim, heads=8, dropout=0.0):\n        super().__init__()\n        self.dropout = dropout\n        self.qkv = nn.Linear(dim, dim * 3)\n\n    def forward(self, x, bias):\n        q, k, v = self.qkv(x).chunk(3, dim=-1)\n        return F.scaled_dot_product_attention(q, k, v, attn_mask=bias, dropout_p=self.dropout if self.training else 0.0, scale=1.0)\n',
    ),
    # the dropout is a constructor argument: reported, no fix
    Invalid(
        'import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def __init__(self, attn_drop_layer):\n        super().__init__()\n        self.attn_drop = attn_drop_layer\n\n    def forward(self, q, k, v):\n        attn = (q @ k.transpose(-2, -1)).softmax(dim=-1)\n        attn = self.attn_drop(attn)\n        return attn @ v\n',
        fixed=None,
    ),
    # the weights are cast: reported, no fix
    Invalid(
        'import torch\n\n\ndef attention(q, k, v):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1, dtype=torch.float32).to(q.dtype)\n    return attn @ v\n',
        fixed=None,
    ),
    # latent-diffusion without the mask: 3-D einsum, made 4-D with one head for the fused kernels
    Invalid(
        "import torch\nfrom torch import nn, einsum\n\n\nclass CrossAttention(nn.Module):\n    def forward(self, x, context=None, mask=None):\n        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)\n        sim = einsum('b i d, b j d -> b i j', q, k) * self.scale\n        attn = sim.softmax(dim=-1)\n        out = einsum('b i j, b j d -> b i d', attn, v)\n        return self.to_out(out)\n",
        fixed='import torch\nfrom torch import nn, einsum\n\n\nclass CrossAttention(nn.Module):\n    def forward(self, x, context=None, mask=None):\n        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)\n        out = nn.functional.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1), scale=self.scale).squeeze(1)\n        return self.to_out(out)\n',
    ),
    # timm edgenext (XCA): a learned temperature as scale is a tensor: reported, no fix
    Invalid(
        'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass XCA(nn.Module):\n    def __init__(self, dim, num_heads=8):\n        super().__init__()\n        self.temperature = nn.Parameter(torch.ones(num_heads, 1, 1))\n        self.attn_drop = nn.Dropout(0.0)\n\n    def forward(self, q, k, v):\n        attn = (F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)) * self.temperature\n        attn = attn.softmax(dim=-1)\n        attn = self.attn_drop(attn)\n        return attn @ v\n',
        fixed=None,
    ),
    # torchvision maxvit: 5-D einsum with a positional bias: reported, no fix
    Invalid(
        'import torch\nimport torch.nn.functional as F\n\n\ndef attend(q, k, v, pos_bias, scale):\n    k = k * scale\n    dot_prod = torch.einsum("B G H I D, B G H J D -> B G H I J", q, k)\n    dot_prod = F.softmax(dot_prod + pos_bias, dim=-1)\n    return torch.einsum("B G H I J, B G H J D -> B G H I D", dot_prod, v)\n',
        fixed=None,
    ),
    # efficientformer: an additive bias from a method call, no dropout
    Invalid(
        'import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def forward(self, x):\n        q, k, v = self.qkv(x).split([8, 8, 16], dim=3)\n        attn = (q @ k.transpose(-2, -1)) * self.scale\n        attn = attn + self.get_attention_biases(x.device)\n        attn = attn.softmax(dim=-1)\n        return (attn @ v).transpose(1, 2)\n',
        fixed='import torch.nn as nn\n\n\nclass Attention(nn.Module):\n    def forward(self, x):\n        q, k, v = self.qkv(x).split([8, 8, 16], dim=3)\n        return nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=self.get_attention_biases(x.device), scale=self.scale).transpose(1, 2)\n',
    ),
    # the output takes the weights' name: after the product, `attn` is the output
    Invalid(
        'import torch\n\n\ndef attend(q, k, v):\n    attn = torch.softmax(q @ k.transpose(-2, -1), dim=-1)\n    attn = attn @ v\n    return attn\n',
        fixed='import torch\n\n\ndef attend(q, k, v):\n    attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, scale=1.0)\n    return attn\n',
    ),
    # cross-attention: context keys and values, nn.Softmax and nn.Dropout in one nn.Sequential
    Invalid(
        'import torch.nn as nn\nfrom torch import einsum\n\n\nclass CrossAttention(nn.Module):\n    def __init__(self, dim, heads, dropout):\n        super().__init__()\n        self.scale = (dim // heads) ** -0.5\n        self.attend = nn.Sequential(nn.Softmax(dim=-1), nn.Dropout(dropout))\n\n    def forward(self, x, context):\n        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)\n        sim = einsum("b h i d, b h j d -> b h i j", q, k) * self.scale\n        attn = self.attend(sim)\n        return einsum("b h i j, b h j d -> b h i d", attn, v)\n',
        fixed='import torch.nn as nn\nfrom torch import einsum\n\n\nclass CrossAttention(nn.Module):\n    def __init__(self, dim, heads, dropout):\n        super().__init__()\n        self.scale = (dim // heads) ** -0.5\n        self.attend = nn.Sequential(nn.Softmax(dim=-1), nn.Dropout(dropout))\n\n    def forward(self, x, context):\n        q, k, v = self.to_q(x), self.to_k(context), self.to_v(context)\n        return nn.functional.scaled_dot_product_attention(q, k, v, dropout_p=self.attend[1].p if self.training else 0.0, scale=self.scale)\n',
    ),
    # taming-transformers AttnBlock: bmm with q permuted, softmax over dim=2 of the 3-D scores,
    # the weights permuted and v on the left: one head for SDPA, the output transposed back to (b, c, hw)
    Invalid(
        'import torch\nimport torch.nn as nn\n\n\nclass AttnBlock(nn.Module):\n    def forward(self, x):\n        q, k, v = self.q(x), self.k(x), self.v(x)\n        b, c, h, w = q.shape\n        q = q.reshape(b, c, h * w).permute(0, 2, 1)\n        k = k.reshape(b, c, h * w)\n        w_ = torch.bmm(q, k)\n        w_ = w_ * (int(c) ** (-0.5))\n        w_ = torch.nn.functional.softmax(w_, dim=2)\n        v = v.reshape(b, c, h * w)\n        w_ = w_.permute(0, 2, 1)\n        h_ = torch.bmm(v, w_)\n        return h_.reshape(b, c, h, w)\n',
        fixed='import torch\nimport torch.nn as nn\n\n\nclass AttnBlock(nn.Module):\n    def forward(self, x):\n        q, k, v = self.q(x), self.k(x), self.v(x)\n        b, c, h, w = q.shape\n        q = q.reshape(b, c, h * w).permute(0, 2, 1)\n        k = k.reshape(b, c, h * w)\n        v = v.reshape(b, c, h * w)\n        h_ = nn.functional.scaled_dot_product_attention(q.unsqueeze(1), k.transpose(-2, -1).unsqueeze(1), v.transpose(-2, -1).unsqueeze(1), scale=int(c) ** (-0.5)).squeeze(1).transpose(-2, -1)\n        return h_.reshape(b, c, h, w)\n',
    ),
    # channel-first einsum (b h d i), a fill value held in a local, a softmax chosen by a flag
    Invalid(
        'import torch\nimport torch.nn.functional as F\n\n\ndef attention(q, k, v, mask, causal):\n    softmax = torch.softmax if causal else F.softmax\n    sim = torch.einsum("b h d i, b h d j -> b h i j", q, k)\n    max_neg = -torch.finfo(sim.dtype).max\n    sim = sim.masked_fill(~mask, max_neg)\n    attn = softmax(sim, dim=-1)\n    return torch.einsum("b h i j, b h d j -> b h i d", attn, v)\n',
        fixed='import torch\nimport torch.nn.functional as F\n\n\ndef attention(q, k, v, mask, causal):\n    softmax = torch.softmax if causal else F.softmax\n    return F.scaled_dot_product_attention(q.transpose(-2, -1), k.transpose(-2, -1), v.transpose(-2, -1), attn_mask=mask, scale=1.0)\n',
    ),
    # the softmax of the weights cast to float and back: reported, no fix
    Invalid(
        'import torch\n\n\ndef attend(q, k, v):\n    w = torch.einsum("b h i d, b h j d -> b h i j", q, k)\n    w = torch.softmax(w.float(), dim=-1).type(w.dtype)\n    return torch.einsum("b h i j, b h j d -> b h i d", w, v)\n',
        fixed=None,
    ),
    # the scores pass through a same-file helper (segment-anything's add_rel_pos): reported, no fix
    Invalid(
        'import torch\nimport torch.nn as nn\n\n\ndef add_rel_pos(attn, q, rel_h, rel_w):\n    return attn + torch.einsum("bhwc,hkc->bhwk", q, rel_h).flatten(1)[:, None] + rel_w\n\n\nclass Attention(nn.Module):\n    def forward(self, q, k, v, rel_h, rel_w):\n        attn = (q * self.scale) @ k.transpose(-2, -1)\n        attn = add_rel_pos(attn, q, rel_h, rel_w)\n        attn = attn.softmax(dim=-1)\n        return attn @ v\n',
        fixed=None,
    ),
    # the weights come from either arm of `if mask is None:`/`else:`: reported, no fix
    Invalid(
        'import torch\nimport torch.nn.functional as F\n\n\ndef attend(q, k, v, mask=None):\n    sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * q.shape[-1] ** -0.5\n    if mask is None:\n        attn = F.softmax(sim, dim=-1)\n    else:\n        attn = F.softmax(sim.masked_fill(~mask, -1e4), dim=-1)\n    return torch.einsum("b h i j, b h j d -> b h i d", attn, v)\n',
        fixed=None,
    ),
    # the scores pass through a function imported from elsewhere: kept, conservatively; no fix
    Invalid(
        'import torch\nfrom .layers import add_decomposed_rel_pos\n\n\ndef attend(q, k, v, rel_h, rel_w):\n    attn = (q * 0.125) @ k.transpose(-2, -1)\n    attn = add_decomposed_rel_pos(attn, q, rel_h, rel_w)\n    attn = attn.softmax(dim=-1)\n    return attn @ v\n',
        fixed=None,
    ),
    # voicebox's Attend: SDPA only behind `if self.flash:`, `flash=False` by default (analysis/flags.py)
    Invalid(
        'import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attend(nn.Module):\n    def __init__(self, dropout=0.0, flash=False):\n        super().__init__()\n        self.dropout = dropout\n        self.attn_dropout = nn.Dropout(dropout)\n        self.flash = flash\n\n    def flash_attn(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)\n\n    def forward(self, q, k, v, mask=None):\n        scale = q.shape[-1] ** -0.5\n        if self.flash:\n            return self.flash_attn(q, k, v)\n        sim = torch.einsum("b h i d, b h j d -> b h i j", q, k) * scale\n        if mask is not None:\n            sim = sim.masked_fill(~mask, -torch.finfo(sim.dtype).max)\n        attn = sim.softmax(dim=-1)\n        attn = self.attn_dropout(attn)\n        return torch.einsum("b h i j, b h j d -> b h i d", attn, v)\n',
        fixed='import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n\nclass Attend(nn.Module):\n    def __init__(self, dropout=0.0, flash=False):\n        super().__init__()\n        self.dropout = dropout\n        self.attn_dropout = nn.Dropout(dropout)\n        self.flash = flash\n\n    def flash_attn(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0)\n\n    def forward(self, q, k, v, mask=None):\n        scale = q.shape[-1] ** -0.5\n        if self.flash:\n            return self.flash_attn(q, k, v)\n        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=self.attn_dropout.p if self.training else 0.0, scale=scale)\n',
    ),
)

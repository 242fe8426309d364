"""The documentation of TML201 (``torchmemlint rule TML201``), kept out of ``inplace.py`` so
that module stays under 800 lines (``tests/test_architecture.py``)."""

TML201_DOCUMENTATION = """
    ## What it does
    Flags `LeakyReLU`, `ELU`, `CELU`, `SELU` and `RReLU` (modules, `F.*` calls, or `torch.selu`,
    `torch.celu` and `torch.rrelu`, whose in-place forms are `torch.selu_` and so on, what `F.selu(x,
    inplace=True)` calls: the fix adds the underscore, tests/test_inplace_torch_functions.py) that run out of
    place although they could safely run in place: their input comes straight from a layer that
    does not need its own output in backward (convolution, linear, normalisation, pooling,
    upsampling, `cat`, addition; PyG's graph convolutions such as `GCNConv`, `GATConv` and
    `ResGatedGraphConv`, which end in an aggregation and a bias (also imported from their own
    files, and the first item of `(out, attention)` with `return_attention_weights=True`), and its
    dense `Linear` and `BatchNorm`; a project's own `MessagePassing` layer whose `forward` returns
    what `self.propagate(...)` aggregates with a sum or a mean (`aggr` `"add"`, `"sum"` or
    `"mean"`, PyG's `"add"` when none is given; not `"max"`/`"min"`, whose backward reads the
    result, nor a class that overrides `update` or `aggregate`; a tuple it returns in another arm
    is never what a layer reading the call gets), tests/test_inplace_message_passing.py; a project module whose builders return their argument,
    maybe `weight_norm`-wrapped, or `nn.Identity()`, as Encodec's `NormConv2d` does,
    tests/test_inplace_encodec_builders.py; also an out-of-place dropout after such a layer,
    `Linear, LayerNorm, Dropout(p), LeakyReLU()`: in training it makes a fresh tensor it does
    not keep, in evaluation or with `p=0` it returns its input, and out of place the activation
    keeps that tensor besides its result, tests/test_inplace_after_dropout.py; and a view module
    after such a layer, `Linear, Unflatten, LeakyReLU`: in place writes the layer's output through
    the view, tests/test_inplace_after_views.py) and nothing else
    reads that input. Not where every layer that
    may follow it in an `nn.Sequential` (also where a factory's call or a local places it) or in
    a module list `forward` runs in turn (tests/test_inplace_lists.py; also an `nn.Sequential` read
    by index, a `ModuleDict` filled item by item, a Sequential a builder is given to append to as
    a parameter annotated `nn.Sequential`, and an instance, list or table entry built at module
    level that the classes of the file place (`self.act = ACTIVATION[activation]`, the key a
    literal or the parameter's default): tests/test_inplace_sequential_elements.py,
    tests/test_inplace_module_level.py), or
    everything that reads its result in `forward` (`self.drop(self.act(h))`, `F.dropout`, or a
    layer of the file whose own `forward` reads that input only through such a dropout: Kipf's
    GCN layer, `input = self.dropout(input)` first), is a
    dropout that drops (p > 0): a dropout keeps only its mask, so out of place the activation's
    input is the one tensor kept, in place its result (saved-tensor bytes measured equal,
    tests/test_module_rules.py; tests/test_inplace_dropout_after.py). A call whose result nothing
    reads (overwritten unread) keeps nothing either way and counts for neither. A dropout whose `p` is a
    constructor parameter defaulting to 0 (also read as Lightning's `self.hparams.<parameter>`)
    drops nothing when no construction in the file or in the files importing the class sets it
    (none at all: the default; a construction handing down its own such parameter leaves it at
    0 in turn): the activation is reported (the fix is safe either way). Nor
    where what reads its result keeps nothing of it either: `torch.where(adj > 0, e, zero_vec)`
    (its backward needs only the condition), a softmax, DGL's `edge_softmax` or PyG's `softmax`
    (they keep their own output), an addition or a subtraction (`F.elu(q) + 1`, a residual sum:
    its backward reads neither term), a `.mean()` / `.sum()` (its backward reads nothing), or a slice or view of the result that only such readers
    read (`acc += F.leaky_relu(h)[:n]`, tests/test_inplace_dropout_after.py); in place would
    keep as many tensors (saved-tensor bytes measured equal, tests/test_module_rules.py). Not where what follows may change its result in
    place (`nn.ELU(inplace=True)` next in a Sequential or a module list run in turn, `h += x`, `h.mul_(s)`, `self.act2(h)`
    built in place): in place the activation keeps its result for backward, and that change
    would make backward raise (tests/test_inplace_alternatives.py). Layers built through
    factories are followed: `act_layer()` with `act_layer=nn.LeakyReLU` (the default, or what
    every call in the file passes, also passed down from a caller's own parameter, also a
    parameter defaulting to None that the function fills in, `if act is None: act = nn.ELU`;
    where the
    calls pass different activation classes that all take `inplace`, `Conv2DBNActiv(activ=activ)`
    with `nn.LeakyReLU` from an encoder and `nn.ReLU` from a decoder, it is judged as the
    LeakyReLU it is for some of them, with an unsafe fix, `activ(inplace=True)`, that suits each;
    never where one is `nn.GELU`, `nn.Identity` or a dropout, tests/test_inplace_alternatives.py),
    `partial(nn.LeakyReLU, 0.1)()` and aliases of such partials, and tensors a method of the
    file returns (`h = self.conv_norm(x)`; `F.leaky_relu(h, 0.2)`). An activation that a method
    or function of the file applies to its argument and returns (`def actvn(self, x): return
    F.leaky_relu(x, 2e-1)`, called as `self.actvn(self.norm_0(x))`) is judged at every call of
    it, on what each passes, and reported in the helper, whose edit serves every call
    (tests/test_inplace_helpers.py). A layer class the class keeps on `self` and calls to build
    layers (`self.conv = nn.Conv2d` or `nn.Conv3d` by dimension) builds that layer. A layer kept on
    `self` as one of those an `if` expression or a table chooses between (`nn.LeakyReLU(0.1) if
    leaky else nn.ReLU()`, `{"ReLU": nn.ReLU(), "lrel": nn.LeakyReLU(0.1)}[activation]`) is judged
    where the attribute runs when its arm may be taken: not when only a caller could ask for it
    (a flag off by default, a key that is not the default: a literal, or a module constant,
    `nonlin=DEFAULT_NONLIN`, also imported from another project file,
    tests/test_inplace_named_constants.py) and no construction of the class, in
    its file or the files importing it, does (tests/test_inplace_chosen_layers.py). A layer that a function
    returns (`def leaky(slope=0.1): return nn.LeakyReLU(slope)`, also through another function,
    `return leaky(**kwargs)`, and also a function of another file of the project, imported
    relatively; also through a local every `return` returns, `if activation == "elu": act =
    nn.ELU()` ... `return act`, not at a call that passes `activation` only other strings,
    tests/test_inplace_held_out5.py; also an entry of a table every `return` returns an item of,
    `mapping = {"elu": nn.ELU(), "relu": nn.ReLU()}` ... `return mapping[name]`, at the calls whose
    key may be its label, the helper maybe of another file, whose arms are then read at each call
    too, tests/test_inplace_returned_tables.py; also a layer that takes `inplace` only through
    the function's own `**kwargs`, `def get_activation(name, **kwargs)` ... `return
    nn.LeakyReLU(**kwargs)`, at the calls that pass no `inplace`, without an edit: another arm
    may take the same keywords and no `inplace`, `nn.GELU(**kwargs)`,
    tests/test_inplace_forwarded_kwargs.py) is reported at each place a call of it puts the layer: an element of
    `nn.Sequential`, a list spliced into one (also registered one by one by a Sequential subclass,
    `for idx, layer in enumerate(layers): self.add_module(f"{idx}", layer)`, rsl_rl's `MLP`,
    tests/test_inplace_registered_layers.py; `layers.append(leaky())`, also through a local or
    a parameter rebound to it first, `activation = resolve_nn_activation(activation)`), `self.act = leaky()`
    called in the class's methods, an element of a module list run as a chain (also one made of a
    local list: `nn.ModuleList(modules)`, `modules` filled by appends in loops and `if`s) or whose
    elements are called one by one (`for c1, a2 in zip(self.convs1, self.acts2): a2(c1(x))`,
    also for an activation built directly in the list, tests/test_inplace_lists.py; and the
    rounds of `nn.Sequential(*sum([[nn.Linear(a, b), act()] for ...], [])[:-1])`). A module a
    base class builds (`self.act = nn.ELU()`) runs wherever it or its subclasses of the same
    file call it, unless a subclass builds its own (tests/test_inplace_passed_on.py); a read of
    an attribute of that name through another object (`model.activation`) may be this class's
    and keeps it unknown, except through a module another class holds and gives only instances
    of other classes (`self.gnn = Other(...)`, then `self.gnn.activation(h)`:
    tests/test_inplace_held_reads.py); modules
    kept in attributes named at run time (`setattr(self, f"act_{i}", nn.LeakyReLU(0.2))`, run as
    `getattr(self, f"act_{i}")(h)`) are one attribute per template
    (tests/test_inplace_named_attributes.py). Each place is
    judged on its own, as a layer written there would be; the function itself is not reported
    (tests/test_inplace_factories.py). An activation that follows a layer inside a Sequential
    the function returns (`return nn.Sequential(conv, nn.LeakyReLU(0.1))`) is reported once,
    where it is built: its input is made there, the same at every place. A layer called as an element
    of a module list counts as what every element of the list is (`for conv in self.convs:`,
    `self.convs[i](x)`, `zip(self.convs1, self.convs2)`, the list built by a display, a
    comprehension or `append`/`extend`/`+=` in `__init__`; an element that is an
    `nn.Sequential` as what its last layers make), and an activation first in such a
    Sequential runs on what every call of an element is given, when the list is only ever
    called or looped over; `weight_norm(...)` and `spectral_norm(...)` (also from
    `torch.nn.utils.parametrizations`, also through a local, maybe bound again under an `if`, `norm_f = spectral_norm if sn else
    weight_norm`, or `else lambda x: x`) count as the layer they wrap, a local name of the function as the one module
    it is ever given (`conv = weight_norm(nn.Conv1d(...))`; `nn.Sequential(conv,
    nn.LeakyReLU(0.1))`; and a module added by `seq.add_module("act", nn.LeakyReLU())` to a
    local Sequential (or to `self.layers = nn.Sequential()`) runs on what the module added before
    it makes, when every `add_module` of it is in the block that builds it and the one before
    runs before it in every round, a statement of a block around it with no loop between
    (`for i in range(n):` adding `f"{i}fc"`, then under an `if` `f"{i}act"`; a module added
    under an `if` before it may not run, so what is added before that one counts too; also
    `self.add_module` in an `nn.Sequential` subclass and `layers["act"] = act()` items of a local
    `OrderedDict` given to `nn.Sequential(layers)`, and `append`s one at a time to a module list
    run in turn, tests/test_inplace_held_out13.py);
    tests/test_inplace_held_out5.py, tests/test_inplace_held_out12.py,
    tests/test_inplace_held_out14.py; a layer built as a
    parameter's default, `actv=nn.LeakyReLU(0.2)`, runs where the function puts the parameter;
    an attribute assigned in a method only `__init__` calls, `self._build_weights(...)`, is
    built at construction; one assigned in the arms of one `if`/`else` in `__init__` is judged
    per arm; one the class never assigns is what the `__init__` of its one base class of the file
    or of another file of the project builds, `self.norm1` of `class Det(DetModule)`,
    tests/test_inplace_held_out14.py; a reduction, `.mean(dim=0)` or `torch.sum`, makes a fresh
    tensor), and a module class of the file or of another
    file of the project counts as what its `forward` returns, over every `return` and every
    branch (`class Conv1d(nn.Module)` whose `forward` returns `self.conv(x)` or a transpose of
    it), as does a function of the file that returns a module (`def down(c): return
    nn.Sequential(..., nn.Conv2d(...))`). A layer bound to a local (`nl = nn.LeakyReLU(0.2) if
    nonlinearity is None else nonlinearity`) runs after whatever precedes it in each Sequential
    it is placed in (tests/test_inplace_containers.py); so does `self.activation` put by name in a
    list a Sequential splices (`ops = [conv, bn, self.activation]`, `ops.append(self.act)`,
    tests/test_inplace_spliced_attribute.py). A factory's layer is judged only at the calls that
    can take the arm building it (`if act_type == "gelu": return nn.GELU() elif
    act_type.startswith("elu"): return nn.ELU()`, read with the key each call passes: a literal,
    a default, a config dataclass field's default (the class maybe of another project file,
    tests/test_inplace_returned_tables.py), what every construction passes;
    tests/test_inplace_factory_arms.py; an arm of `__init__` no configuration takes,
    `elif activation == "leaky_relu": self.activation = nn.LeakyReLU()` with `activation="relu"`
    and no construction asking for it, builds nothing), and a builder's parameter without a default holds what
    every call of it passes (tests/test_inplace_required_factory.py). Activations
    built by name are read too: `getattr(torch.nn, name)(**params)` and `ACTS[name](...)` (a
    module-level dict of layer classes) where `name` is a literal or a parameter with a string
    default (`"LeakyReLU"`), with its slope read from a dict default of `params` (also when a
    caller passes `**params` copied from a dict default of its own), a function of the file
    that looks the class up so (`cls = getattr(torch_nn, name, None)` ... `return cls()`, an
    instance or class handed in returned as it is: `get_activation(activation)` with
    `activation="LeakyReLU"`, reported without a fix; a builder's `return None` arm, a norm
    left out, places nothing, and a local tested against `None` before it is appended is still
    that layer, tests/test_inplace_by_name_builders.py), and
    functional aliases (`act = F.leaky_relu`); so are functions a configured key chooses,
    `self.activation_fn = get_activation_fn(activation)` with `activation="ELU"` and a helper
    returning `{"ELU": F.elu, ...}.get(name, F.elu)`, also `self.act = F.elu` and `fn =
    ACTS[act]`: a literal dict read by a literal key, or by a parameter whose default every call
    of the file leaves or passes alike (also through its callers' own parameters), reported
    where the function is chosen and judged at every call, without a fix: another key may choose
    a function without `inplace` (tests/test_inplace_chosen_functions.py). Layer classes are
    chosen the same way: `act = get_activation(activation)` (also rebinding the parameter,
    `activation = get_activation(activation)`) with a helper of the file or of another project
    file returning `{"lrelu": nn.LeakyReLU, ...}[name]`, reported without a fix; a table read by
    a key not known holds what every entry holds (`{1: nn.Conv1d, 2: nn.Conv2d}[dim]`: a
    convolution); a Sequential element `nn.BatchNorm2d(c) if i else nn.Identity()` is either arm
    (tests/test_activation_table_choices.py). A module that is
    optional, `self.bn = nn.BatchNorm2d(c) if batchnorm else None`, is the layer it may be, and
    `if self.act:` / `if self.act is not None:` only tests it; an `__init__` switch,
    `activation(inplace=inplace)` with `inplace=False`, is read as its default unless a call of
    the class in the file passes otherwise, reported without a fix, the switch being the
    configuration's (tests/test_inplace_optional_layers.py). A norm that is `nn.Identity()` in
    one arm of its construction (`nn.BatchNorm2d(c) if norm else nn.Identity()`, or a class of
    the project whose `forward` only returns its input, Deeplodocus's `EmptyLayer`,
    tests/test_inplace_identity_classes.py), also the elements of a module list built so
    (`self.bns` of `nn.Identity()` in the `else` arm, run as `act(bn(fc(x)))` over zipped lists,
    tests/test_tml201_identity_list_arms.py), hands on what it
    is given, which must then be a layer's output that nothing else reads; one activation
    instance passed to every block (`ConvBlock(..., activation=self.activation)`, also through a
    block that passes it on) runs wherever each block calls it; `bn = self.bns[i]` is an element
    of `self.bns`; a torch layer class chosen by its dimension (`getattr(nn, "Conv%dd" % ndims)`)
    makes what each of its dimensions makes; a class that keeps the module its construction is
    given (`TimeDistributed(nn.Linear(d, h))`, `self.module = module`) makes what that module
    makes; a layer built and called at once (`nn.LeakyReLU()(self.w(h))`) runs on what
    it is called with; an `nn.ModuleDict` read by key (`self.heads[name](x)`) counts as what every
    value of its dict makes; a module added under `if batch_norm:` with `batch_norm=True` by default runs
    before the activation in the default configuration, reported with an unsafe fix, since a
    caller passing False makes the activation first (tests/test_inplace_passed_on.py). OpenMMLab's `build_activation_layer(cfg)` builds the
    layer its config's `type` names, with the config's other keys as keywords (a literal dict, or a
    parameter whose default is one: `act_cfg=dict(type='LeakyReLU')`), reported without a fix: the
    builder takes no `inplace` (tests/test_inplace_config_builders.py). The features of a sparse
    convolution's output (spconv, mmcv.ops: `out.features = self.act(out.features)`) count as that
    convolution's output, a field assigned in the function as a variable of its own
    (tests/test_inplace_sparse_features.py). A layer built with `**params` gets a finding
    without a fix: a caller may pass `params` with an `inplace` of its own, which an added
    `inplace=True` would clash with (tests/test_inplace_forms.py). Lists are followed through
    `layers.pop()`, `layers = layers[:-1]` and `del layers[-1]`, into `super().__init__(*layers)`
    of an `nn.Sequential` subclass; a layer passed to a class of the file
    (`FullyConnected(sizes, final_activation=nn.ELU())`), or to a builder method of the same class
    (`self._conv_block(16, 32, activation=nn.LeakyReLU())`, static or not), runs after what
    precedes it where that class or method places it (tests/test_inplace_method_builders.py, with a
    list started as `list()` and a layer added under a one-line `if act: layers += [nn.ELU()]`; an
    arm that raises ends its path, tests/test_inplace_raising_arms.py); a layer run by a helper
    of the file it is handed to (`call_bn(self.bn1, h)`, `def call_bn(bn, x): return bn(x)`)
    makes what that module makes (tests/test_inplace_module_handed_to_helper.py); a `ModuleList`
    run as `for block in self.blocks: x = block(x)` runs its
    elements in order, like a Sequential; and module lists are followed through
    `enumerate(zip(...))` (tests/test_inplace_lists.py). A function of the file that returns
    `nn.Sequential` (or `nn.ModuleList`) of the modules it is given (`def Sequential(*modules)`
    that drops the Nones) builds that container of a call's arguments; a layer after
    `checkpoint(layer, z)` (torch's, or such a helper of the file) follows the checkpointed
    module; a module class whose `forward` returns `rearrange(...)` of a convolution's output
    counts as that convolution (tests/test_inplace_helpers.py); a call of a builder function,
    of the file or of another project file (`("bn", batch_norm_2d(c))`), or one the calling
    function defines itself (`def conv(*args, **kwargs): return nn.Conv2d(*args, **kwargs)` in
    an `__init__`, tests/test_inplace_containers.py), as what its returns
    make (tests/test_inplace_project_builders.py). An activation class handed to a builder of
    another project file (`build_mlp(obs_dim, n, hidden, activation=nn.ELU)`, which appends
    `activation()` after each Linear of the Sequential it returns; also through a class of that
    file handing it on, `VNetwork(n, sizes, nn.ELU)`) is reported at the argument, judged where
    the builder places what it builds, never fixed there; a builder of the file itself whose every
    call passes a class (its own default never built, nor imported by another file) builds that
    class (tests/test_inplace_passed_classes.py). Rows of a module list unpacked
    by a loop (`for conv1, act, conv2, act in self.layers`) are followed into a module list a
    row holds (`for excite, (conv, noise, act), to_rgb in self.layers`), with the layers a
    function returns placed in them and convs built by a local bound to either of two classes
    (`klass = nn.Conv2d if plain else partial(ModConv, ...)`) (tests/test_inplace_rows.py), and
    a module of an element of a module list of module lists runs as any of the inner modules
    (`for band, stack in zip(x_bands, self.band_convs): for layer in stack:`,
    tests/test_inplace_lists.py). A module method that returns the module itself is that module
    (`nn.LeakyReLU(0.05).to(device=d)`, `nn.Linear(a, b).cuda()`, `.float()`, `.train()`,
    `.apply(init)`); an addition that the activation alone reads may also be read for its size
    (`ret.shape[-1]`), in the other arm of an `if`, or by the join of an `if` around the one the
    activation reads; and a layer built as a constructor's default and kept (`self.activation =
    activation`) runs where that class, or a class it passes `activation=self.activation` to,
    places the attribute in a Sequential, when nothing but the two classes reaches it
    (tests/test_inplace_held_out16.py). A local bound in each arm of an `if` chain on a string
    parameter (`if activation == "leakyrelu": act = nn.LeakyReLU() elif activation == "elu":
    act = nn.ELU()`, then `fc_out.append(act)` or `self.act = act`) holds the layer of the arm
    the parameter's default picks, and runs where the name is placed (a final `else:` fallback
    after that arm is never reached by the default); not when the default picks
    no arm, or the parameter or the name is bound again elsewhere
    (tests/test_inplace_held_out17.py). A local layer rewrapped by `spectral_norm` or
    `weight_norm` (`linear = nn.utils.spectral_norm(linear)`) is still that layer where it is
    appended (tests/test_inplace_factory_arms.py).

    ## Why is this bad?
    Out of place, these activations keep their *input* for backward, while the next layer keeps
    their output: two tensors of the same size per activation. In place, autograd keeps the
    result, which the next layer keeps anyway, so one of the two disappears.

    ## Example
    ```python
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(nn.Conv2d(64, 64, 3), nn.BatchNorm2d(64), nn.LeakyReLU(0.1))

        def forward(self, x):
            return self.block(x)
    ```

    ## Use instead
    ```python
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.block = nn.Sequential(
                nn.Conv2d(64, 64, 3), nn.BatchNorm2d(64), nn.LeakyReLU(0.1, inplace=True)
            )

        def forward(self, x):
            return self.block(x)
    ```

    ## Fix safety
    Adds `inplace=True`. Safe for `LeakyReLU` and `RReLU` with a non-negative slope: outputs and
    gradients are bit-identical (tests/test_module_rules.py). Unsafe for `ELU`, `CELU` and `SELU`,
    whose in-place backward is computed from the result: gradients differ in the last bits
    (1e-5 to 1e-4 absolute where the largest gradient is about 200), for a slope that is not
    a literal, and for a layer taken from a factory parameter's default (a caller elsewhere may
    pass a layer that has no `inplace`). Where a shared partial presets `inplace`, the fix
    overrides it in this call only. For a layer a function returns, the fix edits the function,
    so it is offered only where every call of it in the project puts the layer at a place that
    qualifies and no other file imports the function (its findings share that one edit, applied
    once), and is safe when every call gives the slope a non-negative literal (a place that
    passes a negative one is not reported); a function with an `inplace` parameter (`def
    act(slope=0.1, inplace=False)`) is fixed at each call that leaves it False
    (`act(inplace=True)`).

    ## Measured
    Every ReLU of torchvision's resnet18 / resnet50 swapped for LeakyReLU or ELU (batch
    8x3x224x224): training peak 275,718,824 -> 205,873,832 B (-25.3 %) and 1,022,266,024 ->
    732,940,968 B (-28.3 %) with `inplace=True` (`benchmarks/memory_figures.py`,
    `benchmarks/results/memory_figures.json`, a_inplace_activations, torch 2.13.0).
    """

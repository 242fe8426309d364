"""The documentation of TML501 and TML502 (``torchmemlint rule TML501``), kept out of
``loops.py`` so that module stays under 800 lines (``tests/test_architecture.py``)."""

TML501_DOCUMENTATION = """
    ## What it does
    Flags calls of the model in evaluation code that runs with autograd on: in a loop after
    `model.eval()`, or in a function named like `evaluate` / `validate` / `test` / `predict` /
    `infer` (a word of the name, also inflected: `match_predicted_tree_species`,
    tests/test_tml501_hook_names.py), when nothing turns autograd off there. A single straight-line call after
    `model.eval()` (`model.eval(); out = model(x)`, `return model(x)`) is reported when its
    output is kept (bound or returned, not a bare `model(x)` warm-up), the callee is plainly a
    module (named `model` / `net` / `*_model` ..., or built here from an `nn.Module` class of
    the file or a torch layer, or by a method or function annotated to return a module:
    `self.actor = self.build_actor().to(device)` with `def build_actor(self) ->
    torch.nn.Module`, tests/test_tml501_annotated_builders.py, or by a method or function of
    the file every `return` of which returns a module build: `self.mlp_left =
    self.make_mlp_layer(4, 2)` with `return nn.Sequential(*mlp)`, `model = load_tagger(path)`
    with `model = Tagger(n); ...; return model`, tests/test_tml501_returned_modules.py, wherever
    TML501 asks what a value is built from (a deep copy of the model too: `self.bestModel =
    copy.deepcopy(self.model)`); or a deep copy of a module,
    `copy.deepcopy(self)`, or the class rebuilt, `self.__class__(...)`, or a parameter annotated
    as a module, `first_module: torch.nn.Module`, `dag: dag_module.DagModule`: verification code
    that compares outputs, tests/test_tml501_compared_copies.py), nothing puts it back with `.train()` afterwards or
    backpropagates in the function, and the function is not one a test runner collects (`test_*`
    at the top level or in a `Test*` class or a `unittest.TestCase`; a model's or trainer's
    `test_st()` is its evaluation code). Nor is any call in a test of the test suite, after
    `.eval()` or in a loop too: a method of such a test class, or a top-level `test_*`
    function of a file pytest collects (`test_*.py`, `*_test.py`); a top-level `def
    test(model, loader)` of any other file is evaluation code, named for it, and a `def
    test_unknown(model, ...)` there (or a `test_model` method of a class that is no test class)
    is judged as any code: reported after the model's `.eval()`
    (`tests/test_tml501_test_suites.py`).

    Autograd counts as off (for the function and for the functions of this file it calls)
    under torch's `no_grad()`, `inference_mode()` and `set_grad_enabled(False)` used as a
    decorator, a `with` context, or a context held in a variable of the function, also when a
    conditional expression chooses it (`ctx = torch.no_grad() if c else nullcontext()`;
    `with ctx:`); under a project decorator or context manager whose name says so
    (`*no_grad*`, `*inference_mode*`, `eval_mode`: ultralytics' `@smart_inference_mode()`,
    monai's `with eval_mode(model):`) or whose definition in this file uses torch's switches;
    and in Lightning's `validation_step` / `test_step` / `predict_step` hooks, which Lightning
    runs without autograd (methods: a function of the module named `test_step(model, ...)` is
    no hook, tests/test_tml501_hook_names.py; nor is a method of a class that derives from
    `nn.Module` itself, which Lightning never runs: tests/test_tml502_plain_module_hooks.py).
    `set_grad_enabled(flag)` with a flag the code
    does not show counts as off, except around a `.backward()` (`with
    torch.set_grad_enabled(phase == "train"):` ... `if phase == "train": loss.backward()`):
    autograd is on in the runs that train (TML502 then reports outputs joined across batches
    there, tests/test_tml502_batched_loops.py).

    Like every loop rule (TML5xx), it also reads files that never name torch (an evaluation
    helper importing only tqdm, a `train_model.py` importing nothing) when they ask a module
    what torch code asks (`.eval()`, `.train()`, `.backward(`, `zero_grad(`, `no_grad` ...)
    and import no other array framework (Paddle, JAX, TensorFlow ...: another library's
    `model`, fontTools' or scikit-learn's, stays unread: `tests/test_loops_mined.py`; "torch"
    inside another word, a JAX script's comment citing `pytorch_ema`, names no torch).

    A file that may evaluate a model whose `forward` computes gradients itself (an interatomic
    potential's forces, `-torch.autograd.grad(energy, positions)`, in `forward` or a method it
    runs on `self`), one of its own module classes or of a project file it imports (directly
    or through others), is left alone: under `torch.no_grad()` the energy carries no graph and
    `autograd.grad` raises (`analysis/gradient_models.py`, tests/test_tml501_gradient_models.py;
    a critic's gradient-penalty method that `forward` does not run is no such model). So is a
    call whose output the code differentiates after it: `eps = strain(model(x), x)`, a helper
    of the file or of another project file whose body runs `torch.autograd.grad` on that
    parameter (`analysis/differentiated_outputs.py`, tests/test_tml501_differentiated_outputs.py).
    A function of the file that the project files importing it call only with autograd off
    (`with torch.inference_mode(): score = validate(model, val_loader)` in the training script)
    is left to them (`analysis/importer_modes.py`, tests/test_tml501_importer_modes.py).

    The model is what the code `.eval()`s or `.train()`s (also a name bound to a value that
    ends in the switch, moves after it included: `model = from_pretrained(name).eval().to(device)`,
    tests/test_tml501_switch_in_moves.py; a model handed to a helper of the file whose body
    switches that parameter to eval in a top-level statement and never back is in evaluation
    mode after the call, `check_accuracy(model, x)` then a loop of `model(x_test)`:
    tests/test_tml501_switching_helpers.py; also an item of a container whose
    items a loop switched: `for net in networks.values(): net.eval()`, then `netC =
    networks["classifier"]`), a parameter named `model` / `net` /
    `network` / `module` (or `*_model`, `*_net`), or `self.model` (and `self.*_net`, a private
    `self._model` / `self.__net`, detectron2's hooks', tests/test_tml501_private_models.py ...) unless
    every value the class gives it is an instance of a class the file does not know to be an
    `nn.Module` (`self.model = YOLO(path)`, a wrapper object: quiet; `self.model = Net()` with
    `class Net(nn.Module)` in the file, `build_model(cfg)`, a parameter or a torch layer: the
    model; a `@property` named so is read as the attribute it returns: a pipeline's `model`
    property unwrapping its DDP is the model, one returning `YOLO(path)` is not). A nested
    function reads the models of the function around it that it does not bind itself (a
    counterfactual search's `def model_predict(data): return detach_to_numpy(model(...))`
    inside `def search(sample, model)`: tests/test_tml501_closures.py). Code that calls `backward`, `autograd.grad`, an optimizer `step` or mmengine's `optim_wrapper.update_params(loss)` (itself, or through
    a function of the file or a method on `self` it calls, two levels down: test-time
    adaptation), or switches `enable_grad` / `requires_grad` (also `model.freeze()`, Lightning's and projects' own, which turns
    `requires_grad` off) is left alone; so is, after `.eval()`, a loop whose rounds compute the
    loss a backward after the loop trains on (a mask optimised over the rounds,
    tests/test_tml501_trained_after_loop.py). But a call after the model's own `.eval()` is
    reported in a function that also trains when no backward after it trains on what it
    computes: a validation after the training loop, or between epochs (`model.eval(); pred =
    model(x_val); ...; model.train()` in the epoch loop), whose graph and saved activations stay
    alive, bound to its output, into the next epoch's training, or after the step of a function
    that trains one epoch per call (the step's backward, then `model.eval(); output =
    model(x)` for the validation metrics) (the same test file). Without any `.eval()`, a loop
    over held-out data (`validation_loader`, `testloader`, `x_test`: a name of its `for` clauses)
    that comes after every training call of the function (`main()` trains, then reports test
    accuracy from `torch.max(outputs, 1)[1].numpy()`; also inside the epoch loop, after that
    epoch's training, tests/test_tml501_epoch_held_out.py) is evaluation code when the outputs
    only reach the ends below (a loss held by an attribute, `self.loss = nn.CrossEntropyLoss()`,
    hands them on); the fix wraps that loop, not the function
    (`analysis/held_out_loops.py`, tests/test_tml501_held_out_loops.py).

    A model is also what the called value is, whatever its name (`tests/test_module_calls.py`):
    `self.<x>` that the class (or a base or subclass of it in the file: a base class's
    `get_prediction_list` calling `self.neural_network`, which only its subclasses build,
    `analysis/class_lineage.py`, tests/test_tml501_inherited_attributes.py) binds to a module instance, or to a parameter annotated as a
    module or a tensor function (`encoder: nn.Module`, `Optional[Callable[[Tensor], Tensor]]`),
    or on which it calls `.eval()` / `.parameters()` ...; a local bound to a module, to an item
    or attribute of one (`encoder = torch.load(path)["model"].g_a`), or moved like one
    (`model = expert.network; model.to(device)`); another object's model
    (`self.learn.model(...)`); a model's method that returns a submodule's output
    (`model.generate(n)` with `def generate(self, n): return self.decoder(...)`), also a method
    of a module the class holds, its class read from what the class's methods assign, in this
    file or another project file (`self.autoencoder.eval(); z = self.autoencoder.encode_image(x)`:
    fusilli's `convert_to_latent`); a method of a model switched to evaluation mode, given an
    input by position, in a loop over a loader or in any loop of a function named for
    evaluation (an RL trainer's `self.agent.eval()`, then `self.agent.Actor(obs)` per step of its
    `evaluate`: `tests/test_tml501_recall.py`), or a part named as a model given its inputs
    by keyword (`model.to(device).eval()`, a switch through moves, then
    `model.model(input_ids=ids, labels=labels)` per batch: `tests/test_tml501_keyword_parts.py`).
    Outside such loops too, a method of a module the function switched to evaluation mode
    (`model.eval(); enc = model.encode_source(src)`, a part of it, `model.model.get_embedding(x)`,
    or keyword inputs; also a switch in an assignment, `model = cast(nn.Module,
    torch.load(p)).eval()`) runs it: reported in evaluation code (named for it, over a loader, or a
    script that trains nothing), elsewhere only when its output reaches the ends below (an RL
    rollout handing the action to `env.step` stays quiet). Methods that configure, save, load or
    train (by their name's words), that handle data (`safe_squeeze`), that turn autograd off
    themselves, that a known class defines without returning a submodule's output, or that the
    file's module classes define without calling anything of the instance
    (`validation_epoch_end(outputs)`) are no runs (`analysis/evaluated_methods.py`,
    `tests/test_tml501_evaluated_methods.py`); `self.__call__(x)` is `self(x)`, and so is a method
    of the class returning its forward's or a submodule's output (`self._get_model_output(texts)`
    with `return self.forward(indexed)`: caver's `predict`, tests/test_tml501_own_output_helpers.py),
    also when it first calls a method of the class that leaves autograd alone or returns what it
    computes from that output (`dist.Dirichlet(self.encoder_n(z).exp()).mean`: densityflow2's
    batched `code()` and `soft_assignments()`, tests/test_tml501_own_method_runs.py). A function
    of the file that only a module's `forward` (or what it runs) calls is that module's
    computation, even when named for inference (torch-encoding's `module_inference`,
    tests/test_tml501_forward_helpers.py). A helper one caller
    runs under `no_grad` and another, open evaluation code, runs with autograd on is judged in
    that open run (`tests/test_tml501_opened_helpers.py`); so is one whose model output reaches
    only the ends below when another caller that trains (`.backward()`, an optimizer's `step`,
    itself or through the methods it calls) runs it with autograd on: abimca's
    `_get_score_of_models_for_known_sequences`, wrapped by `predict`, called per step by `fit`
    (`analysis/open_callers.py`, `tests/test_tml501_open_callers.py`); one every call of which in the file runs
    under `no_grad`, also through callers only ever run so (`predict` opens it around
    `self.batch_predict(...)`, which calls `self.model_prediction(...)`), is quiet
    (`tests/test_tml501_callers_no_grad.py`). A call whose output reaches `.numpy()`
    with its graph (no `.detach()`, `.data` or `.argmax()` on the way: `out[0].cpu().numpy()`)
    records none: torch raises there for a tensor that requires grad, so the code runs only where
    something turned autograd off (hummingbird's containers, whose executor does it itself;
    `tests/test_tml501_numpy_attached.py`). A method of the model's class (of this file or another
    project file, by relative or absolute import) that calls only builtins and data methods
    (fusilli's `get_data_from_batch`, which unpacks a batch; a static `safe_squeeze`) runs no
    module: not a model call (`tests/test_tml501_plain_methods.py`); so does a method of a model
    a plain class is handed and keeps, `def __init__(self, model: Enforce): self.model = model`,
    that returns no output of the model's layers (enforce-nn's `self.model.unscale(...)` after
    `self.model.eval()`, arithmetic on buffers: `tests/test_tml501_handed_classes.py`). A model a function of the
    file returns in evaluation mode (`model = get_model(args)`, where `get_model` ends
    `model.eval(); return model`, or returns `model.eval()`) is switched as by `model.eval()` in
    the caller (ThreeDJCG's visualisation scripts; not when the switch is under an `if` or
    followed by `.train()`), also a function of another project file the caller imports
    (mag_net's `nn = model(material=m)` of `from .net import model`,
    `tests/test_tml501_project_eval_helpers.py`). A parameter bound back to itself moved and
    then called (`probe = probe.cuda()`, then `probe(inputs)`: a tensor is not called, a
    function has no `.cuda()`) is a module (`tests/test_tml501_moved_parameters.py`). A method
    of the model's class that runs the instance's parts in a loop (stanfordnlp's
    `Seq2SeqModel.predict` stepping a decoder and returning token ids), called after `.eval()`
    in evaluation code, is a run of the model whatever it returns
    (`tests/test_tml501_stepped_methods.py`); so is a model a dict holds under a key naming it
    (monk's `self.system_dict["local"]["model"](inputs)`, `tests/test_tml501_keyed_models.py`).
    Known this
    way, it counts as the model in evaluation-named code only outside a module class's own
    methods (a `predict()` there is part of its forward) and in functions no other function of
    the file calls (the caller decides, and may train on the result), nor in the methods a
    library's module base class runs itself (scvi-tools' `BaseModuleClass.forward` calls
    `inference`, `generative` and `loss` in training; `analysis/module_calls.py`). A caller
    that is itself open evaluation code (named so, autograd on, neither training nor called by
    code that decides: parsnip's `predict` calling `predict_dataset`) decides nothing. A call of a
    helper of the file that receives the model and runs it (purediffusion's
    `self.ddpm_step(model, x, t)` after `model.eval()`, a `p_sample(model, x, t)` function) is
    the model's run, judged at that call, where the helper's own call is left to its callers
    and the helper neither trains nor loops over its runs (`tests/test_tml501_helper_runs.py`;
    also from a script's top-level code, learn2learn's `loss, acc = fast_adapt(model, batch)`
    in a validation loop after `model.eval()`, `tests/test_tml501_script_helpers.py`);
    so is a method of a trainer or pipeline class that runs a module it holds and returns what
    the module made (steganogan's `self._encode_decode(cover)` in `_validate`), and, in a module
    class, a method calling `self.forward(x)` after switching the part it runs to evaluation
    (`analysis/model_helpers.py`); so is a library function given the model to run, monai's
    `sliding_window_inference(image, roi, n, model)`, also inside such a helper
    (`tests/test_tml501_library_runners.py`).
    Elsewhere it is reported
    when its output reaches only the ends below (not in a method that the module's own
    `forward` runs, itself or through other methods: a router whose scores serve only `topk`
    indices is part of the training forward). A GAN's generator handed in as `G`, built at
    the module's top level (`generator = Generator()`, also when rebound to itself moved:
    `model = model.to(device)`, tests/test_tml501_moved_globals.py) or kept as `self.netG` of a plain class,
    and its generating methods (`self.netG.sample(n)`, `model.module.generation(n)`), count
    where the value is shown to be a module or named as a model or a generator, and only when
    the function itself detaches the output on its way to those ends (`G(z).cpu().data.numpy()`:
    the detach says the output carries a graph; a transform, a cost function or a
    distribution's `sample` detached so stays quiet: `tests/test_tml501_detached_values.py`);
    so does a parameter run on a loader's batches whatever its name (`netC(images)` over
    `dataloader_test`, its output `.data.cpu().numpy()`), unless the name says it takes the
    model's output (`metric(y, out)`, `criterion(out, y)`: a metric or a loss). An item of a container named as the
    model's (`self.mod_model[k](x)`) is the model in a function named for evaluation, and in any
    function an item it put in evaluation mode first (`self.SEEDER_LIST[index].eval()`, then that
    item called: `tests/test_tml501_switched_items.py`). A module held in a container is
    judged as the model itself would be (`analysis/module_items.py`): a loop target over
    `list(model)`, `model.children()`, a `ModuleList` or `ModuleDict` of the class, a parameter
    annotated `list[nn.Module]`, a list only ever given modules, or a plural model name
    (`for m in models`, `self.net_lst[i](x)`), and an item of one called by index
    (`self.layers[i](x)` after `self.eval()`); a dict of metric functions kept on a model
    (`new_model.metrics`) is no container of modules (`tests/test_tml501_module_containers.py`).
    A module's method that writes what
    its layers compute into its own parameter's `.data` (`self.memory.data = new.data`: a
    state update, as streaming memories and moving averages do) is left to its callers.

    A class counts as an `nn.Module` class of the file also when another file of the project
    defines it (`from models import *`, `from .models import Net`, a re-export through a
    package's `__init__.py`) and it derives from `nn.Module` there, or from a library class
    documented as a module (PyG's `torch_geometric.nn` classes such as `GAE`, DGL's `dgl.nn`
    layers, transformers' `PreTrainedModel`; `tests/test_tml501_library_modules.py`, where a
    method unpacking and returning its module's outputs, `z, attention = self.encoder(x)`,
    is the model's output too); the project is the files
    linted and the other modules of their packages, or a script's sibling files. The same code
    split into files gets the findings it gets pasted into one file
    (`tests/test_project_rules.py`).

    A model the code borrows is left to its caller when nothing in the function calls
    `.eval()` / `.train()`: a parameter of a method called once (not `self`, the module
    itself; a static method's first parameter is a parameter like the others; monai's
    `Inferer._run_inference(self, network, patch)`, which evaluators run without autograd and
    trainers with it; not the module an `on_train_*` hook of a Lightning `Callback` is given:
    the training loop calls it with autograd on), or `self.model` in a class that never assigns it nor calls
    eval/train/backward/step and derives (maybe through classes of the file) from a base known
    to run its methods without autograd: transformers' pipelines (`Pipeline`, `ChunkPipeline`
    ..., imported from `transformers` or relatively inside it), whose `forward` runs `_forward`
    under `no_grad`. A base that only builds the model and calls `.eval()` does not turn
    autograd off: a sampler of its subclass is judged like any other code. A module-level
    `def predict(net, x): return net(x)` and a method that loops over its `network` argument
    are still reported, and so is a borrowed model when the class's own methods call that method, all
    with autograd on and none switching the model. Elsewhere, a module called in a function that never backpropagates
    (`self(idx)` or `self.forward(x)` in a method of a module class included, when no other
    function of the file calls that method and no file importing it reads `.<method>` (for a file
    of classes no file imports, loaded by name from a configuration: no file of the project; nor
    when every function of the file calling it does so with autograd off, or is itself such a
    method another file calls: transkun's `transcribeFrames`): a landmark
    detector's `get_landmarks`; a pipeline calling `self.head.predict_num_frames(...)` decides for it;
    so does one calling any other module method of the class, `self.rnd.get_intrinsic_reward(s)`
    for `self.target(s).detach()` there, also through namespace packages, tests/test_tml501_project_callers.py;
    not one whose every call there is itself open evaluation code, `CaverModel.predict` handing
    `self._inside_model.predict(texts)` on with autograd on) is reported when its output
    (followed through the statement flow) ends only saved, printed, logged (a name saying so: `logger.log_metrics`,
    not a logarithm such as `dist.log_prob(y)` or `.log_softmax(-1)`, which keep the graph), made a number or
    numpy array, detached, given to a metric (`acc.update(out, y)`), or made indices (`torch.multinomial`, `argmax`,
    the indices of `topk`: a sampling or greedy decoding loop such as `generate`, whose tokens
    carry no graph even when they are returned); through a function of the file or a method
    called on `self` (a static method included) that returns what it computes from it
    (`fake = self._apply_activate(fake)`) or consumes it, or through a function of another file of
    the project imported relatively or by the package's own name (`cpunum(self(graph))`, read with
    that file's names; `tests/test_tml501_sink_helpers.py`); of an output dict iterated by
    `.items()` only the values are followed, of a `zip` a loop iterates only the items of its
    own argument (`for prob, pos in zip(values, indices)`); a method of the class called on
    `self` is followed whatever its name says (`self.score_func(h, t)`, the model's own scoring:
    `tests/test_tml501_scoring_methods.py`). A parameter annotated
    `nn.Module` or `LightningModule` is a module; one annotated with a module class of the
    project (also one imported by absolute name from the file's own package, and read by a
    closure) is that class, whose methods are read (trecover's `model: TRecover`, then
    `model.predict(chain, src)` in a beam search: `tests/test_tml501_annotated_receivers.py`). Quiet when the output is returned, stored, passed to an unknown function,
    or trained through hooks, and for `self.<module>` of a class that sets `requires_grad` of
    that module's parameters in one of its methods (frozen weights record nothing: transformers'
    FLAVA image codebook), or turns gradients on there in a way not read; freezing another module
    (ctdGAN freezes its classifiers, `for p in self.Qy_.parameters(): p.requires_grad = False`,
    and samples with its generator `self.G_`) leaves the call reported. Quiet too in a function
    named for training (`_learn_policy_gradient`, `update_policy`) that computes a loss (a value
    it names `*loss*`, an empty `losses = []` alone not counting) but never backpropagates it: an unfinished training step, whose fix is
    the missing backward, not `no_grad` (causaltorch's RL stubs; `tests/test_tml501_recall.py`).
    Quiet as well for a method of the model's class that runs its modules under `no_grad` itself
    (`with torch.no_grad():` around every call on `self`, or decorated so), the class read where
    the model is built, also by the file's top level that hands it in (`run_virtual_screen(model,
    loader)` in an `if __name__ == "__main__":` block; `tests/test_tml501_quiet_methods.py`).

    A comprehension over something named like a loader, data set or batches that collects what
    the model (or a method or part of it: `self.model.validation_step(b)`) returns, with
    autograd on, is reported also in a function that trains on other values, when what it
    collects never reaches a backward there (`outputs = [self.model.validation_step(b) for
    [b] in val_loader]`); the fix wraps that statement (`tests/test_loop_computations.py`).

    Each model call is its own finding at its own line (`# noqa` silences one call); the calls
    under the same loop or function share one fix, applied once, and the message says how many
    model calls that `torch.no_grad()` covers when there are several. A loss computed from the
    output of a model call reported in the same function (`score = criterion(x, outputs)`,
    through the names the output is bound to) is not a second finding: its memory is the
    model's (`tests/test_loop_computations.py`), nor a part or method of the model run on that
    output (`model.crf(feats, masks)`, `model.loss(feats, masks, tags)`). Nor is a call of a loss on its own (a class
    named `...Loss`: `nn.MSELoss()`, a project's `MaskedLogCoshLoss(...)`): a loss records a
    graph only from its inputs, so the call that made them is the one judged; a loss of
    outputs made under `torch.no_grad()` records nothing (`tests/test_tml501_recall.py`). A call in
    an arm that runs only when a caller changes a flag from its default (the `else` of `if
    self.double:` with `double=True` that no call of the file turns off) is not judged: the
    default configuration never runs it (`analysis/flags.py`); nor is a call past `if self.gate
    is None: return ...` where the class builds `self.gate` only behind a flag off by default.
    A local named like a model bound to a part of one reached through attributes (`model =
    learn.model.G_B.to(device)`) is a model; a callable a class keeps with a lambda default
    (`self.post_process = post_process if post_process is not None else lambda x: x`) is not.

    ## Why is this bad?
    `model.eval()` only switches dropout and batch-norm behaviour; autograd still records every
    operation and keeps the tensors saved for backward alive as long as the output (or a loss
    computed from it) is referenced. In a loop the previous batch's graph lives until its
    output is overwritten, so the peak holds two batches' activations; any accumulation of
    outputs or losses keeps every batch's graph until the process runs out of memory.

    ## Example
    ```python
    import torch


    def validate(model, loader):
        model.eval()
        correct = 0
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
        return correct
    ```

    ## Use instead
    ```python
    import torch


    @torch.no_grad()
    def validate(model, loader):
        model.eval()
        correct = 0
        for images, labels in loader:
            correct += (model(images).argmax(1) == labels).sum().item()
        return correct
    ```

    ## Fix safety
    Unsafe: the fix decorates an evaluation function with `@torch.no_grad()`, or wraps the loop
    (or statement) after `.eval()` in `with torch.no_grad():`. Outputs then no longer require
    grad, which breaks code elsewhere that backpropagates through them. Offered only where the
    file imports `torch` under that name.

    ## Measured
    Conv-BN-ReLU-Conv-ReLU-GAP-FC net, batch 16x3x32x32, 6 iterations, torch 2.13.0 on CPU
    (`benchmarks/memory_figures.py`, `f_training_loop_leaks`): an evaluation loop without
    `no_grad` peaks at 14,682,760 B per iteration against 6,291,460 B under `no_grad` (x2.33);
    with `total += loss` it grows by 6,294,148 B per iteration.
    """

TML502_DOCUMENTATION = """
    ## What it does
    Flags a loss or model output accumulated across loop iterations without turning it into a
    number or detaching it: `total += loss`, `total = total + loss`, and any arithmetic that
    adds a term to the value it carries (a running mean `mean = (n * mean + k * loss) / (n +
    k)`, a moving average `ma = 0.99 * ma + 0.01 * out.mean()`, `acc = acc + a + b`; not a
    value only scaled, `x = x * 0.5`, nor one also read inside a call, `acc = f(acc) + out`:
    `analysis/folds.py`, `tests/test_tml502_arithmetic_folds.py`), `losses.append(loss)`,
    `preds = torch.cat((preds, out))` (`torch.stack` ..., also in `x if c else ...`; no fix),
    `outputs.append(model(x))` (or a tuple, list or dict holding one: `outputs.append((out, y))`), `history["loss"].append(loss)` (a list under a literal key;
    no fix offered), and a comprehension over something named like a loader, data set or
    batches that collects model outputs (`outs = [model(b) for b in val_loader]`; what it
    collects never backpropagated, outside `no_grad`). A model output is also what a part or
    method of the model given its input by position returns (`self.model.decoder1(z)`;
    unpacked, only the loss beside it), also of a module the class builds whatever its name
    (`self._actor = Actor(...)`; `self._actor.log_prob(obs, a)`), and a torch function of one
    (`torch.mean((x - w) ** 2)`) keeps its graph, and so does what a function of the same
    file (or a plain method of the class) returns of one, element by element
    (`pred, truth = process_raw_pred(batch[i], out[i], n)`: its `pred` sliced and gathered
    from `out[i]`, not its `truth`; a loss such a helper makes afresh, KD-Lib's
    `loss = self.calculate_kd_loss(out, label)`, is made in each run of the caller's loops,
    `tests/test_tml502_helper_losses.py`), and what such a helper handed the model returns
    of its output (`preds, labels = _run_batch(data[i:i + bs], model, collate)`: the
    `preds`; not what a method of the model makes of it, `model.validation_epoch_end(outputs)`,
    `tests/test_tml502_batched_loops.py`), and the loss or output a plain method makes of the
    class's own modules and returns (`loss = self.optimize(batch)`, which runs the network,
    backpropagates and returns the loss: a loop calling a method that trains is a training
    loop, `tests/test_tml502_training_helpers.py`); a sum that starts as a string holds none
    (`tests/test_loop_computations.py`). An accumulator reset only under an `if` in the loop
    (`if step % 100 == 99: running_loss = 0.0`), or kept as a slice of itself
    (`recent = recent[-k:]`), still keeps up to N iterations' graphs and is reported;
    `__init__` of a class (filling a `ModuleList`) is not a loop over batches.
    A `training_step` is a loop body (Lightning's loop, or a trainer's, runs it once per batch):
    an attribute it adds its loss or a model output to (`self.val_loss += loss`,
    `self.train_outputs.append(preds)`) outlives every step and is reported, unless the step binds
    it afresh first; `validation_step` runs under `no_grad` (`analysis/step_hooks.py`,
    `tests/test_tml502_step_hooks.py`). What the step returns as its loss (`return loss`,
    `return {"loss": loss}`) is a loss whatever made it.
    A loss is what a criterion (`criterion(...)`, `loss_fn(...)`, an
    `nn.*Loss()` instance) or an `F.*_loss` / `F.cross_entropy` call returns, or what
    `.backward()` is called on (and a `*loss*` unpacked beside it), and every name that loss
    sums or multiplies before the backward of its loop, whatever computed it (PPO's
    `loss = policy_loss + w * value_loss - c * entropy`: `policy_losses.append(policy_loss)`;
    not what reaches it through a call's arguments, the targets, nor a constant weight,
    `tests/test_tml502_loss_terms.py`); the model as in TML501. Only loops that run the model, compute
    a loss or step are considered, and only values computed in the same iteration of a loop
    the accumulator outlives (also an outer one: `y_pred = torch.cat([y_pred, pred])` for
    each item of the output a loop over batches computed).
    `.item()`, `float()`, `.detach()`, accumulation under `torch.no_grad()` and accumulators
    that are themselves backpropagated (gradient accumulation; also what a Lightning module's
    `training_step` returns, which the trainer backpropagates, tests/test_trainer_step_returns.py;
    and a sum returned, or a value computed from it, to a caller that calls `backward` on what
    it gets, after getting it: a function of the file, or a base class in another file of the
    project whose training step runs `loss, metrics = self.compute_loss(...)` then
    `loss.backward()` or `accelerator.backward(loss)`, tests/test_tml502_returned_loss.py)
    are not reported; a backward counts where it runs after the sum or inside its loops, not one
    that ran before them (a script's training loop on `loss`, then a test loop summing into the
    same name: reported). Nor is a loop without backward in a function whose callers set the
    autograd mode, as for TML501: a top-level function every importer runs under `no_grad`, or
    a method of a module class that a file importing it may call while no caller of its own file
    runs it with autograd on (a diffusion model's `sample`, run by the generation script under
    `torch.no_grad()`: `analysis/importer_modes.py`, tests/test_tml502_importer_modes.py). Nor are
    one batch's items: a list filled in a loop that neither iterates something named like a
    loader / data set / batches, nor batches cut by a batch size (`range(0, n, batch_size)`,
    `range(n // bs)`, `torch.split(x, batch_size)`), nor trains, and that is stacked or summed after the loop
    (`torch.stack(bbox_loss)`: torchvision SSD's `compute_loss`; the embeddings of a word
    list) or, when the loop does not call the model (or a callee named like one) either,
    that holds losses (per-image losses handed on to the caller); nor a loss summed in such a
    loop that does not call the model (per-head losses of one forward, `lossd += lossr + lossf`
    over the discriminators' outputs: one batch's graphs, held by those outputs anyway,
    tests/test_trainer_step_returns.py); nor a loss summed in a function named as a loss
    (`IBP_loss`) that neither backpropagates nor calls in that loop the model, anything named
    like one or a callable it is given, over something it computes itself (not a loader handed
    in), whatever the name of what it iterates (`for cur_batch in torch.unique(batch_index)`:
    one term per group, the sum is the loss; tests/test_tml502_returned_loss.py); nor a sum started again in every batch of a loader
    and added to over an inner loop that is not one (KD-Lib's DML: `avg_student_loss` over a
    cohort of students, one batch's graphs); nor a loop whose only models are borrowed (a class with a base from
    another file that never assigns `self.model` nor calls eval/backward: see TML501).

    ## Why is this bad?
    The accumulated tensor references its autograd graph, and each `+=` links the next one.
    In a training loop, backward frees the saved activations, so device memory stays flat,
    but the graph nodes of every iteration stay reachable from the sum and host memory grows;
    an appended list also holds one tensor per iteration on its device. In a loop without
    backward and outside `no_grad` (evaluation), nothing frees the graphs: every batch's saved
    activations are kept and memory grows by a batch's activations per iteration until out of
    memory. The message says which case applies.

    ## Example
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        running_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss
        print(running_loss / len(loader))
    ```

    ## Use instead
    ```python
    import torch


    def train(model, loader, criterion, optimizer):
        running_loss = 0.0
        for x, y in loader:
            optimizer.zero_grad()
            loss = criterion(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()
        print(running_loss / len(loader))
    ```

    ## Fix safety
    Unsafe: the fix appends `.item()` to a loss known to be a 0-dim tensor (`.backward()` is
    called on it, or it comes from a reducing loss). The accumulator becomes a Python float and
    `.item()` waits for the device; it is offered only when the accumulator starts as a number
    (or is a list) and is only read where a float works (printing, logging, arithmetic,
    comparisons, `len` / `sum` / numpy).

    ## Measured
    Same net and loop (`benchmarks/memory_figures.py`, `f_training_loop_leaks`, torch 2.13.0):
    training with `total_loss += loss` keeps tensor memory flat (0 B per iteration); evaluation
    without `no_grad` with `total += loss` grows by 6,294,148 B (6.29 MB) per iteration. In the
    training case the accumulator's autograd graph gains nodes every iteration (host memory);
    this project has not measured how many bytes that is.
    """

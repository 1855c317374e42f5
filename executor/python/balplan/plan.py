"""Reading a balplan plan (plans/README.md: ``balplan.plan/v2``; v1 is read too).

A plan is read once, checked, and kept as small tuples: the layouts (which global rank holds
which pipeline position) and, per step, every pipeline's micro-batches with their spans. A
rank's view of a step (:meth:`Plan.rank_view`) is computed from those on demand, as
``balplan view`` computes it in C (planner/solve/view.c).

The steps come from :func:`_load_steps`, the one place that knows how steps are stored: today
the ``steps`` array of the whole JSON document. A plan of step lines (one JSON step per line,
issue 22 item 3) would give :class:`Plan` another sequence of the same ``_Step`` items.
"""

import json
import operator
import os
import sys
from collections import namedtuple

PLAN_FORMAT = "balplan.plan/v2"
PLAN_FORMAT_V1 = "balplan.plan/v1"
RANKVIEW_FORMAT = "balplan.rankview/v1"

ORDERS = ("draw", "file", "shuffle")
# sharding modes a plan stores ("adaptive" is resolved per micro-batch before writing)
SHARDS = ("sequence", "document", "ulysses")
ATTENTION_KINDS = ("dense", "sparse", "disaggregated")


class PlanError(ValueError):
    """A plan that cannot be read, or a request the plan cannot answer."""


# One pipeline of a layout: ranks is every rank, stage-major, (cp_i * tp + tp_i) within a
# stage; stage_layers one count per stage; max_tokens its micro-batch cap.
_Pipe = namedtuple("_Pipe", "tp cp pp ranks stage_layers max_tokens")
# A layout: place maps a rank to (pipeline, stage, cp_i, tp_i); server maps a rank to its
# index in servers.
_Layout = namedtuple("_Layout", "schedule pipes servers place server virtual_stages")
# A micro-batch: spans are (doc, offset, len, sample, sample_offset) tuples, sample and
# sample_offset -1 in a plan of draws.
_MB = namedtuple("_MB", "spans shard attention")
# A step: pipelines holds one tuple of _MB per pipeline of its layout; tokens is the step's
# trained tokens (the plan's predicted.tokens).
_Step = namedtuple("_Step", "layout pipelines tokens")


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _index(x):
    """x as an int when it is an integer (numpy's too), else None."""
    if isinstance(x, bool):
        return None
    try:
        return operator.index(x)
    except TypeError:
        return None


def _get(obj, key, where, kind, required=True):
    """obj[key] checked to be of kind ("object", "array", "string", "integer")."""
    if key not in obj:
        if required:
            raise PlanError("%s.%s is missing" % (where, key))
        return None
    v = obj[key]
    ok = {
        "object": isinstance(v, dict),
        "array": isinstance(v, list),
        "string": isinstance(v, str),
        "integer": _is_int(v),
    }[kind]
    if not ok:
        raise PlanError("%s.%s is not %s %s" % (where, key, "an" if kind[0] in "aio" else "a",
                                                 kind))
    return v


def _int_in(obj, key, where, lo, hi=None, required=True):
    v = _get(obj, key, where, "integer", required)
    if v is None:
        return None
    if v < lo or (hi is not None and v > hi):
        raise PlanError("%s.%s is %d, not in [%d, %s]" % (where, key, v, lo,
                                                          "inf" if hi is None else hi))
    return v


def _int_tuple(a, n, where):
    if not isinstance(a, list) or len(a) != n:
        raise PlanError("%s is not an array of %d integers" % (where, n))
    for i, x in enumerate(a):
        if not _is_int(x):
            raise PlanError("%s[%d] is not an integer" % (where, i))
    return a


class _Context(object):
    """What reading the steps needs from the plan's head."""

    def __init__(self, v1, samples, gpus, layouts, first_step=0, carried=()):
        self.v1 = v1
        self.samples = samples
        self.gpus = gpus
        self.layouts = layouts
        self.first_step = first_step
        self.carried = carried


def _place_table(pipes, servers):
    place = {}
    for k, p in enumerate(pipes):
        per = p.tp * p.cp
        for idx, r in enumerate(p.ranks):
            place[r] = (k, idx // per, idx // p.tp % p.cp, idx % p.tp)
    return place, {r: i for i, r in enumerate(servers)}


def _layout_v2(o, gpus, layers, where):
    if not isinstance(o, dict):
        raise PlanError("%s is not an object" % where)
    schedule = _get(o, "schedule", where, "string")
    vstages = 1
    if "virtual_stages" in o:  # interleaved 1F1B's model chunks per rank (plans/README.md)
        vstages = _int_in(o, "virtual_stages", where, 1)
    pipes_j = _get(o, "pipelines", where, "array")
    servers = _get(o, "servers", where, "array", required=False) or []
    pipes, seen = [], set()
    for k, pj in enumerate(pipes_j):
        w = "%s.pipelines[%d]" % (where, k)
        if not isinstance(pj, dict):
            raise PlanError("%s is not an object" % w)
        tp = _int_in(pj, "tp", w, 1)
        cp = _int_in(pj, "cp", w, 1)
        pp = _int_in(pj, "pp", w, 1)
        cap = _int_in(pj, "max_microbatch_tokens", w, 1)
        ranks_j = _get(pj, "ranks", w, "array")
        if len(ranks_j) != pp:
            raise PlanError("%s.ranks has %d stages, expected pp = %d" % (w, len(ranks_j), pp))
        ranks = []
        for s, st in enumerate(ranks_j):
            ws = "%s.ranks[%d]" % (w, s)
            if not isinstance(st, list) or len(st) != tp * cp:
                raise PlanError("%s is not an array of tp*cp = %d ranks" % (ws, tp * cp))
            for i, r in enumerate(st):
                if not _is_int(r) or r < 0 or r >= gpus:
                    raise PlanError("%s[%d] is not a rank of the plan's %d GPUs" % (ws, i, gpus))
                if r in seen:
                    raise PlanError("%s[%d]: rank %d is in two pipeline positions" % (ws, i, r))
                seen.add(r)
                ranks.append(r)
        sl = _get(pj, "stage_layers", w, "array")
        if len(sl) != pp or not all(_is_int(x) and x >= 1 for x in sl):
            raise PlanError("%s.stage_layers is not %d positive integers" % (w, pp))
        if layers is not None and sum(sl) != layers:
            raise PlanError("%s.stage_layers sum to %d, not the model's %d layers"
                            % (w, sum(sl), layers))
        pipes.append(_Pipe(tp, cp, pp, tuple(ranks), tuple(sl), cap))
    for i, r in enumerate(servers):
        if not _is_int(r) or r < 0 or r >= gpus:
            raise PlanError("%s.servers[%d] is not a rank of the plan's %d GPUs" % (where, i, gpus))
    place, server = _place_table(pipes, servers)
    return _Layout(schedule, tuple(pipes), tuple(servers), place, server, vstages)


def _layout_v1(cluster, method, gpus, layers):
    """v1's one layout: Megatron-LM's order, rank = tp_i + tp*(cp_i + cp*(dp_i + dp*pp_i))."""
    w = "plan.cluster"
    tp = _int_in(cluster, "tp", w, 1)
    cp = _int_in(cluster, "cp", w, 1)
    pp = _int_in(cluster, "pp", w, 1)
    dp = _int_in(cluster, "dp", w, 1)
    cap = _int_in(method, "max_microbatch_tokens", "plan.method", 1)
    if tp * cp * pp * dp != gpus:
        raise PlanError("plan.cluster: tp*cp*pp*dp = %d does not match %d GPUs"
                        % (tp * cp * pp * dp, gpus))
    if layers is None or pp > layers:
        raise PlanError("plan.cluster: pp %d exceeds the model's layers" % pp)
    stage_layers = tuple(layers // pp + (1 if s < layers % pp else 0) for s in range(pp))
    pipes = []
    for d in range(dp):
        ranks = tuple(t + tp * (c + cp * (d + dp * s))
                      for s in range(pp) for c in range(cp) for t in range(tp))
        pipes.append(_Pipe(tp, cp, pp, ranks, stage_layers, cap))
    place, server = _place_table(pipes, ())
    return _Layout("1f1b", tuple(pipes), (), place, server, 1)


def _read_mb(o, ctx, where):
    if not isinstance(o, dict):
        raise PlanError("%s is not an object" % where)
    spans_j = _get(o, "spans", where, "array")
    if not spans_j:
        raise PlanError("%s.spans is empty" % where)
    n = 5 if ctx.samples else 3
    spans = []
    for q, t in enumerate(spans_j):
        w = "%s.spans[%d]" % (where, q)
        if isinstance(t, list) and len(t) != n and len(t) in (3, 4, 5):
            raise PlanError("%s has %d entries; a plan %s has %d" % (
                w, len(t), "of samples (sampling.source)" if ctx.samples else "of draws", n))
        _int_tuple(t, n, w)
        if t[0] < 0 or t[1] < 0 or t[2] < 1:
            raise PlanError("%s: document %d, offset %d, length %d is not a span"
                            % (w, t[0], t[1], t[2]))
        if ctx.samples:
            if t[3] < 0 or t[4] < 0:
                raise PlanError("%s: sample %d at offset %d is negative" % (w, t[3], t[4]))
            spans.append(tuple(t))
        else:
            spans.append((t[0], t[1], t[2], -1, -1))
    shard = _get(o, "shard", where, "string")
    if shard not in SHARDS:
        raise PlanError('%s.shard "%s" is not a sharding mode' % (where, shard))
    attention = "dense"
    if "attention" in o:
        a = _get(o, "attention", where, "object")
        attention = _get(a, "kind", where + ".attention", "string")
        if attention not in ATTENTION_KINDS:
            raise PlanError('%s.attention.kind "%s" is not dense, sparse or disaggregated'
                            % (where, attention))
    return _MB(tuple(spans), shard, attention)


def _read_step(o, i, ctx, docs):
    where = "plan.steps[%d]" % i
    if not isinstance(o, dict):
        raise PlanError("%s is not an object" % where)
    index = _get(o, "index", where, "integer")
    if index != ctx.first_step + i:
        raise PlanError("%s.index is %d, expected %d" % (where, index, ctx.first_step + i))
    if ctx.v1:
        layout = 0
    else:
        layout = _int_in(o, "layout", where, 0, len(ctx.layouts) - 1)
    lay = ctx.layouts[layout]
    for k, d in enumerate(_get(o, "docs", where, "array")):
        w = "%s.docs[%d]" % (where, k)
        if ctx.samples:
            _int_tuple(d, 4, w)
            if d[2] < 0 or d[3] < 0:
                raise PlanError("%s: sample %d at offset %d is negative" % (w, d[2], d[3]))
            docs[d[0]] = (d[2], d[3])
        else:
            _int_tuple(d, 2, w)
    pipes_j = _get(o, "pipelines", where, "array")
    if len(pipes_j) != len(lay.pipes):
        raise PlanError("%s has %d pipelines but layout %d has %d"
                        % (where, len(pipes_j), layout, len(lay.pipes)))
    pipelines, tokens = [], 0
    for k, pj in enumerate(pipes_j):
        w = "%s.pipelines[%d]" % (where, k)
        if not isinstance(pj, dict):
            raise PlanError("%s is not an object" % w)
        mbs = []
        for j, mj in enumerate(_get(pj, "microbatches", w, "array")):
            wm = "%s.microbatches[%d]" % (w, j)
            mb = _read_mb(mj, ctx, wm)
            for q, s in enumerate(mb.spans):
                d = docs.get(s[0]) if ctx.samples else None
                if d is not None and (s[3] != d[0] or s[4] != d[1] + s[1]):
                    raise PlanError(
                        "%s.spans[%d] names sample %d at offset %d, but document %d is "
                        "sample %d from offset %d" % (wm, q, s[3], s[4], s[0], d[0], d[1]))
                tokens += s[2]
            mbs.append(mb)
        pipelines.append(tuple(mbs))
    pred = o.get("metrics" if ctx.v1 else "predicted")
    if isinstance(pred, dict) and _is_int(pred.get("tokens")):
        tokens = pred["tokens"]
    return _Step(layout, tuple(pipelines), tokens)


def _load_steps(root, ctx):
    """The plan's steps as a sequence of _Step, checked.

    The seam for other storage: a plan of step lines would read them one line at a time
    (keeping the document index that resolves a span's sample across steps) and return a
    sequence with the same items; nothing else in the package reads ``steps``.
    """
    steps_j = root.get("steps")
    if not isinstance(steps_j, _StepLines):
        steps_j = _get(root, "steps", "plan", "array")
    docs = {}
    for c in ctx.carried:  # a window's documents drawn before it: [id, len, step, to, sample, off]
        if ctx.samples:
            docs[c[0]] = (c[4], c[5])
    return [_read_step(o, i, ctx, docs) for i, o in enumerate(steps_j)]


def _plan_name(path):
    if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__"):
        return os.fsdecode(path)
    return getattr(path, "name", "<plan>")


def open_plan(path, world_size=None, dataset_sha256=None):
    """Reads a plan file (``balplan.plan/v2``, or v1) and checks it.

    ``path``: a file name, ``"-"`` for standard input, or an open text/binary file.
    ``world_size``: the training job's number of processes; a plan made for another number of
    GPUs is refused. ``dataset_sha256``: the sha256 of the sample index the job reads; a plan
    of other samples is refused. Raises :class:`PlanError` (a ValueError) with a message
    naming what is wrong; an unreadable file raises the OSError it gave.
    """
    name = _plan_name(path)
    if isinstance(path, (str, bytes)) or hasattr(path, "__fspath__"):
        if name != "-":
            with open(path, "rb") as f:
                return _open_file(f, name, world_size, dataset_sha256)
        path = sys.stdin.buffer
    return _open_file(path, name, world_size, dataset_sha256)


def _text(data, name):
    if isinstance(data, bytes):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise PlanError("%s: not a balplan plan (not UTF-8 text: %s)" % (name, e))
    return data


def _open_file(f, name, world_size, dataset_sha256):
    """A plan of lines is read a line at a time (each step line turned into the package's
    small tuples as it comes, never the whole document at once); one JSON document whole."""
    first = _text(f.readline(), name)
    header = _lines_header(first, name)
    if header is not None:
        header["steps"] = _StepLines(f, name)
        plan = Plan.from_json(header, name=name, world_size=world_size,
                              dataset_sha256=dataset_sha256)
        if header["steps"].summary is None:
            raise PlanError("%s: the plan of lines ends after %d lines without its summary "
                            "line (a truncated file?)" % (name, header["steps"].lineno))
        return plan
    text = first + _text(f.read(), name)
    try:
        root = json.loads(text)
    except ValueError as e:
        raise PlanError("%s: not a balplan plan (not JSON: %s)" % (name, e))
    return Plan.from_json(root, name=name, world_size=world_size,
                          dataset_sha256=dataset_sha256)


def _lines_header(first, name):
    """The header of a plan of lines (its first line, a whole JSON object with "layout":
    "lines"), or None when the plan is one JSON document (whose first line is "{")."""
    try:
        header = json.loads(first) if first.strip() else None
    except ValueError:
        return None
    if not isinstance(header, dict) or "layout" not in header:
        return None
    if header.pop("layout") != "lines":
        raise PlanError("%s: line 1 is not a header with \"layout\": \"lines\"" % name)
    if "steps" in header:
        raise PlanError("%s: line 1 holds steps; a plan of lines has one per line" % name)
    return header


class _StepLines(object):
    """The step lines of a plan of lines, parsed one at a time as they are iterated; the
    summary line ends them (kept in ``summary``); nothing may follow it."""

    def __init__(self, f, name):
        self.f, self.name, self.summary, self.lineno = f, name, None, 1

    def __iter__(self):
        for raw in self.f:
            self.lineno += 1
            line = _text(raw, self.name).rstrip("\r\n")
            if self.summary is not None:
                if line.strip():
                    raise PlanError("line %d follows the summary line" % self.lineno)
                continue
            try:
                o = json.loads(line)
            except ValueError as e:
                raise PlanError("line %d of the plan is not JSON: %s" % (self.lineno, e))
            if not isinstance(o, dict):
                raise PlanError("line %d of the plan is not a JSON object" % self.lineno)
            if len(o) == 1 and "summary" in o:
                self.summary = o["summary"]
                continue
            yield o


RankSample = namedtuple("RankSample", "step microbatch sample sample_offset len")
RankSample.__doc__ = """One span a rank's pipeline trains: tokens [sample_offset,
sample_offset + len) of sample ``sample`` in micro-batch ``microbatch`` of step ``step``."""


class Plan(object):
    """A plan, read and checked. Attributes:

    ``steps`` (how many), ``world_size`` (GPUs), ``method`` (its name), ``order`` ("draw":
    a what-if plan of drawn lengths; "file" or "shuffle": the team's samples), ``source``
    (``sampling.source`` as a dict, None in a plan of draws), ``max_tokens``
    (``sampling.max_tokens``), ``dataset_sha256`` (``inputs.dataset.sha256``), ``seed``,
    ``format``, ``dataset`` (the dataset's name), ``documents`` (``sampling.documents``),
    ``gpus_per_node``, ``layouts`` (how many).
    """

    def __init__(self):
        raise TypeError("use balplan.open_plan(path) or Plan.from_json(obj)")

    @classmethod
    def from_json(cls, root, name="plan", world_size=None, dataset_sha256=None):
        """A Plan from the parsed JSON document ``root`` (see :func:`open_plan`)."""
        self = object.__new__(cls)
        self.name = name
        try:
            self._read(root)
        except PlanError as e:
            raise PlanError("%s: %s" % (name, e))
        if world_size is not None and world_size != self.world_size:
            raise PlanError("%s: plan is for %d GPUs, not a world of %d"
                            % (name, self.world_size, world_size))
        if dataset_sha256 is not None and dataset_sha256.lower() != self.dataset_sha256:
            what = ("plan's samples come from index" if self.order != "draw"
                    else "plan's documents were drawn from dataset")
            raise PlanError("%s: %s sha256 %s, not %s"
                            % (name, what, self.dataset_sha256, dataset_sha256.lower()))
        return self

    def _read(self, root):
        if not isinstance(root, dict):
            raise PlanError("not a balplan plan (a JSON object with \"format\": \"%s\")"
                            % PLAN_FORMAT)
        fmt = root.get("format")
        if fmt not in (PLAN_FORMAT, PLAN_FORMAT_V1):
            raise PlanError('not a balplan plan: format %s (expected "%s" or "%s")'
                            % (json.dumps(fmt) if isinstance(fmt, str) else "missing",
                               PLAN_FORMAT, PLAN_FORMAT_V1))
        v1 = fmt == PLAN_FORMAT_V1
        self.format = fmt
        inputs = _get(root, "inputs", "plan", "object")
        ds = _get(inputs, "dataset", "plan.inputs", "object")
        self.dataset = _get(ds, "name", "plan.inputs.dataset", "string")
        self.dataset_sha256 = _get(ds, "sha256", "plan.inputs.dataset", "string")
        self.seed = _int_in(inputs, "seed", "plan.inputs", 0)
        cluster = _get(root, "cluster", "plan", "object")
        self.world_size = _int_in(cluster, "gpus", "plan.cluster", 1)
        self.gpus_per_node = _int_in(cluster, "gpus_per_node", "plan.cluster", 1)
        model = _get(root, "model", "plan", "object")
        layers = _int_in(model, "layers", "plan.model", 1)
        method = _get(root, "method", "plan", "object")
        self.method = _get(method, "name", "plan.method", "string")
        self.params = dict(_get(method, "params", "plan.method", "object"))
        sampling = _get(root, "sampling", "plan", "object")
        self.max_tokens = _int_in(sampling, "max_tokens", "plan.sampling", 1)
        self.documents = "per-method"
        self.order = "draw"
        self.source = None
        if not v1:
            self.documents = _get(sampling, "documents", "plan.sampling", "string",
                                  required=False) or "per-method"
            self.order = _get(sampling, "order", "plan.sampling", "string",
                              required=False) or "draw"
            if self.order not in ORDERS:
                raise PlanError('plan.sampling.order "%s" is not draw, file or shuffle'
                                % self.order)
            src = _get(sampling, "source", "plan.sampling", "object", required=False)
            if (src is not None) != (self.order != "draw"):
                raise PlanError("plan.sampling: order %s %s a source"
                                % (self.order, "has no" if src is not None else "needs"))
            self.source = dict(src) if src is not None else None
        if v1:
            self._layouts = [_layout_v1(cluster, method, self.world_size, layers)]
        else:
            lays = _get(root, "layouts", "plan", "array")
            if not lays:
                raise PlanError("plan.layouts is empty")
            self._layouts = [_layout_v2(o, self.world_size, layers, "plan.layouts[%d]" % i)
                             for i, o in enumerate(lays)]
        self.layouts = len(self._layouts)
        # A window of a longer run (plans/README.md "Windows"): steps keep the run's
        # numbers, first_step .. first_step + steps - 1, and are addressed by them.
        self.first_step, self.open, carried = 0, False, ()
        win = None if v1 else _get(root, "window", "plan", "object", required=False)
        if win is not None:
            self.first_step = _int_in(win, "first_step", "plan.window", 0)
            self.open = win.get("open") is True
            carried = _get(win, "carried_in", "plan.window", "array")
            width = 6 if self.order != "draw" else 4
            for k, c in enumerate(carried):
                _int_tuple(c, width, "plan.window.carried_in[%d]" % k)
        ctx = _Context(v1, self.order != "draw", self.world_size, self._layouts,
                       self.first_step, carried)
        self._steps = _load_steps(root, ctx)
        self.steps = len(self._steps)

    def __repr__(self):
        return "<balplan.Plan %s: %s, %d steps, %d GPUs, order %s>" % (
            self.name, self.method, self.steps, self.world_size, self.order)

    # ---- per step ----

    def _step(self, step):
        i = _index(step)
        f, last = self.first_step, self.first_step + self.steps - 1
        if i is None or i < 0:
            raise PlanError("step %r is not a step: the plan has steps %d to %d"
                            % (step, f, last))
        if i < f:
            raise PlanError("step %d is before the plan's first: it has steps %d to %d"
                            % (i, f, last))
        if i > last:
            raise PlanError("step %d is past the plan's end: it has steps %d to %d"
                            % (i, f, last))
        return self._steps[i - f]

    def _rank(self, rank):
        r = _index(rank)
        if r is None or r < 0 or r >= self.world_size:
            raise PlanError("rank %r is outside the plan's world of %d GPUs"
                            % (rank, self.world_size))
        return r

    def step_tokens(self, step):
        """The tokens the whole cluster trains in ``step`` (the loss normaliser)."""
        return self._step(step).tokens

    def step_loss_tokens(self, step):
        """The tokens of ``step`` that have a label: every span's tokens but its last."""
        st = self._step(step)
        return sum(s[2] - 1 for mbs in st.pipelines for mb in mbs for s in mb.spans)

    def layout_of(self, step):
        """The index of the layout ``step`` runs on."""
        return self._step(step).layout

    def rank_view(self, step, rank):
        """What global rank ``rank`` trains in ``step``: a :class:`balplan.view.RankView`."""
        from .view import make_rank_view
        st = self._step(step)
        rank = self._rank(rank)
        return make_rank_view(self, operator.index(step), st, self._layouts[st.layout], rank)

    def rank_views(self, rank, start_step=None, steps=None):
        """The rank's views of ``steps`` steps from ``start_step`` (the plan's first: None;
        all remaining: None)."""
        self._rank(rank)
        if start_step is None:
            start_step = self.first_step
        stop = self.first_step + self.steps
        end = stop if steps is None else min(stop, start_step + steps)
        if start_step != stop:
            self._step(start_step)
        for s in range(start_step, end):
            yield self.rank_view(s, rank)

    def samples_of_rank(self, rank):
        """Every span rank's pipeline trains, as :data:`RankSample` tuples in step order,
        then micro-batch order (each CP rank of the pipeline trains a slice of each)."""
        self._rank(rank)
        for i, st in enumerate(self._steps):
            pl = self._layouts[st.layout].place.get(rank)
            if pl is None:
                continue
            for j, mb in enumerate(st.pipelines[pl[0]]):
                for s in mb.spans:
                    yield RankSample(self.first_step + i, j, s[3], s[4], s[2])

    def sample_ids(self):
        """The set of sample ids the plan trains (a plan of samples only)."""
        self._need_samples("sample_ids")
        return {s[3] for st in self._steps for mbs in st.pipelines for mb in mbs
                for s in mb.spans}

    def _need_samples(self, what):
        if self.order == "draw":
            raise PlanError("%s: a plan of draws (sampling.order draw) names no samples (%s)"
                            % (self.name, what))

    def check_samples(self, sample_ids):
        """Raises PlanError unless every sample the plan trains is in ``sample_ids`` (any
        collection supporting ``in``; a list or iterator is turned into a set)."""
        self._need_samples("check_samples")
        if not isinstance(sample_ids, (set, frozenset, dict, range)):
            if not hasattr(sample_ids, "__contains__") or not hasattr(sample_ids, "__len__") \
                    or isinstance(sample_ids, (list, tuple)):
                sample_ids = set(sample_ids)
        for i, st in enumerate(self._steps):
            for k, mbs in enumerate(st.pipelines):
                for j, mb in enumerate(mbs):
                    for s in mb.spans:
                        if s[3] not in sample_ids:
                            raise PlanError(
                                "%s: sample %d (step %d, pipeline %d, micro-batch %d, tokens "
                                "%d to %d) is not among the given samples"
                                % (self.name, s[3], i, k, j, s[4], s[4] + s[2]))

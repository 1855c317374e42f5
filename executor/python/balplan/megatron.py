"""A balplan plan as Megatron-LM's sequence-packing planning contract.

Megatron-LM's ``megatron/core/datasets/sequence_packing`` (api.py) defines what an offline
planner hands its execution engine: *packs* (``PackDescriptor``: sample ids, sequence
lengths, ``cu_seqlens``) built by a ``SequencePackingScheduler.build_packs(sequences,
constraints)``, and their placement (``ExecutionPlan``: ``ExecutionGroup`` s of
``PackAssignment`` s with ``executor_ranks`` and ``local_cp_size``) built by a
``PlacementScheduler.build_plan(packs, resources)``. This module has types with the same
names, fields and call shapes (it does not import Megatron-LM), schedulers that read a
balplan plan, and :func:`to_megatron`, which rebuilds the objects as Megatron-LM's own types
where Megatron-LM is installed. executor/python/README.md maps every field.

A pack is one balplan micro-batch. Packs of a step are numbered pipeline by pipeline, each
pipeline's micro-batches in execution order (``pack_id`` 0, 1, ...); execution group g holds
micro-batch g of every pipeline that has one.
"""

from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Mapping, Optional, Sequence, Tuple

from .plan import PlanError
from .view import shard_ranges


class PlacementKind(str, Enum):
    """Which backend executes a pack (the same values as Megatron-LM's)."""

    DATA_PARALLEL = "data_parallel"
    STATIC_CP = "static_cp"
    DYNAMIC_CP = "dynamic_cp"
    HYBRID_EP = "hybrid_ep"
    CUSTOM = "custom"


def _ints(values, name):
    out = tuple(int(v) for v in values)
    if not out:
        raise ValueError("%s must not be empty" % name)
    return out


def _positive(value, name):
    if value <= 0:
        raise ValueError("%s must be positive, got %s" % (name, value))


def _cumsum(lengths):
    out = [0]
    for n in lengths:
        out.append(out[-1] + int(n))
    return tuple(out)


@dataclass(frozen=True)
class SequenceDescriptor:
    """One source sequence: a sample id and its token count."""

    sample_id: int
    num_tokens: int
    padded_num_tokens: Optional[int] = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        _positive(self.num_tokens, "num_tokens")
        if self.padded_num_tokens is not None and self.padded_num_tokens < self.num_tokens:
            raise ValueError("padded_num_tokens %d is below num_tokens %d"
                             % (self.padded_num_tokens, self.num_tokens))

    @property
    def materialized_tokens(self):
        return self.num_tokens if self.padded_num_tokens is None else self.padded_num_tokens


@dataclass(frozen=True)
class PackingConstraints:
    """What a pack may hold (``max_tokens_per_pack``: the pipeline's micro-batch cap)."""

    max_tokens_per_pack: int
    pad_to_multiple: int = 1
    sequence_parallel_size: int = 1
    backend_alignment: Optional[int] = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        _positive(self.max_tokens_per_pack, "max_tokens_per_pack")
        _positive(self.pad_to_multiple, "pad_to_multiple")
        _positive(self.sequence_parallel_size, "sequence_parallel_size")
        if self.backend_alignment is not None:
            _positive(self.backend_alignment, "backend_alignment")


@dataclass(frozen=True)
class PackDescriptor:
    """One pack (a balplan micro-batch): its sequences' sample ids and real lengths."""

    pack_id: int
    sample_ids: Sequence[int]
    sequence_lengths: Sequence[int]
    padded_sequence_lengths: Optional[Sequence[int]] = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ids = _ints(self.sample_ids, "sample_ids")
        lens = _ints(self.sequence_lengths, "sequence_lengths")
        if len(ids) != len(lens):
            raise ValueError("sample_ids and sequence_lengths differ in length: %d != %d"
                             % (len(ids), len(lens)))
        for n in lens:
            _positive(n, "sequence_lengths entries")
        object.__setattr__(self, "sample_ids", ids)
        object.__setattr__(self, "sequence_lengths", lens)
        if self.padded_sequence_lengths is not None:
            padded = _ints(self.padded_sequence_lengths, "padded_sequence_lengths")
            if len(padded) != len(lens) or any(p < n for p, n in zip(padded, lens)):
                raise ValueError("padded_sequence_lengths must pair with sequence_lengths, "
                                 "each at least its length")
            object.__setattr__(self, "padded_sequence_lengths", padded)

    @property
    def total_tokens(self):
        return sum(self.sequence_lengths)

    @property
    def materialized_tokens(self):
        return sum(self.padded_sequence_lengths or self.sequence_lengths)

    @property
    def cu_seqlens(self) -> Tuple[int, ...]:
        return _cumsum(self.sequence_lengths)

    @property
    def cu_seqlens_padded(self) -> Tuple[int, ...]:
        return _cumsum(self.padded_sequence_lengths or self.sequence_lengths)


@dataclass(frozen=True)
class RankGroup:
    """A named group of global ranks (here: one pipeline stage's CP group at a TP position)."""

    group_id: str
    ranks: Sequence[int]
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ranks = _ints(self.ranks, "ranks")
        if len(set(ranks)) != len(ranks) or min(ranks) < 0:
            raise ValueError("ranks must be distinct and non-negative, got %s" % (ranks,))
        object.__setattr__(self, "ranks", ranks)


@dataclass(frozen=True)
class PlacementResources:
    """The parallel sizes a step's layout offers, and its rank groups by id."""

    dp_size: int = 1
    cp_size: int = 1
    ep_size: int = 1
    tp_size: int = 1
    pp_size: int = 1
    rank_groups: Mapping[str, RankGroup] = field(default_factory=dict)
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        for name in ("dp_size", "cp_size", "ep_size", "tp_size", "pp_size"):
            _positive(getattr(self, name), name)


@dataclass(frozen=True)
class PackAssignment:
    """Where a pack runs: ``executor_ranks`` (its pipeline's CP group at one stage and TP
    position, CP position order) and ``local_cp_size`` (the pipeline's cp)."""

    pack_id: int
    placement_kind: PlacementKind
    executor_ranks: Sequence[int]
    rank_group_id: Optional[str] = None
    local_cp_size: Optional[int] = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        ranks = _ints(self.executor_ranks, "executor_ranks")
        if len(set(ranks)) != len(ranks) or min(ranks) < 0:
            raise ValueError("executor_ranks must be distinct and non-negative, got %s"
                             % (ranks,))
        object.__setattr__(self, "executor_ranks", ranks)
        if self.local_cp_size is not None:
            _positive(self.local_cp_size, "local_cp_size")


@dataclass(frozen=True)
class ExecutionGroup:
    """Pack assignments that run together: micro-batch slot ``group_id`` of every pipeline."""

    group_id: int
    assignments: Sequence[PackAssignment]
    requires_barrier_after: bool = True
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        a = tuple(self.assignments)
        if not a:
            raise ValueError("assignments must not be empty")
        object.__setattr__(self, "assignments", a)


@dataclass(frozen=True)
class ExecutionPlan:
    """A step's execution groups in order."""

    groups: Sequence[ExecutionGroup]
    num_microbatches: Optional[int] = None
    total_tokens: Optional[int] = None
    sequence_square_sum: Optional[int] = None
    metadata: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self):
        g = tuple(self.groups)
        if not g:
            raise ValueError("groups must not be empty")
        object.__setattr__(self, "groups", g)
        for name in ("num_microbatches", "total_tokens", "sequence_square_sum"):
            if getattr(self, name) is not None:
                _positive(getattr(self, name), name)

    @property
    def assignment_count(self):
        return sum(len(g.assignments) for g in self.groups)

    @property
    def pack_ids(self):
        return tuple(a.pack_id for g in self.groups for a in g.assignments)


# ---- a plan's step as packs and placements ----

def _pipelines(plan, step, rank):
    """(pipeline index, _Pipe, micro-batches) of the step, only rank's pipeline when given."""
    st = plan._step(step)
    lay = plan._layouts[st.layout]
    if rank is None:
        return st, lay, list(range(len(lay.pipes)))
    pl = lay.place.get(plan._rank(rank))
    return st, lay, ([] if pl is None else [pl[0]])


def step_sequences(plan, step):
    """The step's source sequences as :class:`SequenceDescriptor` s: one per sample it trains
    (per document in a plan of draws), in the order packs first train them, ``num_tokens``
    the end of the furthest token of it the step trains (a sample holds at least those),
    ``metadata["spans"]`` its spans as (pack position: pipeline, micro-batch; doc,
    doc_offset, len, sample_offset)."""
    st = plan._step(step)
    order, ends, spans = [], {}, {}
    for k, mbs in enumerate(st.pipelines):
        for j, mb in enumerate(mbs):
            for s in mb.spans:
                sid = _sample_id(plan, s)
                if sid not in ends:
                    order.append(sid)
                    ends[sid] = 0
                    spans[sid] = []
                ends[sid] = max(ends[sid], _span_start(plan, s) + s[2])
                spans[sid].append((k, j, s[0], s[1], s[2], s[4]))
    return [SequenceDescriptor(sid, ends[sid], None, {"spans": tuple(spans[sid])})
            for sid in order]


def _span_start(plan, span):
    return span[4] if plan.order != "draw" else span[1]


def _sample_id(plan, span):
    # a plan of draws names no samples: its documents are the sequences
    return span[3] if plan.order != "draw" else span[0]


def build_packs(plan, step, sequences=None, constraints=None, rank=None):
    """The step's packs (one per micro-batch), pipeline by pipeline, each pipeline's
    micro-batches in execution order; only ``rank``'s pipeline when ``rank`` is given (its
    packs keep their step-wide ``pack_id``).

    ``sequences`` (optional :class:`SequenceDescriptor` s, Megatron-LM's call shape): when
    given, every planned sequence's sample must be among them with at least the tokens the
    plan trains of it (PlanError otherwise). ``constraints`` (optional
    :class:`PackingConstraints`): every pack must fit ``max_tokens_per_pack``.
    """
    st, lay, which = _pipelines(plan, step, rank)
    have = None
    if sequences is not None:
        have = {}
        for sq in sequences:
            have[int(sq.sample_id)] = max(have.get(int(sq.sample_id), 0), int(sq.num_tokens))
    packs, pack_id = [], 0
    for k, mbs in enumerate(st.pipelines):
        for j, mb in enumerate(mbs):
            pid = pack_id
            pack_id += 1
            if k not in which:
                continue
            ids = [_sample_id(plan, s) for s in mb.spans]
            lens = [s[2] for s in mb.spans]
            if have is not None:
                for s, sid in zip(mb.spans, ids):
                    end = _span_start(plan, s) + s[2]
                    if have.get(sid, 0) < end:
                        raise PlanError(
                            "step %d pack %d trains tokens up to %d of sample %d, which the "
                            "given sequences %s" % (step, pid, end, sid,
                                                   "lack" if sid not in have else
                                                   "have only %d tokens of" % have[sid]))
            if constraints is not None and sum(lens) > constraints.max_tokens_per_pack:
                raise PlanError("step %d pack %d holds %d tokens, more than "
                                "max_tokens_per_pack %d" % (step, pid, sum(lens),
                                                            constraints.max_tokens_per_pack))
            p = lay.pipes[k]
            packs.append(PackDescriptor(pid, ids, lens, None, {
                "step": step, "pipeline": k, "microbatch": j, "shard": mb.shard,
                "attention": mb.attention, "cp": p.cp, "max_tokens": p.max_tokens,
                "docs": tuple(s[0] for s in mb.spans),
                "doc_offsets": tuple(s[1] for s in mb.spans),
                "sample_offsets": tuple(s[4] for s in mb.spans)}))
    return packs


def _group_id(step, k, stage, tp_i):
    return "step%d/pipeline%d/stage%d/tp%d" % (step, k, stage, tp_i)


def _cp_group(p, stage, tp_i):
    per = p.tp * p.cp
    return tuple(p.ranks[stage * per + c * p.tp + tp_i] for c in range(p.cp))


def placement_resources(plan, step):
    """The step's layout as :class:`PlacementResources`: ``dp_size`` its pipelines, tp, cp
    and pp of its pipelines (the largest when they differ, ``metadata["schemes"]`` listing
    each), and every CP group as a :class:`RankGroup`."""
    st = plan._step(step)
    lay = plan._layouts[st.layout]
    groups = {}
    for k, p in enumerate(lay.pipes):
        for stage in range(p.pp):
            for t in range(p.tp):
                gid = _group_id(step, k, stage, t)
                groups[gid] = RankGroup(gid, _cp_group(p, stage, t),
                                        {"pipeline": k, "stage": stage, "tp_rank": t})
    schemes = tuple((p.tp, p.cp, p.pp) for p in lay.pipes)
    return PlacementResources(
        dp_size=max(1, len(lay.pipes)), cp_size=max([1] + [p.cp for p in lay.pipes]),
        tp_size=max([1] + [p.tp for p in lay.pipes]),
        pp_size=max([1] + [p.pp for p in lay.pipes]), rank_groups=groups,
        metadata={"step": step, "layout": st.layout, "schedule": lay.schedule,
                  "virtual_stages": lay.virtual_stages,
                  "schemes": schemes, "homogeneous": len(set(schemes)) <= 1})


def build_plan(plan, step, packs=None, resources=None, rank=None, stage=0, tp_rank=0):
    """The step's :class:`ExecutionPlan`: group g holds micro-batch g of every pipeline (of
    ``rank``'s pipeline only when ``rank`` is given); each pack's ``executor_ranks`` are its
    pipeline's CP group at pipeline stage ``stage`` and TP position ``tp_rank`` (``rank``'s
    own when given), in CP position order, and ``local_cp_size`` is the pipeline's cp.

    ``packs``: packs from :func:`build_packs` (built here when None); ``resources``: when
    given, each pipeline's cp must not exceed its ``cp_size``. Groups need no barrier
    between them within a step (``requires_barrier_after`` False) except the last (the
    step's gradient synchronisation). Returns None when the selection holds no pack (a rank
    outside every pipeline, or empty pipelines)."""
    st, lay, which = _pipelines(plan, step, rank)
    if rank is not None and which:
        _, stage, _, tp_rank = lay.place[plan._rank(rank)]
    if packs is None:
        packs = build_packs(plan, step, rank=rank)
    by_slot = {}
    for pk in packs:
        md = pk.metadata
        k, j = md.get("pipeline"), md.get("microbatch")
        if md.get("step") != step or k is None or k >= len(st.pipelines) \
                or j is None or j >= len(st.pipelines[k]):
            raise PlanError("pack %d is not a pack of step %d (build it with build_packs)"
                            % (pk.pack_id, step))
        if k not in which:
            continue
        p = lay.pipes[k]
        if resources is not None and p.cp > resources.cp_size:
            raise PlanError("step %d pipeline %d has cp %d, more than the resources' "
                            "cp_size %d" % (step, k, p.cp, resources.cp_size))
        s, t = min(stage, p.pp - 1), min(tp_rank, p.tp - 1)
        mb = st.pipelines[k][j]
        lens = [x[2] for x in mb.spans]
        ranges = tuple(tuple(shard_ranges(lens, mb.shard, p.cp, c)[0]) for c in range(p.cp))
        a = PackAssignment(
            pk.pack_id, PlacementKind.STATIC_CP if p.cp > 1 else PlacementKind.DATA_PARALLEL,
            _cp_group(p, s, t), _group_id(step, k, s, t), p.cp,
            {"pipeline": k, "microbatch": j, "stage": s, "tp_rank": t,
             "shard": mb.shard, "cp_ranges": ranges, "pipeline_ranks": p.ranks})
        by_slot.setdefault(j, []).append(a)
    if not by_slot:
        return None
    slots = sorted(by_slot)
    groups = [ExecutionGroup(g, by_slot[g], g == slots[-1], {"step": step, "microbatch": g})
              for g in slots]
    sel = [pk for pk in packs if pk.metadata.get("pipeline") in which]
    return ExecutionPlan(
        groups, num_microbatches=len(slots),
        total_tokens=sum(pk.total_tokens for pk in sel) or None,
        sequence_square_sum=sum(n * n for pk in sel for n in pk.sequence_lengths) or None,
        metadata={"step": step, "layout": st.layout, "schedule": lay.schedule,
                  "method": plan.method, "order": plan.order, "step_tokens": st.tokens})


class BalplanPackingScheduler(object):
    """A ``SequencePackingScheduler`` (Megatron-LM's protocol) that returns a plan step's
    micro-batches: ``build_packs(sequences, constraints)`` is :func:`build_packs` of the step
    set with :meth:`set_step` (or given at construction)."""

    def __init__(self, plan, step=0, rank=None):
        self.plan, self.step, self.rank = plan, step, rank

    def set_step(self, step):
        self.step = step

    def build_packs(self, sequences=None, constraints=None):
        return build_packs(self.plan, self.step, sequences, constraints, rank=self.rank)


class BalplanPlacementScheduler(object):
    """A ``PlacementScheduler`` (Megatron-LM's protocol): ``build_plan(packs, resources)`` is
    :func:`build_plan` of the step set with :meth:`set_step`."""

    def __init__(self, plan, step=0, rank=None):
        self.plan, self.step, self.rank = plan, step, rank

    def set_step(self, step):
        self.step = step

    def build_plan(self, packs=None, resources=None):
        return build_plan(self.plan, self.step, packs, resources, rank=self.rank)


_TYPES = ("SequenceDescriptor", "PackingConstraints", "PackDescriptor", "RankGroup",
          "PlacementResources", "PackAssignment", "ExecutionGroup", "ExecutionPlan")


def to_megatron(obj, module=None):
    """``obj`` (one of this module's objects, or a list/tuple of them) rebuilt as Megatron-LM's
    own types, field by field, from ``megatron.core.datasets.sequence_packing`` (or the given
    module). Raises ImportError where Megatron-LM is not installed."""
    if module is None:
        import importlib
        module = importlib.import_module("megatron.core.datasets.sequence_packing")

    def conv(x):
        if isinstance(x, (list, tuple)):
            return type(x)(conv(y) for y in x)
        if isinstance(x, dict):
            return {k: conv(v) for k, v in x.items()}
        if isinstance(x, PlacementKind):
            return module.PlacementKind(x.value)
        name = type(x).__name__
        if name in _TYPES and type(x).__module__ == __name__:
            kw = {f: conv(getattr(x, f)) for f in x.__dataclass_fields__}
            return getattr(module, name)(**kw)
        return x

    return conv(obj)

"""A rank's view of a plan step (``balplan.rankview/v1``), computed as ``balplan view`` computes
it (planner/solve/view.c): the rank's place in the step's layout, and every micro-batch of its
pipeline with its spans, ``cu_seqlens`` and the packed-token ranges its CP position holds
(planner/model/costmodel.c ``bp_shard_ranges``)."""

from collections import namedtuple

from .plan import RANKVIEW_FORMAT

Role = namedtuple("Role", "pipeline stage tp_rank cp_rank tp cp pp pipelines layers")
Role.__doc__ = """A rank's place in a step's layout: pipeline ``pipeline`` of ``pipelines``,
pipeline stage ``stage`` of ``pp``, tensor-parallel position ``tp_rank`` of ``tp``,
context-parallel position ``cp_rank`` of ``cp``; ``layers`` = (first layer, count) of its
stage."""

Span = namedtuple("Span", "doc doc_offset len sample sample_offset")
Span.__doc__ = """Tokens [doc_offset, doc_offset + len) of plan document ``doc``, which are
tokens [sample_offset, sample_offset + len) of sample ``sample`` (both -1 in a plan of draws).
Every span is its own causal sequence."""


def shard_ranges(lengths, shard, cp, cp_rank):
    """The packed-token ranges [start, end) that CP position ``cp_rank`` of ``cp`` holds of a
    micro-batch of spans of ``lengths`` under ``shard``, ascending, touching ranges merged,
    and their token count (costmodel.c ``bp_shard_ranges``).

    ``sequence``: the packed micro-batch in 2cp chunks with boundaries floor(total*k/(2cp));
    rank r holds chunks r and 2cp-1-r. ``document`` (and ``ulysses``'s token-wise layers):
    every span so, in 2cp chunks of len // (2cp) tokens, the len mod 2cp remainder tokens
    going one each to ranks in round-robin order carried across spans."""
    total = sum(lengths)
    if cp == 1:
        return ([(0, total)] if total > 0 else []), total
    parts = 2 * cp
    out = []
    tokens = 0

    def push(a, b):
        if b <= a:
            return
        if out and out[-1][1] == a:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))

    if shard not in ("document", "ulysses"):
        for c in (cp_rank, parts - 1 - cp_rank):
            a, b = total * c // parts, total * (c + 1) // parts
            push(a, b)
            tokens += b - a
        return out, tokens
    rr, pos = 0, 0
    for length in lengths:
        base, rem = divmod(length, parts)
        for cidx in range(parts):
            owner = cidx if cidx < cp else parts - 1 - cidx
            e = (owner - rr) % cp  # the first remainder token that goes to owner
            if cidx >= cp:
                extra = 1 if (e < rem and e < cp) else 0
            else:
                extra = 1 if e + cp < rem else 0
            size = base + extra
            if owner == cp_rank:
                push(pos, pos + size)
                tokens += size
            pos += size
        rr = (rr + length % parts) % cp
    return out, tokens


class MicroBatch(object):
    """One micro-batch of the rank's pipeline, in execution order.

    ``index`` (its place in the pipeline's order), ``tokens`` (all its tokens), ``shard``
    ("sequence", "document" or "ulysses"), ``attention`` ("dense", "sparse" or
    "disaggregated"), ``spans`` (:class:`Span`, packing order), ``cu_seqlens`` (the packed
    micro-batch's sequence boundaries, 0 first), ``cp_ranges`` ([start, end) ranges of the
    packed micro-batch this rank's CP position holds), ``cp_tokens`` (their tokens)."""

    __slots__ = ("index", "tokens", "shard", "attention", "spans", "cu_seqlens", "cp_ranges",
                 "cp_tokens")

    def __init__(self, index, spans, shard, attention, cp, cp_rank):
        self.index = index
        self.shard = shard
        self.attention = attention
        self.spans = [Span(*s) for s in spans]
        cu = [0]
        for s in spans:
            cu.append(cu[-1] + s[2])
        self.cu_seqlens = cu
        self.tokens = cu[-1]
        self.cp_ranges, self.cp_tokens = shard_ranges([s[2] for s in spans], shard, cp,
                                                      cp_rank)

    def __repr__(self):
        return "<MicroBatch %d: %d spans, %d tokens, %s, CP ranges %s>" % (
            self.index, len(self.spans), self.tokens, self.shard, self.cp_ranges)

    def pieces(self):
        """This rank's slice as (span index, start, end) pieces, [start, end) in the span's
        own positions, in packed order (the pieces of one span are consecutive)."""
        out = []
        q = 0
        cu = self.cu_seqlens
        for a, b in self.cp_ranges:
            while cu[q + 1] <= a:
                q += 1
            while a < b:
                end = min(b, cu[q + 1])
                out.append((q, a - cu[q], end - cu[q]))
                a = end
                if a == cu[q + 1]:
                    q += 1
        return out

    def position_ids(self):
        """For every packed token its position in its span's sequence (0..len-1 per span)."""
        out = []
        for s in self.spans:
            out.extend(range(s.len))
        return out

    def cp_position_ids(self):
        """The position ids of this rank's CP slice (its ranges, in order)."""
        out = []
        for _, a, b in self.pieces():
            out.extend(range(a, b))
        return out

    def cp_cu_seqlens(self):
        """cu_seqlens of this rank's slice: per span with tokens in the slice, in order, how
        many (its parts inside the ranges together)."""
        lens = []
        last = -1
        for q, a, b in self.pieces():
            if q == last:
                lens[-1] += b - a
            else:
                lens.append(b - a)
                last = q
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        return cu

    def cp_sample_ids(self):
        """The sample of every sequence of this rank's slice (aligned with cp_cu_seqlens)."""
        out = []
        last = -1
        for q, _, _ in self.pieces():
            if q != last:
                out.append(self.spans[q].sample)
                last = q
        return out

    def sample_ids(self):
        """The sample of every span, in packing order (-1 in a plan of draws)."""
        return [s.sample for s in self.spans]

    def to_json(self):
        return {
            "index": self.index,
            "tokens": self.tokens,
            "shard": self.shard,
            "attention": self.attention,
            "spans": [list(s) for s in self.spans],
            "cu_seqlens": list(self.cu_seqlens),
            "cp_ranges": [list(r) for r in self.cp_ranges],
            "cp_tokens": self.cp_tokens,
        }


class RankView(object):
    """What global rank ``rank`` trains in step ``step`` of a plan.

    ``role`` is a :class:`Role`, or None when the rank holds no pipeline position in the
    step's layout (then ``microbatches`` is empty); ``server`` its index among the layout's
    attention servers or -1; ``layout`` the step's layout index and ``schedule`` its
    schedule; ``step_tokens`` the tokens the whole cluster trains in the step (the loss
    normaliser); ``microbatches`` its pipeline's micro-batches (:class:`MicroBatch`) in
    execution order. ``to_json()`` is ``balplan view --rank R --step S``'s object."""

    __slots__ = ("method", "order", "step", "steps", "rank", "world_size", "layout",
                 "schedule", "virtual_stages", "role", "server", "step_tokens",
                 "microbatches")

    def __repr__(self):
        return "<RankView step %d rank %d: %s, %d micro-batches>" % (
            self.step, self.rank, self.role, len(self.microbatches))

    def to_json(self):
        role = None
        if self.role is not None:
            role = self.role._asdict()
            role["layers"] = list(self.role.layers)
            role = dict(role)
        out = {
            "format": RANKVIEW_FORMAT,
            "method": self.method,
            "order": self.order,
            "step": self.step,
            "steps": self.steps,
            "rank": self.rank,
            "world_size": self.world_size,
            "layout": self.layout,
            "schedule": self.schedule,
        }
        if self.virtual_stages > 1:  # as balplan view writes it: only for interleaved
            out["virtual_stages"] = self.virtual_stages
        out.update({
            "role": role,
            "server": self.server,
            "step_tokens": self.step_tokens,
            "microbatches": [m.to_json() for m in self.microbatches],
        })
        return out


def make_rank_view(plan, step, st, layout, rank):
    v = RankView()
    v.method = plan.method
    v.order = plan.order
    v.step = step
    v.steps = plan.steps
    v.rank = rank
    v.world_size = plan.world_size
    v.layout = st.layout
    v.schedule = layout.schedule
    v.virtual_stages = layout.virtual_stages
    v.server = layout.server.get(rank, -1)
    v.step_tokens = st.tokens
    v.role = None
    v.microbatches = []
    pl = layout.place.get(rank)
    if pl is not None:
        k, stage, cp_i, tp_i = pl
        p = layout.pipes[k]
        v.role = Role(k, stage, tp_i, cp_i, p.tp, p.cp, p.pp, len(layout.pipes),
                      (sum(p.stage_layers[:stage]), p.stage_layers[stage]))
        v.microbatches = [MicroBatch(j, mb.spans, mb.shard, mb.attention, p.cp, cp_i)
                          for j, mb in enumerate(st.pipelines[k])]
    return v

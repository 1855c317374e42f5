"""PyTorch batches of what a rank trains, per plan step (executor/python/README.md).

    from balplan.torch import PlanBatches
    for batch in PlanBatches(plan, dataset, rank, start_step=resume_step):
        for mb in batch.microbatches:
            loss = model(mb["input_ids"], mb["position_ids"], mb["cu_seqlens"], mb["labels"])
            ... sum of token losses / batch.loss_tokens (the whole step's labelled tokens)

``dataset`` maps a sample id to its token ids (a mapping or sequence indexed by sample id, or
a callable); a span's tokens are ``dataset[sample][sample_offset:sample_offset + len]``. In a
what-if plan of draws, spans name no sample: the dataset is indexed by the plan's document id
and sliced at the span's document offset instead.

Importing this module needs torch; the rest of balplan does not.
"""

try:
    import torch as _torch
    from torch.utils.data import IterableDataset as _IterableDataset
    from torch.utils.data import get_worker_info as _get_worker_info
except ImportError as _e:  # pragma: no cover - depends on the machine
    raise ImportError(
        "balplan.torch needs PyTorch, which cannot be imported here (%s); balplan itself "
        "(balplan.open_plan, rank views, balplan.megatron) works without it" % _e) from _e

from dataclasses import dataclass
from typing import Any, List

from .plan import Plan, PlanError, open_plan

IGNORE_INDEX = -100


@dataclass(frozen=True)
class StepBatch:
    """What the rank trains in one step.

    ``step``; ``step_tokens`` (the tokens the whole cluster trains in the step, the plan's
    loss normaliser by tokens); ``microbatches``, one dict per micro-batch of the rank's
    pipeline in execution order (empty when the rank holds no pipeline position):
    ``input_ids``, ``labels``, ``position_ids`` (torch.long, the rank's CP slice, cp_tokens
    each), ``cu_seqlens`` (torch.int32, the slice's sequence boundaries), ``sample_ids``
    (the sample of each sequence of the slice), ``loss_tokens`` (labels other than -100 in
    the slice), ``max_seqlen`` (the slice's longest sequence), ``cp_ranges`` and ``index``;
    ``loss_tokens``: labelled tokens of the whole step over all ranks (every span's tokens
    but its last), the normaliser of a mean token loss; ``rank`` and ``role`` (the view's)."""

    step: int
    step_tokens: int
    microbatches: List[dict]
    loss_tokens: int = 0
    rank: int = -1
    role: Any = None


def _getter(dataset):
    if hasattr(dataset, "__getitem__"):
        return dataset.__getitem__
    if callable(dataset):
        return dataset
    raise TypeError("dataset must map a sample id to token ids: a mapping, a sequence or a "
                    "callable, not %s" % type(dataset).__name__)


def _as_long(x):
    if isinstance(x, _torch.Tensor):
        return x.to(_torch.long)
    if hasattr(x, "astype"):  # numpy arrays of any integer type
        x = x.astype("int64")
    return _torch.as_tensor(x, dtype=_torch.long)


class PlanBatches(object):
    """The rank's :class:`StepBatch` of steps ``start_step`` .. (``steps`` of them, or all
    remaining when None). Each step is computed from the plan alone, so ``start_step=k``
    yields exactly what an uninterrupted iteration yields from step k (resuming a job).

    ``plan``: a :class:`balplan.Plan` or a plan file name; ``rank``: the global rank;
    ``cp_slice``: False gives every token of each micro-batch (the full packed sequences),
    True (default) the rank's CP slice."""

    def __init__(self, plan, dataset, rank, start_step=None, steps=None, cp_slice=True):
        if not isinstance(plan, Plan):
            plan = open_plan(plan)
        self.plan = plan
        rank = plan._rank(rank)
        # steps by the run's numbers: a window of a run starts at plan.first_step
        first, stop = plan.first_step, plan.first_step + plan.steps
        if start_step is None:
            start_step = first
        if not isinstance(start_step, int) or start_step < first or start_step > stop:
            raise PlanError("start_step %r is outside the plan: it has steps %d to %d"
                            % (start_step, first, stop - 1))
        if steps is not None and (not isinstance(steps, int) or steps < 0):
            raise PlanError("steps %r is not a count of steps" % (steps,))
        self.rank = rank
        self.start_step = start_step
        self.end_step = stop if steps is None else min(stop, start_step + steps)
        self.cp_slice = cp_slice
        self._get = _getter(dataset)

    def __len__(self):
        return self.end_step - self.start_step

    def __iter__(self):
        for s in range(self.start_step, self.end_step):
            yield self.batch(s)

    def _span_tokens(self, span, where):
        draw = self.plan.order == "draw"
        key = span.doc if draw else span.sample
        off = span.doc_offset if draw else span.sample_offset
        try:
            toks = self._get(key)
        except (KeyError, IndexError) as e:
            raise PlanError("%s: the dataset has no %s %d (%s)"
                            % (where, "document" if draw else "sample", key, e))
        seg = _as_long(toks[off:off + span.len])
        if seg.dim() != 1 or seg.numel() != span.len:
            raise PlanError("%s: %s %d has %d tokens from offset %d; the plan trains %d"
                            % (where, "document" if draw else "sample", key,
                               max(0, seg.numel()), off, span.len))
        return seg

    def _microbatch(self, step, mb):
        where = "step %d micro-batch %d" % (step, mb.index)
        if self.cp_slice:
            pieces = mb.pieces()
            ranges = [list(r) for r in mb.cp_ranges]
        else:
            pieces = [(q, 0, s.len) for q, s in enumerate(mb.spans)]
            ranges = [[0, mb.tokens]]
        inp, lab, pos, lens, sids = [], [], [], [], []
        cache, last = {}, -1
        for q, a, b in pieces:
            span = mb.spans[q]
            t = cache.get(q)
            if t is None:
                t = cache[q] = self._span_tokens(span, where)
            inp.append(t[a:b])
            nxt = t[a + 1:b + 1]
            if b == span.len:  # the span's last token predicts nothing
                nxt = _torch.cat([nxt, _torch.full((1,), IGNORE_INDEX, dtype=_torch.long)])
            lab.append(nxt)
            pos.append(_torch.arange(a, b, dtype=_torch.long))
            if q == last:
                lens[-1] += b - a
            else:
                lens.append(b - a)
                sids.append(span.sample)
                last = q
        cu = [0]
        for n in lens:
            cu.append(cu[-1] + n)
        empty = _torch.zeros(0, dtype=_torch.long)
        labels = _torch.cat(lab) if lab else empty
        return {
            "index": mb.index,
            "input_ids": _torch.cat(inp) if inp else empty,
            "labels": labels,
            "position_ids": _torch.cat(pos) if pos else empty,
            "cu_seqlens": _torch.tensor(cu, dtype=_torch.int32),
            "max_seqlen": max(lens) if lens else 0,
            "sample_ids": sids,
            "loss_tokens": int((labels != IGNORE_INDEX).sum()),
            "cp_ranges": ranges,
        }

    def batch(self, step):
        """The :class:`StepBatch` of one step."""
        view = self.plan.rank_view(step, self.rank)
        mbs = [self._microbatch(step, mb) for mb in view.microbatches]
        return StepBatch(step, view.step_tokens, mbs, self.plan.step_loss_tokens(step),
                         self.rank, view.role)


class PlanDataset(_IterableDataset):
    """:class:`PlanBatches` as a ``torch.utils.data.IterableDataset``: use it with
    ``DataLoader(ds, batch_size=None, num_workers=n)``; with workers, worker w computes steps
    start + w, start + w + n, ..., and the loader's in-order delivery keeps step order."""

    def __init__(self, plan, dataset, rank, start_step=None, steps=None, cp_slice=True):
        super().__init__()
        self.batches = PlanBatches(plan, dataset, rank, start_step, steps, cp_slice)

    def __len__(self):
        return len(self.batches)

    def __iter__(self):
        b = self.batches
        info = _get_worker_info()
        first, stride = (0, 1) if info is None else (info.id, info.num_workers)
        for s in range(b.start_step + first, b.end_step, stride):
            yield b.batch(s)

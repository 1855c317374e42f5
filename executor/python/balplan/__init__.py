"""balplan: read a balplan plan in a training job (executor/python/README.md).

    import balplan
    plan = balplan.open_plan("wlb.json", world_size=8, dataset_sha256=index_sha)
    view = plan.rank_view(step, rank)        # what this rank trains in the step
    for mb in view.microbatches:
        mb.spans, mb.cu_seqlens, mb.cp_ranges, mb.cp_position_ids()

Pure standard library. ``balplan.torch`` (PyTorch batches of a rank's CP slice) and
``balplan.megatron`` (Megatron-LM's sequence-packing planning types) are imported on demand.
"""

from .plan import (ATTENTION_KINDS, ORDERS, PLAN_FORMAT, PLAN_FORMAT_V1, RANKVIEW_FORMAT,
                   SHARDS, Plan, PlanError, RankSample, open_plan)
from .view import MicroBatch, RankView, Role, Span, shard_ranges

__version__ = "0.1.0"

__all__ = [
    "ATTENTION_KINDS",
    "MicroBatch",
    "ORDERS",
    "PLAN_FORMAT",
    "PLAN_FORMAT_V1",
    "Plan",
    "PlanError",
    "RANKVIEW_FORMAT",
    "RankSample",
    "RankView",
    "Role",
    "SHARDS",
    "Span",
    "open_plan",
    "shard_ranges",
]

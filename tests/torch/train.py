#!/usr/bin/python3
"""Trains a tiny causal transformer by a balplan plan, one process per rank (issue 23 item 3).

    srun -n 4 /usr/bin/python3 tests/torch/train.py --plan PLAN --data CORPUS.jsonl --out DIR
        [--start-step K] [--steps N] [--save-at K --checkpoint FILE] [--resume FILE]
        [--trace FILE] [--lr X] [--seed S]

Rank and world come from SLURM_PROCID and SLURM_NTASKS (or RANK and WORLD_SIZE), the gloo
rendezvous from MASTER_ADDR and MASTER_PORT. The plan's samples are read by sample id from a
tokenized JSONL ({"id", "input_ids"} per line, the index the plan was solved from: its sha256
must be the plan's). Each rank trains what the plan gives it: balplan.torch.PlanBatches for its
rank (its pipeline's micro-batches, its context-parallel slice of each), with

- attention block-diagonal and causal over the packed spans (each span its own sequence,
  positions 0 .. len-1), built from the rank view's cu_seqlens and the packed positions of the
  rank's tokens (its cp_ranges); plain matrix attention, no flash kernels;
- context parallelism (cp > 1): the ranks of a pipeline form a torch.distributed group; every
  layer all-gathers K and V (and once per micro-batch the packed positions) over it, and the
  local queries attend to the gathered keys under the same block-diagonal causal mask in packed
  coordinates; the gather's backward all-reduces the gathered gradient and keeps the local
  slice, so K and V get the gradients of the other ranks' queries;
- the loss of a step: the sum of the token losses (next token within each span) over every
  micro-batch of every rank, divided by the plan's step_tokens, the same normaliser on every
  rank; gradients summed over all ranks (data-parallel and context-parallel ranks hold the same
  weights), then one Adam step.

Only layouts of pp 1 and tp 1 are supported (every pipeline one stage, no tensor parallelism):
dp N, or cp C x dp N/C; anything else is refused.

Per rank it writes DIR/rank-R.json: per step the normaliser, its own loss sum and the global
loss, and per micro-batch the sample token ranges it trained in order ([sample, first, end) of
the sample's tokens), the sha256 of its input ids and labels, and the measured forward and
backward times. Rank 0 writes --trace FILE, a balplan.trace/v2 of the measured times that
`balplan report PLAN FILE` reads (backend "trainer:torch-gloo", time scale 1). --save-at K saves the
model and the optimizer when step K is next (after step K-1); --resume FILE loads such a
checkpoint and must be given with --start-step K, so a restart continues exactly."""
import argparse
import datetime
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

import balplan
from balplan.torch import PlanBatches

VOCAB = 260  # byte tokens 0-255, EOS 256 (tests/torch/make-corpus), spare ids


def die(msg):
    print("train.py: error: rank %s: %s" % (os.environ.get("SLURM_PROCID", "?"), msg),
          file=sys.stderr, flush=True)
    sys.exit(1)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def seq_sha(values):
    """sha256 of a token list as its decimal values joined by commas (what check-train
    computes from the corpus)."""
    return hashlib.sha256(",".join(str(int(v)) for v in values).encode()).hexdigest()


# ---- context parallelism ----

class GatherCP(torch.autograd.Function):
    """All-gather of equal-sized (padded) rows over a CP group. Backward: every rank holds
    the gradient of its own copy of the gathered tensor; their sum, sliced at this rank, is
    the gradient of this rank's input."""

    @staticmethod
    def forward(ctx, x, group, me, size):
        parts = [torch.empty_like(x) for _ in range(size)]
        dist.all_gather(parts, x.contiguous(), group=group)
        ctx.group, ctx.me = group, me
        return torch.stack(parts)

    @staticmethod
    def backward(ctx, grad):
        g = grad.contiguous().clone()
        dist.all_reduce(g, op=dist.ReduceOp.SUM, group=ctx.group)
        return g[ctx.me], None, None, None


class AttnCtx:
    """What attention needs about one micro-batch on this rank: the mask of local queries
    against (gathered) keys, and the CP group with the padding of the gather."""

    def __init__(self, local_pos, cu, cp_group):
        cu = torch.tensor(cu, dtype=torch.int64)
        self.group = None
        if cp_group is None:
            key_pos = local_pos
        else:
            group, self.size = cp_group
            self.group, self.me = group, dist.get_rank(group)
            n = torch.tensor([local_pos.numel()], dtype=torch.int64)
            sizes = [torch.zeros_like(n) for _ in range(self.size)]
            dist.all_gather(sizes, n, group=group)
            self.n = local_pos.numel()
            self.pad = max(1, max(int(s) for s in sizes))
            padded = torch.full((self.pad,), -1, dtype=torch.int64)
            padded[:self.n] = local_pos
            parts = [torch.empty_like(padded) for _ in range(self.size)]
            dist.all_gather(parts, padded, group=group)
            key_pos = torch.cat(parts)
        qseg = torch.searchsorted(cu, local_pos, right=True) - 1
        kseg = torch.searchsorted(cu, key_pos, right=True) - 1
        self.mask = ((qseg[:, None] == kseg[None, :]) & (key_pos[None, :] <= local_pos[:, None])
                     & (key_pos[None, :] >= 0))

    def gather(self, kv):
        """kv: [n, w] local rows -> [size * pad, w] rows in the order of the key positions."""
        if self.group is None:
            return kv
        kv = F.pad(kv, (0, 0, 0, self.pad - self.n))
        return GatherCP.apply(kv, self.group, self.me, self.size).reshape(-1, kv.shape[1])


# ---- the model ----

class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads, self.d = heads, d
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, ctx):
        n, d, h = x.shape[0], self.d, self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        kv = ctx.gather(torch.cat([k, v], dim=-1))
        k, v = kv.split(d, dim=-1)
        q = q.reshape(n, h, d // h).transpose(0, 1)
        k = k.reshape(-1, h, d // h).transpose(0, 1)
        v = v.reshape(-1, h, d // h).transpose(0, 1)
        s = (q @ k.transpose(1, 2)) / math.sqrt(d // h)
        s = s.masked_fill(~ctx.mask, float("-inf"))
        a = (torch.softmax(s, dim=-1) @ v).transpose(0, 1).reshape(n, d)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, max_pos, d=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(max_pos, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, ids, pos, ctx):
        x = self.tok(ids) + self.pos(pos)
        for b in self.blocks:
            x = b(x, ctx)
        return self.head(self.ln(x))


# ---- the run ----

def as_list(x):
    return x.tolist() if torch.is_tensor(x) else list(x)


def local_layout(mb):
    """Packed positions of this rank's tokens (its cp_ranges, in order)."""
    return torch.tensor([p for a, b in mb.cp_ranges for p in range(a, b)], dtype=torch.int64)


def runs_of(mb, pos):
    """The sample token ranges [sample, first, end) of this rank's tokens, in order, from the
    rank view's spans; with each token's sample and position in its span."""
    starts = list(mb.cu_seqlens)
    samples, span_pos, runs = [], [], []
    seg = 0
    for p in pos.tolist():
        while not (starts[seg] <= p < starts[seg + 1]):
            seg = seg + 1 if p >= starts[seg + 1] else 0
        sp = mb.spans[seg]
        off = sp.sample_offset + (p - starts[seg])
        samples.append(sp.sample)
        span_pos.append(p - starts[seg])
        if runs and runs[-1][0] == sp.sample and runs[-1][2] == off and runs[-1][3] == seg:
            runs[-1][2] = off + 1
        else:
            runs.append([sp.sample, off, off + 1, seg])
    return [r[:3] for r in runs], samples, span_pos


def main():
    ap = argparse.ArgumentParser(description="train a tiny LM by a balplan plan")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--data", required=True, help="tokenized JSONL: id, input_ids")
    ap.add_argument("--out", required=True, help="directory for rank-R.json")
    ap.add_argument("--start-step", type=int, default=0)
    ap.add_argument("--steps", type=int, default=None, help="steps to train [to the plan's end]")
    ap.add_argument("--save-at", type=int, default=None)
    ap.add_argument("--checkpoint", default=None)
    ap.add_argument("--resume", default=None)
    ap.add_argument("--trace", default=None)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=120)
    a = ap.parse_args()
    if (a.save_at is None) != (a.checkpoint is None):
        die("--save-at and --checkpoint go together")
    if a.resume and a.start_step == 0:
        die("--resume needs --start-step")

    torch.set_num_threads(1)
    torch.set_num_interop_threads(1)
    rank = int(os.environ.get("SLURM_PROCID", os.environ.get("RANK", "-1")))
    world = int(os.environ.get("SLURM_NTASKS", os.environ.get("WORLD_SIZE", "0")))
    if rank < 0 or world < 1:
        die("no SLURM_PROCID/SLURM_NTASKS (or RANK/WORLD_SIZE): run under srun")

    try:
        plan = balplan.open_plan(a.plan, world_size=world, dataset_sha256=sha256_file(a.data))
    except balplan.PlanError as e:
        die("plan %s: %s" % (a.plan, e))
    with open(a.plan, "rb") as f:
        plan_bytes = f.read()
    plan_json = json.loads(plan_bytes)
    plan_sha = hashlib.sha256(plan_bytes).hexdigest()
    first = a.start_step
    last = plan.steps if a.steps is None else min(plan.steps, first + a.steps)
    if not 0 <= first < last:
        die("no steps to train: start %d, plan of %d steps" % (first, plan.steps))

    dataset = {}
    with open(a.data) as f:
        for line in f:
            if line.strip():
                o = json.loads(line)
                dataset[int(o["id"])] = o["input_ids"]

    # Roles: one layout of pp 1, tp 1 for every trained step; a CP group per pipeline.
    role = None
    for s in range(first, last):
        v = plan.rank_view(s, rank)
        r = v.role
        kinds = {mb.attention for mb in v.microbatches} - {"dense"}
        if kinds:
            die("step %d: %s attention: only dense attention is supported" % (s, kinds.pop()))
        if r is None:
            die("step %d: rank %d holds no pipeline position (not supported)" % (s, rank))
        if r.pp != 1 or r.tp != 1:
            die("step %d: layout tp %d pp %d: only pp 1 and tp 1 are supported" % (s, r.tp, r.pp))
        key = (r.pipeline, r.cp_rank, r.cp, r.pipelines)
        if role is not None and key != role:
            die("step %d: the rank's role changes (%s -> %s): one layout only" % (s, role, key))
        role = key
    layout = plan_json["steps"][first]["layout"]
    if any(plan_json["steps"][s]["layout"] != layout for s in range(first, last)):
        die("the trained steps change layouts: one layout only")
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=a.timeout))

    pipeline, cp_rank, cp, pipelines = role
    roles = [None] * world
    dist.all_gather_object(roles, role)
    cp_group = None
    if cp > 1:
        for p in range(pipelines):
            members = sorted(q for q in range(world) if roles[q][0] == p)
            if len(members) != cp:
                die("pipeline %d has ranks %s, not cp = %d" % (p, members, cp))
            g = dist.new_group(members)
            if p == pipeline:
                cp_group = (g, cp)

    torch.manual_seed(a.seed)
    model = TinyLM(max_pos=plan.max_tokens)
    for p in model.parameters():  # the same weights everywhere, whatever the seed did
        dist.broadcast(p.data, src=0)
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    if a.resume:
        ck = torch.load(a.resume)
        if ck["step"] != first or ck["plan_sha256"] != plan_sha:
            die("checkpoint %s is of step %d of plan %s, not step %d of this plan"
                % (a.resume, ck["step"], ck["plan_sha256"][:12], first))
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["optim"])
    params = list(model.parameters())

    def save(step):
        if rank == 0:
            tmp = a.checkpoint + ".tmp"
            torch.save({"step": step, "plan_sha256": plan_sha, "model": model.state_dict(),
                        "optim": opt.state_dict()}, tmp)
            os.replace(tmp, a.checkpoint)
        dist.barrier()

    steps_out = []
    for sb in PlanBatches(plan, dataset, rank, start_step=first, steps=last - first):
        if a.save_at is not None and sb.step == a.save_at:
            save(sb.step)
        view = plan.rank_view(sb.step, rank)
        if len(view.microbatches) != len(sb.microbatches):
            die("step %d: PlanBatches gave %d micro-batches, the rank view %d"
                % (sb.step, len(sb.microbatches), len(view.microbatches)))
        norm = sb.step_tokens
        if norm != view.step_tokens or norm != plan.step_tokens(sb.step):
            die("step %d: step_tokens %s, rank view %s, plan %s"
                % (sb.step, norm, view.step_tokens, plan.step_tokens(sb.step)))
        dist.barrier()
        t_step = time.perf_counter()
        local_sum = 0.0
        mbs_out = []
        for b, mb in zip(sb.microbatches, view.microbatches):
            ids = torch.as_tensor(b["input_ids"], dtype=torch.int64)
            labels = torch.as_tensor(b["labels"], dtype=torch.int64)
            pos = local_layout(mb)
            if ids.numel() != pos.numel() or labels.numel() != pos.numel():
                die("step %d micro-batch %d: %d input ids, %d labels, cp_ranges hold %d"
                    % (sb.step, mb.index, ids.numel(), labels.numel(), pos.numel()))
            runs, samples, span_pos = runs_of(mb, pos)
            # PlanBatches' slice: per-token positions, per-sequence samples on its own
            # cu_seqlens; both must be what the rank view's spans and cp_ranges say.
            cu, sids = as_list(b["cu_seqlens"]), as_list(b["sample_ids"])
            per_token = [sids[k] for k in range(len(sids)) for _ in range(cu[k], cu[k + 1])]
            if per_token != samples or as_list(b["position_ids"]) != span_pos:
                die("step %d micro-batch %d: PlanBatches' sample or position ids are not the "
                    "rank view's" % (sb.step, mb.index))
            t0 = time.perf_counter()
            ctx = AttnCtx(pos, mb.cu_seqlens, cp_group)
            logits = model(ids, torch.as_tensor(span_pos, dtype=torch.int64), ctx)
            tok_loss = F.cross_entropy(logits, labels, ignore_index=-100, reduction="sum")
            loss = tok_loss / norm
            t1 = time.perf_counter()
            loss.backward()
            t2 = time.perf_counter()
            local_sum += float(tok_loss.detach())
            mbs_out.append({
                "index": mb.index, "tokens": mb.tokens, "local_tokens": int(ids.numel()),
                "runs": runs, "input_sha256": seq_sha(ids.tolist()),
                "labels_sha256": seq_sha(labels.tolist()),
                "loss_tokens": int((labels != -100).sum()), "loss_sum": float(tok_loss.detach()),
                "fwd_start_us": (t0 - t_step) * 1e6, "fwd_us": (t1 - t0) * 1e6,
                "bwd_start_us": (t1 - t_step) * 1e6, "bwd_us": (t2 - t1) * 1e6})
        t_pipe = time.perf_counter()
        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
        off = 0
        for p in params:
            n = p.numel()
            p.grad = flat[off:off + n].view_as(p).clone()
            off += n
        opt.step()
        opt.zero_grad(set_to_none=True)
        total = torch.tensor([local_sum], dtype=torch.float64)
        dist.all_reduce(total, op=dist.ReduceOp.SUM)
        t_end = time.perf_counter()
        steps_out.append({
            "step": sb.step, "step_tokens": sb.step_tokens, "normaliser": norm,
            "local_loss_sum": local_sum, "loss": float(total) / norm,
            "role": {"layout": layout, "pipeline": pipeline, "stage": 0, "cp_i": cp_rank,
                     "tp_i": 0},
            "step_us": (t_end - t_step) * 1e6, "pipeline_us": (t_pipe - t_step) * 1e6,
            "grad_sync_us": (t_end - t_pipe) * 1e6, "microbatches": mbs_out})
        if rank == 0:
            print("step %d: loss %.6f (normaliser %d, %d micro-batches on rank 0, %.1f ms)"
                  % (sb.step, float(total) / norm, norm, len(mbs_out), (t_end - t_step) * 1e3),
                  flush=True)
    if a.save_at is not None and a.save_at == last:
        save(last)
    if [s["step"] for s in steps_out] != list(range(first, last)):
        die("PlanBatches gave steps %s, expected %d..%d"
            % ([s["step"] for s in steps_out], first, last - 1))

    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "rank-%d.json" % rank), "w") as f:
        json.dump({"rank": rank, "world": world, "plan": a.plan, "plan_sha256": plan_sha,
                   "method": plan.method, "start_step": first, "lr": a.lr, "seed": a.seed,
                   "steps": steps_out}, f, indent=1)

    everyone = [None] * world
    dist.all_gather_object(everyone, steps_out)
    if rank == 0 and a.trace:
        write_trace(a, plan_json, plan_sha, world, everyone)
    dist.barrier()
    dist.destroy_process_group()


def write_trace(a, plan_json, plan_sha, world, everyone):
    """balplan.trace/v2 (executor/README.md "Trace") of the measured times."""
    r3 = lambda x: round(x, 3)
    steps = []
    for i, s in enumerate(everyone[0]):
        ranks = []
        for r in range(world):
            rs = everyone[r][i]
            assert rs["step"] == s["step"]
            o = dict(rs["role"])
            o.update({"rank": r, "step_us": r3(rs["step_us"]),
                      "pipeline_us": r3(rs["pipeline_us"]),
                      "grad_sync_us": r3(rs["step_us"] - rs["pipeline_us"]),
                      "microbatches": [{k: r3(m[k]) for k in ("fwd_start_us", "fwd_us",
                                                              "bwd_start_us", "bwd_us")}
                                       for m in rs["microbatches"]]})
            ranks.append(o)
        steps.append({"index": s["step"],
                      "predicted_us": plan_json["steps"][s["step"]]["predicted"]["step_us"],
                      "step_us": max(o["step_us"] for o in ranks), "ranks": ranks})
    trace = {"format": "balplan.trace/v2", "plan_sha256": plan_sha,
             "method": plan_json["method"]["name"], "backend": "trainer:torch-gloo", "time_scale": 1.0,
             "timeout_s": float(a.timeout), "max_bytes": 0, "warmup": 0, "world": world,
             "steps": steps}
    tmp = a.trace + ".tmp"
    with open(tmp, "w") as f:
        json.dump(trace, f, indent=1, sort_keys=True)
    os.replace(tmp, a.trace)


if __name__ == "__main__":
    main()

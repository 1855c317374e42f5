#!/usr/bin/env python3
"""PyTorch's scaled_dot_product_attention on the shapes of tools/bench/bench_attn.cu.

The reference that balexec's own kernels (executor/attn.cu) are compared against by
tools/bench/bench-attn. Same shapes and names: 8K, 32K and 128K tokens as one document or
packed 8K / 2K documents; 32 query heads, 8 kv heads, head_dim 128, bf16, causal.

Packed documents: every shape packs documents of one length, so varlen attention over them is
exactly a batch of independent causal documents; this times ONE SDPA call on a batch of
(docs, heads, doc_len, head_dim), not one call per document and not a block mask.

GQA: enable_gqa=True when this PyTorch has it (2.5 or later) and the chosen backend accepts
it; otherwise K and V are expanded to 32 heads with repeat_interleave before timing (then dK,
dV are the expanded ones and the 8-head reduction is not timed). Backend: FlashAttention via
torch.nn.attention.sdpa_kernel when available, else PyTorch's default choice; the line
"sdpa: ..." says which.

Timing: CUDA events, WARMUP untimed calls, median of ITERS. The backward is
torch.autograd.grad of the output with a fixed dO; its forward runs before the start event.
FLOPs as in bench_attn.cu: forward 4 * head_dim * heads * doc (doc + 1) / 2 per document,
backward 2.5x that.

Output: a table, then per shape "shape=NAME tokens=N docs=N fwd_ms=X fwd_tflops=X bwd_ms=X
bwd_tflops=X". Exit status: 0 ok, 1 runtime error, 2 usage, 3 PyTorch or CUDA missing.
"""
import argparse
import contextlib
import statistics
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError as exc:
    print(f"bench-attn-sdpa: error: PyTorch is missing ({exc}); it is installed on the GPU "
          "machine only", file=sys.stderr)
    sys.exit(3)

HEADS, KV_HEADS, HEAD_DIM, WARMUP = 32, 8, 128, 2
SHAPES = [  # (name, tokens, document length, heads, kv heads): keep in step with bench_attn.cu
    ("8K-1x8K", 8192, 8192, HEADS, KV_HEADS), ("8K-4x2K", 8192, 2048, HEADS, KV_HEADS),
    ("32K-1x32K", 32768, 32768, HEADS, KV_HEADS), ("32K-4x8K", 32768, 8192, HEADS, KV_HEADS),
    ("32K-16x2K", 32768, 2048, HEADS, KV_HEADS),
    ("128K-1x128K", 131072, 131072, HEADS, KV_HEADS),
    ("128K-16x8K", 131072, 8192, HEADS, KV_HEADS), ("128K-64x2K", 131072, 2048, HEADS, KV_HEADS),
    # one TP-8 rank's heads (bench_attn's "-unsplit" rows compare with these too)
    ("8K-1x8K-tp8", 8192, 8192, 4, 1), ("32K-1x32K-tp8", 32768, 32768, 4, 1),
]


def backend_context():
    """FlashAttention if this PyTorch can pin it and it runs here, else PyTorch's choice."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext, "default"
    ctx = lambda: sdpa_kernel([SDPBackend.FLASH_ATTENTION])  # noqa: E731
    q = torch.randn(1, HEADS, 128, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    try:
        with ctx():
            F.scaled_dot_product_attention(q, q, q, is_causal=True)
        torch.cuda.synchronize()
        return ctx, "flash"
    except RuntimeError:
        return contextlib.nullcontext, "default"


def pick_gqa(ctx):
    """'enable_gqa' if SDPA takes it under ctx on a small input, else 'expand'."""
    q = torch.randn(1, HEADS, 128, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(1, KV_HEADS, 128, HEAD_DIM, device="cuda", dtype=torch.bfloat16)
    try:
        with ctx():
            F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
        torch.cuda.synchronize()
        return "enable_gqa"
    except (TypeError, RuntimeError):
        return "expand"


def timed(fn, iters, before=None):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    out = []
    for it in range(WARMUP + iters):
        arg = before() if before else None
        start.record()
        fn(arg)
        end.record()
        end.synchronize()
        if it >= WARMUP:
            out.append(start.elapsed_time(end))
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iters", type=int, default=10, help="timed calls per shape (median)")
    args = ap.parse_args()
    if args.iters < 1:
        ap.error("--iters must be at least 1")
    if not torch.cuda.is_available():
        print("bench-attn-sdpa: error: torch.cuda.is_available() is false", file=sys.stderr)
        sys.exit(3)
    ctx, backend = backend_context()
    gqa = pick_gqa(ctx)
    print(f"sdpa: torch {torch.__version__}, {torch.cuda.get_device_name(0)}, backend "
          f"{backend}, gqa {gqa}, heads {HEADS}, kv_heads {KV_HEADS}, head_dim {HEAD_DIM}, "
          f"bf16, causal; median of {args.iters} after {WARMUP} warm-up")
    print(f"{'shape':<21} {'tokens':>8} {'docs':>5} {'fwd ms':>10} {'fwd TFLOP/s':>11} "
          f"{'bwd ms':>10} {'bwd TFLOP/s':>11}")
    lines = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for name, total, doc, heads, kv_heads in SHAPES:
        docs = total // doc
        dev = dict(device="cuda", dtype=torch.bfloat16)
        q = torch.randn(docs, heads, doc, HEAD_DIM, generator=gen, **dev)
        k = torch.randn(docs, kv_heads, doc, HEAD_DIM, generator=gen, **dev)
        v = torch.randn(docs, kv_heads, doc, HEAD_DIM, generator=gen, **dev)
        if gqa == "expand":
            k = k.repeat_interleave(heads // kv_heads, dim=1)
            v = v.repeat_interleave(heads // kv_heads, dim=1)
        dout = torch.randn(docs, heads, doc, HEAD_DIM, generator=gen, **dev)
        kw = {"is_causal": True}
        if gqa == "enable_gqa":
            kw["enable_gqa"] = True

        def fwd(_):
            with torch.no_grad(), ctx():
                F.scaled_dot_product_attention(q, k, v, **kw)

        qg, kg, vg = (t.detach().requires_grad_() for t in (q, k, v))

        def fwd_graph():
            with ctx():
                return F.scaled_dot_product_attention(qg, kg, vg, **kw)

        def bwd(out):
            with ctx():
                torch.autograd.grad(out, (qg, kg, vg), dout)

        fwd_ms = timed(fwd, args.iters)
        bwd_ms = timed(bwd, args.iters, before=fwd_graph)
        pairs = docs * doc * (doc + 1) / 2
        fwd_flops = 4 * HEAD_DIM * heads * pairs
        ft, bt = fwd_flops / fwd_ms / 1e9, 2.5 * fwd_flops / bwd_ms / 1e9
        print(f"{name:<21} {total:>8} {docs:>5} {fwd_ms:>10.3f} {ft:>11.1f} {bwd_ms:>10.3f} "
              f"{bt:>11.1f}")
        lines.append(f"shape={name} tokens={total} docs={docs} fwd_ms={fwd_ms:.4f} "
                     f"fwd_tflops={ft:.2f} bwd_ms={bwd_ms:.4f} bwd_tflops={bt:.2f}")
        del q, k, v, dout, qg, kg, vg
        torch.cuda.empty_cache()
    print("\n".join(lines))
    sys.stdout.flush()


if __name__ == "__main__":
    try:
        main()
    except RuntimeError as exc:
        print(f"bench-attn-sdpa: error: {exc}", file=sys.stderr)
        sys.exit(1)

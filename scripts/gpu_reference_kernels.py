"""Reference kernel costs on a GPU, measured through PyTorch (cuBLAS, cuDNN attention).

Run by scripts/gpu_check.sh where python3 has torch:  python3 gpu_reference_kernels.py SECONDS
Prints the CSV of cost_model/data/h200_reference_kernels.csv (its header says what each
column holds): GEMMs of GPT layer shapes and of square, skinny-K and small-M shapes (CUDA
events around one launch), per-kernel floor and element-wise bandwidth by size (CUDA graphs of
back-to-back kernels), fused attention forward and backward by sequence, head size and causal
mask, layer norm forward and backward. Stops starting new shapes after SECONDS.
"""
import sys
import time
import traceback

import torch
import torch.nn.functional as F

DEV = "cuda"
torch.backends.cuda.matmul.allow_tf32 = False
deadline = time.time() + float(sys.argv[1] if len(sys.argv) > 1 else 150)


def event_ms(fn, reps=10):
    """Median device ms of one launch of fn, between two CUDA events."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(True), torch.cuda.Event(True)
    times = []
    for _ in range(reps):
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end))
    times.sort()
    return times[len(times) // 2]


def graph_ms(fn, n=64, reps=7):
    """Median device ms per call of fn, from a CUDA graph of n calls (no launch gaps)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(n):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    begin, end = torch.cuda.Event(True), torch.cuda.Event(True)
    times = []
    for _ in range(reps):
        begin.record()
        graph.replay()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) / n)
    times.sort()
    return times[len(times) // 2]


def row(*fields):
    print(",".join(str(f) for f in fields), flush=True)


def gemm_shapes():
    shapes = set()
    for tokens in (2048, 4096):
        for hidden, ffn, mp in ((2560, 10240, 1), (4096, 16384, 1), (4096, 16384, 2),
                                (5120, 20480, 4), (6144, 24576, 8), (8192, 32768, 8),
                                (12288, 49152, 8)):
            for k, n in ((hidden, 3 * hidden // mp), (hidden // mp, hidden), (hidden, ffn // mp),
                         (ffn // mp, hidden)):
                shapes |= {(tokens, n, k), (tokens, k, n), (k, n, tokens)}
    shapes |= {(s, s, s) for s in (128, 256, 512, 1024, 2048, 4096, 8192, 16384)}
    shapes |= {(8192, 8192, k) for k in (16, 32, 64, 128, 256, 512)}
    shapes |= {(m, 8192, 8192) for m in (1, 8, 64, 256)}
    return sorted(shapes)


def gemms():
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        for m, n, k in gemm_shapes():
            if time.time() > deadline:
                return
            a = torch.randn(m, k, device=DEV, dtype=dtype)
            b = torch.randn(k, n, device=DEV, dtype=dtype)
            ms = event_ms(lambda: a @ b)
            row("gemm", name, m, n, k, 2 * m * n * k, f"{ms:.5f}", f"{2 * m * n * k / ms / 1e9:.2f}",
                "events")


def gemm_floor():
    for s in (64, 128, 256, 512, 1024):
        a = torch.randn(s, s, device=DEV, dtype=torch.bfloat16)
        c = torch.empty(s, s, device=DEV, dtype=torch.bfloat16)
        ms = graph_ms(lambda: torch.matmul(a, a, out=c))
        row("gemm_graph", "bf16", s, s, s, 2 * s**3, f"{ms:.6f}", f"{2 * s**3 / ms / 1e9:.2f}",
            "graph")


def elementwise():
    for dtype, name in ((torch.bfloat16, "bf16"), (torch.float32, "f32")):
        n = 256
        while n <= (1 << 28) and time.time() < deadline:
            x = torch.randn(n, device=DEV, dtype=dtype)
            y = torch.empty_like(x)
            ms = graph_ms(lambda: torch.add(x, 1.0, out=y), n=64 if n < (1 << 24) else 8)
            moved = 2 * n * x.element_size()
            row("add", name, n, "", "", moved, f"{ms:.6f}", f"{moved / ms / 1e6:.1f}", "graph")
            n *= 4


def attention():
    for causal in (True, False):
        for head_dim in (128, 64):
            for seq in (512, 1024, 2048, 4096, 8192, 16384):
                if time.time() > deadline:
                    return
                heads, batch = 4096 // head_dim, max(1, 16384 // seq)
                q, k, v = (torch.randn(batch, heads, seq, head_dim, device=DEV,
                                       dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
                grad_out = torch.randn(batch, heads, seq, head_dim, device=DEV, dtype=torch.bfloat16)
                flops = 4 * batch * heads * seq * seq * head_dim * (0.5 if causal else 1.0)
                fwd = event_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), 7)

                def forward_backward():
                    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    torch.autograd.grad(out, (q, k, v), grad_out)

                bwd = event_ms(forward_backward, 7) - fwd
                row("attention_fwd", "bf16", seq, head_dim, int(causal), f"{flops:.0f}", f"{fwd:.5f}",
                    f"{flops / fwd / 1e9:.1f}", "events")
                row("attention_bwd", "bf16", seq, head_dim, int(causal), f"{2.5 * flops:.0f}",
                    f"{bwd:.5f}", f"{2.5 * flops / bwd / 1e9:.1f}", "events")


def layer_norm():
    for hidden in (4096, 8192, 12288):
        for tokens in (512, 2048, 8192):
            if time.time() > deadline:
                return
            x = torch.randn(tokens, hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
            w = torch.ones(hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
            b = torch.zeros(hidden, device=DEV, dtype=torch.bfloat16, requires_grad=True)
            grad_y = torch.randn(tokens, hidden, device=DEV, dtype=torch.bfloat16)
            fwd = graph_ms(lambda: F.layer_norm(x.detach(), (hidden,), w.detach(), b.detach()), n=16)

            def forward_backward():
                y = F.layer_norm(x, (hidden,), w, b)
                torch.autograd.grad(y, (x, w, b), grad_y)

            both = event_ms(forward_backward, 7)
            moved = 2 * tokens * hidden * 2
            row("layer_norm_fwd", "bf16", tokens, hidden, "", moved, f"{fwd:.6f}",
                f"{moved / fwd / 1e6:.1f}", "graph")
            row("layer_norm_fwd_bwd", "bf16", tokens, hidden, "", f"{moved * 2.5:.0f}", f"{both:.6f}",
                f"{moved * 2.5 / both / 1e6:.1f}", "events")


print(f"# {torch.cuda.get_device_name(0)}, PyTorch {torch.__version__}", flush=True)
print("kind,dtype,a,b,c,work,ms,rate,timing", flush=True)
for section in (gemm_floor, elementwise, attention, layer_norm, gemms):
    try:
        section()
    except Exception:  # one section's failure leaves the others' rows
        traceback.print_exc(file=sys.stderr)
        print(f"# {section.__name__} failed", flush=True)

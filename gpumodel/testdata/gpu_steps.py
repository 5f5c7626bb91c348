#!/usr/bin/env python3
"""Times the GPU work of scheduler steps of a model-shaped network on one CUDA GPU.

Usage: python3 gpu_steps.py MODEL OUT.json [TP], MODEL one of the keys of MODELS below. With
TP > 1 it times one GPU's shard of a tensor-parallel replica (a TP-th of the heads, of the
MLP and of the vocabulary, as vLLM splits them), without the all-reduces.

Its results are testdata/kernels_<gpu>_<model>[-tp<N>].json, which kernels_test.go compares
gpumodel's step prices with. For each shape it records the
median GPU time of one replay of a CUDA graph (CUDA events around n replays, five
repeats), so that kernel-launch overhead and the CPU are out of the figure:

  layer_linear  one layer's four matrix multiplies (fused QKV, O, fused gate-up, down)
                over T rows, as F.linear runs them (cuBLAS): what vLLM runs for
                unquantized weights.
  attention_*   scaled_dot_product_attention alone: decode rows against their cached
                context (also with 8/8 and 32/32 heads, to tell a native grouped-query
                kernel from one that expands the KV heads), and causal prefill.
  step          a whole forward pass through every layer (RMSNorm, QKV, attention, O, RMSNorm,
                gate-up, SiLU-times-up, down, residual adds) and the LM head over the
                sampled rows, for B sequences decoding one token after C cached tokens
                each, and/or one prefill chunk of T tokens with no cached context.
                Each layer writes the step's new keys and values into its cache.

Weights and caches are random bf16 with the model's shapes (from its config.json, as
gpumodel's catalog has them). What vLLM does differently, and so what the figures leave
out: rotary embeddings, Qwen3's per-head query/key norms, fused norm/activation kernels, paged KV blocks
(here each sequence's cache is contiguous), FlashAttention 3 (here PyTorch's
scaled_dot_product_attention, whose backend is recorded), and all CPU work.
"""
import json
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

# hidden, query heads, KV heads, head dim, MLP width, layers, vocabulary
MODELS = {
    "Llama-3.1-8B": (4096, 32, 8, 128, 14336, 32, 128256),
    "Qwen3-32B": (5120, 64, 8, 128, 25600, 64, 151936),
    "Llama-3.1-70B": (8192, 64, 8, 128, 28672, 80, 128256),
}
HID, HEADS, KVH, HD, INTER, LAYERS, VOCAB = MODELS["Llama-3.1-8B"]
EPS = 1e-5
DT = torch.bfloat16
DEV = torch.device("cuda")

LINEAR_TOKENS = [1, 16, 64, 128, 256, 512, 1024, 2048, 4096, 8192]
# (decoding sequences, their cached context, prefill chunk tokens)
STEPS = [
    (1, 1024, 0), (8, 1024, 0), (16, 1024, 0), (32, 1024, 0), (64, 1024, 0),
    (128, 1024, 0), (256, 1024, 0), (64, 4096, 0), (128, 2048, 0), (16, 8192, 0),
    (0, 0, 128), (0, 0, 512), (0, 0, 1024), (0, 0, 2048), (0, 0, 4096), (0, 0, 8192),
    (64, 1024, 512), (128, 1024, 1024), (32, 2048, 2048),
]
# attention alone: (decoding sequences, cached context, query heads, KV heads); the
# 32/8 rows are the model's, 8/8 reads the same KV as a native grouped kernel would and
# 32/32 as many as one that expands the KV heads to the query heads.
DECODE_ATTENTION = [(128, 2048, 32, 8), (128, 2048, 8, 8), (128, 2048, 32, 32),
                    (16, 8192, 32, 8), (256, 1024, 32, 8)]
PREFILL_ATTENTION = [1024, 4096, 8192]
# a model four times larger: fewer shapes, and at most 131,072 cached tokens
BIG_STEPS = [
    (1, 1024, 0), (16, 1024, 0), (64, 1024, 0), (128, 1024, 0), (32, 4096, 0),
    (0, 0, 512), (0, 0, 2048), (0, 0, 8192), (64, 1024, 1024),
]


def randn(*shape):
    t = torch.empty(*shape, device=DEV, dtype=DT)
    t.normal_(0, 0.02)
    return t


def layer_weights():
    return {
        "n1": torch.ones(HID, device=DEV, dtype=DT),
        "qkv": randn((HEADS + 2 * KVH) * HD, HID),
        "o": randn(HID, HEADS * HD),
        "n2": torch.ones(HID, device=DEV, dtype=DT),
        "gu": randn(2 * INTER, HID),
        "down": randn(HID, INTER),
    }


def pick_backend():
    """Returns the first SDPA backend that runs grouped-query attention natively."""
    q = randn(2, HEADS, 1, HD)
    k = randn(2, KVH, 64, HD)
    for name, b in [("flash", SDPBackend.FLASH_ATTENTION),
                    ("cudnn", SDPBackend.CUDNN_ATTENTION),
                    ("efficient", SDPBackend.EFFICIENT_ATTENTION)]:
        try:
            with sdpa_kernel([b]):
                F.scaled_dot_product_attention(q, k, k, enable_gqa=True)
                qp = randn(1, HEADS, 64, HD)
                F.scaled_dot_product_attention(qp, k[:1], k[:1], is_causal=True, enable_gqa=True)
            torch.cuda.synchronize()
            return name, b
        except Exception as e:  # noqa: BLE001 - any failure means try the next
            print(f"sdpa backend {name}: {e!r}"[:300], flush=True)
    raise SystemExit("no SDPA backend runs enable_gqa=True")


def attend(backend, q, k, v, causal):
    with sdpa_kernel([backend]):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)


def timed(fn, min_ms=60.0, repeats=5):
    """Median ms of one replay of fn captured in a CUDA graph (eager if capture fails)."""
    for _ in range(2):
        fn()
    torch.cuda.synchronize()
    graph, call, graphed = None, fn, False
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        call, graphed = graph.replay, True
    except Exception as e:  # noqa: BLE001
        print(f"graph capture failed, timing eagerly: {e!r}"[:300], flush=True)
        torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    end.synchronize()
    n = max(3, min(500, int(min_ms / max(start.elapsed_time(end), 1e-3))))
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(n):
            call()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / n)
    del graph
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return {"ms": statistics.median(samples), "min_ms": min(samples), "max_ms": max(samples),
            "replays": n, "graph": graphed}


def layer_linear(w, tokens):
    x = randn(tokens, HID)
    a = randn(tokens, HEADS * HD)
    m = randn(tokens, INTER)

    def run():
        F.linear(x, w["qkv"])
        F.linear(a, w["o"])
        F.linear(x, w["gu"])
        F.linear(m, w["down"])
    return timed(run)


def attention_decode(backend, seqs, context, heads, kv_heads):
    q = randn(seqs, heads, 1, HD)
    k = randn(seqs, kv_heads, context + 1, HD)
    v = randn(seqs, kv_heads, context + 1, HD)
    return timed(lambda: attend(backend, q, k, v, False))


def attention_prefill(backend, tokens):
    q = randn(1, HEADS, tokens, HD)
    k = randn(1, KVH, tokens, HD)
    v = randn(1, KVH, tokens, HD)
    return timed(lambda: attend(backend, q, k, v, True))


def step(layers, head, backend, seqs, context, tokens):
    kv_elems = seqs * (context + 1) * KVH * HD
    dcache = [(randn(kv_elems), randn(kv_elems)) for _ in range(LAYERS)] if seqs else None
    pcache = [(torch.empty(tokens * KVH * HD, device=DEV, dtype=DT),
               torch.empty(tokens * KVH * HD, device=DEV, dtype=DT))
              for _ in range(LAYERS)] if tokens else None
    x0 = randn(seqs + tokens, HID)
    sampled = list(range(seqs)) + ([seqs + tokens - 1] if tokens else [])
    rows = torch.tensor(sampled, device=DEV)
    split = [HEADS * HD, KVH * HD, KVH * HD]

    def run():
        x = x0
        for i, w in enumerate(layers):
            q, k, v = F.linear(F.rms_norm(x, (HID,), w["n1"], EPS), w["qkv"]).split(split, dim=-1)
            outs = []
            if seqs:
                kc = dcache[i][0].view(seqs, KVH, context + 1, HD)
                vc = dcache[i][1].view(seqs, KVH, context + 1, HD)
                kc[:, :, context].copy_(k[:seqs].view(seqs, KVH, HD))
                vc[:, :, context].copy_(v[:seqs].view(seqs, KVH, HD))
                o = attend(backend, q[:seqs].reshape(seqs, HEADS, 1, HD), kc, vc, False)
                outs.append(o.reshape(seqs, HEADS * HD))
            if tokens:
                pcache[i][0].copy_(k[seqs:].reshape(-1))
                pcache[i][1].copy_(v[seqs:].reshape(-1))
                qp = q[seqs:].reshape(tokens, HEADS, HD).transpose(0, 1).unsqueeze(0)
                kp = k[seqs:].reshape(tokens, KVH, HD).transpose(0, 1).unsqueeze(0)
                vp = v[seqs:].reshape(tokens, KVH, HD).transpose(0, 1).unsqueeze(0)
                o = attend(backend, qp, kp, vp, True)
                outs.append(o.squeeze(0).transpose(0, 1).reshape(tokens, HEADS * HD))
            attn = outs[0] if len(outs) == 1 else torch.cat(outs)
            x = x + F.linear(attn, w["o"])
            g, u = F.linear(F.rms_norm(x, (HID,), w["n2"], EPS), w["gu"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(g) * u, w["down"])
        last = F.rms_norm(x.index_select(0, rows), (HID,), head[1], EPS)
        return F.linear(last, head[0])

    r = timed(run)
    del dcache, pcache
    torch.cuda.empty_cache()
    return r


def main():
    global HID, HEADS, KVH, HD, INTER, LAYERS, VOCAB
    model, out = sys.argv[1], sys.argv[2]
    tp = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    HID, HEADS, KVH, HD, INTER, LAYERS, VOCAB = MODELS[model]
    HEADS, KVH, INTER, VOCAB = HEADS // tp, max(KVH // tp, 1), INTER // tp, VOCAB // tp
    small = model == "Llama-3.1-8B" and tp == 1
    torch.manual_seed(0)
    props = torch.cuda.get_device_properties(0)
    name, backend = pick_backend()
    result = {
        "device": props.name, "sms": props.multi_processor_count,
        "memory_gib": round(props.total_memory / 2**30, 2),
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "cublas": "torch.nn.functional.linear", "sdpa_backend": name,
        "model": model, "tp": tp, "weights": "bf16, random", "points": [],
    }

    def save():
        with open(out, "w") as f:
            json.dump(result, f, indent=1)

    layers = [layer_weights() for _ in range(LAYERS)]
    head = (randn(VOCAB, HID), torch.ones(HID, device=DEV, dtype=DT))
    print(f"{props.name}: sdpa {name}", flush=True)
    for t in LINEAR_TOKENS:
        r = layer_linear(layers[0], t)
        result["points"].append({"kind": "layer_linear", "tokens": t, **r})
        print("layer_linear", t, r, flush=True)
        save()
    for seqs, context, heads, kv_heads in DECODE_ATTENTION if small else []:
        r = attention_decode(backend, seqs, context, heads, kv_heads)
        result["points"].append({"kind": "attention_decode", "seqs": seqs, "context": context,
                                 "heads": heads, "kv_heads": kv_heads, **r})
        print("attention_decode", seqs, context, heads, kv_heads, r, flush=True)
        save()
    for tokens in PREFILL_ATTENTION if small else []:
        r = attention_prefill(backend, tokens)
        result["points"].append({"kind": "attention_prefill", "tokens": tokens, **r})
        print("attention_prefill", tokens, r, flush=True)
        save()
    for seqs, context, tokens in STEPS if small else BIG_STEPS:
        r = step(layers, head, backend, seqs, context, tokens)
        p = {"kind": "step"}
        if tokens:
            p["prefill"] = [{"tokens": tokens, "context": 0}]
        if seqs:
            p["decode"] = {"seqs": seqs, "context": context}
        result["points"].append({**p, **r})
        print("step", seqs, context, tokens, r, flush=True)
        save()


if __name__ == "__main__":
    main()

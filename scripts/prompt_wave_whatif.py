"""What-if: tile and wave quantisation of llama.cpp's prompt GEMMs, and the layer split's prompt pipeline.

Now in the core (issue 27: ``roofline.wave_flops_factor`` with the CUTLASS tile of
``roofline.GEMM_TILE_BY_ARCHITECTURE``, for rows of ``measurements.tiled_prompt_gemms``
builds; ``parallel.evaluation.prompt_chunks``); this script switches both off and re-applies
its own variants on the table's class fit, as measured below (its ``--off`` is the model
before them, the refitted table aside).

    python scripts/prompt_wave_whatif.py --off --out /tmp/base.csv          # the shipped model
    python scripts/prompt_wave_whatif.py --cublas-only --pipeline --out /tmp/wp.csv
    python scripts/prompt_wave_whatif.py --tile 256x128 --tile 128x128      # least wasteful tile
    python scripts/prompt_wave_whatif.py --from /tmp/wp.csv --against /tmp/base.csv
    python scripts/prompt_wave_whatif.py --cublas-only --pipeline --tile 256x128 --decode

**Tile and wave quantisation** (``--tile``, default 128x128). A GEMM of M x N outputs runs
ceil(M / tm) x ceil(N / tn) output tiles, one per SM at a time, in ceil(tiles / SMs) waves;
the last wave leaves SMs idle, so the GEMM runs at M N / (waves x SMs x tm x tn) of the rate a
wave-free GEMM reaches (NVIDIA, "Matrix Multiplication Background User's Guide", DU-09799-001,
2023, sections 2.3 and 3; ``serving.cost.gemm_quantisation``, the serving what-if of the same
rule, reused here). In a llama.cpp prompt each weight matmul is one GEMM over a micro-batch of
min(prompt, 512) rows (``efficiency.UBATCH_STACKS``) and N = its output columns: Q (heads x
head size), K and V (KV heads x head size), O, gate and up (the FFN width each: llama.cpp runs
them as separate matmuls) and down (hidden size). Where several tiles are given, each GEMM
takes the least wasteful. An A100 (108 SMs) runs Llama-3-8B's prompt GEMMs at 0.67 of their
wave-free rate, an RTX 4080 (76 SMs) at 0.88, an RTX 5000 Ada (100 SMs) at 0.72 (128 x 128).
``--cublas-only``: only rows of the builds that ran every prompt matmul through cuBLAS
(``measurements.CUBLAS_PROMPT_BUILDS``, the May 2024 notebooks); llama.cpp's MMQ kernels split
their tiles over the SMs by stream-k decomposition since github ggml-org/llama.cpp PR #8018
(2024-06, "CUDA: stream-k decomposition for MMQ": an RTX 4090's 8B Q5_0 prompt at 512-token
micro-batches 1.28x faster), which removes the idle last wave -- the 2025 builds' rows.

**Prompt pipeline over a layer split** (``--pipeline``). llama.cpp pipelines a prompt's
micro-batches through the devices of a layer split (github ggml-org/llama.cpp PR #6017,
2024-03): n micro-batches on PP even stages take 1 + (n - 1) / PP micro-batch passes, not n.
The A100 SXM4 notebooks show it: the 8B Q4_K_M prompt on four GPUs runs 0.82, 1.33, 2.39 and
2.79x one GPU's rate at pp512 / 1024 / 4096 / 8192, which is 0.82-0.83x the pipeline's
1, 1.6, 2.9 and 3.4 (``A100_SXM_4_v3.ipynb`` against ``A100_SXM_v3.ipynb``, XiongjieDai
/GPU-Benchmarks-on-LLM-Inference@7d5af524, llama-bench tables).

Only the fast path is patched (``fastpath.features``: each prompt GEMM's FLOPs count
1 / quantisation times), so the class fit sees the rule; rows the full core times (layer
splits) are scaled: their GEMM share of the prompt's FLOPs by its FLOP-weighted
1 / quantisation, then by the pipeline's speed-up. Folds as ``scripts/prefill_class_loo.py``:
for each GPU device with llama.cpp prompt rows (power-limited twins held out together,
``measurements.device_key``) the classes are refitted without it
(``fitting.fit_table(..., frameworks=False)``) and its llama.cpp prompt rows predicted (the
single-device rows with the fast path, as the fit). Prints the median |error| by class and
by single / multi-device rows. About 4 min.

Measured (issue 27, this script at its commit; median |error| held out, llama.cpp's GPU
prompt rows: consumer 66 rows (44 single-device, 22 layer-split), datacenter 18 (11, 7)):

| variant | consumer | (single / split) | datacenter | (single / split) |
|---|---|---|---|---|
| shipped (``--off``) | 13.5 % | 12.4 / 15.8 % | 26.3 % | 25.3 / 41.8 % |
| tiles 128x128, every row | 15.5 % | 13.9 / 18.1 % | 20.1 % | 10.2 / 42.4 % |
| the same, least wasteful of 256x128, 128x256, 128x128 | 15.5 % | 13.9 / 18.1 % | 20.1 % | 10.2 / 42.4 % |
| tiles 128x128, cuBLAS builds only (``--cublas-only``) | 14.5 % | 11.8 / 19.7 % | 19.8 % | 7.3 / 42.7 % |
| pipeline only (``--off --pipeline``) | 18.0 % | 12.4 / 33.9 % | 26.3 % | 25.3 / 48.6 % |
| cuBLAS tiles + pipeline (``--cublas-only --pipeline``) | 13.4 % | 11.8 / 25.7 % | **13.0 %** | 7.3 / 21.9 % |
| the same with 256x128 tiles (``--tile 256x128``; 128x256 gives the same) | **10.9 %** | 9.2 / 16.7 % | **13.9 %** | 6.1 / 21.4 % |

The tile is the rule's one free choice, and the figures depend on it: 128x128 was tried first,
256x128 second (the two orientations tile a 512-row GEMM whose width is a multiple of 256 into
the same N / 64 tiles). With 256x128 the A100 PCIe's six single-GPU rows held out land within
-7..+3 %, the consumer single-GPU rows go 12.4 -> 9.2 % (RTX 4090 Q4_K_M +24 / +29 -> -10 / +1 %,
RTX 5000 Ada +29..+45 -> +4..+27 %), but the rows the rule leaves alone move with the refitted
class fraction: the 2025 MMQ Q4_0 rows of an RTX 4090 / RTX PRO 6000 / the AMD cards -5..+13 ->
+14..+36 % (the RTX 3090 / 50-series ones -25..-10 -> -11..+9 %). Choosing the tile on these
held-out rows would be tuning: a core rule should take it from the kernels (cuBLAS's heuristics
pick per shape and GPU).

The class refit moves the batch-1 values little (``--decode``: the same folds' llama.cpp
batch-1 decode rows, the stacks not refitted): consumer GPUs 4.1 -> 4.0 % (94 rows), the
A100s' llama.cpp decode rows 6.6 -> 6.3 % (26 rows), shipped vs 256x128 tiles + pipeline.

With both, the A100 PCIe's single-GPU rows held out go from +11..+40 % to -1..+15 %, the 16-bit
layer splits (8B and 70B F16 on 2-8 GPUs) from -11..-50 % to -13..+19 %, but the quantised
layer splits overshoot: 70B Q4_K_M on 2-8 GPUs +24..+145 % (none of them gains the pipeline's
speed-up: the SXM4 box's four GPUs prefill it at 0.57-0.68x one GPU's rate at pp512 / 1024),
8B Q4_K_M +5..+40 % (the unsteady A100 SXM4 8B F16 row D0481 aside,
``measurements.unsteady_prefill``: its four-GPU sweep rises 627 -> 1,612 tokens/s as well).
Since built into the core, on by default, with the cited CUTLASS tile (256 tokens x 128
columns) and the refit of ``fitting.BUILD_RULES`` (only the class GEMM fractions refitted with
the rules, every other value and every other stack's profile as without them):
``llmpara validate --loo`` prefill held out 9.0 -> 7.1 %, consumer GPUs 13.5 -> 12.3 %,
datacenter 25.0 -> 9.7 % (docs/accuracy.md, "What limits prefill"). Why quantised layer splits do not
pipeline is still open: llama.cpp turns the pipeline on for any format
(ggerganov/llama.cpp@0028010d llama.cpp, llama_new_context_with_model: more than one device,
every layer offloaded and the layer split; CUDA only).
"""

from __future__ import annotations

import argparse
import csv
import functools
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.calibration import default_table, fastpath, fitting  # noqa: E402
from llmpara_core.calibration import measurements as validation  # noqa: E402
from llmpara_core.serving.cost import gemm_quantisation  # noqa: E402

GPU = ("consumer-gpu", "datacenter-gpu")
UBATCH_TOKENS = 512
_FEATURES = fastpath.features.__wrapped__      # the shipped fast path, unpatched
COLUMNS = ("row_id", "device", "cls", "devices", "quant", "prompt", "measured", "predicted",
           "error", "wave")


def gemm_columns(model, name: str) -> float:
    """Output columns of one llama.cpp GEMM of operator ``name`` (0: not a weight GEMM timed
    here). llama.cpp runs Q, K, V and gate, up as separate matmuls."""
    hd = model.head_size
    cols = {"q_proj": model.num_attention_heads * hd, "k_proj": model.num_key_value_heads * hd,
            "v_proj": model.num_key_value_heads * hd, "o_proj": model.hidden_size,
            "ffn_gate_up": model.intermediate_size, "ffn_down": model.hidden_size}
    return float(cols.get(name, 0))


def op_quantisation(row, names, tiles) -> np.ndarray:
    """Per operator of the row's prompt pass: the share of its GEMM's tile slots doing work
    (1 for operators that are not weight GEMMs, and where the device has no SM count)."""
    sms = row.hardware.compute_units
    if not sms or row.model.moe is not None:
        return np.ones(len(names))
    m = float(min(row.workload.prompt_len, UBATCH_TOKENS))
    n = np.array([gemm_columns(row.model, x) for x in names])
    q = gemm_quantisation(np.full(len(names), m), n, float(sms), tiles)
    return np.where(n > 0, q, 1.0)


def applies(row, cublas_only: bool) -> bool:
    """Whether the rule applies to ``row``: llama.cpp prompt rows of GPUs (with
    ``cublas_only``, only rows of the builds that ran every prompt matmul through cuBLAS,
    ``measurements.CUBLAS_PROMPT_BUILDS``: MMQ since github ggml-org/llama.cpp PR #8018,
    2024-06, splits its tiles over the SMs by stream-k decomposition, which removes the last
    wave's idle SMs -- the 2025 builds' quantised prompts)."""
    if (row.measurement.metric == "decode_tok_s" or row.framework != "llama.cpp"
            or row.hardware.hw_class.value not in GPU):
        return False
    return not cublas_only or row.measurement.source.startswith(
        validation.CUBLAS_PROMPT_BUILDS)


def patch(tiles, cublas_only: bool = False) -> None:
    """Make ``fastpath.features`` count each prompt GEMM's FLOPs 1 / quantisation times for
    llama.cpp prompt rows of GPUs."""
    orig = _FEATURES

    @functools.lru_cache(maxsize=4096)
    def features(row):
        f = orig(row)
        if not applies(row, cublas_only):
            return f
        q = op_quantisation(row, f.prefill.names, tiles)
        return replace(f, prefill=replace(f.prefill, flops=f.prefill.flops / q))
    fastpath.features = features
    fitting.features = features
    import llmpara_core.calibration.stack_fit as sf
    sf.features = features


def flops_weighted(row, tiles) -> tuple[float, float]:
    """1 / quantisation averaged over the row's prompt GEMM FLOPs (for rows the full core
    times: layer splits)."""
    f = _FEATURES(row)
    q = op_quantisation(row, f.prefill.names, tiles)
    gem = np.array([gemm_columns(row.model, x) > 0 for x in f.prefill.names])
    fl = f.prefill.flops
    if not gem.any():
        return 1.0, 0.0
    return float(np.sum(fl[gem] / q[gem]) / np.sum(fl[gem])), float(np.sum(fl[gem]) / np.sum(fl))


def pipeline_speedup(row) -> float:
    """How many times faster a layer-split prompt runs when its micro-batches of
    ``UBATCH_TOKENS`` pipeline through the row's ``pp`` devices (github ggml-org/llama.cpp PR
    #6017, 2024-03, up to GGML_SCHED_MAX_COPIES = 4 micro-batches in flight) than when they run
    one after another: n / (1 + (n - 1) / PP) for n micro-batches and even stages."""
    n = -(-row.workload.prompt_len // UBATCH_TOKENS)
    pp = row.pp
    if pp <= 1 or n <= 1:
        return 1.0
    return n / (1.0 + (n - 1) / pp)


def run(tiles, devices, cublas_only: bool = False, pipeline: bool = False,
        decode: bool = False) -> list[dict]:
    """Per-row held-out predictions of the GPU devices' llama.cpp prompt rows (and, with
    ``decode``, of the same folds' llama.cpp batch-1 decode rows: the class refit moves their
    values too; their ``prompt`` is 0)."""
    # the core's own rules (issue 27: measurements.PROMPT_GEMM_WAVES, evaluation.
    # PROMPT_PIPELINE) off, so the variants here start from the model they were measured on
    validation.PROMPT_GEMM_WAVES = False
    from llmpara_core.parallel import evaluation
    evaluation.PROMPT_PIPELINE = False
    evaluation._shard_cached.cache_clear()
    fastpath.features.cache_clear()
    measured, skipped = validation.read_shipped()
    mapped, _ = validation.map_all(measured, skipped)
    if tiles:
        patch(tiles, cublas_only)
    base = default_table()
    prompt = [r for r in mapped if validation.regime(r) == "prefill"
              and validation.row_stack(r) == fitting.REFERENCE_FRAMEWORK
              and r.hardware.hw_class.value in GPU
              and (not devices or r.hardware.slug in devices)]
    out, t0 = [], time.time()
    for key in sorted({validation.device_key(r.hardware) for r in prompt}, key=str):
        test = [r for r in prompt if validation.device_key(r.hardware) == key]
        if decode:
            test += [r for r in mapped if validation.device_key(r.hardware) == key
                     and validation.regime(r) == "batch-1"
                     and validation.row_stack(r) == fitting.REFERENCE_FRAMEWORK]
        train = [r for r in mapped if validation.device_key(r.hardware) != key]
        table = fitting.fit_table(train, base, frameworks=False)
        for r in test:
            w = 1.0
            if r.devices == 1:
                eff = table.efficiency_for(r.hardware, fitting.REFERENCE_FRAMEWORK)
                pred = fastpath.features(r).predict(eff)
            else:
                pred = validation.predict_all([r], table)[0][0].estimated
                if tiles and applies(r, cublas_only):
                    # the GEMMs' share of the prompt time grows by their mean 1 / quantisation
                    w, share = flops_weighted(r, tiles)
                    pred = pred / (1.0 + share * (w - 1.0))
                if pipeline and r.measurement.metric != "decode_tok_s":
                    pred = pred * pipeline_speedup(r)
            m = r.measurement
            out.append({"row_id": m.row_id, "device": r.hardware.slug,
                        "cls": fitting.kernel_class(r.hardware.hw_class,
                                                    r.hardware.architecture).value,
                        "devices": r.devices, "quant": m.quant,
                        "prompt": (0 if m.metric == "decode_tok_s" else r.workload.prompt_len),
                        "measured": m.value,
                        "predicted": pred, "error": pred / m.value - 1.0, "wave": w})
        print(f"{test[0].hardware.slug}: {time.time() - t0:.0f} s", flush=True)
    return out


def read_rows(path: Path) -> list[dict]:
    """Rows of a CSV written by ``--out`` (ValueError if a column is missing or an error is
    not a number)."""
    with path.open(newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: no column {', '.join(missing)} (write it with --out)")
        rows = list(reader)
    for r in rows:
        r["error"] = float(r["error"])
    return rows


def summary(rows: list[dict]) -> None:
    """Median |error| and signed median by class, and by single- / multi-device rows (prompt
    rows; decode rows, written with ``--decode``, apart)."""
    dec = [r for r in rows if int(r["prompt"]) == 0]
    rows = [r for r in rows if int(r["prompt"]) > 0]
    for cls in GPU:
        errs = [float(r["error"]) for r in dec if r["cls"] == cls]
        if errs:
            print(f"batch-1 decode, {cls}: {len(errs)} rows, median |error| "
                  f"{statistics.median(abs(e) for e in errs):.1%}")
    for cls in GPU + (None,):
        for part, keep in (("", lambda r: True),
                           (", single device", lambda r: int(r["devices"]) == 1),
                           (", several devices", lambda r: int(r["devices"]) > 1)):
            sel = [r for r in rows if (cls is None or r["cls"] == cls) and keep(r)]
            if sel:
                errs = [float(r["error"]) for r in sel]
                print(f"{'  ' if part else ''}{cls or 'all GPU'}{part}: {len(sel)} rows, median |error| "
                      f"{statistics.median(abs(e) for e in errs):.1%}, signed "
                      f"{statistics.median(errs):+.1%}")


def parse_tile(s: str) -> tuple[int, int]:
    a, b = s.lower().split("x")
    return int(a), int(b)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tile", action="append", type=parse_tile,
                    help="output tile rows x columns (repeat: the least wasteful is taken)")
    ap.add_argument("--off", action="store_true", help="no quantisation (the shipped model)")
    ap.add_argument("--cublas-only", action="store_true",
                    help="only rows of builds that ran their prompt matmuls on cuBLAS")
    ap.add_argument("--pipeline", action="store_true",
                    help="layer-split prompts pipeline their micro-batches over the devices")
    ap.add_argument("--decode", action="store_true",
                    help="also the same folds' llama.cpp batch-1 decode rows (prompt 0)")
    ap.add_argument("--device", action="append", help="hold out only these presets")
    ap.add_argument("--out", type=Path, help="write the per-row CSV here")
    ap.add_argument("--from", dest="src", type=Path, help="summarise a CSV written by --out")
    ap.add_argument("--against", type=Path, help="with --from: a second CSV to set beside it")
    args = ap.parse_args(argv)
    if args.src:
        try:
            files = [read_rows(p) for p in (args.src, args.against) if p is not None]
        except (OSError, UnicodeDecodeError, ValueError) as e:
            print(f"prompt_wave_whatif: cannot read: {e}", file=sys.stderr)
            return 2
        for path, rows in zip((args.src, args.against), files):
            print(f"{path}:")
            summary(rows)
        return 0
    tiles = None if args.off else tuple(args.tile or [(128, 128)])
    if tiles and len(tiles) == 1:
        tiles = tiles[0]
    rows = run(tiles, args.device, args.cublas_only, args.pipeline, args.decode)
    if args.out:
        with args.out.open("w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            w.writerows(rows)
    summary(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())

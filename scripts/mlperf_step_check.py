"""Where the MLPerf v4.1 Server residuals sit: the model's pass time at each run's own
operating point (issue 31; nothing is fitted here, and nothing reads this in a test).

A Server run's log gives, besides its tokens/s, the scheduled rate, the mean latency, the mean
time to first token and the mean time per output token (``mlperf_log_summary.txt``,
"Additional Stats"). By Little's law the run held, per instance,

    in flight  N  = rate x mean latency
    decoding   Nd = rate x (mean latency - mean TTFT)
    prompt tokens per pass  = rate x ISL x TPOT   (the prompts admitted while one pass runs)

and one pass lasted about the mean TPOT (one decode token per running sequence per pass).
Timing that mix with the row's ``IterationCost`` (the shipped profile, release factor, power
wall, board) -- plus its streamed responses where the row streams -- separates the two halves
of a throughput error: the **operating point** (how many sequences the engine holds) and the
**pass cost** at that point. A ratio TPOT / model pass > 1 says the model's pass is too fast
at the real batch; the throughput residual then follows from it (a faster pass drains the
same traffic with fewer sequences in flight). vLLM 0.4.3 (AMD) runs prompts in passes of
their own (prefill-first, ``mlperf.RELEASE_ENGINE``): there one output token costs a decode
pass of Nd sequences plus a prompt pass of the prompts admitted meanwhile.

The log figures below were read from the published summaries (github
mlcommons/inference_results_v4.1@a2f5d66d17e8, ``closed/<submitter>/results/<system>/<benchmark>/
Server/performance/run_1/mlperf_log_summary.txt``; the llama2-70b-99.9 file where it is the
same run and the -99 one is not stored). Context length per sequence is taken as ISL + OSL / 2
(first order).

    python scripts/mlperf_step_check.py

Measured on main c65c8f1 (ratio = log TPOT / model pass incl. streaming):
  H100 llama2-70b TP2        1.24   (throughput residual +18.4 %)
  H200 llama2-70b TP1        1.07   (+6.0 %)
  Dell XE9640 llama2 TP2     1.28   (+21.6 %)
  H100 Mixtral TP1           1.17   (+17.4 %)
  Dell XE8640 Mixtral TP1    1.15   (+13.8 %)
  H200 Mixtral TP1           1.14   (+16.2 %)
  1x MI300X llama2 (vLLM)    1.41   (+18.2 %; prefill-first form)
With the activations between kernels at 16 bits (``serving.cost.INTERKERNEL_ACTIVATION_BITS``,
branch mlperf10): H100 TP2 1.24, Dell TP2 1.25, H200 llama2 1.07, MI300X 1.38, Mixtral H100 /
Dell / H200 1.11 / 1.09 / 1.10. With TensorRT-LLM's MoE routing kernels switched on
(``serving.cost.MOE_ROUTING_KERNELS``, a what-if, branch mlperf28): Mixtral H100 / Dell /
H200 1.09 / 1.07 / 1.08 (the llama2-70b rows unchanged).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmpara_core.serving import mlperf  # noqa: E402

_R = "github mlcommons/inference_results_v4.1@a2f5d66d17e8:closed/"
# system -> (scheduled samples/s of the whole system, mean latency [s], mean TTFT [s],
# mean TPOT [s], the summary read)
LOGS = {
    # NVIDIA's summary is not stored: its mlperf_log_detail.txt, result_scheduled_samples_per_
    # sec, result_mean_latency_ns, result_first_token_mean_latency_ns,
    # result_time_to_output_token_mean
    "DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99": (75.0967, 44.955, 0.27593, 0.15496, _R +
                                                   "NVIDIA/results/DGX-H100_H100-SXM-80GBx8_"
                                                   "TRT/llama2-70b-99/Server (detail log)"),
    "XE9640_H100_SXM_80GBx4_TRT": (30.97, 34.633, 0.2108, 0.11945, _R + "Dell/results/"
                                   "XE9640_H100_SXM_80GBx4_TRT/llama2-70b-99.9/Server"),
    "H200-SXM-141GBx8_TRT/llama2-70b-99": (101.25, 35.855, 0.1983, 0.12326, _R + "NVIDIA/"
                                           "results/H200-SXM-141GBx8_TRT/llama2-70b-99/Server"),
    "1xMI300X_2xEPYC-9374F": (8.62, 45.214, 0.4019, 0.15338, _R + "AMD/results/"
                              "1xMI300X_2xEPYC-9374F/llama2-70b-99.9/Server"),
    "DGX-H100_H100-SXM-80GBx8_TRT/mixtral-8x7b": (348.37, 15.016, 0.1800, 0.10259, _R +
                                                  "NVIDIA/results/DGX-H100_H100-SXM-80GBx8_"
                                                  "TRT/mixtral-8x7b/Server"),
    "XE8640_H100_SXM_80GBx4_TRT": (176.27, 14.031, 0.1553, 0.09598, _R + "Dell/results/"
                                   "XE8640_H100_SXM_80GBx4_TRT/mixtral-8x7b/Server"),
    "H200-SXM-141GBx8_TRT/mixtral-8x7b": (392.18, 20.223, 0.2276, 0.13839, _R + "NVIDIA/"
                                          "results/H200-SXM-141GBx8_TRT/mixtral-8x7b/Server"),
}


def _log_for(row):
    return LOGS.get(f"{row.system}/{row.benchmark}") or LOGS.get(row.system) \
        if row.scenario == "Server" else None


def _row(cost, n_tok, n_logits, pairs, keys) -> np.ndarray:
    f = np.zeros(len(cost.features))
    f[:5] = (1.0, n_tok, n_logits, pairs, keys)
    if cost.window:
        f[5:7] = (pairs, keys)
    if cost.moe:
        f[-1] = cost.moe.expected_active_experts(float(n_tok))
    return f


def pass_check(row, log) -> dict:
    """The model's pass time at the log's operating point (see the module docstring)."""
    qps, lat, ttft, tpot, _ = log
    cost, cfg = mlperf._setup(row)
    rate = qps / row.instances
    n = rate * lat
    nd = rate * (lat - ttft)
    pre_seqs = rate * tpot
    pre = pre_seqs * row.isl
    ctx = row.isl + row.osl / 2.0
    dec = (nd, nd, nd * ctx, nd * ctx)                       # tokens, logits, pairs, keys
    # a whole prompt per admitted sequence: ISL (ISL + 1) / 2 pairs, ISL keys read
    pro = (pre, pre_seqs, pre * (row.isl + 1) / 2.0, pre)
    if cfg.mixed_batches:
        f = _row(cost, *(a + b for a, b in zip(dec, pro)))
        t = cost.time_one_s(f, max(1, int(round(n))))
        t += mlperf.server_stream_s(row, cost) * f[2]
    else:           # prefill-first: a decode pass, and a prompt pass of the admitted prompts
        t = cost.time_one_s(_row(cost, *dec), max(1, int(round(nd)))) \
            + cost.time_one_s(_row(cost, *pro), max(1, int(round(pre_seqs))))
    return {"in_flight": n, "decoding": nd, "tokens": nd + pre, "model_s": t, "log_s": tpot}


def main() -> None:
    rows = mlperf.load_rows()
    print(f"{'system':30s} {'model':8s} {'N':>5s} {'Nd':>5s} {'tokens':>6s} "
          f"{'model pass':>10s} {'log TPOT':>9s} {'ratio':>6s}")
    for r in rows:
        log = _log_for(r)
        if log is None:
            continue
        c = pass_check(r, log)
        print(f"{r.system[:30]:30s} {r.benchmark[:8]:8s} {c['in_flight']:5.0f} "
              f"{c['decoding']:5.0f} {c['tokens']:6.0f} {1e3 * c['model_s']:8.1f} ms "
              f"{1e3 * c['log_s']:6.1f} ms {c['log_s'] / c['model_s']:6.2f}")


if __name__ == "__main__":
    main()

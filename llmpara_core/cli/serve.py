"""``llmpara serve``: an in-flight-batching serving engine simulated request by request.

Example::

    llmpara serve --model llama-3-8b --hardware nvidia-h100-sxm --isl 512 --osl 256 \\
        --framework tensorrt-llm --max-load --requests 2000 --format json
"""

from __future__ import annotations

import argparse

from .types import bounded
from ..limits import bound
from .base import (FRAMEWORK_HELP, add_model_hw_args, add_output_args, add_precision_args, emit,
                   nonneg_int, number_in, positive_int, precision_from_args, print_stack,
                   with_framework)
from ..errors import ConfigError
from ..units import BYTES_PER_GB, BYTES_PER_GIB, S_PER_MS
from ..serving import (ARRIVALS, POLICIES, SCHEDULERS, EngineConfig, RequestSpec, Slo,
                       engine_config, serve, study_to_dict)
from ..serving import lengths as length_sets, scenarios, stack_version, streaming
from ..serving.disagg import disaggregate, disagg_to_dict

_MAX_TP = 65536


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="simulate a serving engine under load (TTFT/TPOT percentiles, SLOs)",
        description="Iteration-level simulation of an in-flight-batching engine: arrivals, "
                    "scheduler token budget, paged KV cache, preemption; throughput, latency "
                    "percentiles, goodput and the largest rate meeting an SLO.")
    add_model_hw_args(p)
    g = p.add_argument_group("deployment")
    g.add_argument("--tp", type=bounded("degree", "TP"), default=1, help="tensor-parallel degree")
    g.add_argument("--pp", type=bounded("degree", "PP"), default=1, help="pipeline stages")
    g.add_argument("--framework", help=FRAMEWORK_HELP + "; also the scheduler defaults "
                                       "(tensorrt-llm, vllm; other stacks: a generic engine)")
    g.add_argument("--stack-version", metavar="V",
                   help="TensorRT-LLM release (0.10 to 0.21, e.g. 0.12): its fitted factor on "
                        "the compute time (serving.stack_version; default: the profile pooled "
                        "over all releases); needs --framework tensorrt-llm")
    w = p.add_argument_group("requests")
    w.add_argument("--isl", type=bounded("tokens_per_request", "ISL"), default=512, help="input tokens per request")
    w.add_argument("--osl", type=bounded("tokens_per_request", "OSL"), default=256, help="output tokens per request")
    load = w.add_mutually_exclusive_group()
    load.add_argument("--max-load", action="store_true", help="all requests queued at t = 0")
    load.add_argument("--rate", type=bounded("rate_per_s", "rate"),
                      help="mean request rate [requests/s]")
    w.add_argument("--arrival", choices=[a for a in ARRIVALS if a != "max-load"],
                   default="poisson", help="arrival process with --rate (gamma: see "
                                           "--burstiness)")
    w.add_argument("--burstiness", type=bounded("burstiness"), default=1.0,
                   help="gamma shape: 1 = Poisson, < 1 burstier")
    w.add_argument("--requests", type=bounded("requests"), default=1000)
    w.add_argument("--lengths", metavar="KIND|NAME|FILE",
                   help="fixed (default), uniform or lognormal around ISL/OSL; a named data set "
                        f"({', '.join(length_sets.NAMED)}: MLPerf's request lengths); a CSV of "
                        "input_length,output_length; or stats:IN_MEAN/IN_MEDIAN/IN_MAX:"
                        "OUT_MEAN/OUT_MEDIAN/OUT_MAX (lognormal). A table sets ISL/OSL")
    w.add_argument("--scenario", choices=scenarios.SCENARIOS,
                   help="MLPerf scenario: offline = max load; server / interactive = Poisson "
                        "arrivals with the benchmark's p99 TTFT/TPOT limits (mlperf.conf), "
                        "reported at the largest rate meeting them unless --rate is given; "
                        "lengths default to the benchmark's data set")
    w.add_argument("--mlperf-benchmark", choices=tuple(scenarios.LIMITS),
                   help="whose limits --scenario uses (default: the model's benchmark, else "
                        "llama2-70b)")
    w.add_argument("--length-spread", type=number_in(0, 5), default=0.5)
    w.add_argument("--seed", type=nonneg_int, default=0)
    e = p.add_argument_group("engine (defaults: the framework's)")
    e.add_argument("--max-batch", type=positive_int, help="cap on running requests")
    e.add_argument("--max-num-tokens", type=positive_int, help="token budget per iteration")
    e.add_argument("--chunked-prefill", choices=("on", "off"))
    e.add_argument("--scheduler", choices=SCHEDULERS,
                   help="mixed (default): decodes and prompt chunks share a pass; "
                        "prefill-first: vLLM V0's default (chunked prefill off) -- a pass "
                        "that runs prompts stalls the decodes")
    e.add_argument("--sliding-window", choices=("on", "off"),
                   help="whether the engine applies a sliding-window model's window (default: "
                        "the framework's; TensorRT-LLM off -- trtllm-bench sets no max "
                        "attention window, so every cached token is kept and read)")
    e.add_argument("--block-size", type=positive_int, help="KV-cache block [tokens]")
    e.add_argument("--kv-memory-fraction", type=bounded("unit_fraction", "KV memory fraction", lo_open=True),
                   help="KV memory fraction: TensorRT-LLM and generic take this share of the memory left after weights and activations; vLLM takes it of the total, less weights and activations")
    e.add_argument("--runtime-reserve-gib", type=number_in(0, 1024, what="a reserve [GiB]"),
                   help="device memory the runtime holds outside weights, activations and KV "
                        "cache, per device [GiB = 2^30 B] (default: the framework's; "
                        "TensorRT-LLM 4, fitted on its max-load rows; vLLM and generic 0)")
    e.add_argument("--stream", action=argparse.BooleanOptionalAction, default=None,
                   help="stream a response per token after every pass (--no-stream: "
                        "responses as requests finish); each streamed token costs the stack's "
                        "fitted per-sequence host time per pass (0 under the generic profile), "
                        "so a busy engine serves fewer tokens/s. Default: the "
                        "scenario's -- on for --scenario server / interactive under "
                        "TensorRT-LLM (NVIDIA's MLPerf harness streams there), off otherwise")
    e.add_argument("--kv-policy", choices=POLICIES)
    e.add_argument("--prefix-hit-rate", type=number_in(0, 0.999), default=0.0)
    s = p.add_argument_group("objectives")
    s.add_argument("--slo-ttft-ms", type=bounded("slo_ms", "SLO TTFT [ms]"))
    s.add_argument("--slo-tpot-ms", type=bounded("slo_ms", "SLO TPOT [ms]"))
    s.add_argument("--slo-percentile", type=bounded("percentile", "SLO percentile"), default=90.0)
    s.add_argument("--target-rate", type=bounded("rate_per_s", "target rate"),
                   help="requests/s the fleet must serve: replicas and GPUs")
    s.add_argument("--no-search", action="store_true", help="skip the SLO rate search")
    s.add_argument("--disagg-gpus", type=bounded("devices", "disaggregation GPUs"),
                   help="disaggregated serving: best prefill:decode split of this many GPUs "
                        "(needs the SLO)")
    bw = bound("bandwidth_bytes_per_s")
    s.add_argument("--kv-link-gbps", type=number_in(bw.lo / BYTES_PER_GB, bw.hi / BYTES_PER_GB,
                                                    what="a link bandwidth [GB/s]"),
                   help="disaggregation: KV-transfer link per device [GB/s] (default: the "
                        "cluster's link)")
    p.add_argument("--no-flash-attention", action="store_true")
    add_precision_args(p)
    add_output_args(p)
    p.set_defaults(func=_cmd_serve)


def _engine_config(args, framework: str | None) -> tuple[EngineConfig, str]:
    chunked = None if args.chunked_prefill is None else args.chunked_prefill == "on"
    mixed = None if args.scheduler is None else args.scheduler == "mixed"
    window = None if args.sliding_window is None else args.sliding_window == "on"
    return engine_config(framework, max_batch=args.max_batch, mixed_batches=mixed,
                         sliding_window=window,
                         max_num_tokens=args.max_num_tokens, chunked_prefill=chunked,
                         block_size=args.block_size, kv_memory_fraction=args.kv_memory_fraction,
                         policy=args.kv_policy, prefix_hit_rate=args.prefix_hit_rate,
                         runtime_reserve_bytes=None if args.runtime_reserve_gib is None
                         else args.runtime_reserve_gib * BYTES_PER_GIB)


def _arrival(args) -> tuple[str, bool, str]:
    """(arrival process, report at the largest rate meeting the SLO, note) from --max-load /
    --rate and --scenario."""
    sc = args.scenario
    if sc is None:
        if not args.max_load and args.rate is None:
            raise ConfigError("give --max-load, --rate or --scenario")
        return ("max-load" if args.max_load else args.arrival), False, ""
    if sc == "offline":
        if args.rate is not None:
            raise ConfigError("--scenario offline queues every request at once: drop --rate")
        return "max-load", False, ""
    if args.max_load:
        raise ConfigError(f"--scenario {sc} has Poisson arrivals: drop --max-load")
    if args.arrival != "poisson":
        raise ConfigError(f"--scenario {sc} has Poisson arrivals: drop --arrival")
    if args.rate is not None:
        return "poisson", False, f"; at the given rate {args.rate:g} requests/s"
    return "max-load", True, "; reported at the largest Poisson rate meeting the limits"


def _cmd_serve(args) -> None:
    from ..parallel import ParallelPlan
    from ..presets import load_hardware, load_model
    model, hw = load_model(args.model), load_hardware(args.hardware)
    stack_hw, stack = with_framework(hw, args.framework)
    eff = stack_hw.efficiency
    if (args.slo_ttft_ms is None) != (args.slo_tpot_ms is None):
        raise ConfigError("give both --slo-ttft-ms and --slo-tpot-ms")
    slo = None if args.slo_ttft_ms is None else Slo(args.slo_ttft_ms * S_PER_MS,
                                                     args.slo_tpot_ms * S_PER_MS,
                                                     args.slo_percentile)
    arrival, at_slo_rate, note = _arrival(args)
    lengths_arg = args.lengths
    sc = None
    if args.scenario is not None:
        sc = scenarios.preset(args.scenario, getattr(args, "model", None),
                              args.mlperf_benchmark)
        if slo is None:
            slo = sc.slo
        if lengths_arg is None and scenarios.LIMITS[sc.benchmark].lengths:
            lengths_arg = scenarios.LIMITS[sc.benchmark].lengths
    elif args.mlperf_benchmark:
        raise ConfigError("--mlperf-benchmark needs --scenario")
    table = length_sets.resolve(lengths_arg or "fixed")
    cfg, source = _engine_config(args, stack.name)
    spec = RequestSpec(isl=args.isl, osl=args.osl, arrival=arrival, rate=args.rate,
                       burstiness=args.burstiness, requests=args.requests,
                       lengths="fixed" if table is not None else (lengths_arg or "fixed"),
                       spread=args.length_spread, seed=args.seed, table=table)
    if at_slo_rate and slo is None:
        raise ConfigError(f"--scenario {args.scenario} needs an SLO")
    precision = precision_from_args(args)
    scale = 1.0
    if args.stack_version is not None:
        if stack.name != "tensorrt-llm":
            raise ConfigError("--stack-version is a TensorRT-LLM release: give --framework "
                              "tensorrt-llm")
        scale = stack_version.time_scale(args.stack_version, bool(model.moe))
    on = (streaming.default_streaming(args.scenario, stack.name) if args.stream is None
          else args.stream)
    cfg = streaming.with_streaming(cfg, on, stack_hw, scale)
    st = serve(model, hw, precision, spec, cfg,
               ParallelPlan(tp=args.tp, pp=args.pp), eff, slo, args.target_rate,
               flash_attention=not args.no_flash_attention,
               search=not args.no_search or at_slo_rate, at_slo_rate=at_slo_rate,
               time_scale=scale)
    d = study_to_dict(st, stack, source, streaming=on)
    if args.stack_version is not None:
        d["stack_version"] = {"release": args.stack_version,
                              "range": stack_version.range_of(args.stack_version),
                              "time_scale": scale}
    if sc is not None:
        d["scenario"] = {"name": sc.scenario, "mlperf_benchmark": sc.benchmark,
                         "note": sc.note + note}
    if args.disagg_gpus is not None:
        if slo is None:
            raise ConfigError("--disagg-gpus needs --slo-ttft-ms and --slo-tpot-ms")
        dg = disaggregate(model, hw, precision, spec, cfg, slo,
                          args.disagg_gpus, ParallelPlan(tp=args.tp, pp=args.pp), eff,
                          None if args.kv_link_gbps is None else args.kv_link_gbps * BYTES_PER_GB,
                          st.search.max_rate if st.search else None)
        d["disaggregated"] = disagg_to_dict(dg)
    if args.format == "json":
        emit(d, "json")
        return
    flat = {k: v for k, v in d.items() if not isinstance(v, (dict, list))}
    for k in ("ttft_s", "tpot_s", "e2e_s", "memory"):
        flat.update({f"{k}.{q}": v for q, v in d[k].items()})
    if args.format == "table":
        print_stack(stack)
    emit(None, args.format, [{"quantity": k, "value": v} for k, v in flat.items()])

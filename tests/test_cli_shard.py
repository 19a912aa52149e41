"""``llmpara shard``: JSON keys and values for one plan, a device TOML with [interconnect], the
search and scaling modes, and bad input of every kind -> exit 2 with one line on stderr."""

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from llmpara_core.cli import main

ROOT = Path(__file__).resolve().parent.parent


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(["shard", *argv])
    return code, out.getvalue(), err.getvalue()


def shard_json(*argv):
    code, out, err = run(*argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_json_keys_and_consistency():
    d = shard_json("--model", "llama-3.1-70b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                   "--tp", "4", "--pp", "2", "--batch", "8", "--prompt-len", "1024",
                   "--gen-len", "128")
    for k in ("decode_tokens_per_s", "tpot_s", "ttft_s", "e2e_latency_s",
              "throughput_tokens_per_s", "weight_bytes_per_device", "kv_cache_bytes_per_device",
              "activation_bytes_per_device", "memory_bytes_per_device", "max_batch",
              "prefill_breakdown", "decode_breakdown", "collectives", "parallel_efficiency",
              "stages", "ideal", "plan"):
        assert k in d, k
    assert d["decode_tokens_per_s"] == pytest.approx(1 / d["tpot_s"])        # per sequence
    assert d["throughput_tokens_per_s"] == pytest.approx(8 / d["tpot_s"])    # aggregate
    assert d["e2e_latency_s"] == pytest.approx(d["ttft_s"] + 127 * d["tpot_s"])
    bd = d["decode_breakdown"]
    parts = ("compute_s", "memory_s", "overhead_s", "communication_s", "pipeline_wait_s")
    assert sum(bd[k] for k in parts) == pytest.approx(d["tpot_s"], rel=1e-9)
    assert 0 < bd["communication_share"] < 1
    assert d["plan"]["devices"] == 8 and d["plan"]["microbatches"] == 2
    assert len(d["stages"]) == 2
    # 70.6 B parameters x 2 bytes over 4-way TP and 2 stages
    assert d["weight_bytes_per_device"] == pytest.approx(70.55e9 * 2 / 8, rel=0.02)
    assert d["memory_bytes_per_device"] <= d["memory_capacity_bytes"] and d["fits_in_memory"]


def test_weight_bits_and_vocab_flags():
    full = shard_json("--model", "mixtral-8x7b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                      "--tp", "8", "--prompt-len", "64", "--gen-len", "8")
    w4 = shard_json("--model", "mixtral-8x7b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                    "--tp", "8", "--prompt-len", "64", "--gen-len", "8", "--weight-bits", "4")
    assert w4["weight_bytes_per_device"] == pytest.approx(full["weight_bytes_per_device"] / 4,
                                                          rel=1e-3)
    whole = shard_json("--model", "mixtral-8x7b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                       "--tp", "8", "--prompt-len", "64", "--gen-len", "8",
                       "--no-vocab-parallel")
    assert whole["weight_bytes_per_device"] > full["weight_bytes_per_device"]
    assert whole["plan"]["vocab_parallel"] is False


def test_device_toml_with_interconnect(tmp_path):
    src = (ROOT / "presets" / "hardware" / "nvidia-h100-sxm.toml").read_text()
    f = tmp_path / "two_h100.toml"
    f.write_text(src + '\n[interconnect]\nbandwidth_GBps = 50\nlatency_us = 3\n'
                       'topology = "ring"\ndevices = 2\n')
    d = shard_json("--model", "llama-3.1-8b", "--hardware", str(f), "--tp", "2",
                   "--prompt-len", "128", "--gen-len", "16")
    ar = [c for c in d["collectives"] if c["name"] == "tp_all_reduce_ffn"
          and c["phase"] == "decode"][0]
    m = 4096 * 2
    assert ar["ideal_s"] == pytest.approx(2 * 3e-6 + 2 * 0.5 * m / 50e9, rel=1e-9)


def test_search_and_scaling_modes():
    d = shard_json("--model", "llama-3.1-70b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                   "--batch", "8", "--prompt-len", "512", "--gen-len", "64",
                   "--search", "min-tpot", "--top", "3")
    assert len(d["candidates"]) == 3 and d["candidates"][0]["plan"].startswith("TP8")
    tpots = [c["tpot_s"] for c in d["candidates"]]
    assert tpots == sorted(tpots)
    d = shard_json("--model", "llama-3.1-8b", "--hardware", "4x-nvidia-a100-sxm-80gb-nvlink",
                   "--prompt-len", "128", "--gen-len", "16", "--scaling", "tp")
    assert [p["devices"] for p in d["points"]] == [1, 2, 4]
    assert [p["ideal_speedup"] for p in d["points"]] == [1, 2, 4]
    code, out, _ = run("--model", "llama-3.1-8b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                       "--tp", "2", "--format", "table")
    assert code == 0 and "tpot_s" in out and "decode_breakdown.communication_s" in out
    code, out, _ = run("--model", "llama-3.1-8b", "--hardware", "8x-nvidia-h100-sxm-nvlink",
                       "--tp", "2", "--prompt-len", "64", "--gen-len", "4", "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("phase,") and "tp_all_reduce" in out


BAD = [
    (["--tp", "3"], "must divide the 64 attention heads"),
    (["--tp", "16"], "needs 16 devices"),
    (["--tp", "0"], "--tp"),
    (["--tp", "two"], "--tp"),
    (["--ep", "2"], "mixture-of-experts"),
    (["--pp", "81"], "exceeds the 80 layers"),
    (["--pp", "2", "--stage-layers", "40,41"], "sum to 81"),
    (["--pp", "2", "--stage-layers", "40,x"], "comma-separated"),
    (["--pp", "2", "--stage-layers", "80,0"], "at least one layer"),
    (["--dp", "4", "--batch", "2"], "need at least 4 sequences"),
    (["--overlap", "1.5"], "--overlap"),
    (["--overlap", "nan"], "--overlap"),
    (["--pp", "2", "--microbatches", "9", "--batch", "4"], "9 microbatches"),
    (["--search", "min-tpot", "--scaling", "tp"], "either --search or --scaling"),
    (["--search", "fastest"], "--search"),
    (["--scaling", "zz"], "--scaling"),
]


@pytest.mark.parametrize("args, msg", BAD, ids=[" ".join(a) for a, _ in BAD])
def test_bad_input_exits_2_with_one_line(args, msg, capsys):
    code, out, err = run("--model", "llama-3.1-70b", "--hardware",
                         "8x-nvidia-h100-sxm-nvlink", *args)
    assert code == 2, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0] and "Traceback" not in err


@pytest.mark.parametrize("args, msg", [
    (["--hardware", "nvidia-h100-sxm", "--tp", "2"], "no [interconnect] section"),
    (["--hardware", "nvidia-h100-sxm", "--model", "mixtral-8x7b", "--dp", "2", "--batch", "2"],
     "need links"),
    (["--hardware", "no-such-gpu"], "unknown hardware"),
    (["--hardware", "/nonexistent/x.toml"], "not found"),
    (["--hardware", "8x-nvidia-h100-sxm-nvlink", "--model", "nope"], "unknown model"),
])
def test_bad_hardware_and_model(args, msg):
    argv = ["--model", "llama-3.1-70b", *args] if "--model" not in args else args
    code, _, err = run(*argv)
    assert code == 2 and len(err.strip().splitlines()) == 1 and msg in err


def test_framework_profile_changes_the_estimate():
    pytest.importorskip("llmpara_core.calibration")
    args = ("--model", "llama-3.1-8b", "--hardware", "4x-nvidia-a100-sxm-80gb-nvlink",
            "--tp", "4", "--prompt-len", "5", "--gen-len", "200")
    default, fast = shard_json(*args), shard_json(*args, "--framework", "gpt-fast")
    assert default["stack"]["name"] == "vllm" and fast["stack"]["name"] == "gpt-fast"
    assert fast["tpot_s"] != default["tpot_s"]
    assert fast["ideal"]["tpot_s"] == default["ideal"]["tpot_s"]     # only the derating moves
    code, _, err = run(*args, "--framework", "no-such-stack")
    assert code == 2 and "unknown framework" in err and len(err.strip().splitlines()) == 1


def test_single_device_allows_dp_only():
    d = shard_json("--model", "llama-3.1-8b", "--hardware", "nvidia-h100-sxm", "--dp", "2",
                   "--batch", "4", "--prompt-len", "128", "--gen-len", "8")
    assert d["plan"]["devices"] == 2 and d["collectives"] == []


def test_entry_point_subprocess():
    """The installed entry point path: python -m llmpara_core shard ... exits 2 on bad input."""
    p = subprocess.run([sys.executable, "-m", "llmpara_core", "shard", "--model", "llama-3.1-8b",
                        "--hardware", "8x-nvidia-h100-sxm-nvlink", "--tp", "5"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "valid TP" in p.stderr

"""The command line: outputs, keys, and bad input of every kind -> exit 2 and one line."""

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
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


REQUIRED_KEYS = {"params_total", "params_active", "weight_bytes", "kv_cache_bytes_per_token",
                 "ttft_s", "tpot_s", "e2e_latency_s", "decode_tokens_per_s",
                 "throughput_tokens_per_s", "prefill_tokens_per_s", "ideal", "operators"}


def test_analyze_json_keys_and_units():
    code, out, err = run("analyze", "--model", "Llama-3 8B", "--hardware", "NVIDIA H100 SXM",
                         "--batch", "4", "--prompt-len", "2048", "--gen-len", "256",
                         "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert REQUIRED_KEYS <= d.keys()
    assert d["params_total"] == 8_030_261_248
    assert d["kv_cache_bytes_per_token"] == 131_072
    assert d["decode_tokens_per_s"] == pytest.approx(1 / d["tpot_s"])
    assert d["throughput_tokens_per_s"] == pytest.approx(4 / d["tpot_s"])
    assert d["e2e_latency_s"] == pytest.approx(d["ttft_s"] + 255 * d["tpot_s"])
    for k in ("ttft_s", "tpot_s", "e2e_latency_s", "decode_tokens_per_s"):
        assert k in d["ideal"]
    assert d["ideal"]["tpot_s"] < d["tpot_s"]
    assert {"prefill", "decode"} == {o["phase"] for o in d["operators"]}
    assert d["scenario"]["workload"]["batch"] == 4


def test_weight_bits_flag_quantises_all_weights():
    _, out, _ = run("analyze", "--model", "llama-3-8b", "--hardware", "h100 sxm",
                    "--weight-bits", "4.5", "--format", "json")
    d = json.loads(out)
    assert d["weight_bytes"] == pytest.approx(8_030_261_248 * 4.5 / 8, rel=1e-4)


def test_list_and_csv_and_table():
    code, out, _ = run("models", "--format", "json")
    assert code == 0 and len(json.loads(out)) >= 20
    code, out, _ = run("hardware", "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("slug,name,class")
    code, out, _ = run("analyze", "--model", "GPT-2 Small (117M)", "--hardware", "NVIDIA A10")
    assert code == 0 and "ttft_s" in out
    code, out, _ = run("analyze", "--model", "LLaMA-3 8B", "--hardware", "NVIDIA H100 SXM",
                       "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("phase,name,kind")


BAD_ARGS = [
    (["analyze", "--model", "No Such Model", "--hardware", "NVIDIA H100 SXM"], "unknown model"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H1000"], "unknown hardware"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--batch", "0"], "batch"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--batch", "-7"], "batch"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--batch", "abc"], "integer"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--prompt-len", "1e999"], "integer"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--gen-len", "99999999999"], "1e8"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--weight-bits", "0"], "bits"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--kv-bits", "nan"], "bits"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--precision", "fp12"], "precision"),
    (["analyze", "--model", "Llama-3 8B", "--hardware", "H100", "--format", "xml"], "format"),
    (["analyze", "--model", "Llama-3 8B"], "hardware"),
    (["analyze", "--bogus"], ""),
    (["frobnicate"], "invalid choice"),
    ([], "command"),
]


@pytest.mark.parametrize("argv,needle", BAD_ARGS)
def test_bad_flags_exit_2_one_line(argv, needle):
    code, out, err = run(*argv)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("llmpara: error:")
    assert needle.lower() in err.lower()
    assert "Traceback" not in err


def test_unknown_name_suggests_close_matches():
    _, _, err = run("analyze", "--model", "Llama-3 8", "--hardware", "NVIDIA H100 SXM")
    assert "did you mean" in err


@pytest.mark.parametrize("content,needle", [
    ("{not json", "JSON"),
    ("[1, 2, 3]", "object"),
    ('{"architectures": ["LlamaForCausalLM"], "hidden_size": "big"}', "hidden_size"),
    ('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 32,'
     ' "num_attention_heads": 32, "num_key_value_heads": 7, "intermediate_size": 14336,'
     ' "vocab_size": 128256}', "num_key_value_heads"),
    ('{"architectures": ["LlamaForCausalLM"], "hidden_size": -4096, "num_hidden_layers": 32,'
     ' "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256}', "hidden_size"),
    ('{"architectures": ["LlamaForCausalLM"], "hidden_size": 4096, "num_hidden_layers": 1e12,'
     ' "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256}', "num_hidden_layers"),
    ("\x00\xff\xfe", ""),
])
def test_malformed_config_files(tmp_path, content, needle):
    f = tmp_path / "config.json"
    f.write_bytes(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
    code, _, err = run("analyze", "--model", str(f), "--hardware", "NVIDIA H100 SXM")
    assert code == 2 and err.count("\n") == 1
    assert needle in err


@pytest.mark.parametrize("content,needle", [
    ("this is = not [toml", "TOML"),
    ('name = "x"\nclass = "datacenter-gpu"\nsource = "s"\nmemory_bandwidth_GBps = 100\n'
     'memory_capacity_GB = 8\nbandwith = 3\n[peak_TFLOPS]\nfp16 = 10\n', "bandwith"),
    ('name = "x"\nclass = "datacenter-gpu"\nsource = "s"\nmemory_bandwidth_GBps = "fast"\n'
     'memory_capacity_GB = 8\n[peak_TFLOPS]\nfp16 = 10\n', "memory_bandwidth_GBps"),
    ('name = "x"\nclass = "toaster"\nsource = "s"\nmemory_bandwidth_GBps = 100\n'
     'memory_capacity_GB = 8\n[peak_TFLOPS]\nfp16 = 10\n', "class"),
])
def test_junk_hardware_files(tmp_path, content, needle):
    f = tmp_path / "chip.toml"
    f.write_text(content)
    code, _, err = run("analyze", "--model", "Llama-3 8B", "--hardware", str(f))
    assert code == 2 and err.count("\n") == 1
    assert needle in err


def test_user_hardware_file_round_trip(tmp_path):
    f = tmp_path / "my_chip.toml"
    f.write_text('name = "My Accelerator"\nclass = "asic"\nsource = "test"\n'
                 'memory_bandwidth_GBps = 1000\nmemory_capacity_GB = 64\n[peak_TFLOPS]\nfp16 = 200\n')
    code, out, err = run("analyze", "--model", "Llama-3 8B", "--hardware", str(f), "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["hardware"] == "My Accelerator" and d["memory_bandwidth_bytes_per_s"] == 1e12


def test_missing_file_is_a_clean_error():
    code, _, err = run("analyze", "--model", "/nonexistent/config.json", "--hardware", "H100")
    assert code == 2 and "not found" in err


def test_module_entry_point_no_traceback():
    """A real process: bad input gives exit 2 and exactly one stderr line."""
    p = subprocess.run([sys.executable, "-m", "llmpara_core", "analyze", "--model", "x",
                        "--hardware", "y", "--batch", "-1"], capture_output=True, text=True,
                       cwd=ROOT, timeout=60)
    assert p.returncode == 2 and p.stderr.count("\n") == 1 and "Traceback" not in p.stderr


# ---- the replaced tool's flags and console summary (reference-tool.md §8) -------------------

def _json(*argv):
    code, out, err = run(*argv, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def test_old_tool_flags_are_aliases():
    ours = _json("analyze", "--model", "llama-3-8b", "--hardware", "nvidia-h100-sxm",
                 "--prompt-len", "1024", "--batch", "2")
    old = _json("analyze", "-m", "llama-3-8b", "-hw", "nvidia-h100-sxm", "--seq-len", "1024",
                "--batch-size", "2", "--flash-attn")
    short = _json("-m", "llama-3-8b", "-hw", "nvidia-h100-sxm", "-s", "1024", "-b", "2")
    for d in (old, short):                         # no subcommand = analyze, as the old tool
        assert d["ttft_s"] == ours["ttft_s"] and d["tpot_s"] == ours["tpot_s"]
        assert d["scenario"]["workload"]["prompt_len"] == 1024
    code, _, err = run("analyze", "-m", "llama-3-8b", "-hw", "h100", "--flash-attn",
                       "--no-flash-attention")
    assert code == 2 and "contradict" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("name, bits", [
    ("fp32", (32, 32, 32, 32)), ("fp16", (16, 16, 16, 16)), ("int8", (8, 8, 8, 8)),
    ("int4", (8, 4, 4, 4)), ("w4a8", (8, 4, 4, 8))])
def test_old_tool_precision_names_keep_its_bit_widths(name, bits):
    d = _json("-m", "llama-3-8b", "-hw", "nvidia-h100-sxm", "-q", name)
    p = d["scenario"]["precision"]
    assert (p["activation_bits"], p["weight_attn_bits"], p["weight_ffn_bits"],
            p["kv_bits"]) == bits
    assert p["weight_embed_bits"] == bits[1]          # the reference's w_a covers the embedding
    assert d["kv_cache_bytes_per_token"] == 131_072 * bits[3] / 16


def test_output_and_json_files(tmp_path):
    csv_path, json_path = tmp_path / "ops.csv", tmp_path / "result.json"
    code, out, err = run("-m", "llama-3-8b", "-hw", "nvidia-h100-sxm", "-o", str(csv_path),
                         "--json", str(json_path))
    assert code == 0, err
    lines = csv_path.read_text(encoding="utf-8").splitlines()
    d = json.loads(json_path.read_text(encoding="utf-8"))
    assert len(lines) == 1 + len(d["operators"])
    assert lines[0].startswith("phase,") or "phase" in lines[0].split(",")
    code, _, err = run("-m", "llama-3-8b", "-hw", "h100", "--output", str(tmp_path / "no" / "x"))
    assert code == 2 and err.startswith("llmpara: error: cannot write") and err.count("\n") == 1


def test_list_flags_run_the_list_subcommands():
    code, out, _ = run("--list-models", "--format", "json")
    assert code == 0 and any(m["slug"] == "llama-3-8b" for m in json.loads(out))
    code, out, _ = run("--list-hardware")
    assert code == 0 and "nvidia-h100-sxm" in out


def test_table_output_ends_with_the_old_tools_console_summary():
    from llmpara_core.analysis import analyze
    from llmpara_core.precision import precision_preset
    from llmpara_core.presets import load_hardware, load_model
    from llmpara_core.workload import Workload
    code, out, err = run("analyze", "-m", "llama-3-8b", "-hw", "nvidia-h100-sxm")
    assert code == 0, err
    summary = out[out.index("\nSummary\n"):]
    r = analyze(load_model("llama-3-8b"), load_hardware("nvidia-h100-sxm"),
                precision_preset("FP16"), Workload())
    total = r.prefill.flops + r.decode_steps * r.decode.flops
    assert f"{total / 1e12:.3g} TFLOP" in summary
    assert f"{r.peak_flops_per_s / r.bandwidth_bytes_per_s:.4g} FLOP/B at peak" in summary
    n_mem = sum(1 for x in r.decode.rows if x.bound == "memory")
    assert f"decode: {n_mem} memory-bound, {len(r.decode.rows) - n_mem} compute-bound" in summary
    top = summary.split("top-5 operators by FLOPs over the run:\n")[1].strip().splitlines()
    assert len(top) == 5 and top[0].split()[:2] == ["prefill", "ffn_gate_up"]

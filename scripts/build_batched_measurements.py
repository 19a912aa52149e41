"""Build ``presets/tables/batched_measurements.csv`` (batched-regime rows in the columns of
``presets/tables/measurements.csv``) from the published measurements in ../shared/validation/ (beside the repository).

    python scripts/build_batched_measurements.py [--validation DIR]

* ``batched_throughput.csv``: the static-batch TensorRT-LLM rows (<= v0.9, gptSessionBenchmark,
  batch size given) -> metric ``output_tok_s`` = batch x output tokens / (context phase +
  generation) of the whole system (per-GPU values x GPUs). Rows whose per-GPU/total label is
  ambiguous (flagged "not stated whether" in the source notes) are left out. Max-load
  in-flight rows (no batch size) are for the serving simulator and are not used here.
* ``batched_throughput.csv`` vLLM 0.6 max-load ShareGPT rows -> ``output_tok_s`` with the
  running batch = vLLM's default max_num_seqs (256; the KV cache is not the limit at these
  lengths) and the mean output length = output tokens/s / requests/s (``maxload_rows``).
* ``energy_measurements.csv`` (the mapped copy in presets/tables/ names presets, the running batch
  and the generated length): ML.ENERGY vLLM rows -> ``throughput_tok_s`` = the measured token
  throughput at the stated average running batch (a ShareGPT prompt of 256 tokens assumed, as
  in that file).
Deterministic; rerun when the sources change.
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "presets" / "tables" / "batched_measurements.csv"
COLUMNS = ("row_id", "hardware", "hardware_class", "num_devices", "parallelism", "model",
           "params_b", "quant", "weight_bits", "batch", "context_or_prompt_len", "gen_len",
           "metric", "value", "framework", "source", "notes")
HARDWARE = {"NVIDIA H100 SXM 80GB": "nvidia-h100-sxm", "NVIDIA L40S": "nvidia-l40s",
            "NVIDIA A100 (variant not stated)": "NVIDIA A100 (variant unspecified)"}
MODELS = {"Llama-2-7B": "llama-2-7b", "Llama-2-70B": "llama-2-70b",
          "Mistral-7B": "mistral-7b-v0.1", "Mixtral-8x7B": "mixtral-8x7b",
          "GPT-J-6B": "GPT-J-6B", "Falcon-180B": "Falcon-180B"}
BITS = {"FP8": 8.0, "FP16": 16.0}


def static_rows(path: Path) -> list[dict]:
    out = []
    for r in csv.DictReader(path.open(encoding="utf-8")):
        if not r["batch_size"] or r["metric"] not in ("output_tok_s_total", "output_tok_s_per_gpu"):
            continue
        if "not stated whether" in r["notes"].lower() and int(r["num_gpus"]) > 1:
            continue
        gpus = int(r["num_gpus"])
        value = float(r["value"]) * (gpus if r["metric"] == "output_tok_s_per_gpu" else 1)
        out.append({"row_id": r["row_id"], "hardware": HARDWARE.get(r["hardware"], r["hardware"]),
                    "hardware_class": "datacenter_gpu", "num_devices": gpus,
                    "parallelism": "tensor" if gpus > 1 else "single",
                    "model": MODELS.get(r["model"], r["model"]), "params_b": "",
                    "quant": r["precision_weights"], "weight_bits": BITS.get(r["precision_weights"], ""),
                    "batch": r["batch_size"], "context_or_prompt_len": r["isl"],
                    "gen_len": r["osl"], "metric": "output_tok_s", "value": f"{value:g}",
                    "framework": f"{r['framework']} {r['framework_version']}",
                    "source": r["source_url"],
                    "notes": f"static batch; {r['metric']} {r['value']} x {gpus if r['metric'].endswith('gpu') else 1}; "
                             + r["notes"]})
    return out


# vLLM 0.6 EngineArgs default max_num_seqs = 256 (vLLM docs, engine arguments); at these
# lengths the KV cache holds far more tokens than 256 sequences need, so 256 run at once.
VLLM_MAX_NUM_SEQS = 256
SHAREGPT_PROMPT_TOKENS = 256      # not stated by the source: the energy rows' assumption


def maxload_rows(path: Path) -> list[dict]:
    """vLLM max-load ShareGPT rows: output tokens/s with the running batch = the engine's
    max_num_seqs and the mean output length = output tokens/s / requests/s."""
    rows = list(csv.DictReader(path.open(encoding="utf-8")))
    out = []
    for r in rows:
        if r["framework"] != "vLLM" or r["metric"] != "output_tok_s_total":
            continue
        rps = next(x for x in rows if x["framework"] == r["framework"]
                   and x["hardware"] == r["hardware"] and x["model"] == r["model"]
                   and x["metric"] == "requests_s"
                   and x["notes"].split("column")[0] == r["notes"].split("column")[0])
        osl = round(float(r["value"]) / float(rps["value"]))
        gpus = int(r["num_gpus"])
        model = {"Llama-3.1-8B-Instruct": "llama-3.1-8b",
                 "Llama-3.1-70B-Instruct": "llama-3.1-70b"}[r["model"]]
        hw = {"NVIDIA A100 80GB (form factor not stated)": "NVIDIA A100 80GB (variant unspecified)",
              "NVIDIA H100 80GB (form factor not stated)": "nvidia-h100-sxm"}[r["hardware"]]
        out.append({"row_id": r["row_id"], "hardware": hw, "hardware_class": "datacenter_gpu",
                    "num_devices": gpus, "parallelism": "tensor" if gpus > 1 else "single",
                    "model": model, "params_b": "", "quant": "BF16", "weight_bits": 16,
                    "batch": VLLM_MAX_NUM_SEQS, "context_or_prompt_len": SHAREGPT_PROMPT_TOKENS,
                    "gen_len": osl, "metric": "output_tok_s", "value": r["value"],
                    "framework": f"vLLM {r['framework_version']}", "source": r["source_url"],
                    "notes": f"max load: running batch = max_num_seqs {VLLM_MAX_NUM_SEQS} "
                             f"(vLLM default), prompt {SHAREGPT_PROMPT_TOKENS} assumed, output "
                             f"{osl} = output tok/s / requests/s ({rps['value']}); " + r["notes"]})
    return out


def energy_rows(path: Path) -> list[dict]:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if not ln.startswith("#")]
    out = []
    for r in csv.DictReader(lines):
        if "vllm" not in r["framework"].lower() or not r["avg_batch"]:
            continue
        m = re.search(r"token throughput ([0-9.]+) tok/s", r["notes"])
        if not m or int(r["num_devices"]) != 1:
            continue
        out.append({"row_id": r["row_id"], "hardware": r["hardware_preset"],
                    "hardware_class": "datacenter_gpu", "num_devices": 1, "parallelism": "single",
                    "model": r["model_preset"], "params_b": r["params_b"], "quant": "BF16",
                    "weight_bits": 16, "batch": round(float(r["avg_batch"])),
                    "context_or_prompt_len": r["prompt_len_assumed"], "gen_len": r["gen_len_used"],
                    "metric": "throughput_tok_s", "value": m.group(1), "framework": r["framework"],
                    "source": r["source"],
                    "notes": f"running batch = avg batch {r['avg_batch']}; {r['mapping_notes']}; "
                             + r["notes"]})
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--validation", type=Path, default=ROOT.parent / "shared" / "validation")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = static_rows(args.validation / "batched_throughput.csv")
    rows += maxload_rows(args.validation / "batched_throughput.csv")
    rows += energy_rows(ROOT / "presets" / "tables" / "energy_measurements.csv")
    with args.out.open("w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, COLUMNS)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {len(rows)} rows to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

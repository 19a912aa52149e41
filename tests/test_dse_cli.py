"""``llmpara dse``: the JSON summary agrees with the core, sampling flags are honoured, the CLI's
import path stays free of pandas and Streamlit, and bad input is exit 2 with one line."""

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest

from llmpara_core import dse
from llmpara_core.dse import space as dse_space
from llmpara_core.cli import main
from llmpara_core.metrics.cost import MetricsSettings
from llmpara_core.precision import precision_preset
from llmpara_core.presets import load_hardware, load_model
from llmpara_core.workload import Workload


def run(*argv):
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def test_grid_json_matches_the_core():
    code, out, err = run("dse", "--model", "llama-3.2-1b", "--preset", "edge-mobile",
                         "--tdp-price", "swept", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    space = dse_space.find_space("edge-mobile")
    assert d["points_evaluated"] == space.grid_size
    ctx = dse.DesignContext(load_model("llama-3.2-1b"), precision_preset("FP16"), Workload(),
                            load_hardware(space.base_hardware), MetricsSettings())
    res = dse.explore(ctx, space)
    assert d["pareto_size"] == len(res.front) == len(d["pareto"]) > 1
    assert d["feasible"] == int(res.evaluation.feasible.sum())
    assert d["infeasible"] == res.infeasible_counts()
    got = sorted((p["peak_tflops"], p["bw_gbps"], p["cap_gb"], p["tdp_w"], p["price_usd"])
                 for p in d["pareto"])
    ev = res.evaluation
    want = sorted((ev["peak_tflops"][i], ev["bw_gbps"][i], ev["cap_gb"][i], ev["tdp_w"][i],
                   ev["price_usd"][i]) for i in res.front)
    assert got == want
    assert all(not p["infeasible_reasons"] for p in d["pareto"])
    assert set(d["best"]) == set(dse.DEFAULT_OBJECTIVES)


def test_samples_seed_objectives_and_hypervolume():
    args = ("dse", "--model", "llama-3-8b", "--preset", "datacenter-gpu", "--samples", "3000",
            "--method", "lhs", "--seed", "4", "--objectives", "tokens_per_s,gco2e_per_mtok",
            "--hypervolume", "--sensitivity", "--format", "json")
    a, b = json.loads(run(*args)[1]), json.loads(run(*args)[1])
    assert a["points_evaluated"] == 3000 and a == b
    assert [o["key"] for o in a["objectives"]] == ["tokens_per_s", "gco2e_per_mtok"]
    hv = a["hypervolume"]
    assert 0 < hv["value"] <= 1.1 ** 2 and hv["exact"]
    tps = [p["tokens_per_s"] for p in a["pareto"]]
    assert tps == sorted(tps, reverse=True)
    assert "bw" in a["sensitivity"]["relative"]["tokens_per_s"]
    code, out, _ = run("dse", "--model", "llama-3-8b", "--samples", "500", "--format", "csv")
    assert code == 0 and out.splitlines()[0].startswith("peak_tflops,")


def test_nsga_from_the_cli():
    code, out, err = run("dse", "--model", "llama-3.2-1b", "--preset", "edge-mobile", "--nsga",
                         "--population", "16", "--generations", "3", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert d["method"] == "nsga2" and len(d["nsga"]["history"]) == 3
    assert d["points_evaluated"] == 16 and d["pareto_size"] >= 1


@pytest.mark.parametrize("argv, message", [
    (("--objectives", "speed,usd_per_mtok"), "unknown objective"),
    (("--objectives", "tokens_per_s"), "2 to 4"),
    (("--preset", "nope"), "unknown design-space preset"),
    (("--ranges", "/nonexistent/ranges.toml"), "ranges file not found"),
    (("--preset", "custom", "--ranges", "x.toml"), "not both"),
    (("--samples", "0"), "integer in"),
    (("--method", "lhs"), "needs --samples"),
    (("--samples", "99999999"), "samples must be an integer in"),
    (("--hardware-base", "no-such-chip"), "unknown hardware"),
    (("--price-usd", "100"), "design quantity"),
    (("--energy-model", "tdp-fraction"), "component energy model"),
    (("--precision", "FP8", "--ranges", "{ranges}"), "computes in fp8"),
])
def test_bad_input_is_exit_2_and_one_line(argv, message, tmp_path):
    f = tmp_path / "r.toml"
    f.write_text("[axes]\npeak_fp16 = [1, 2]\n")
    argv = tuple(str(f) if a == "{ranges}" else a for a in argv)
    code, out, err = run("dse", "--model", "llama-3-8b", *argv)
    assert code == 2
    assert out == "" and len(err.strip().splitlines()) == 1 and message in err


def test_bad_ranges_file_is_exit_2(tmp_path):
    f = tmp_path / "r.toml"
    f.write_text("[axes]\nbandwidth = [1, 2]\n")
    code, _, err = run("dse", "--model", "llama-3-8b", "--ranges", str(f))
    assert code == 2 and "did you mean 'bw'" in err


def test_cli_import_path_is_lean():
    code = ("import sys, runpy; sys.argv = ['llmpara', 'dse', '--model', 'llama-3-8b', "
            "'--samples', '100', '--format', 'json']\n"
            "try:\n    runpy.run_module('llmpara_core', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('HEAVY', sorted(m for m in ('pandas', 'streamlit', 'plotly', 'pymoo') "
            "if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "HEAVY []"


def test_json_text_is_json_dumps_exactly():
    from llmpara_core.cli.dse import _json_text
    code, out, err = run("dse", "--model", "llama-3-8b", "--samples", "2000", "--seed", "2",
                         "--sensitivity", "--format", "json")
    assert code == 0, err
    d = json.loads(out)
    assert out == json.dumps(d, indent=2, allow_nan=False, default=str) + "\n"
    rows = d["pareto"]
    odd = [{"x": 1.5, "e": {}}, {"e": {}, "y": []}, {"s": "},\n      {", "u": "é\"\\"},
           {"nested": [1, {"a": None}]}, {}]
    for pareto in ([], rows[:1], rows, rows[:2] + odd, odd[:3]):
        case = {**d, "pareto": pareto}
        assert _json_text(case) == json.dumps(case, indent=2, allow_nan=False, default=str)

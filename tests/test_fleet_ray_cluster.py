"""The fleet planner joining an existing Ray cluster (issue 30): a head node started here with
`ray start`, joined by its GCS address and by Ray Client (`ray://`, with the token
authentication Ray >= 2.59 turns on for local clusters). Slow (a cluster start and stop, about
a minute): `python -m pytest -m slow tests/test_fleet_ray_cluster.py`."""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from browser_util import free_port
from test_fleet import SMALL

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def _plan(traffic, *extra, env=None):
    return subprocess.run([sys.executable, "-c", "import sys; from llmpara_core.cli import main; "
                           "sys.exit(main(sys.argv[1:]))", "plan", "--traffic",
                           str(traffic), "--format", "csv", "--time-budget", "240", *extra],
                          capture_output=True, text=True, timeout=300, cwd=ROOT,
                          env=dict(env or os.environ, PYTHONPATH=str(ROOT)))


def test_joining_a_cluster_gives_the_local_plan(tmp_path):
    pytest.importorskip("ray")
    ray_cli = shutil.which("ray")
    if ray_cli is None:
        pytest.skip("the ray command is needed")
    traffic = tmp_path / "mix.toml"
    traffic.write_text(SMALL)
    gcs, client = free_port(), free_port()
    short = tempfile.mkdtemp(prefix="r", dir="/tmp")      # Unix socket paths are short
    env = dict(os.environ, RAY_TMPDIR=short)
    start = subprocess.run([ray_cli, "start", "--head", "--num-cpus", "2", "--port", str(gcs),
                            "--ray-client-server-port", str(client), "--include-dashboard",
                            "false", "--disable-usage-stats"],
                           capture_output=True, text=True, timeout=180, env=env)
    assert start.returncode == 0, start.stderr[-2000:]
    try:
        local = _plan(traffic)
        assert local.returncode == 0, local.stderr
        bare = _plan(traffic, "--executor", "ray", "--address", f"ray://127.0.0.1:{client}",
                     env=env)
        assert bare.returncode == 2 and "RAY_AUTH_MODE=token" in bare.stderr.splitlines()[-1]
        tok = dict(env, RAY_AUTH_MODE="token")
        gcs_join = _plan(traffic, "--executor", "ray", "--address", f"127.0.0.1:{gcs}", env=tok)
        assert gcs_join.returncode == 0, gcs_join.stderr[-2000:]
        assert gcs_join.stdout == local.stdout
        remote = _plan(traffic, "--executor", "ray", "--address",
                       f"ray://127.0.0.1:{client}", env=tok)
        assert remote.returncode == 0, remote.stderr
        assert remote.stdout == local.stdout
    finally:
        subprocess.run([ray_cli, "stop", "--force"], capture_output=True, timeout=120, env=env)
        shutil.rmtree(short, ignore_errors=True)

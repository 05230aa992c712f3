"""The guide's runnable companion, examples/12_warm_and_read_cache.py, run as a user would: with no
server of its own configured (it packs and serves a dataset), and against the server in DATAVO_SERVER."""
import os
import subprocess
import sys

from conftest import DATASET, REPO

EXAMPLE = os.path.join(REPO, "examples", "12_warm_and_read_cache.py")


def run_example(env, *args):
    done = subprocess.run([sys.executable, EXAMPLE, *args], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_example_serves_its_own_dataset(env, datavo_bin):
    child = dict(os.environ, DATAVO_BIN=datavo_bin)
    child.pop("DATAVO_SERVER")
    out = run_example(child)
    assert "datavo serve, a dataset of its own" in out
    assert "ok: the reads made 0 shard/ticket requests; the second pass made 0 server requests in all" in out


def test_example_uses_the_server_in_datavo_server(env, datavo_bin, origin):
    before = origin.requests()
    out = run_example(dict(os.environ, DATAVO_BIN=datavo_bin), DATASET)
    assert "(DATAVO_SERVER)" in out and "ok:" in out
    after = origin.requests()
    # Only `datavo warm` fetched: one ticket and one download per shard.
    assert after["shard"] - before.get("shard", 0) == after["ticket"] - before.get("ticket", 0) > 0

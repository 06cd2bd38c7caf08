"""How soon a subscribed MCP client hears of an inbox message another process appended.

Workload: the chat fixture (tests/fixtures/chat) in a temp dir; one client (the official MCP
Python SDK) connected to `pap mcp` over stdio and subscribed to ui://chat/inbox; then N times a
separate `pap dispatch` runs the `worker` agent, whose success appends an outcome to the inbox.
Reported: the time from each dispatch's exit (its commit is before that) to the client's
`notifications/resources/updated`, and, as baselines in the same run, how long each dispatch
took and what one fsync costs on this disk.

    cargo build --release
    PAP_BENCH_N=50 python3 benches/mcp_notify.py target/release/pap

Needs `pip install mcp==2.3.0`. Not part of `cargo test`.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings

import anyio
import mcp.types as types
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

warnings.simplefilter("ignore")


async def main(pap, n):
    here = os.path.dirname(os.path.abspath(__file__))
    work = tempfile.mkdtemp(prefix="pap-mcp-bench-")
    root = os.path.join(work, "chat")
    shutil.copytree(os.path.join(here, "..", "tests", "fixtures", "chat"), root)
    env = dict(os.environ, PAP_TEST_DIR=root)
    heard = []

    async def on_message(message):
        root_ = getattr(message, "root", message)
        if isinstance(root_, types.ResourceUpdatedNotification):
            heard.append(time.time())

    params = StdioServerParameters(command=pap, args=["--root", root, "mcp"], env=env)
    latencies, dispatches = [], []
    async with stdio_client(params) as (r, w):
        async with ClientSession(r, w, message_handler=on_message) as s:
            await s.initialize()
            await s.subscribe_resource("ui://chat/inbox")
            for i in range(n):
                event = {"pap_version": "0.2", "id": f"b{i}", "type": "test.work.requested",
                         "source": "bench", "time": "2026-11-23T10:00:00Z", "data": {}}
                path = os.path.join(work, f"b{i}.json")
                with open(path, "w") as f:
                    json.dump(event, f)
                before = len(heard)
                started = time.time()
                subprocess.run([pap, "--root", root, "dispatch", path], env=env, check=True,
                               stdout=subprocess.DEVNULL)
                ended = time.time()
                dispatches.append(ended - started)
                deadline = ended + 5
                while len(heard) == before and time.time() < deadline:
                    await anyio.sleep(0.001)
                if len(heard) == before:
                    raise SystemExit(f"no update within 5 s for dispatch {i}")
                latencies.append(heard[before] - ended)
    # The cost of one fsync on this disk, in this run (dispatch's commits pay it).
    fsyncs = []
    probe = os.path.join(work, "fsync-probe")
    with open(probe, "wb") as f:
        for _ in range(50):
            f.write(b"x" * 4096)
            f.flush()
            t = time.time()
            os.fsync(f.fileno())
            fsyncs.append(time.time() - t)
    shutil.rmtree(work, ignore_errors=True)

    def ms(xs, q):
        xs = sorted(xs)
        return 1000 * xs[min(len(xs) - 1, int(q * len(xs)))]

    print(f"{n} dispatches, each appending one outcome to the inbox")
    print(f"fsync of 4 KiB in the same directory: median {ms(fsyncs, 0.5):.2f} ms")
    print(f"dispatch (baseline): median {ms(dispatches, 0.5):.1f} ms, p90 {ms(dispatches, 0.9):.1f} ms")
    print(f"heard after the dispatch exited: median {ms(latencies, 0.5):.1f} ms, "
          f"p90 {ms(latencies, 0.9):.1f} ms, max {1000 * max(latencies):.1f} ms, "
          f"mean {1000 * statistics.mean(latencies):.1f} ms")


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(os.environ.get("PAP_BENCH_N", "50")))

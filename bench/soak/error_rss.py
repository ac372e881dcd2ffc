#!/usr/bin/env python3
"""maskd's RSS under a stream of failing calls, the mix the request fuzzer sends.

Each round makes four unary calls on one channel: a Compile of a distinct malformed
regex, a Step of an unknown session, a CreateSession on an unknown index, and a
stateless Mask on a real index with a varying token. With --streams, each round
instead opens one StepStream with one Step of an unknown session, every third
cancelled before its reply is read (the request fuzzer's stream records). The server's RSS (/proc/<pid>)
is printed eight times along the way and at the end: it should stay flat. Not in the
default suite; uses the Python client's generated stubs (the venv of
scripts/setup_python.sh). Results: docs/reliability.md ("Hours run", third round).

  $(scripts/setup_python.sh)/bin/python bench/soak/error_rss.py --addr unix:///tmp/maskd.sock \\
      --pid PID --rounds 8000 [--tokenizer qwen3] [--streams]
"""
import argparse
import os
import sys

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "client", "python"))
from maskd.v1 import maskd_pb2 as pb  # noqa: E402
from maskd.v1 import maskd_pb2_grpc as pbg  # noqa: E402


def rss_mb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) // 1024
    return -1


def run_streams(stub: pbg.MaskdStub, args: argparse.Namespace) -> int:
    every = max(1, args.rounds // 8)
    for i in range(args.rounds):
        step = pb.StepRequest(entries=[pb.StepEntry(session_id=12345 + i, tokens=[1])])
        call = stub.StepStream(iter([step]), timeout=5)
        try:
            if i % 3 == 0:
                call.cancel()
            else:
                for _ in call:
                    pass
        except grpc.RpcError:
            pass
        if i % every == 0:
            print("%d streams, RSS %d MB" % (i, rss_mb(args.pid)), flush=True)
    print("%d streams, RSS %d MB" % (args.rounds, rss_mb(args.pid)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--rounds", type=int, default=8000)
    ap.add_argument("--tokenizer", default="qwen3")
    ap.add_argument("--streams", action="store_true")
    args = ap.parse_args()
    stub = pbg.MaskdStub(grpc.insecure_channel(args.addr))
    if args.streams:
        return run_streams(stub, args)
    index = stub.Compile(pb.CompileRequest(tokenizer=args.tokenizer, regex="[a-z]{1,5}")).index_id
    every = max(1, args.rounds // 8)
    for i in range(args.rounds):
        calls = (
            lambda: stub.Compile(pb.CompileRequest(tokenizer=args.tokenizer, regex="(a%d" % i)),
            lambda: stub.Step(pb.StepRequest(entries=[pb.StepEntry(session_id=12345 + i)])),
            lambda: stub.CreateSession(pb.CreateSessionRequest(index_id="nope%d" % i)),
            lambda: stub.Mask(pb.MaskRequest(index_id=index, tokens=[1, 2, 3, i % 50000])),
        )
        for call in calls:
            try:
                call()
            except grpc.RpcError:
                pass
        if i % every == 0:
            print("%d calls, RSS %d MB" % (4 * i, rss_mb(args.pid)), flush=True)
    print("%d calls, RSS %d MB" % (4 * args.rounds, rss_mb(args.pid)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Regenerates maskd's committed gRPC code from proto/ (run after editing a .proto).

    python client/python/gen_proto.py            # rewrite client/python/maskd/v1/*_pb2*.py
    python client/python/gen_proto.py --check    # exit 1 if the committed files are stale

Needs grpcio-tools (pinned in tests/python/requirements.txt: the generated code
names the grpcio/protobuf versions it needs). The generated files are committed
so that `pip install ./client/python` needs no code generator and works from
any copy of the folder; tests/python/test_generated.py (default suite) runs
`--check` so they cannot go stale.
"""
from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
PROTO_ROOT = HERE.parent.parent / "proto"
PACKAGE = HERE / "maskd"
# (proto file, generated file in the temporary tree, destination in the package)
OUTPUTS = [
    ("maskd/v1/maskd.proto", "maskd/v1/maskd_pb2.py", "v1/maskd_pb2.py"),
    ("maskd/v1/maskd.proto", "maskd/v1/maskd_pb2.pyi", "v1/maskd_pb2.pyi"),
    ("maskd/v1/maskd.proto", "maskd/v1/maskd_pb2_grpc.py", "v1/maskd_pb2_grpc.py"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2.py", "v1/shm_pb2.py"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2.pyi", "v1/shm_pb2.pyi"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2_grpc.py", "v1/shm_pb2_grpc.py"),
    # Health: messages only (the client calls /grpc.health.v1.Health/Check by
    # name); kept out of the top-level `grpc` package.
    ("grpc/health/v1/health.proto", "grpc/health/v1/health_pb2.py", "_health_pb2.py"),
]


def generate(out: pathlib.Path) -> None:
    from grpc_tools import protoc  # imported here: only this script needs it

    protos = sorted({p for p, _, _ in OUTPUTS})
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{protoc_include()}",
            f"--python_out={out}", f"--pyi_out={out}", f"--grpc_python_out={out}", *protos]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def protoc_include() -> str:
    import grpc_tools

    return str(pathlib.Path(grpc_tools.__file__).parent / "_proto")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        generate(pathlib.Path(tmp))
        stale = []
        for _, src, dst in OUTPUTS:
            new = (pathlib.Path(tmp) / src).read_bytes()
            target = PACKAGE / dst
            if a.check:
                if not target.exists() or target.read_bytes() != new:
                    stale.append(str(target.relative_to(HERE.parent.parent)))
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(new)
        if stale:
            print("stale generated files (run python client/python/gen_proto.py):", *stale,
                  sep="\n  ", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

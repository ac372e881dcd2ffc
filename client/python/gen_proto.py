#!/usr/bin/env python3
"""Regenerates maskd's committed gRPC code from proto/ (run after editing a .proto).

    python client/python/gen_proto.py            # rewrite client/python/maskd/v1/*_pb2*.py
    python client/python/gen_proto.py --check    # exit 1 if the committed files are stale

Needs grpcio-tools and mypy-protobuf (pinned in tests/python/requirements.txt: the
generated code names the grpcio/protobuf versions it needs). grpcio-tools writes the
modules (*_pb2.py, *_pb2_grpc.py), mypy-protobuf their typed stubs (*_pb2.pyi,
*_pb2_grpc.pyi: what `mypy --strict` reads for the stubs' methods and messages). The
generated files are committed so that `pip install ./client/python` needs no code
generator and works from any copy of the folder; test_generated_code_is_current
(tests/python/test_client.py, default suite) runs `--check` so they cannot go stale.
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
    ("maskd/v1/maskd.proto", "maskd/v1/maskd_pb2_grpc.pyi", "v1/maskd_pb2_grpc.pyi"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2.py", "v1/shm_pb2.py"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2.pyi", "v1/shm_pb2.pyi"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2_grpc.py", "v1/shm_pb2_grpc.py"),
    ("maskd/v1/shm.proto", "maskd/v1/shm_pb2_grpc.pyi", "v1/shm_pb2_grpc.pyi"),
]
# grpc.health.v1 is not generated here: it comes from grpcio-health-checking.


def generate(out: pathlib.Path) -> None:
    from grpc_tools import protoc  # imported here: only this script needs it

    protos = sorted({p for p, _, _ in OUTPUTS})
    args = ["protoc", f"-I{PROTO_ROOT}", f"-I{protoc_include()}",
            f"--plugin=protoc-gen-mypy={plugin('protoc-gen-mypy')}",
            f"--plugin=protoc-gen-mypy_grpc={plugin('protoc-gen-mypy_grpc')}",
            f"--python_out={out}", f"--grpc_python_out={out}",
            f"--mypy_out=quiet:{out}", f"--mypy_grpc_out=quiet:{out}", *protos]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")


def plugin(name: str) -> str:
    """A protoc plugin installed by mypy-protobuf: beside this interpreter (a venv's bin/),
    else on PATH."""
    beside = pathlib.Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: pip install mypy-protobuf "
                         "(pinned in tests/python/requirements.txt)")
    return found


def protoc_include() -> str:
    import grpc_tools

    return str(pathlib.Path(grpc_tools.__file__).parent / "_proto")


def main() -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
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

"""The committed generated code must be exactly what `make proto` produces from proto/kse.proto."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = ("kse_pb2.py", "kse_pb2.pyi", "kse_pb2_grpc.py")


def test_generated_code_is_fresh(tmp_path: Path) -> None:
    (tmp_path / "proto").mkdir()
    (tmp_path / "proto" / "kse.proto").write_bytes((ROOT / "proto" / "kse.proto").read_bytes())
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I.", "--python_out=.", "--pyi_out=.",
         "--grpc_python_out=.", "proto/kse.proto"],
        cwd=tmp_path,
        check=True,
    )
    for name in GENERATED:
        fresh = (tmp_path / "proto" / name).read_text()
        committed = (ROOT / "proto" / name).read_text()
        assert fresh == committed, f"proto/{name} is stale: run `make proto` and commit the result"

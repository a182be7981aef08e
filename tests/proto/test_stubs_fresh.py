"""The checked-in gRPC stubs are exactly what the pinned grpcio-tools generates from the .proto files.

These tests fail (never skip) when grpcio-tools is missing: a contract that cannot be verified is not
verified. They also pin that the stubs import each other package-qualified and that the contract
package stays torch-free.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from kvgate.proto import generate


def _copy_of_proto_dir(tmp_path: Path) -> Path:
    """The .proto files and checked-in stubs, copied into a scratch folder that tests may tamper with."""
    copy = tmp_path / "proto"
    copy.mkdir()
    for path in [*generate.proto_files(), *generate.checked_in_stubs()]:
        shutil.copyfile(path, copy / path.name)
    return copy


def test_checked_in_stubs_are_fresh() -> None:
    stale = generate.stale_stubs()
    assert stale == [], f"stale stubs {stale}: run `python -m kvgate.proto.generate`"


def test_every_proto_has_its_three_stubs() -> None:
    names = {p.name for p in generate.checked_in_stubs()}
    for proto in generate.proto_files():
        stem = proto.stem
        assert {f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"} <= names


def test_check_names_a_tampered_stub_and_an_orphan(tmp_path: Path) -> None:
    src = _copy_of_proto_dir(tmp_path)
    with (src / "worker_pb2.py").open("a") as f:
        f.write("# hand edit\n")
    (src / "gone_pb2.py").write_text("# its .proto was deleted\n")
    (src / "common_pb2.pyi").unlink()

    assert generate.stale_stubs(src) == ["common_pb2.pyi", "gone_pb2.py", "worker_pb2.py"]


def test_write_stubs_repairs_and_is_idempotent(tmp_path: Path) -> None:
    src = _copy_of_proto_dir(tmp_path)
    (src / "gateway_pb2_grpc.py").write_text("# clobbered\n")
    (src / "gone_pb2_grpc.py").write_text("# orphan\n")

    generate.write_stubs(src)
    before = {p.name: p.read_bytes() for p in src.iterdir()}
    generate.write_stubs(src)

    assert generate.stale_stubs(src) == []
    assert not (src / "gone_pb2_grpc.py").exists()
    assert {p.name: p.read_bytes() for p in src.iterdir()} == before


def test_stubs_import_each_other_package_qualified() -> None:
    for stub in generate.checked_in_stubs():
        for line in stub.read_text().splitlines():
            if "_pb2" in line and line.startswith(("import ", "from ")):
                assert line.startswith("from kvgate.proto import "), f"{stub.name}: {line}"


def test_check_command_passes_and_the_contract_is_torch_free() -> None:
    """`python -m kvgate.proto.generate --check` exits 0; importing the generator, the stubs and the
    converters in a fresh interpreter pulls in no torch (the gateway must never import it)."""
    check = subprocess.run(
        [sys.executable, "-m", "kvgate.proto.generate", "--check"], capture_output=True, text=True
    )
    assert check.returncode == 0, check.stderr
    probe = (
        "import sys\n"
        "import kvgate.proto.generate, kvgate.proto.convert\n"
        "import kvgate.proto.worker_pb2_grpc, kvgate.proto.gateway_pb2_grpc\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    imports = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert imports.returncode == 0, imports.stderr

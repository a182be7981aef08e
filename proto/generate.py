"""Regenerates the checked-in gRPC stubs: ``python -m kvgate.proto.generate [--check]``.

The ``.proto`` files live flat in this folder but import each other as ``kvgate/proto/<name>.proto``,
so that the generated modules import each other package-qualified (``from kvgate.proto import
common_pb2``), never as a bare ``import common_pb2``. The generator therefore copies them into a
temporary tree ``kvgate/proto/`` and runs protoc from the pinned ``grpcio-tools`` with that tree's root
as include path, writing ``<name>_pb2.py``, ``<name>_pb2.pyi`` and ``<name>_pb2_grpc.py`` per file.

Plain mode writes the fresh stubs here and deletes stubs whose ``.proto`` is gone. ``--check`` writes
nothing here: it generates into a temporary folder and exits 1, naming every stub that differs, is
missing or is orphaned. Torch-free, like all of ``kvgate.proto``.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import shutil
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
_PYPROJECT = PROTO_DIR.parent / "pyproject.toml"
_PACKAGE_PATH = Path("kvgate", "proto")
_STUB_SUFFIXES = ("_pb2.py", "_pb2.pyi", "_pb2_grpc.py")
_TOOLS = "grpcio-tools"
_SUMMARY = "Regenerates (or, with --check, verifies) the checked-in gRPC stubs of kvgate.proto."


def proto_files(src: Path = PROTO_DIR) -> list[Path]:
    """The ``.proto`` files of ``src``, sorted by name."""
    return sorted(src.glob("*.proto"))


def checked_in_stubs(src: Path = PROTO_DIR) -> list[Path]:
    """Every generated-looking file (``*_pb2.py``, ``*_pb2.pyi``, ``*_pb2_grpc.py``) in ``src``."""
    return sorted(p for p in src.iterdir() if p.name.endswith(_STUB_SUFFIXES))


def generate(dest: Path, src: Path = PROTO_DIR) -> list[Path]:
    """Generates stubs for every ``.proto`` of ``src`` into the existing folder ``dest``.

    Overwrites files of the same names in ``dest`` and touches nothing else there. Returns the written
    paths, sorted. Raises RuntimeError when grpcio-tools is missing or not the pinned version, or when
    protoc fails (its diagnostics go to stderr).
    """
    _require_pinned_tools()
    protos = proto_files(src)
    if not protos:
        raise RuntimeError(f"no .proto files in {src}")
    with tempfile.TemporaryDirectory(prefix="kvgate-protoc-") as tmp:
        include_root, out_root = Path(tmp, "in"), Path(tmp, "out")
        tree = include_root / _PACKAGE_PATH
        tree.mkdir(parents=True)
        out_root.mkdir()
        for proto in protos:
            shutil.copyfile(proto, tree / proto.name)
        _run_protoc(include_root, out_root, [tree / p.name for p in protos])
        outputs = sorted((out_root / _PACKAGE_PATH).iterdir())
        return [Path(shutil.copyfile(f, dest / f.name)) for f in outputs]


def stale_stubs(src: Path = PROTO_DIR) -> list[str]:
    """Names of the stubs in ``src`` that differ from a fresh generation, are missing, or have no
    ``.proto`` any more; empty when all are fresh. Pure with respect to ``src`` (reads only)."""
    with tempfile.TemporaryDirectory(prefix="kvgate-stubs-") as tmp:
        fresh = {p.name: p.read_bytes() for p in generate(Path(tmp), src)}
    current = {p.name: p.read_bytes() for p in checked_in_stubs(src)}
    return sorted(name for name in fresh.keys() | current.keys() if fresh.get(name) != current.get(name))


def write_stubs(src: Path = PROTO_DIR) -> list[Path]:
    """Regenerates the stubs of ``src`` in place and deletes orphaned ones; returns the written paths.

    Idempotent: a second run changes no byte.
    """
    written = generate(src, src)
    for orphan in set(checked_in_stubs(src)) - set(written):
        orphan.unlink()
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry point; returns the process exit status (0 = ok, 1 = stale stubs)."""
    parser = argparse.ArgumentParser(prog="python -m kvgate.proto.generate", description=_SUMMARY)
    parser.add_argument("--check", action="store_true", help="fail if the checked-in stubs are stale")
    args = parser.parse_args(argv)
    if not args.check:
        for path in write_stubs():
            print(f"wrote {path}")
        return 0
    stale = stale_stubs()
    if stale:
        print(f"stale gRPC stubs in {PROTO_DIR}: {', '.join(stale)}", file=sys.stderr)
        print("regenerate them with: python -m kvgate.proto.generate", file=sys.stderr)
        return 1
    print("gRPC stubs are fresh")
    return 0


def _run_protoc(include_root: Path, out_root: Path, protos: Sequence[Path]) -> None:
    """Runs protoc in-process with the python, pyi and grpc_python generators."""
    from grpc_tools import protoc  # imported here so a missing grpcio-tools fails with our message

    well_known = Path(protoc.__file__).parent / "_proto"
    args = [
        "grpc_tools.protoc",
        f"--proto_path={include_root}",
        f"--proto_path={well_known}",
        f"--python_out={out_root}",
        f"--pyi_out={out_root}",
        f"--grpc_python_out={out_root}",
        *map(str, protos),
    ]
    if protoc.main(args) != 0:
        raise RuntimeError(f"protoc failed on {[p.name for p in protos]} (see its messages above)")


def _require_pinned_tools() -> None:
    """Raises RuntimeError unless the installed grpcio-tools is the version pinned in pyproject.toml
    (the stubs embed it, so any other version would report every stub as stale)."""
    try:
        installed = importlib.metadata.version(_TOOLS)
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError(f"{_TOOLS} is not installed: pip install -e '.[dev]'") from None
    pinned = _pinned_tools_version()
    if pinned is not None and installed != pinned:
        raise RuntimeError(f"the stubs are pinned to {_TOOLS}=={pinned}, but {installed} is installed")


def _pinned_tools_version() -> str | None:
    """The ``grpcio-tools==X`` pin of the ``dev`` extra in the source tree's pyproject.toml; None when
    running from an installed wheel (no pyproject.toml) or when there is no exact pin."""
    if not _PYPROJECT.is_file():
        return None
    extras = tomllib.loads(_PYPROJECT.read_text())["project"].get("optional-dependencies", {})
    for requirement in extras.get("dev", []):
        name, sep, version = requirement.partition("==")
        if sep and name.strip() == _TOOLS:
            return version.strip()
    return None


if __name__ == "__main__":
    sys.exit(main())

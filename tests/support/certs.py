"""A throwaway CA and one certificate it signs (for 127.0.0.1, localhost and ``kvgate-worker``, good
for both server and client authentication), made with the ``openssl`` command."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path
    other_ca: Path  # a CA that signed nothing here: verifying against it must fail


def make_certs(folder: Path) -> Certs:
    """Creates the files in ``folder``; skips the test where ``openssl`` is missing."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    for name in ("ca", "other-ca"):
        _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                 "-subj", f"/CN=kvgate test {name}",
                 "-keyout", folder / f"{name}.key", "-out", folder / f"{name}.pem")  # fmt: skip
    (folder / "ext.cnf").write_text(
        "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kvgate-worker\n"
        "extendedKeyUsage=serverAuth,clientAuth\n"
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=kvgate-worker",
             "-keyout", folder / "node.key", "-out", folder / "node.csr")  # fmt: skip
    _openssl("x509", "-req", "-in", folder / "node.csr",
             "-CA", folder / "ca.pem", "-CAkey", folder / "ca.key", "-CAcreateserial", "-days", "2",
             "-extfile", folder / "ext.cnf", "-out", folder / "node.pem")  # fmt: skip
    return Certs(folder / "ca.pem", folder / "node.pem", folder / "node.key", folder / "other-ca.pem")


def _openssl(*args: object) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)

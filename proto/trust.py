"""What the deployment secret proves, besides seeding chunk hashes: who may register as a worker, and
who may call one.

Anyone who can write to Redis can write a worker record, and anyone who can reach a worker's port can
call it; neither is proof of belonging to the deployment. The secret is:

- **Never used directly.** Each purpose gets its own key, ``HMAC-SHA256(secret, "kvgate/<purpose>")``
  (:func:`derive`), so a key seen or guessed for one purpose opens nothing else.
- **Signing worker records.** A worker signs its registration record (:func:`sign_record`);
  a gateway routes only to records whose signature verifies (:func:`record_verified`). The signature
  covers every field of its format, so a copied record cannot be pointed at another address. Format
  ``v1`` covers the fields of the first records; ``v2`` adds the LoRA adapters a worker holds or
  loads on request. A
  worker without adapters signs ``v1`` (so gateways that know only ``v1`` keep routing to it), one
  with adapters ``v2``; a reader refuses a ``v1`` record that lists adapters (nothing vouches for
  them). Fields a newer kvgate adds need a new format, which older readers do not know and refuse, so
  an upgrade that adds fields to the record upgrades readers first.
- **Authenticating calls.** A gateway sends :func:`call_token` with every call to a worker (gRPC
  metadata :data:`CALL_TOKEN_HEADER`); a worker serves only calls that carry it (:func:`token_matches`,
  constant time). The token is a bearer credential: on a link others can read, protect it (and the
  prompts) with TLS.
- **Vouching for KV moved between workers.** A worker exporting a KV block tags it with
  :func:`kv_block_mac` (keyed BLAKE2b under the key :func:`kv_block_key`); the importer writes only
  blocks whose tag verifies. The call token alone (which crosses the wire on every call) cannot make
  a worker cache KV of anyone's choosing: forging a block takes the secret.

A deployment without a secret (empty: only where the operator said ``--insecure``) signs nothing and
checks nothing; a record with a signature is refused by it, as an unsigned one is by a keyed one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json

from kvgate.proto.workers import WorkerInfo

CALL_TOKEN_HEADER = "x-kvgate-worker-token"
"""The gRPC metadata key that carries :func:`call_token` on calls to a worker."""
_V1_FIELDS = ("worker_id", "epoch", "address", "fingerprint", "model_id", "metrics_address", "node_id")
# signature format -> the fields it covers
_FORMATS = {"v1": _V1_FIELDS, "v2": (*_V1_FIELDS, "adapters", "loadable_adapters")}


def derive(secret: bytes, purpose: str) -> bytes:
    """The key of one ``purpose`` (``"worker-record"``, ``"worker-call"``): 32 bytes."""
    return hmac.new(secret, f"kvgate/{purpose}".encode(), hashlib.sha256).digest()


def sign_record(info: WorkerInfo, secret: bytes) -> WorkerInfo:
    """``info`` with its signature under ``secret`` (unsigned, as is, when ``secret`` is empty)."""
    if not secret:
        return dataclasses.replace(info, signature="")
    form = "v2" if info.adapters or info.loadable_adapters else "v1"
    return dataclasses.replace(info, signature=f"{form}:{_record_mac(info, secret, form)}")


def record_verified(info: WorkerInfo, secret: bytes) -> bool:
    """True iff ``info`` was signed under ``secret`` (or both are unsigned: ``secret`` empty and no
    signature). Constant time in the signature."""
    if not secret:
        return not info.signature
    form, _, mac = info.signature.partition(":")
    if form not in _FORMATS or ("adapters" not in _FORMATS[form] and info.all_adapters):
        return False
    presented = mac.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(presented, _record_mac(info, secret, form).encode())


def call_token(secret: bytes) -> str | None:
    """What a caller presents to the workers of the deployment of ``secret`` (None: no secret, no
    token)."""
    return derive(secret, "worker-call").hex() if secret else None


def token_matches(presented: str | bytes | None, secret: bytes) -> bool:
    """True iff ``presented`` is the call token of ``secret`` (constant time); always True without a
    secret."""
    expected = call_token(secret)
    if expected is None:
        return True
    if presented is None:
        return False
    if isinstance(presented, str):
        presented = presented.encode("utf-8", "surrogateescape")
    return hmac.compare_digest(presented, expected.encode())


def kv_block_key(secret: bytes) -> bytes | None:
    """The key that tags KV blocks moved between the workers of ``secret``'s deployment (None: no
    secret, blocks go untagged)."""
    return derive(secret, "kv-block") if secret else None


def kv_block_mac(key: bytes, index: int, block_hash: int, data: bytes) -> bytes:
    """The 16-byte tag of block ``index`` (wire hash ``block_hash``, KV bytes ``data``) under ``key``:
    keyed BLAKE2b over the index and hash (8 bytes each, little-endian) then the data. Hashing a large
    ``data`` releases the GIL: call it off the event loop."""
    mac = hashlib.blake2b(key=key, digest_size=16)
    mac.update(index.to_bytes(8, "little") + block_hash.to_bytes(8, "little"))
    mac.update(data)
    return mac.digest()


def _record_mac(info: WorkerInfo, secret: bytes, form: str) -> str:
    fields = {name: getattr(info, name) for name in _FORMATS[form]}
    payload = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()
    return hmac.new(derive(secret, "worker-record"), payload, hashlib.sha256).hexdigest()

"""The flags of ``kvgate up``, ``kvgate workers`` and ``kvgate gateway``, and the settings they make.

Names and defaults are the ones deploy/ is written against (``tests/deploy``): ``--port`` 8000,
``--grpc-port`` 50051, ``--host``, ``--redis-url``, ``--ray-address``, ``--workers``, ``--model``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from pathlib import Path

from kvgate.cli.cache_args import add_cache_arguments, cache_config
from kvgate.cli.secret_args import add_insecure_argument, secret_from
from kvgate.cli.size_args import byte_size
from kvgate.cluster.lora_spec import LoraPlacement, parse_lora
from kvgate.cluster.settings import WORKER_DTYPES, WORKER_GEMMS, ClusterSettings, KVSizing
from kvgate.common.grpc_tls import TlsFiles
from kvgate.common.models import DEFAULT_MODEL_ID, default_model_path
from kvgate.gateway.http_api.admin import ADMIN_ENV, admin_ring
from kvgate.gateway.routing import policy_names
from kvgate.gateway.routing.overrides import routing_config
from kvgate.gateway.settings import HttpTimeouts
from kvgate.gateway.tenancy.config import ENV_VAR, key_ring

HTTP_PORT = 8000
GRPC_PORT = 50051
WORKER_GRPC_BASE = 50100  # worker i of a node: gRPC on 50100 + i (``kvgate workers``)
WORKER_METRICS_BASE = 9400  # worker i of a node: /metrics on 9400 + i


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", type=Path, help="a .gguf file or HF directory (default: SmolLM2-135M)")
    add_insecure_argument(parser)
    parser.add_argument("--model-name", help="the name clients use (default: from the model)")
    add_cache_arguments(parser)
    kv = KVSizing()
    parser.add_argument("--max-model-len", type=int, default=kv.max_model_len, help="tokens per sequence")


def add_worker_arguments(parser: argparse.ArgumentParser, fixed_ports: bool = False) -> None:
    """``fixed_ports``: workers take the node's ports from 50100 / 9400 up by default (deployments,
    firewalls, static scrape targets); otherwise any free ports (one machine, many stacks)."""
    kv = KVSizing()
    grpc_base, metrics_base = (WORKER_GRPC_BASE, WORKER_METRICS_BASE) if fixed_ports else (0, 0)
    parser.add_argument("--worker-port", type=int, default=grpc_base,
                        help=f"workers of a node take the first free gRPC ports from this one, up to 8 "
                             f"(0: any free port; default {grpc_base})")  # fmt: skip
    parser.add_argument("--worker-metrics-port", type=int, default=metrics_base,
                        help=f"the same for /metrics (0: any free port; default {metrics_base})")  # fmt: skip
    parser.add_argument("--stall-timeout", type=float, default=120.0,
                        help="seconds a worker's engine may hold requests without finishing a step before "
                             "it is declared hung and restarted")  # fmt: skip
    parser.add_argument("--workers", type=int, help="worker actors (default: one per GPU, or 2 on CPU)")
    parser.add_argument("--ray-address", help="join this Ray cluster (default: start a local one)")
    parser.add_argument("--cpus-per-worker", type=int, default=1, help="CPU mode: cores per worker")
    parser.add_argument("--dtype", default="auto", choices=WORKER_DTYPES,
                        help="weights and KV cache: auto = bfloat16 on a GPU, float32 on a CPU (bfloat16 "
                             "halves memory and is faster on CPUs with AVX-512 BF16 or AMX)")  # fmt: skip
    parser.add_argument("--gemm", default="auto", choices=WORKER_GEMMS,
                        help="how projections multiply decode batches on a CPU: auto = the fastest form "
                             "measured on the model's weights at load (about a second); linear = torch's "
                             "linear (the same numerics on every run); default auto")  # fmt: skip
    parser.add_argument("--num-gpu-blocks", type=int, default=kv.num_gpu_blocks,
                        help="CPU mode: KV blocks per worker (of --block-size tokens each)")  # fmt: skip
    parser.add_argument("--gpu-memory-fraction", type=float, default=kv.gpu_memory_fraction,
                        help="GPU mode: share of free GPU memory for KV blocks")  # fmt: skip
    parser.add_argument("--kv-memory", type=byte_size,
                        help="KV blocks per worker as bytes, e.g. 2GiB (instead of --num-gpu-blocks "
                             "/ --gpu-memory-fraction), at the bytes per block of --kv-dtype")  # fmt: skip
    parser.add_argument("--num-cpu-blocks", type=int, default=kv.num_cpu_blocks, help="offload tier blocks")
    parser.add_argument("--cpu-kv-memory", type=byte_size,
                        help="the offload tier as bytes, e.g. 16GiB (not with --num-cpu-blocks)")  # fmt: skip
    parser.add_argument("--lora", action="append", type=_lora, default=[], metavar="ID=PATH[@I,J]",
                        help="a LoRA adapter (PEFT folder) loaded at start by every worker, or by "
                             "worker-I, worker-J; clients name it MODEL:ID or ID (repeatable)")  # fmt: skip
    parser.add_argument("--lora-dir", type=Path,
                        help="a folder of PEFT adapters (one subfolder each, named by its id) that workers "
                             "load when a request first names one")  # fmt: skip
    parser.add_argument("--ray-temp-dir", help="a local Ray instance's files (default: Ray's)")
    parser.add_argument("--ready-timeout", type=float, default=600.0, help="seconds to wait for the workers")


def add_gateway_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="the gateway's interface (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=HTTP_PORT, help="HTTP: OpenAI / Anthropic API")
    parser.add_argument("--grpc-port", type=int, default=GRPC_PORT, help="gRPC: kvgate.v1.KVGateway")
    parser.add_argument("--policy", default="kvgate", choices=policy_names(), help="the routing policy")
    parser.add_argument("--routing-config", action="append", default=[], metavar="KEY=VALUE",
                        help="a parameter of the routing cost model (repeatable), e.g. "
                             "prefill_tokens_per_s=20000 (docs/INDEX.md, cost model parameters)")  # fmt: skip
    parser.add_argument("--api-keys", type=Path,
                        help="TOML file of tenants and their hashed API keys (default: $KVGATE_API_KEYS, "
                             "else no authentication)")  # fmt: skip
    parser.add_argument("--max-concurrent-requests", type=int, default=1024,
                        help="generations in flight on the gateway; beyond, a fast 503")  # fmt: skip
    parser.add_argument("--shutdown-grace", type=float, default=30.0,
                        help="seconds requests in flight may take to finish at shutdown")  # fmt: skip
    slow = HttpTimeouts()
    parser.add_argument("--header-timeout", type=float, default=slow.header_s,
                        help="seconds a client may take to send a request's headers")  # fmt: skip
    parser.add_argument("--body-timeout", type=float, default=slow.body_s,
                        help="seconds for a body (plus one per --min-body-rate bytes)")  # fmt: skip
    parser.add_argument("--min-body-rate", type=int, default=slow.min_body_rate,
                        help="bytes per second a slow upload must keep up")  # fmt: skip
    parser.add_argument("--keep-alive-timeout", type=float, default=slow.keep_alive_s,
                        help="seconds an idle HTTP connection is kept open between requests")  # fmt: skip


def add_tls_arguments(parser: argparse.ArgumentParser) -> None:
    """TLS on the gateway-worker link; give the same files to ``workers``, ``gateway`` and ``up``."""
    group = parser.add_argument_group("gateway-worker TLS (default: plaintext)")
    group.add_argument("--worker-tls-cert", type=Path,
                       help="PEM certificate: workers serve it, gateways present it")  # fmt: skip
    group.add_argument("--worker-tls-key", type=Path, help="its PEM private key")
    group.add_argument("--worker-tls-ca", type=Path,
                       help="PEM CA of the certificates (with a cert and key: mutual TLS)")  # fmt: skip
    group.add_argument("--worker-tls-server-name", help="the name the gateway expects in worker certificates "
                       "(default: the worker's registered IP)")  # fmt: skip


def tls_from(args: argparse.Namespace) -> TlsFiles | None:
    """The TLS files of the flags; None when none is given."""
    files = {name: getattr(args, f"worker_tls_{name}", None) for name in ("ca", "cert", "key")}
    if not any(files.values()):
        return None
    return TlsFiles(**files, server_name=getattr(args, "worker_tls_server_name", None))


def settings_from(args: argparse.Namespace, *, local: bool = False) -> ClusterSettings:
    """The settings of any of the three commands (flags a command lacks take their defaults).
    ``local``: the command runs the whole cluster on this machine, so it may make up the deployment
    secret (:func:`kvgate.cli.secret_args.deployment_secret`); ValueError when a secret is needed."""
    secret = secret_from(args, local=local)
    if secret.source == "generated":
        print("kvgate: generated a deployment secret for this local cluster", file=sys.stderr)
    model = args.model or default_model_path()
    kv = KVSizing(
        num_gpu_blocks=getattr(args, "num_gpu_blocks", KVSizing().num_gpu_blocks),
        gpu_memory_fraction=getattr(args, "gpu_memory_fraction", KVSizing().gpu_memory_fraction),
        num_cpu_blocks=getattr(args, "num_cpu_blocks", KVSizing().num_cpu_blocks),
        max_model_len=args.max_model_len,
        kv_memory_bytes=getattr(args, "kv_memory", None),
        cpu_kv_memory_bytes=getattr(args, "cpu_kv_memory", None),
    )
    names = ("workers", "ray_address", "ray_temp_dir", "host", "policy")
    optional = {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}
    return ClusterSettings(
        model_path=model,
        model_name=args.model_name or model_name(args.model, args.model_id),
        cache=dataclasses.replace(cache_config(args), secret=secret.value),
        kv=kv,
        cpus_per_worker=getattr(args, "cpus_per_worker", 1),
        dtype=getattr(args, "dtype", "auto"),
        gemm=getattr(args, "gemm", "auto"),
        redis_url=args.redis_url,
        port=getattr(args, "port", HTTP_PORT),
        grpc_port=getattr(args, "grpc_port", GRPC_PORT),
        ready_timeout_s=getattr(args, "ready_timeout", 600.0),
        worker_port=getattr(args, "worker_port", 0),
        worker_metrics_port=getattr(args, "worker_metrics_port", 0),
        stall_timeout_s=getattr(args, "stall_timeout", 120.0),
        keys=key_ring(getattr(args, "api_keys", None), os.environ.get(ENV_VAR)),
        max_concurrent_requests=getattr(args, "max_concurrent_requests", 1024),
        http_timeouts=http_timeouts_from(args),
        admin_keys=admin_ring(os.environ.get(ADMIN_ENV)),
        shutdown_grace_s=getattr(args, "shutdown_grace", 30.0),
        tls=tls_from(args),
        lora=tuple(getattr(args, "lora", ())),
        lora_dir=getattr(args, "lora_dir", None),
        routing=routing_config(getattr(args, "routing_config", [])),
        **optional,
    )


def http_timeouts_from(args: argparse.Namespace) -> HttpTimeouts:
    """The HTTP front's timeouts of the flags (their defaults for a command without them)."""
    slow = HttpTimeouts()
    return HttpTimeouts(
        header_s=getattr(args, "header_timeout", slow.header_s),
        body_s=getattr(args, "body_timeout", slow.body_s),
        min_body_rate=getattr(args, "min_body_rate", slow.min_body_rate),
        keep_alive_s=getattr(args, "keep_alive_timeout", slow.keep_alive_s),
    )


def model_name(model: Path | None, model_id: str) -> str:
    """The served name: the model id's last part for the default model, else the file's or folder's
    name without its extension."""
    if model is None:
        return (model_id or DEFAULT_MODEL_ID).rsplit("/", 1)[-1]
    return model.stem if model.suffix == ".gguf" else model.resolve().name


def _lora(text: str) -> LoraPlacement:
    try:
        return parse_lora(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None

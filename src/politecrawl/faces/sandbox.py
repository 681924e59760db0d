"""A small web on loopback; ``python -m politecrawl.faces.sandbox`` serves a benchmark web."""

from .sandbox_sites import (
    RealisticPages,
    Reply,
    RequestRecord,
    Sandbox,
    SandboxHost,
    _main,
    bench_hosts,
    demo_hosts,
    violations,
)

__all__ = [
    "RealisticPages",
    "Reply",
    "RequestRecord",
    "Sandbox",
    "SandboxHost",
    "bench_hosts",
    "demo_hosts",
    "violations",
]

if __name__ == "__main__":  # pragma: no cover
    _main()

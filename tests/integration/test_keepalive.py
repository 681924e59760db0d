"""A connection is kept for a host's next request only when that request comes soon enough to
use it (``net.fetch.KEEPALIVE_SECONDS``): a host asked again later gets ``Connection: close``
and holds no idle socket on either side meanwhile. Seen from the server: one connection per
request for a far host, one for all of them for a near one."""

from __future__ import annotations

import asyncio
import time

from politecrawl.net.fetch import KEEPALIVE_SECONDS, Fetcher

from servers.sandbox import SandboxHost

PAGES = {
    "/": "<html><body>home</body></html>",
    "/a": "<html><body>a</body></html>",
    "/b": "<html><body>b</body></html>",
}


def test_a_host_asked_again_after_the_pool_would_drop_the_connection_is_not_kept_alive(sandbox_factory):
    far, near = SandboxHost("127.0.31.41", pages=PAGES), SandboxHost("127.0.31.42", pages=PAGES)
    sb = sandbox_factory([far, near])

    async def main() -> None:
        fetcher = Fetcher(
            user_agent="politecrawl-test", max_bytes=1 << 20, connect_timeout=5, read_timeout=5, total_timeout=10
        )
        async with fetcher:
            for path in PAGES:
                assert (await fetcher.get(far.url(path), next_request_in=KEEPALIVE_SECONDS + 15)).status == 200
                assert (await fetcher.get(near.url(path), next_request_in=1.0)).status == 200

    asyncio.run(main())
    # The server records a request once its answer is written: on a busy machine the client
    # may read the last answer before the server's loop gets back to that line.
    settle = time.monotonic() + 10
    while len(sb.requests()) < 2 * len(PAGES) and time.monotonic() < settle:
        time.sleep(0.02)
    far_peers = [r.peer for r in sb.requests(far)]
    near_peers = [r.peer for r in sb.requests(near)]
    assert len(far_peers) == len(near_peers) == len(PAGES)
    assert len(set(far_peers)) == len(PAGES), far_peers  # a connection each: closed after its answer
    assert len(set(near_peers)) == 1, near_peers  # the control: one kept-alive connection

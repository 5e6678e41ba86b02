#!/usr/bin/env python3
"""When an API server closes an HTTP/1.1 keep-alive connection between requests.

Why: Go's http.Server (kube-apiserver's) times the wait for a next request with IdleTimeout
(90 s) until the next request's first bytes, then gives its head ReadHeaderTimeout (32 s) from
there; the embedded server must do the same. This measures it from outside, on either server.

How: one GET /version on a fresh connection, its whole answer read; then
  idle:    nothing more; the seconds until the server closes the connection;
  partial: 40 s later half a request line ("GET /vers"); the seconds until the close, from the
           answer and from the half line.
Prints one JSON line.

Usage: keep-alive-timing.py idle|partial NAME HOST:PORT [--ca CA --cert CRT --key KEY]
(with --ca: TLS, HTTP/1.1 by ALPN, the client certificate if given.)
"""
import argparse
import json
import socket
import ssl
import time

parser = argparse.ArgumentParser()
parser.add_argument("mode", choices=["idle", "partial"])
parser.add_argument("name")
parser.add_argument("address")
parser.add_argument("--ca")
parser.add_argument("--cert")
parser.add_argument("--key")
args = parser.parse_args()

host, port = args.address.rsplit(":", 1)
stream = socket.create_connection((host, int(port)))
if args.ca:
    context = ssl.create_default_context(cafile=args.ca)
    if args.cert:
        context.load_cert_chain(args.cert, args.key)
    context.set_alpn_protocols(["http/1.1"])
    stream = context.wrap_socket(stream, server_hostname=host)

stream.sendall(f"GET /version HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
received = b""
while b"\r\n\r\n" not in received:
    received += stream.recv(4096)
head, _, body = received.partition(b"\r\n\r\n")
lengths = [line.split(b":")[1] for line in head.split(b"\r\n")
           if line.lower().startswith(b"content-length")]
if lengths:
    while len(body) < int(lengths[0]):
        body += stream.recv(4096)
else:  # chunked: to the last chunk
    while not body.endswith(b"0\r\n\r\n"):
        body += stream.recv(4096)
answered = time.monotonic()

partial_at = None
if args.mode == "partial":
    time.sleep(40)
    stream.sendall(b"GET /vers")
    partial_at = time.monotonic()
stream.settimeout(300)
try:
    while stream.recv(4096):
        pass
except OSError:
    pass
closed = time.monotonic()
print(json.dumps({
    "server": args.name,
    "mode": args.mode,
    "first": head.split(b"\r\n")[0].decode(),
    "closed_after_answer_s": round(closed - answered, 2),
    "closed_after_partial_head_s": None if partial_at is None else round(closed - partial_at, 2),
}))

#!/usr/bin/env python3
"""http_server.py ROOT PORT_FILE ACCESS_LOG [--tls CERT KEY] [--drop NAME:N]
                  [--auth USER:PASSWORD | --bearer TOKEN]

A file server for the data staging tests: serves ROOT on a free port of
127.0.0.1 (written to PORT_FILE once it listens), over TLS with --tls,
answers Range requests (bytes=START-) with 206, missing files with 404,
and appends one line per request to ACCESS_LOG: "GET /PATH RANGE STATUS
BYTES". --drop NAME:N cuts the first answer for file NAME after N bytes of
its body (the connection closes, as a failing network would). --auth and
--bearer answer 401 to a request without those credentials.

Hostile answers, for the staging limits, under /hostile/: endless (a
token shard's header promising 10 tokens, then bytes without end),
endless-junk (bytes without end that are no shard's), endless-huge (a
header promising 2^31-1 tokens, then bytes without end), trickle (a valid
header, then one byte a second), loop (a redirect to itself), big (a
Content-Length of a terabyte)."""
import argparse
import http.server
import os
import struct
import threading
import time

from local_server import serve


def main():
    p = argparse.ArgumentParser()
    p.add_argument("root")
    p.add_argument("port_file")
    p.add_argument("access_log")
    p.add_argument("--tls", nargs=2, metavar=("CERT", "KEY"))
    p.add_argument("--drop", default="")
    p.add_argument("--auth", default="")
    p.add_argument("--bearer", default="")
    a = p.parse_args()
    drop_name, _, drop_after = a.drop.partition(":")
    dropped = set()
    lock = threading.Lock()

    def log(line):
        with lock, open(a.access_log, "a") as f:
            f.write(line + "\n")

    class Files(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def hostile(self, what):
            """The answers of a hostile or broken server; True when it was one."""
            header = lambda ntok: struct.pack("<3i", 20240520, 1, ntok) + bytes(1012)
            if what == "loop":
                self.send_response(302)
                self.send_header("Location", "/hostile/loop")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return True
            if what == "big":
                self.send_response(200)
                self.send_header("Content-Length", str(10**12))
                self.end_headers()
                return True
            first = {"endless": header(10), "endless-junk": b"<html>" * 200,
                     "endless-huge": header(2**31 - 1), "trickle": header(10**6)}.get(what)
            if first is None:
                return False
            rng = self.headers.get("Range", "")
            start = int(rng[6:-1]) if what == "trickle" and rng.startswith("bytes=") else 0
            total = len(first) + 2 * 10**6
            self.send_response(206 if start else 200)
            self.send_header("Connection", "close")
            if what == "trickle":  # a resumed trickle goes on where it stopped, as slowly
                if start:
                    self.send_header("Content-Range", f"bytes {start}-{total - 1}/{total}")
                self.send_header("Content-Length", str(total - start))
                first = first[start:]
            self.end_headers()
            self.close_connection = True
            try:
                self.wfile.write(first)
                while True:  # until the client goes away
                    self.wfile.write(b"x" if what == "trickle" else bytes(65536))
                    self.wfile.flush()
                    if what == "trickle":
                        time.sleep(1)
            except OSError:
                pass
            return True

        def do_GET(self):
            rel = self.path.split("?", 1)[0].lstrip("/")
            if rel.startswith("hostile/"):
                log(f"GET /{rel} - hostile 0")
                if self.hostile(rel[len("hostile/"):]):
                    return
            path = os.path.realpath(os.path.join(a.root, rel))
            rng = self.headers.get("Range", "-")
            want = None
            if a.auth:
                import base64
                want = "Basic " + base64.b64encode(a.auth.encode()).decode()
            elif a.bearer:
                want = "Bearer " + a.bearer
            if want and self.headers.get("Authorization") != want:
                log(f"GET /{rel} {rng} 401 0")
                self.send_response(401)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if not path.startswith(os.path.realpath(a.root) + "/") or not os.path.isfile(path):
                log(f"GET /{rel} {rng} 404 0")
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            size = os.path.getsize(path)
            start = 0
            if rng.startswith("bytes=") and rng.endswith("-"):
                start = int(rng[6:-1])
            if start >= size and size > 0:
                log(f"GET /{rel} {rng} 416 0")
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{size}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            cut = None
            with lock:
                if os.path.basename(path) == drop_name and path not in dropped:
                    dropped.add(path)
                    cut = int(drop_after)
            self.send_response(206 if start else 200)
            if start:
                self.send_header("Content-Range", f"bytes {start}-{size - 1}/{size}")
            self.send_header("Content-Length", str(size - start))
            self.end_headers()
            with open(path, "rb") as f:
                f.seek(start)
                body = f.read()
            if cut is not None:
                self.wfile.write(body[:cut])
                self.wfile.flush()
                log(f"GET /{rel} {rng} {206 if start else 200} {cut} dropped")
                self.close_connection = True
                self.connection.shutdown(2)
                return
            self.wfile.write(body)
            log(f"GET /{rel} {rng} {206 if start else 200} {len(body)}")

        def log_message(self, *args):
            pass

    serve(Files, a.port_file, a.tls)

if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""webhook.py PORT_FILE LOG [--sleep S] [--status N]: a web hook receiver
for the tests. Listens on 127.0.0.1 on a free port (written to PORT_FILE
once it listens), appends every POST body as one line to LOG, and answers
N (default 200), each answer after S seconds (default 0)."""
import argparse
import http.server
import time

from local_server import serve


def main():
    p = argparse.ArgumentParser()
    p.add_argument("port_file")
    p.add_argument("log")
    p.add_argument("--sleep", type=float, default=0)
    p.add_argument("--status", type=int, default=200)
    a = p.parse_args()

    class Hook(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            with open(a.log, "ab") as f:
                f.write(body.replace(b"\n", b" ") + b"\n")
            if a.sleep:
                time.sleep(a.sleep)
            self.send_response(a.status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    serve(Hook, a.port_file)

if __name__ == "__main__":
    main()

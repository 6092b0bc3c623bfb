"""local_server.serve(): what the tests' HTTP servers (http_server.py,
webhook.py) share: a threaded server on a free port of 127.0.0.1, over
TLS when given a certificate and key, whose port is written to a file
(atomically, so a test polling for it reads a whole number) once it
listens."""
import http.server
import os
import socketserver
import ssl


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(handler, port_file, tls=None):
    srv = _Server(("127.0.0.1", 0), handler)
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls[0], tls[1])
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(port_file + ".tmp", port_file)
    srv.serve_forever()

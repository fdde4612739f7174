#!/usr/bin/env python3
"""A listener that records the HTTP requests it gets (the S3 signing and
proxy tests): prints its port, then for each request appends one JSON line
{"request_line", "headers": [[name, value], ...], "body_hex"} to the file
named by argv[1], and answers 200 with an empty body. Stops after
argv[2] requests or 60 s without one."""
import json
import socket
import sys

out_path, count = sys.argv[1], int(sys.argv[2])
server = socket.socket()
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0))
server.listen(8)
server.settimeout(60)
print(server.getsockname()[1], flush=True)
for _ in range(count):
    try:
        conn, _ = server.accept()
    except socket.timeout:
        break
    conn.settimeout(10)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
    headers = [[n.strip(), v.strip()] for n, v in headers]
    length = next((int(v) for n, v in headers if n.lower() == "content-length"), 0)
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    with open(out_path, "a") as f:
        f.write(json.dumps({"request_line": lines[0], "headers": headers, "body_hex": body.hex()}) + "\n")
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    conn.close()

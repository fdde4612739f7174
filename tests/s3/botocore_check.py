#!/usr/bin/env python3
"""Recomputes the SigV4 signature of each request capture.py recorded with
botocore's own signer (Debian python3-botocore) and checks the payload
checksums: argv[1] the capture file, argv[2] the access key id, argv[3] the
secret, argv[4] the region. Prints one line per request, "ok <request line>"
or "MISMATCH ...", and exits 1 if any request does not match."""
import base64
import hashlib
import json
import re
import sys

from botocore.auth import S3SigV4Auth, SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

path, key_id, secret, region = sys.argv[1:5]
failed = False
for line in open(path):
    r = json.loads(line)
    method, target, _ = r["request_line"].split(" ", 2)
    headers = {}
    for name, value in r["headers"]:
        headers.setdefault(name.lower(), value)
    body = bytes.fromhex(r["body_hex"])
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                 r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", headers.get("authorization", ""))
    problems = []
    if not m:
        problems.append("no SigV4 Authorization header")
    else:
        cred_key, day, cred_region, service, signed, signature = m.groups()
        if cred_key != key_id or cred_region != region:
            problems.append("credential scope " + m.group(0))
        request = AWSRequest(method=method, url="http://" + headers["host"] + target, data=body,
                             headers={h: headers[h] for h in signed.split(";")})
        auth_class = S3SigV4Auth if service == "s3" else SigV4Auth
        auth = auth_class(Credentials(key_id, secret), service, region)
        request.context["timestamp"] = headers["x-amz-date"]
        canonical = auth.canonical_request(request)
        expected = auth.signature(auth.string_to_sign(request, canonical), request)
        if expected != signature:
            problems.append("signature %s, botocore computes %s over\n%s" % (signature, expected, canonical))
        if service == "s3":
            if "x-amz-content-sha256" not in signed.split(";"):
                problems.append("x-amz-content-sha256 is not signed")
            if headers.get("x-amz-content-sha256") != hashlib.sha256(body).hexdigest():
                problems.append("x-amz-content-sha256 is not the body's SHA-256")
            if method == "PUT" and headers.get("content-md5") != base64.b64encode(hashlib.md5(body).digest()).decode():
                problems.append("Content-MD5 is not the body's MD5")
    if problems:
        failed = True
        print("MISMATCH " + r["request_line"] + ": " + "; ".join(problems))
    else:
        print("ok " + r["request_line"])
sys.exit(1 if failed else 0)

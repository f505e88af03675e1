"""An S3-compatible server on loopback for the tests and benchmarks: moto's S3 (the standalone server on PyPI) in a
process of its own, counting the requests it serves by S3 operation.

`python tests/support/s3_server.py --port N` serves; `S3Server` starts one on a free port, waits for it, gives the
environment that points pyarrow (and boto-style clients) at it, makes buckets, and reads or resets the counts
(`GET /_acid/requests` and `DELETE /_acid/requests`, a path no bucket can have: names hold no `_`). Every request and
wait is on 127.0.0.1 and bounded in time.

Imported as `support.<module>` (tests/support/__init__.py).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

COUNTS_PATH = "/_acid/requests"
ACCESS_KEY, SECRET_KEY, REGION = "acid-test-key", "acid-test-secret", "us-east-1"


def operation(method: str, path: str, query: str, headers) -> str:
    """The S3 operation of one request, from its method, query and headers (as S3's API reference names them)."""
    params = urllib.parse.parse_qs(query, keep_blank_values=True)
    bucket_only = path.strip("/").count("/") == 0
    if method == "PUT":
        if "x-amz-copy-source" in {key.lower() for key in headers.keys()}:
            return "UploadPartCopy" if "partNumber" in params else "CopyObject"
        if "partNumber" in params:
            return "UploadPart"
        return "CreateBucket" if bucket_only else "PutObject"
    if method == "POST":
        if "uploads" in params:
            return "CreateMultipartUpload"
        if "uploadId" in params:
            return "CompleteMultipartUpload"
        if "delete" in params:
            return "DeleteObjects"
        return "Post"
    if method == "GET":
        if bucket_only:
            return "ListObjectsV2" if params.get("list-type") == ["2"] else "ListObjects"
        return "GetObject"
    if method == "HEAD":
        return "HeadBucket" if bucket_only else "HeadObject"
    if method == "DELETE":
        if "uploadId" in params:
            return "AbortMultipartUpload"
        return "DeleteBucket" if bucket_only else "DeleteObject"
    return method


class CountingApp:
    """WSGI middleware: counts each request by operation (and the bytes uploaded and downloaded), serves the counts."""

    def __init__(self, app) -> None:
        self.app = app
        self.lock = threading.Lock()
        self.counts: collections.Counter = collections.Counter()

    def __call__(self, environ, start_response):
        method, path = environ["REQUEST_METHOD"], environ.get("PATH_INFO", "")
        if path == COUNTS_PATH:
            with self.lock:
                body = json.dumps(dict(self.counts)).encode()
                if method == "DELETE":
                    self.counts.clear()
            start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
            return [body]
        headers = {key[5:].replace("_", "-"): value for key, value in environ.items() if key.startswith("HTTP_")}
        kind = operation(method, path, environ.get("QUERY_STRING", ""), headers)
        with self.lock:
            self.counts[kind] += 1
            if method in ("PUT", "POST"):  # the AWS SDK streams chunked bodies and says their size in a header
                length = environ.get("HTTP_X_AMZ_DECODED_CONTENT_LENGTH") or environ.get("CONTENT_LENGTH") or 0
                self.counts["bytes uploaded"] += int(length)
        return self.app(environ, start_response)


def serve(port: int) -> None:
    from moto.moto_server.threaded_moto_server import MotoRequestHandler
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    server = make_server("127.0.0.1", port, CountingApp(DomainDispatcherApplication(create_backend_app)), True,
                         request_handler=MotoRequestHandler)
    print(f"serving on 127.0.0.1:{port}", flush=True)
    server.serve_forever()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    """One S3 server process on a free loopback port; `stop()` ends it."""

    def __init__(self, log_path: Path) -> None:
        self.port = _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        self._log = open(log_path, "w")
        self.process = subprocess.Popen([sys.executable, __file__, "--port", str(self.port)], stdout=self._log,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        deadline = time.monotonic() + 60
        while True:
            try:
                self.counts()
                break
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"the S3 test server did not start:\n{log_path.read_text()[-3000:]}") from None
                time.sleep(0.1)

    @property
    def environment(self) -> dict[str, str]:
        """What points pyarrow's S3 filesystem (and the AWS SDKs) at this server."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY, "AWS_DEFAULT_REGION": REGION,
                "AWS_REGION": REGION, "AWS_ENDPOINT_URL": self.endpoint, "AWS_EC2_METADATA_DISABLED": "true"}

    def _call(self, method: str, path: str) -> bytes:
        request = urllib.request.Request(self.endpoint + path, method=method)
        with self._opener.open(request, timeout=30) as response:
            return response.read()

    def counts(self) -> dict[str, int]:
        """Requests served since the last reset, by S3 operation."""
        return json.loads(self._call("GET", COUNTS_PATH))

    def reset_counts(self) -> dict[str, int]:
        """The counts, then zero them."""
        return json.loads(self._call("DELETE", COUNTS_PATH))

    def make_bucket(self, name: str) -> str:
        """Create bucket `name`; returns `s3://<name>`."""
        import pyarrow.fs as pafs

        filesystem = pafs.S3FileSystem(access_key=ACCESS_KEY, secret_key=SECRET_KEY, region=REGION,
                                       endpoint_override=self.endpoint, allow_bucket_creation=True)
        filesystem.create_dir(name)
        return f"s3://{name}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    serve(parser.parse_args().port)
    os._exit(0)

"""An S3-compatible server on 127.0.0.1 for the tests: moto's server mode, which honours
conditional writes (``If-None-Match: *``) as S3 does.

The address and the (dummy) credentials go into this process's environment when the tests
start (``configure``), before Ray or Spark start, so that every process the tests start
(Ray workers, Spark executors, dead-writer subprocesses) finds the store through the usual
AWS settings, as a user's would. The server itself starts once per session
(:class:`S3Server`, from the ``s3`` fixture) and stops at its end.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

BUCKET = "dynbucket-tests"


def configure() -> None:
    """Points the AWS settings of this process (and its children) at the test server."""
    if os.environ.get("DYNBUCKET_TEST_S3_ENDPOINT") is None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ["DYNBUCKET_TEST_S3_ENDPOINT"] = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=os.environ["DYNBUCKET_TEST_S3_ENDPOINT"],
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
        AWS_REGION="us-east-1",
        AWS_DEFAULT_REGION="us-east-1",
        AWS_ALLOW_HTTP="true",  # hudi-rs (object_store) talks to a plain-HTTP endpoint
    )


def s3_filesystem(endpoint: str) -> Any:
    """A pyarrow ``S3FileSystem`` of the test server (or of a proxy in front of it)."""
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(
        endpoint_override=endpoint,
        access_key="testing",
        secret_key="testing",
        region="us-east-1",
        scheme="http",
    )


class S3Server:
    """A moto server process; ``stop()`` ends it."""

    def __init__(self, log: Path) -> None:
        endpoint = os.environ["DYNBUCKET_TEST_S3_ENDPOINT"]
        self.endpoint = endpoint
        port = endpoint.rsplit(":", 1)[1]
        moto = shutil.which("moto_server", path=str(Path(sys.executable).parent))
        command = [moto] if moto else [sys.executable, "-m", "moto.server"]
        self._log = open(log, "ab")  # noqa: SIM115 (open while the server runs)
        self.process = subprocess.Popen(
            [*command, "-H", "127.0.0.1", "-p", port],
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._wait()
        self.client().create_bucket(Bucket=BUCKET)

    def _wait(self) -> None:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(self.endpoint + "/moto-api/", timeout=2).close()
                return
            except OSError as e:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"the S3 test server did not start at {self.endpoint}"
                    ) from e
                time.sleep(0.2)

    def client(self):  # noqa: ANN201 (boto3's client type)
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint)

    def uri(self, name: str = "t") -> str:
        """A fresh table location on the server."""
        return f"s3://{BUCKET}/{uuid.uuid4().hex[:12]}/{name}"

    def keys(self, uri: str) -> list[str]:
        """Every object under ``uri`` (a table's files)."""
        prefix = uri.split(f"s3://{BUCKET}/", 1)[1].rstrip("/") + "/"
        pages = (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
        )
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._log.close()

"""A local S3 endpoint for the store tests (a test module or conftest imports them): moto's server on a free loopback port, started by the test, with the
standard AWS settings (``AWS_ENDPOINT_URL`` and keys) pointing at it for that test only."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

BUCKET = "remnant-store"


@pytest.fixture(scope="module")
def _moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def s3(_moto_server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """A boto3 client of a fresh bucket ``BUCKET`` on the local endpoint (emptied after the test)."""
    import boto3  # type: ignore[import-untyped]

    for name, value in {
        "AWS_ENDPOINT_URL": _moto_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    client = boto3.client("s3")
    client.create_bucket(Bucket=BUCKET)
    yield client
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)

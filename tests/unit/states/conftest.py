"""The states tests' fixtures: a local S3 endpoint (tests/fixtures_s3.py)."""

from fixtures_s3 import _moto_server, s3  # noqa: F401 - registered as fixtures

__all__ = ["_moto_server", "s3"]

"""The checkpoint store on object storage (``s3://bucket/prefix``, ``gs://bucket/prefix``): files through
``pyarrow.fs``, build-once through a lease object created only if absent.

Files go through :class:`pyarrow.fs.FileSystem` (``FileSystem.from_uri``), which reads the standard AWS settings
itself (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``,
``AWS_DEFAULT_REGION``, profiles) and Google's application credentials for ``gs://``. A stored checkpoint is its
files and, written last, ``seal.json``: the sha256 and size of each file. A checkpoint is stored when its seal is;
every read is checked against the seal (a file whose bytes differ is refused), and the loaded weights are then
checked against the pin in the sweep's records as on a local disk (R23: the seal, like meta.json, is the store's
word, never the authority).

Object storage has no ``flock``. One builder per checkpoint is decided by a *lease*: ``locks/<key>.lease``, created
with a conditional write (S3 ``If-None-Match: *``, through boto3, which reads the same AWS settings): exactly one
worker's create succeeds. The holder renews the lease while it builds (a conditional overwrite of its own
version, ``If-Match``) and deletes it when done; the others poll until it is gone (then find the sealed
checkpoint) or until it has not been renewed for ``stale`` seconds (its holder died): then one of them takes it
over, again by a conditional overwrite of the stale version, so two waiters never both take it. Ages are read
from the object store's own clock (its ``Date`` and ``Last-Modified``), never the worker's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, ValidationError

from remnant.errors import ConfigError, IntegrityError, RecordError
from remnant.models.files import CONFIG_NAME, GENERATION_CONFIG, INDEX_NAME, TOKENIZER_FILES
from remnant.models.identity import sha256_file

RULE = "R23"
SEAL = "seal.json"
#: The files of a sweep's checkpoint: its meta and its safetensors delta or adapter.
FLAT_FILES = ("meta.json", "delta.safetensors", "adapter.safetensors")
#: The folder of a whole state (store format "full") and the files it may hold: a model folder as remnant loads it
#: (safetensors weights, the shard index, the configs, the tokenizer files), never a pickle or code.
STATE_FOLDER = "state"
STATE_FILES = frozenset({INDEX_NAME, CONFIG_NAME, GENERATION_CONFIG, *TOKENIZER_FILES})
SAFE_WEIGHTS = re.compile(r"[A-Za-z0-9_.-]+\.safetensors")


def stored_name(name: str) -> str:
    """``name`` when a stored checkpoint may hold a file of that name (relative, ``/``-separated); ValueError
    otherwise (a seal naming anything else is refused, R23)."""
    folder, _, file = name.rpartition("/")
    flat = not folder and file in FLAT_FILES
    whole = folder == STATE_FOLDER and (file in STATE_FILES or SAFE_WEIGHTS.fullmatch(file) is not None)
    if not (flat or whole):
        raise ValueError(f"{name!r} is not a file a checkpoint may hold")
    return name


#: A file a stored checkpoint may hold (:func:`stored_name`).
FileName = Annotated[str, AfterValidator(stored_name)]
#: The most bytes read of a meta or seal object: they are small JSON, and a hostile store may not exhaust memory.
SMALL = 16 * 2**20
SCHEMES = ("s3", "gs", "gcs")


def is_uri(text: str) -> bool:
    """Whether ``text`` names object storage (``s3://``, ``gs://``) rather than a local folder."""
    return text.split("://", 1)[0].lower() in SCHEMES and "://" in text


class FileSeal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: StrictInt = Field(ge=0)


class Seal(BaseModel):
    """``seal.json``: what each file of a stored checkpoint must hash to (module docstring)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    files: dict[FileName, FileSeal]


@dataclass(frozen=True)
class LeaseTiming:
    """Seconds: a lease not renewed for ``stale`` is taken over; the holder renews every ``beat``; waiters poll
    every ``poll``."""

    stale: float = 600.0
    beat: float = 60.0
    poll: float = 2.0


class RemoteStore:
    """The files of a store at ``uri`` (module docstring)."""

    def __init__(self, uri: str, timing: LeaseTiming | None = None) -> None:
        from pyarrow import fs  # type: ignore[import-untyped]  # pyarrow ships no stubs

        scheme, rest = uri.split("://", 1)
        self.uri = f"{scheme.lower()}://{rest}".rstrip("/")
        self.timing = timing or LeaseTiming()
        try:
            self.fs, base = fs.FileSystem.from_uri(self.uri)
        except (OSError, ValueError) as exc:  # pyarrow's errors subclass these
            raise ConfigError(
                f"{uri}: not a checkpoint store this machine can open: {exc}", requirement=RULE
            ) from None
        self.base = base.rstrip("/")
        if not self.base or self.base.startswith("/"):
            raise ConfigError(f"{uri}: names no bucket (s3://bucket/prefix)", requirement=RULE)

    def name(self, key: str, file: str = "") -> str:
        return f"{self.uri}/ckpt/{key}" + (f"/{file}" if file else "")

    def _path(self, key: str, file: str) -> str:
        return f"{self.base}/ckpt/{key}/{file}"

    def has(self, key: str) -> bool:
        from pyarrow import fs

        return bool(self.fs.get_file_info(self._path(key, SEAL)).type == fs.FileType.File)

    def _read_small(self, key: str, file: str) -> bytes:
        try:
            with self.fs.open_input_stream(self._path(key, file)) as stream:
                data = bytes(stream.read(SMALL + 1))
        except OSError as exc:
            raise RecordError(f"{self.name(key, file)}: cannot read: {exc}", requirement=RULE) from None
        if len(data) > SMALL:
            raise RecordError(f"{self.name(key, file)}: more than {SMALL} bytes", requirement=RULE)
        return data

    def seal(self, key: str) -> Seal:
        from remnant.jsonio import loads_strict
        from remnant.packs.schema import describe_validation

        raw = loads_strict(self._read_small(key, SEAL), source=self.name(key, SEAL), error=RecordError)
        try:
            seal = Seal.model_validate(raw)
        except ValidationError as exc:
            raise RecordError(
                f"{self.name(key, SEAL)}: {describe_validation(exc)}", requirement=RULE
            ) from None
        if "meta.json" not in seal.files:
            raise RecordError(f"{self.name(key, SEAL)}: field 'files' names no meta.json", requirement=RULE)
        return seal

    def meta_bytes(self, key: str) -> bytes:
        """The checkpoint's meta.json, checked against its seal."""
        data = self._read_small(key, "meta.json")
        _check(self.name(key), "meta.json", hashlib.sha256(data).hexdigest(), len(data), self.seal(key))
        return data

    def put(self, key: str, folder: Path) -> None:
        """Upload the checkpoint built in ``folder`` (its files only), sealed last: unsealed first, so a reader
        never takes a half-replaced checkpoint for a stored one."""
        from pyarrow import fs

        files = {
            name: FileSeal(sha256=sha256_file(path), size=path.stat().st_size) for name, path in held(folder)
        }
        try:
            seal = Seal.model_validate({"files": {n: f.model_dump() for n, f in files.items()}})
        except ValidationError as exc:
            raise RecordError(f"{folder}: not a checkpoint to store: {exc}", requirement=RULE) from None
        if self.has(key):
            self.fs.delete_file(self._path(key, SEAL))
        local = fs.LocalFileSystem()
        for name in files:
            fs.copy_files(str(folder / name), self._path(key, name), local, self.fs)
        with self.fs.open_output_stream(self._path(key, SEAL)) as out:
            out.write(json.dumps(seal.model_dump(), sort_keys=True).encode())

    def download(self, key: str, into: Path) -> None:
        """The sealed files of ``key`` into ``into`` (a new folder), each checked against the seal."""
        from pyarrow import fs

        seal = self.seal(key)
        local = fs.LocalFileSystem()
        for name in seal.files:
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            try:
                fs.copy_files(self._path(key, name), str(into / name), self.fs, local)
            except OSError as exc:
                raise RecordError(
                    f"{self.name(key, name)}: cannot download: {exc}", requirement=RULE
                ) from None
        verify_folder(into, seal, self.name(key))

    @contextlib.contextmanager
    def lease(self, key: str) -> Iterator[None]:
        """Hold the build lease of ``key`` (module docstring); blocks until this worker holds it."""
        lease = _S3Lease(self.uri, f"{self.base}/locks/{key}.lease", self.timing)
        lease.acquire()
        try:
            yield
        finally:
            lease.release()


def held(folder: Path) -> list[tuple[str, Path]]:
    """The files of a checkpoint folder by relative name: its own and those of its ``state/`` folder, plain files
    only (a link or any other folder is refused: remnant never follows a link, R23)."""

    def plain(path: Path) -> Path:
        if path.is_symlink() or not path.is_file():
            raise IntegrityError(f"{path}: not a plain file (remnant never follows a link)", requirement=RULE)
        return path

    out: list[tuple[str, Path]] = []
    for path in sorted(folder.iterdir()):
        if path.name == STATE_FOLDER and path.is_dir() and not path.is_symlink():
            out += [(f"{STATE_FOLDER}/{inner.name}", plain(inner)) for inner in sorted(path.iterdir())]
        else:
            out.append((path.name, plain(path)))
    return out


def verify_folder(folder: Path, seal: Seal, where: str) -> None:
    """IntegrityError unless ``folder`` holds exactly the sealed files, plain (no link), with their digests."""
    present = dict(held(folder))
    if set(present) != set(seal.files):
        raise IntegrityError(
            f"{where}: holds {sorted(present)}, its seal names {sorted(seal.files)}", requirement=RULE
        )
    for name, path in present.items():
        _check(where, name, sha256_file(path), path.stat().st_size, seal)


def _check(where: str, name: str, sha: str, size: int, seal: Seal) -> None:
    want = seal.files.get(name)
    if want is None or want.sha256 != sha or want.size != size:
        raise IntegrityError(
            f"{where}/{name}: its bytes are not the ones its seal names (sha256 {sha[:12]}…): the store was "
            "changed after the build",
            requirement=RULE,
        )


class _S3Lease:
    """One worker's hold on a lease object (module docstring), through boto3's conditional writes."""

    def __init__(self, uri: str, path: str, timing: LeaseTiming) -> None:
        if not uri.lower().startswith("s3://"):
            raise ConfigError(
                f"{uri}: building into this store needs a conditional write (create-if-absent), which remnant "
                "does through S3's If-None-Match: use an s3:// store (any S3-compatible endpoint, through "
                "AWS_ENDPOINT_URL) or a local folder to build, and this one to read",
                requirement=RULE,
            )
        try:
            import boto3  # type: ignore[import-untyped]
        except ImportError:
            raise ConfigError(
                f"{uri}: building into an s3:// store needs boto3 (pip install boto3)", requirement=RULE
            ) from None
        # a session of its own: boto3's default session is not thread-safe
        self.client: Any = boto3.session.Session().client("s3")
        self.bucket, self.key = path.split("/", 1)
        self.timing = timing
        self.etag: str | None = None
        self.body = json.dumps({"holder": uuid.uuid4().hex}).encode()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def _put(self, **condition: str) -> bool:
        from botocore.exceptions import ClientError  # type: ignore[import-untyped]

        try:
            reply = self.client.put_object(Bucket=self.bucket, Key=self.key, Body=self.body, **condition)
        except ClientError as exc:
            if exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode") in (409, 412):
                return False  # someone else's write won (409: a concurrent conditional write in flight)
            raise RecordError(
                f"s3://{self.bucket}/{self.key}: cannot write the build lease: {exc}", requirement=RULE
            ) from None
        self.etag = str(reply["ETag"])
        return True

    def _stale_etag(self) -> str | None:
        """The lease's version when it has not been renewed for ``stale`` seconds (by the store's clock)."""
        from botocore.exceptions import ClientError

        try:
            head = self.client.head_object(Bucket=self.bucket, Key=self.key)
        except ClientError:
            return None  # gone: the next create decides
        now = parsedate_to_datetime(head["ResponseMetadata"]["HTTPHeaders"]["date"])
        age = (now - head["LastModified"]).total_seconds()
        return str(head["ETag"]) if age > self.timing.stale else None

    def acquire(self) -> None:
        while not self._put(IfNoneMatch="*"):
            stale = self._stale_etag()
            if stale is not None and self._put(IfMatch=stale):
                break
            time.sleep(self.timing.poll)
        self._beat = threading.Thread(target=self._renew, daemon=True)
        self._beat.start()

    def _renew(self) -> None:
        while not self._stop.wait(self.timing.beat):
            try:
                renewed = self.etag is not None and self._put(IfMatch=self.etag)
            except RecordError:  # the store unreachable: a waiter may take over once it goes stale
                return
            if not renewed:
                return  # taken over: the holder's build goes on; the pin check keeps the weights honest

    def release(self) -> None:
        from botocore.exceptions import ClientError

        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        with contextlib.suppress(ClientError):
            if self.etag is not None:
                self.client.delete_object(Bucket=self.bucket, Key=self.key, IfMatch=self.etag)


__all__ = ["SEAL", "LeaseTiming", "RemoteStore", "Seal", "is_uri", "verify_folder"]

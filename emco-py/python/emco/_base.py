"""What the two ways in share beneath the API: references to deployments, the requests of the
REST API's operations (their routes are the OpenAPI document's, `_operations`) and their
answers (errors raised as the exception of their kind), and files for uploads."""

import json
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union
from urllib.parse import quote, urlencode

from ._emco import Transport, pack_dir
from ._errors import NotFound, Unavailable, error_for
from ._operations import OPERATIONS, OperationId

Query = Union[Mapping[str, str], Sequence[Tuple[str, str]]]
_PARAM = re.compile(r"\{[^}]+\}")


def route(op: OperationId, *params: str, query: Optional[Query] = None) -> Tuple[str, str]:
    """The method and path of operation `op`, its path parameters `params` in the route's
    order (each quoted as one segment), and `query` after them."""
    method, template = OPERATIONS[op]
    names = _PARAM.findall(template)
    if len(names) != len(params):
        raise TypeError(f"{op} takes {len(names)} path parameters ({', '.join(names)}), "
                        f"not {len(params)}")
    values = iter(params)
    path = _PARAM.sub(lambda _: q(next(values)), template)
    if query:
        path += "?" + urlencode(query)
    return method, path

PathLike = Union[str, "os.PathLike[str]"]
Json = Dict[str, Any]


@dataclass(frozen=True)
class DigRef:
    """A deployment intent group: project, composite app, its version and the group's name."""

    project: str
    composite_app: str
    version: str
    name: str

    @property
    def params(self) -> Tuple[str, str, str, str]:
        """The path parameters of the group's routes, in order."""
        return (self.project, self.composite_app, self.version, self.name)

    @property
    def path(self) -> str:
        return route("getDeploymentIntentGroup", *self.params)[1]


@dataclass(frozen=True)
class LogicalCloudRef:
    """A logical cloud of a project."""

    project: str
    name: str

    @property
    def params(self) -> Tuple[str, str]:
        """The path parameters of the logical cloud's routes, in order."""
        return (self.project, self.name)

    @property
    def path(self) -> str:
        return route("getLogicalCloud", *self.params)[1]


Target = Union[DigRef, LogicalCloudRef]


@dataclass(frozen=True)
class Principal:
    """Who an embedded orchestrator acts for: a subject and its roles, written as in the
    server's auth config (`platform-admin`, `cluster-admin`, `project-owner:NAME`,
    `project-viewer:NAME`). Its calls obey the same rules as that caller's on a server."""

    subject: str
    roles: Sequence[str] = ()


def q(segment: str) -> str:
    return quote(segment, safe="")


def meta(name: str, description: str = "") -> Json:
    """EMCO's `metadata` of a new object."""
    m: Json = {"name": name}
    if description:
        m["description"] = description
    return m


class Base:
    """Requests of EMCO's REST API over a transport."""

    def __init__(self, transport: Transport) -> None:
        self._t = transport

    # ---- plumbing -------------------------------------------------------------------------

    def _answer(self, method: str, path: str, answer: Tuple[int, Optional[str], bytes]) -> Any:
        status, kind, body = answer
        text = body.decode("utf-8", "replace")
        if status >= 400:
            raise error_for(status, kind, f"{method} {self._t.url(path)}: {text.strip()}")
        if not body.strip():
            return None
        try:
            return json.loads(text)
        except ValueError:
            return text

    def _call(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        try:
            answer = self._t.request(method, path, data)
        except ConnectionError as e:
            raise Unavailable(str(e)) from e
        return self._answer(method, path, answer)

    def _upload(self, method: str, path: str, metadata: Json,
                files: Sequence[Tuple[str, Path]]) -> Any:
        """A multipart request: `metadata`, and each `(field, file)` streamed from disk."""
        try:
            answer = self._t.upload(method, path, json.dumps(metadata).encode(),
                                    [(field, file.name, str(file)) for field, file in files])
        except ConnectionError as e:
            raise Unavailable(str(e)) from e
        return self._answer(method, path, answer)

    def _op(self, op: OperationId, *params: str, body: Optional[Any] = None,
            query: Optional[Query] = None) -> Any:
        """Operation `op` of the REST API with its path parameters `params`."""
        method, path = route(op, *params, query=query)
        return self._call(method, path, body)

    def _op_upload(self, op: OperationId, *params: str, metadata: Json,
                   files: Sequence[Tuple[str, Path]] = ()) -> Any:
        """Operation `op` as a multipart request (see `_upload`)."""
        method, path = route(op, *params)
        return self._upload(method, path, metadata, files)

    def _exists(self, op: OperationId, *params: str) -> bool:
        """Whether the GET operation `op` finds its object."""
        try:
            self._op(op, *params)
        except NotFound:
            return False
        return True

    def request(self, method: str, path: str, body: Optional[Any] = None) -> Any:
        """Any request of the REST API (`path` starts with `/v2/`); the decoded JSON answer."""
        return self._call(method, path, body)

    @property
    def is_embedded(self) -> bool:
        """Whether the orchestrator runs in this process."""
        return self._t.is_embedded


class TempFile:
    """A context manager yielding a path, removing it afterwards when it was made here."""

    def __init__(self, path: Path, owned: Optional[tempfile.TemporaryDirectory[str]]) -> None:
        self.path, self.owned = path, owned

    def __enter__(self) -> Path:
        return self.path

    def __exit__(self, *exc: object) -> None:
        if self.owned is not None:
            self.owned.cleanup()


def as_file(value: Union[PathLike, str], name: str) -> TempFile:
    """The file at `value`; a `str` naming no file is the content, written to a temporary file
    `name`."""
    if isinstance(value, str) and ("\n" in value or not Path(value).exists()):
        tmp = tempfile.TemporaryDirectory(prefix="emco-")
        path = Path(tmp.name) / name
        path.write_text(value)
        return TempFile(path, tmp)
    if not Path(value).is_file():
        raise FileNotFoundError(f"no file at {value}")
    return TempFile(Path(value), None)


def as_tgz(path: PathLike, top_dir: bool = True) -> TempFile:
    """A `.tgz` as is; a directory tarred (under its own name for a chart, at the root for a
    profile)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no chart or profile at {p}")
    if not p.is_dir():
        return TempFile(p, None)
    tmp = tempfile.TemporaryDirectory(prefix="emco-")
    out = Path(tmp.name) / f"{p.name}.tgz"
    out.write_bytes(pack_dir(str(p), p.name if top_dir else "."))
    return TempFile(out, tmp)

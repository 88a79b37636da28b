"""The exceptions of `emco`: one per error kind of the server, all under `EmcoError`."""

from typing import Dict, Optional, Type


class EmcoError(Exception):
    """A request the server refused or could not answer.

    `status` is the HTTP status (0 when no answer came), `kind` the server's error kind
    (`NotFound`, `AlreadyExists`, ...) and `message` its text.
    """

    def __init__(self, message: str, status: int = 0, kind: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.kind = kind


class NotFound(EmcoError):
    """The object, or one it names, does not exist (404)."""


class AlreadyExists(EmcoError):
    """An object of that name exists already (409)."""


class Conflict(EmcoError):
    """The request conflicts with the object's state or a concurrent change (409)."""


class InvalidArgument(EmcoError):
    """The request is malformed or fails validation (400, 413, 415, 422)."""


class FailedPrecondition(EmcoError):
    """The operation is not allowed in the object's lifecycle state (409)."""


class Unavailable(EmcoError):
    """The server, a store, a controller or a cluster cannot be reached (503, or no answer)."""


class Internal(EmcoError):
    """The server failed (500)."""


class Unauthenticated(EmcoError):
    """No credentials, or ones the server does not accept (401)."""


class PermissionDenied(EmcoError):
    """The credentials' roles do not allow the request (403)."""


_BY_KIND: Dict[str, Type[EmcoError]] = {
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "InvalidArgument": InvalidArgument,
    "FailedPrecondition": FailedPrecondition,
    "Unavailable": Unavailable,
    "Internal": Internal,
    "Unauthenticated": Unauthenticated,
    "PermissionDenied": PermissionDenied,
}


def error_for(status: int, kind: Optional[str], message: str) -> EmcoError:
    """The exception for an error answer: by the server's kind when it names one (emco-rs),
    else by the status code (EMCO, which answers 409 for several kinds)."""
    cls = _BY_KIND.get(kind or "")
    if cls is None:
        if status == 401:
            cls = Unauthenticated
        elif status == 403:
            cls = PermissionDenied
        elif status == 404:
            cls = NotFound
        elif status == 409:
            cls = AlreadyExists if "exist" in message.lower() else Conflict
        elif status in (400, 413, 415, 422):
            cls = InvalidArgument
        elif status in (502, 503, 504):
            cls = Unavailable
        elif status >= 500:
            cls = Internal
        else:
            cls = EmcoError
    return cls(message, status, kind)

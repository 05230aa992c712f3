"""Datavo's exceptions: one class per C++ ErrorCode (include/datavo/result.hpp), all under DatavoError.

The four kinds a Python user branches on are also the builtin exceptions they expect, so that
``except FileNotFoundError`` and ``except datavo_sdk.DatavoError`` both work:

=====================  ===============================  ========================================================
ErrorCode              class                            also a
=====================  ===============================  ========================================================
not_found              NotFoundError                    FileNotFoundError (a missing dataset, key or file)
permission_denied      PermissionDeniedError            PermissionError
timeout                DatavoTimeoutError               TimeoutError
invalid_argument       InvalidArgumentError             ValueError (a bad argument, a malformed content hash)
config                 ConfigError                      ValueError (shards.yaml, naming file:line, or a tier
                                                        argument, naming Class.argument)
no_space               NoSpaceError                     OSError
io                     DatavoIOError                    OSError
remote                 RemoteError; UnreachableError    UnreachableError is also a ConnectionError: the server
                       when the server could not be     refused the connection, or its host or network is
                       reached at all                   unreachable, or its name does not resolve
cancelled              CancelledError                   (a stop on request, SIGINT or SIGTERM; nothing half-done
                                                        is left behind)
capacity, integrity,   CapacityError, IntegrityError,   (DatavoError only)
conflict, unsupported, ConflictError, UnsupportedError,
internal               InternalError
=====================  ===============================  ========================================================

Every instance carries the C++ message as its text, ``code`` (the ErrorCode's name) and ``sys_errno`` (0 when none).
``code`` is the CLI's error code too: ``datavo --json`` reports a failure as ``{"error": {"code": ..., "message":
...}}`` with the same name and message, and exits with 2 for invalid_argument and config, 1 for the rest.
"""

__all__ = [
    "DatavoError",
    "NotFoundError",
    "PermissionDeniedError",
    "DatavoTimeoutError",
    "InvalidArgumentError",
    "ConfigError",
    "NoSpaceError",
    "DatavoIOError",
    "CapacityError",
    "IntegrityError",
    "RemoteError",
    "UnreachableError",
    "ConflictError",
    "UnsupportedError",
    "InternalError",
    "CancelledError",
]


class DatavoError(Exception):
    """Base of every error Datavo raises. ``code`` names the C++ ErrorCode, ``sys_errno`` the errno behind it."""

    code: str = "internal"
    sys_errno: int = 0


class NotFoundError(DatavoError, FileNotFoundError):
    """A dataset, key, file or shard that must exist does not (not a cache miss)."""


class PermissionDeniedError(DatavoError, PermissionError):
    """EACCES / EPERM / EROFS, or a server that refused the credentials."""


class DatavoTimeoutError(DatavoError, TimeoutError):
    """A deadline passed."""


class InvalidArgumentError(DatavoError, ValueError):
    """A bad argument: a malformed content hash, dataset name, option or value."""


class ConfigError(DatavoError, ValueError):
    """A malformed or inconsistent configuration; the message names file:line (or Class.argument)."""


class NoSpaceError(DatavoError, OSError):
    """ENOSPC / EDQUOT."""


class DatavoIOError(DatavoError, OSError):
    """An I/O error not covered by a more specific class."""


class CapacityError(DatavoError):
    """No tier can hold the shard."""


class IntegrityError(DatavoError):
    """Bytes do not match the expected size or SHA-256, or a shard is malformed."""


class RemoteError(DatavoError):
    """A remote tier or the origin failed (5xx, reset, protocol violation)."""


class UnreachableError(RemoteError, ConnectionError):
    """The server could not be reached at all (connection refused, host or network unreachable, a name that does not
    resolve): the request never reached it. ``code`` is still "remote"."""


class ConflictError(DatavoError):
    """A conditional request was refused: the object changed, or already exists (HTTP 412, 409)."""


class CancelledError(DatavoError):
    """Stopped on request (SIGINT or SIGTERM); nothing half-done is left behind."""


class UnsupportedError(DatavoError):
    """The operation is not supported by this tier, build or platform."""


class InternalError(DatavoError):
    """A broken invariant: a bug in Datavo."""


# ErrorCode name (to_string in src/base/result.cpp) -> class, handed to the extension at import; "unreachable" is the
# class of a remote error that is_unreachable() (include/datavo/result.hpp) says never reached its server.
BY_CODE = {
    "invalid_argument": InvalidArgumentError,
    "config": ConfigError,
    "io": DatavoIOError,
    "permission_denied": PermissionDeniedError,
    "no_space": NoSpaceError,
    "not_found": NotFoundError,
    "capacity": CapacityError,
    "integrity": IntegrityError,
    "remote": RemoteError,
    "timeout": DatavoTimeoutError,
    "unsupported": UnsupportedError,
    "internal": InternalError,
    "conflict": ConflictError,
    "cancelled": CancelledError,
    "unreachable": UnreachableError,
}

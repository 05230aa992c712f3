"""The PyTorch integration, without importing torch.

datavo_sdk never imports torch itself: a job that only warms or reads does not pay for it (over a second and 200 MiB
of memory with Debian's python3-torch). A DataLoader needs torch, so the job imports it, and this module notices
when that happens:

- at once, when ``torch`` is already in ``sys.modules`` (and done initialising);
- else through a finder on ``sys.meta_path`` that lets the usual finders locate ``torch`` and runs the callbacks right
  after the package's ``__init__`` has run (the finder then removes itself). ``import torch.utils.data`` imports
  ``torch`` first, and torch's ``__init__`` imports ``torch.utils.data``, so torch is whole when a callback runs.

Callbacks run once each, in registration order, with the ``torch.utils.data`` module.
Thread safety: register from any thread; a callback runs on the thread that imported torch.
"""

import importlib.abc
import importlib.machinery
import sys
import threading
import types
import typing

Callback = typing.Callable[[types.ModuleType], None]

_TARGET = "torch"
_lock = threading.Lock()
_callbacks: typing.List[Callback] = []
_finder: typing.Optional["_Finder"] = None


def loaded() -> typing.Optional[types.ModuleType]:
    """``torch.utils.data`` once the job has imported torch, else None. Never imports torch."""
    torch = sys.modules.get(_TARGET)
    if torch is None or getattr(torch.__spec__, "_initializing", False):
        return None
    return sys.modules.get("torch.utils.data")


def when_loaded(callback: Callback) -> None:
    """Calls ``callback(torch.utils.data)`` now if the job has imported it, else right after it does."""
    global _finder
    with _lock:
        module = loaded()
        if module is None:
            _callbacks.append(callback)
            if _finder is None:
                _finder = _Finder()
                sys.meta_path.insert(0, _finder)
            return
    callback(module)


def _run_callbacks(module: types.ModuleType) -> None:
    with _lock:
        callbacks = list(_callbacks)
        _callbacks.clear()
    for callback in callbacks:
        callback(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: typing.Optional[typing.Sequence[str]],
        target: typing.Optional[types.ModuleType] = None,
    ) -> typing.Optional[importlib.machinery.ModuleSpec]:
        global _finder
        if fullname != _TARGET:
            return None
        with _lock:
            if sys.meta_path and self in sys.meta_path:
                sys.meta_path.remove(self)
            _finder = None
        spec: typing.Optional[importlib.machinery.ModuleSpec] = None
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = typing.cast(typing.Optional[importlib.machinery.ModuleSpec],
                               find(fullname, path, target) if find is not None else None)
            if spec is not None:
                break
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ThenRunCallbacks(spec.loader)
        return spec


class _ThenRunCallbacks(importlib.abc.Loader):
    """Delegates to the real loader, then runs the callbacks with the executed module."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> typing.Optional[types.ModuleType]:
        return self._loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self._loader.exec_module(module)
        _run_callbacks(sys.modules["torch.utils.data"])  # torch's __init__ has imported it

    def __getattr__(self, name: str) -> typing.Any:  # get_resource_reader, is_package, ... of the real loader
        return getattr(self._loader, name)

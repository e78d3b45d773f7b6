"""Load kubernetes-asyncio without its ~1,000 generated API and model modules.

gangsched uses kubernetes-asyncio for what it does well (kubeconfig and in-cluster
configuration, TLS, token refresh, its aiohttp session) and speaks raw JSON through
`ApiClient.call_api(..., _preload_content=False)`, so the generated `V1*` models and `*Api`
classes are never used. Importing them anyway costs about 60 MiB of resident memory, more
than half of an idle scheduler (kopf imports `kubernetes_asyncio.client` on its own too, to
recognise model objects we never hand it), and some seconds of start-up on a cold disk.

`install()` registers the packages `kubernetes_asyncio`, `kubernetes_asyncio.client` and
`kubernetes_asyncio.client.models` as empty shells whose `__path__` is the installed one,
so the modules we do use (`client.configuration`, `client.api_client`, `client.rest`,
`client.exceptions`, the whole `config` package) load from disk unchanged. Any other name
looked up on the shells raises AttributeError (an ImportError for `from ... import`), which
kopf already treats as "kubernetes-asyncio models not installed".

Nor does loading a kubeconfig load aiohttp any more: kubernetes-asyncio's `config` package
imports `ApiClient` (whose module imports aiohttp) and its OIDC helper (which does too), and
uses neither unless asked for a client or an OIDC refresh. Both are stand-ins (`_Deferred`)
that load the real thing at their first call; `load_client` loads them outright. So
`gangsched run`'s first lists go out 0.2 s of CPU earlier (aiohttp and kubernetes-asyncio's
client), and those imports run in a worker thread while the pages arrive (gangsched.cli).

`gangsched run` and `gangsched explain` call it (gangsched.cli.main), before anything imports
kubernetes-asyncio; a process that already has the full client (tests, a REPL) keeps it. If
the installed layout ever stops matching, the shells are removed and the ordinary import is
used: a larger process, never a broken one, wherever the full client is installed. The image
does not ship it (hack/image-prune.txt deletes the generated modules; tests/unit/
test_image_prune.py keeps gangsched from needing them), so there it must install.
"""

from __future__ import annotations

import importlib
import importlib.util
import ssl
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

#: Packages a checkout's venv has only for development tools (import-linter brings `rich`)
#: and that libraries gangsched runs import whenever present: structlog's console renderer
#: imports rich and pygments, 0.1 s of every start before the first list could go out (-X
#: importtime, issue 30). The image has none of them (pyproject.toml's runtime dependencies).
DEV_ONLY = ("rich",)
_SHELLS = ("kubernetes_asyncio", "kubernetes_asyncio.client", "kubernetes_asyncio.client.models")
#: TLS contexts built while the system CAs were put off (`import_aiohttp`), until
#: `load_deferred_cas` gives them their CAs.
_WITHOUT_CAS: list[ssl.SSLContext] = []
#: The real modules the shells must expose, each as the attribute other modules import.
_NEEDED = {
    "kubernetes_asyncio.client": {
        "Configuration": "kubernetes_asyncio.client.configuration",
    },
}
#: Attributes loaded at their first call (`_Deferred`): (package, attribute) -> module. The
#: OIDC helper's module is itself a stand-in until then (`_OPENID`).
_DEFERRED = {
    ("kubernetes_asyncio.client", "ApiClient"): "kubernetes_asyncio.client.api_client",
    ("kubernetes_asyncio.config.openid", "OpenIDRequestor"): "kubernetes_asyncio.config.openid",
}
_OPENID = "kubernetes_asyncio.config.openid"


class _Deferred:
    """Stands for a class whose module imports aiohttp, until its first call (then the real
    class's instance is returned, and the real class put where the stand-in was)."""

    def __init__(self, package: str, attribute: str, module: str) -> None:
        self.package, self.attribute, self.module = package, attribute, module

    def load(self) -> Any:
        if self.module == _OPENID and isinstance(sys.modules.get(_OPENID), _Shell):
            del sys.modules[_OPENID]  # the stand-in module: import the real one
        real = getattr(importlib.import_module(self.module), self.attribute)
        for name in (self.package, self.module):
            if getattr(sys.modules.get(name), self.attribute, None) is self:
                setattr(sys.modules[name], self.attribute, real)
        return real

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


class _Shell(ModuleType):
    """A package with a real `__path__` and only the attributes set on it explicitly."""

    def __getattr__(self, name: str) -> object:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"{self.__name__}.{name} is not loaded: gangsched runs kubernetes-asyncio "
            "without its generated models and API classes (gangsched/edge/slim_client.py)"
        )


def install() -> bool:
    """Make later imports of kubernetes-asyncio slim; True if they now are."""
    if "kubernetes_asyncio" in sys.modules:
        return isinstance(sys.modules["kubernetes_asyncio"], _Shell)
    spec = importlib.util.find_spec("kubernetes_asyncio")
    if spec is None or not spec.submodule_search_locations:
        return False
    root = Path(next(iter(spec.submodule_search_locations)))
    try:
        for name in _SHELLS:
            shell = _Shell(name)
            shell.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
            shell.__package__ = name
            sys.modules[name] = shell
            parent, _, child = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], child, shell)
        for package, attributes in _NEEDED.items():
            for attribute, module in attributes.items():
                setattr(
                    sys.modules[package],
                    attribute,
                    getattr(importlib.import_module(module), attribute),
                )
        if "aiohttp" not in sys.modules:
            openid = _Shell(_OPENID)
            openid.__package__ = _OPENID.rpartition(".")[0]
            sys.modules[_OPENID] = openid
            for (package, attribute), module in _DEFERRED.items():
                setattr(sys.modules[package], attribute, _Deferred(package, attribute, module))
        else:
            load_client()
        importlib.import_module("kubernetes_asyncio.config")
    except Exception:  # any surprise means: use the ordinary, full import
        for name in [
            n
            for n in sys.modules
            if n == "kubernetes_asyncio" or n.startswith("kubernetes_asyncio.")
        ]:
            del sys.modules[name]
        return False
    return True


def load_client() -> None:
    """Load what `install` put off (aiohttp, kubernetes-asyncio's ApiClient and OIDC helper):
    `gangsched run` does it in a worker thread once its first lists are out."""
    import_aiohttp()
    for (package, attribute), module in _DEFERRED.items():
        placed = getattr(sys.modules.get(package), attribute, None)
        if isinstance(placed, _Deferred):
            placed.load()
        elif placed is None and isinstance(sys.modules.get(package), _Shell):
            setattr(
                sys.modules[package], attribute, getattr(importlib.import_module(module), attribute)
            )


def leave_out_dev_only() -> None:
    """Make DEV_ONLY unimportable in this process (an ImportError, which structlog takes as
    "not installed"), unless already loaded: a `gangsched run` from a checkout then loads
    and does what the image does."""
    for name in DEV_ONLY:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


def import_aiohttp() -> None:
    """Import aiohttp with the system CAs of its two default TLS contexts put off until
    `load_deferred_cas`.

    aiohttp builds both contexts at import and loads the system's CA bundle into each: 0.07-0.1
    s of CPU (-X importtime: 0.11 s of aiohttp.connector's own time), a tenth of the imports
    before the pod and node lists go out (issue 30). gangsched never uses those contexts: its
    client (kubernetes-asyncio's session) and kopf's each build their own from the kubeconfig's
    CA, and kubernetes-asyncio's OIDC refresh takes its own or none. Should anything use them
    before `load_deferred_cas`, a verified connection fails for want of a CA: it never goes out
    unverified. Contexts are only put off while aiohttp is imported here, and only if this
    process has not imported it yet."""
    if "aiohttp" in sys.modules:
        return
    had_own = "set_default_verify_paths" in vars(ssl.SSLContext)
    original = ssl.SSLContext.set_default_verify_paths

    def put_off(context: ssl.SSLContext) -> None:
        _WITHOUT_CAS.append(context)

    ssl.SSLContext.set_default_verify_paths = put_off  # type: ignore[method-assign,assignment]
    try:
        importlib.import_module("aiohttp")
    finally:
        if had_own:
            ssl.SSLContext.set_default_verify_paths = original  # type: ignore[method-assign]
        else:
            del ssl.SSLContext.set_default_verify_paths  # inherited from _ssl._SSLContext again


def load_deferred_cas() -> int:
    """Give the contexts `import_aiohttp` built their system CAs; how many there were."""
    loaded = 0
    while _WITHOUT_CAS:
        _WITHOUT_CAS.pop().set_default_verify_paths()
        loaded += 1
    return loaded

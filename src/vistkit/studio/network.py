"""Where the studio listens: a host and port checked before the server starts, so a typo is one sentence."""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
from urllib.parse import urlsplit

from vistkit.errors import InputError

_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?$")


def check_host(host: str) -> str:
    """``host`` if it is an IP address or a host name (what links and the server can use), else `InputError`."""
    text = host.strip()
    try:
        return str(ipaddress.ip_address(text.strip("[]")))  # [::1] -> ::1 (what a server binds)
    except ValueError:
        pass
    if not _HOST_NAME.match(text):
        raise InputError(
            f"--host {host!r} is not a host name or an IP address; use 127.0.0.1 (this machine only), 0.0.0.0 "
            "(every interface) or the machine's name"
        )
    return text


def http_url(host: str, port: int) -> str:
    """``http://HOST:PORT`` with an IPv6 address in brackets (``http://[::1]:8000``)."""
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    return f"http://{shown}:{port}"


def check_base_url(url: str) -> str:
    """The ``--base-url`` of printed links without its trailing /, if it is an http(s) URL with a host and no
    path: the server's pages name its addresses from the root of the host (``/static/...``, ``/a/TOKEN/submit``),
    so behind a proxy under a sub-path (``https://lab.example.org/studio``) they would load no style, script or
    photo, and a submission would go to an address the proxy does not pass on."""
    text = url.strip()
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment or " " in text:
        raise InputError(
            f"--base-url {url!r} is not an http(s) address to put in front of the links; e.g. "
            "http://127.0.0.1:8000 or https://study.example.org"
        )
    try:
        if parts.port == 0:  # (parts.port raises ValueError on a port out of range or not a number)
            raise ValueError
    except ValueError:
        raise InputError(f"--base-url {url!r}: its port is not a number from 1 to 65535") from None
    if parts.username is not None or parts.password is not None:  # said without them: a password is no output
        shown = f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
        raise InputError(
            f"--base-url holds a user name or password (before {parts.hostname}), which every printed link would "
            f"carry to every annotator; give the address without them (e.g. {shown})"
        )
    if parts.path.strip("/"):
        root = f"{parts.scheme}://{parts.netloc}"
        raise InputError(
            f"--base-url {url!r} has a path ({parts.path}), but the studio's pages use addresses from the root of "
            "their host, so links under a path would not work; serve the studio at the root of a host name or port "
            f"of its own and give that (e.g. {root})"
        )
    return text.rstrip("/")


def check_port(port: int) -> None:
    """Refuse a TCP port outside 1..65535 (also where links only name it: ``studio demo --no-serve``)."""
    if isinstance(port, bool) or not 1 <= int(port) <= 65535:
        raise InputError(f"--port must be from 1 to 65535 (got {port})")


def check_listen(host: str, port: int) -> str:
    """Refuse a port outside 1..65535, a host that is no address of this machine, or a port that is taken or
    needs privileges, naming the fix; the probe socket is closed again (the server binds it right after).
    Returns the host as the server should bind it."""
    check_port(port)
    host = check_host(host)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise InputError(
            f"cannot listen on {host!r}: not an address or host name of this machine ({exc}); "
            "use 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)"
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            probe.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise InputError(
                    f"port {port} on {host} is in use by another program; choose another with --port"
                ) from None
            if exc.errno in (errno.EACCES, errno.EPERM):
                raise InputError(
                    f"port {port} needs administrator rights on this machine; use a port above 1023"
                ) from None
            raise InputError(f"cannot listen on {host}:{port} ({exc.strerror or exc}); check --host") from None
    return host

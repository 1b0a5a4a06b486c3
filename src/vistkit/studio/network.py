"""Where the studio listens: a host and port checked before the server starts, so a typo is one sentence."""

from __future__ import annotations

import errno
import socket

from vistkit.errors import InputError


def check_port(port: int) -> None:
    """Refuse a TCP port outside 1..65535 (also where links only name it: ``studio demo --no-serve``)."""
    if isinstance(port, bool) or not 1 <= int(port) <= 65535:
        raise InputError(f"--port must be from 1 to 65535 (got {port})")


def check_listen(host: str, port: int) -> None:
    """Refuse a port outside 1..65535, a host that is no address of this machine, or a port that is taken or
    needs privileges, naming the fix; the probe socket is closed again (the server binds it right after)."""
    check_port(port)
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

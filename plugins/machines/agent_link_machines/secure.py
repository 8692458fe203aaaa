"""The engine connection's TLS: nats-py's client made to honour a ``tls://`` URL
(:func:`open_connection`), which the relay and ``agent-link machines release`` connect with."""

from __future__ import annotations

from typing import Any

from agent_link_machines.common import redact


class TLSNotOffered(Exception):
    """A server of a ``tls://`` URL offered no TLS (raised before any credentials were sent)."""


def _client_class() -> type:
    """nats-py's client, made to honour a ``tls://`` URL: nats-py switches to TLS only when the
    server's INFO says ``tls_required``, so against a server without TLS (or anyone on the
    path answering as one) it would send the credentials in clear. For a ``tls://`` server this
    client refuses an INFO that offers no TLS (:class:`TLSNotOffered`, before the CONNECT that
    carries the credentials) and upgrades when the server only offers it (``tls_available``),
    as nats.go's ``checkForSecure`` does; on every (re)connection. It hooks nats-py's
    ``_process_info`` (called with the first INFO before the TLS decision;
    ``tests/test_machines.py`` checks it against a server without TLS)."""
    from nats.aio.client import Client

    class TLSClient(Client):  # type: ignore[misc]
        async def _process_info(self, info: dict[str, Any], initial_connection: bool = False) -> None:
            server = self._current_server
            if initial_connection and server is not None and server.uri.scheme == "tls":
                if not (info.get("tls_required") or info.get("tls_available")):
                    raise TLSNotOffered(f"the engine at {redact(server.uri.geturl())} does not offer TLS, which its tls:// URL requires "
                                        "(nothing was sent to it; give the server a tls block, or use nats:// on a trusted network).")
                info["tls_required"] = True
            await super()._process_info(info, initial_connection)

    return TLSClient


async def open_connection(**options: Any) -> Any:
    """A connected nats-py client (``options``: those of ``nats.connect``) that honours
    ``tls://`` URLs (:func:`_client_class`).

    :raises TLSNotOffered: through ``error_cb`` and as the connect error, see :func:`_client_class`.
    """
    nc = _client_class()()
    await nc.connect(**options)
    return nc

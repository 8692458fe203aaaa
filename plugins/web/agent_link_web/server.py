"""The page's HTTP server: Starlette routes served by uvicorn, with its guards.

Guards, in the order a request meets them (:class:`Guard`):

1. **Host header**: only the names the server was reached under (``127.0.0.1:<port>``,
   ``localhost:<port>``, ``[::1]:<port>``, and the ``--bind`` address) are served; any other
   Host is refused (421), so a DNS-rebinding page in the browser cannot talk to it.
2. **Token**: a random token (32 bytes, URL-safe) printed in the URL, as Jupyter does. The
   first request with ``?token=`` sets an HttpOnly, SameSite=Strict cookie and redirects to
   the same path without the token; every later request needs that cookie (403 otherwise).
3. **CSRF**: every POST needs the page's CSRF token (a second random value embedded in its
   forms) and, when the browser sends one, an ``Origin`` of this server.
4. **Headers**: a strict Content Security Policy (no inline script or style, nothing from
   other origins, no framing), ``nosniff``, ``same-origin`` referrers, ``no-store``.

Live updates: ``/events`` is a server-sent event stream. It polls the mailbox's newest
audit event number (:meth:`~agent_link_core.mailbox.Mailbox.last_event_seq`), which every
agent-link process bumps on each committed change, and tells the page to refresh its live
sections; a tick every few seconds refreshes agents (whose liveness has no mail event).
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import logging
import os
import secrets
import signal
import socket
import threading
from contextlib import contextmanager
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode

import jinja2
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    HTMLResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from agent_link_core.app import App
from agent_link_core.errors import AgentLinkError
from agent_link_core.mailbox import Visibility
from agent_link_core.model import Caller
from agent_link_web import forms, views
from agent_link_web.panels import panels
from agent_link_web.context import page_person

log = logging.getLogger(__name__)
HERE = Path(__file__).parent
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # "no-referrer" makes browsers send Origin: null
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
POLL_S = 0.2
TICK_S = 10.0
WEB_TOOL = "agent-link-web"

ASGIApp = Callable[[MutableMapping[str, Any], Callable[[], Awaitable[Any]], Callable[[MutableMapping[str, Any]], Awaitable[None]]], Awaitable[None]]


@dataclass
class WebConfig:
    """One page server's secrets and settings.

    :param person: the person's address (``user:<name>``).
    :param port: the bound TCP port.
    :param hosts: Host header values served (``name:port``).
    :param act_for: ``AGENT_LINK_WEB_ACT_FOR`` patterns.
    :param token: the access token in the printed URL.
    :param csrf: the token every POST must carry.
    """

    person: str
    port: int
    hosts: frozenset[str]
    act_for: tuple[str, ...] = ()
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    #: where the printed link points (:func:`link_host` of the bound address)
    link_host: str = "127.0.0.1"
    #: bound to every address (``0.0.0.0``, ``::``): also served under any IP address of the
    #: port as Host (the machine's own, whichever it was reached by), never a host name
    any_ip: bool = False

    @property
    def cookie(self) -> str:
        """The cookie name; cookies ignore ports, so the port is part of it."""
        return f"agent_link_web_{self.port}"

    def url(self, host: str | None = None) -> str:
        """The URL to open (with the token)."""
        return f"http://{host or self.link_host}:{self.port}/?token={self.token}"

    def serves(self, host: str) -> bool:
        """Whether a request naming ``host`` (a Host header value, ``name:port``) is answered:
        one of :attr:`hosts`, or with :attr:`any_ip` an IP address of this port. A host name
        other than ``localhost`` never is: a DNS-rebinding page reaches the server only under one."""
        host = host.lower()
        if host in self.hosts:
            return True
        name, _, port = host.rpartition(":")
        return self.any_ip and port == str(self.port) and _ip(name.removeprefix("[").removesuffix("]")) is not None


WILDCARDS = ("0.0.0.0", "::")


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        return None


def is_loopback(bind: str) -> bool:
    """Whether ``bind`` is this machine's loopback (``localhost``, 127.0.0.0/8, ``::1``): only this machine reaches it."""
    address = _ip(bind)
    return bind.lower() == "localhost" or (address is not None and address.is_loopback)


def link_host(bind: str) -> str:
    """The host of the printed link for a server bound to ``bind``: the address itself (an IPv6
    one in brackets), loopback for a wildcard (``0.0.0.0``: 127.0.0.1, ``::``: [::1])."""
    if bind in WILDCARDS:
        return "127.0.0.1" if bind == "0.0.0.0" else "[::1]"
    return f"[{bind}]" if ":" in bind else bind


def allowed_hosts(port: int, bind: str) -> frozenset[str]:
    """Host header values a server bound to ``bind``:``port`` answers to: the loopback names
    and the bound address's own (a wildcard's addresses: :attr:`WebConfig.any_ip`)."""
    names = {"127.0.0.1", "localhost", "[::1]"}
    if bind not in WILDCARDS:
        names.add(link_host(bind).lower())
    return frozenset(f"{n}:{port}" for n in names)


class Guard:
    """ASGI middleware applying the Host, token and CSRF-origin rules and the headers."""

    def __init__(self, inner: ASGIApp, config: WebConfig) -> None:
        self.inner, self.config = inner, config

    async def __call__(self, scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}

        async def send_secured(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *SECURITY_HEADERS]
            await send(message)

        if not self.config.serves(headers.get("host", "")):
            await _plain(421, "This server answers only to the address it listens on, or by IP address when it listens on "
                              "every one; other host names are refused (foreign Host header).")(scope, receive, send_secured)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        given = query.get("token")
        if given is not None:
            if not hmac.compare_digest(given.encode(), self.config.token.encode()):
                await _plain(403, "Wrong token. Open the link agent-link web printed.")(scope, receive, send_secured)
                return
            rest = {k: v for k, v in query.items() if k != "token"}
            target = scope["path"] + ("?" + urlencode(rest) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(self.config.cookie, self.config.token, httponly=True, samesite="strict", path="/")
            await response(scope, receive, send_secured)
            return
        cookie = _cookie(headers.get("cookie", ""), self.config.cookie)
        if cookie is None or not hmac.compare_digest(cookie.encode(), self.config.token.encode()):
            await _plain(403, "This page needs its token: open the link that agent-link web printed.")(scope, receive, send_secured)
            return
        if scope["method"] not in ("GET", "HEAD"):
            origin = headers.get("origin")
            if origin is not None and not (origin.startswith("http://") and self.config.serves(origin.removeprefix("http://"))):
                await _plain(403, "Refused: the request came from another site.")(scope, receive, send_secured)
                return
        await self.inner(scope, receive, send_secured)


def _plain(status: int, text: str) -> Response:
    return Response(text + "\n", status_code=status, media_type="text/plain; charset=utf-8")


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def templates() -> jinja2.Environment:
    """The page's templates, every value escaped (autoescape on for all of them) and every
    control, format or bidi character in it shown as ``\\u{XXXX}`` (:func:`shown`)."""
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True, finalize=shown,
                             undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    env.filters["when"] = when
    env.globals["activity_words"] = views.ACTIVITIES
    return env


def shown(value: Any) -> Any:
    """A value as the page shows it: text by the rule for what agents wrote
    (:func:`agent_link_core.visible.visible`: line breaks and tabs kept, a right-to-left
    override or an escape sequence as a visible ``\\u{XXXX}``, so it cannot reorder or hide
    what a person reads); markup the templates built, and other values, unchanged."""
    if type(value) is str:
        from agent_link_core.visible import visible

        return visible(value)
    return value


def when(iso: str | None) -> str:
    """``2026-11-30T15:30:21.631Z`` as ``2026-11-30 15:30:21`` (UTC) for people."""
    if not iso:
        return ""
    return iso.replace("T", " ")[:19]


def build_web_app(app: App, config: WebConfig, closing: asyncio.Event | None = None) -> ASGIApp:
    """The guarded ASGI application serving ``app``'s mailbox to one person (a form body read
    by :func:`read_form`).

    The person reads under the one rule of every read path (:func:`views.person_view`): the
    mail they sent or received, everyone's only with ``AGENT_LINK_INSPECT_ALL``. Pages,
    sections, panels and the live stream all draw from that one view."""
    env = templates()
    visibility = views.person_view(app, config.person)

    def page(name: str, http_status: int = 200, **context: Any) -> HTMLResponse:
        html = env.get_template(name).render(person=config.person, csrf=config.csrf, everything=visibility.everything,
                                             **context)
        return HTMLResponse(html, status_code=http_status)

    def waiting_on_others() -> list[dict[str, Any]]:
        # the person's own open mail is "Waiting for you"; the rest is who waits on whom
        return [w for w in views.waiting(app, config.person) if w["to"] != config.person]

    async def overview_page(http_status: int = 200, *, error: str | None = None, notice: str | None = None, to: str = "",
                            message: str = "", anticipation: str = "") -> Response:
        """The overview, its send form filled with ``to``, ``message`` and ``anticipation``
        (a refused send shows the page again with what the person typed, never losing it)."""
        drawn = panels(app)
        return page("overview.html", http_status, panels=drawn, error=error, notice=notice, to=to, message=message,
                    anticipation=anticipation, agents_data=await views.agents(app, config.person),
                    inbox_data=views.inbox(app, config.person), waiting_data=waiting_on_others(),
                    conversations_data=views.conversations(app, config.person),
                    panel_data={p.name: await views.render_panel(app, p, visibility) for p in drawn})

    async def overview(request: Request) -> Response:
        q = request.query_params
        return await overview_page(error=q.get("error"), notice=q.get("notice"), to=q.get("to", ""))

    async def conversation_page(request: Request) -> Response:
        q = request.query_params
        return await thread_page(request.path_params["message_id"], error=q.get("error"), notice=q.get("notice"))

    async def thread_page(message_id: str, http_status: int = 200, *, error: str | None = None, notice: str | None = None,
                          answer: dict[str, str] | None = None) -> Response:
        """The conversation of ``message_id``, the answer form of ``answer["messageId"]``
        filled with ``answer["message"]`` (a refused answer keeps what the person typed)."""
        message_id = message_id.upper()
        try:
            data = views.conversation_view(app, config.person, message_id, config.act_for)
        except AgentLinkError as exc:
            return page("error.html", http_status={"not_found": 404, "permission_denied": 403}.get(exc.code, 400), error=exc.message)
        unmarked = views.mark_seen(app, config.person, data["cards"])  # why a refused answer was refused comes first
        error = " ".join(e for e in (error, unmarked) if e) or None
        data = views.conversation_view(app, config.person, message_id, config.act_for)
        others = [a for c in data["cards"] for a in (c["from"], c["to"]) if a != config.person]
        return page("conversation.html", http_status, data=data, error=error, notice=notice, answer=answer or {},
                    other=others[0] if others else "")

    async def search_page(request: Request) -> Response:
        q = request.query_params
        query = q.get("q", "").strip()
        result, error, http_status = None, None, 200
        status = q.get("status", "")
        if status and status not in views_statuses():  # refused as `agent-link search --status` refuses it
            error, http_status = (f"{status!r} is not a status a message can have: choose one of "
                                  f"{', '.join(views_statuses())}, or any status."), 400
        elif query:
            try:
                result = views.search_view(app, config.person, query, status=q.get("status"), sender=q.get("from"),
                                           recipient=q.get("to"), cursor=q.get("cursor"))
            except AgentLinkError as exc:
                error, http_status = exc.message, 400
        return page("search.html", http_status, query=query, result=result, error=error, status=q.get("status", ""),
                    sender=q.get("from", ""), recipient=q.get("to", ""), statuses=views_statuses())

    async def fragment(request: Request) -> Response:
        name = request.path_params["name"]
        if name == "agents":
            return page("_agents.html", data=await views.agents(app, config.person))
        if name == "inbox":
            return page("_inbox.html", messages=views.inbox(app, config.person))
        if name == "waiting":
            return page("_waiting.html", waiting=waiting_on_others())
        if name == "conversations":
            return page("_conversations.html", conversations=views.conversations(app, config.person))
        return _plain(404, "No such section.")

    async def panel_fragment(request: Request) -> Response:
        wanted = request.path_params["name"]
        for panel in panels(app):
            if panel.name == wanted:
                return page("_panel.html", panel=await views.render_panel(app, panel, visibility))
        return _plain(404, "No such panel.")

    async def conversation_fragment(request: Request) -> Response:
        try:
            data = views.conversation_view(app, config.person, request.path_params["message_id"].upper(), config.act_for)
        except AgentLinkError as exc:
            return _plain(404, exc.message)
        return page("_messages.html", data=data)

    async def events(request: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            # The cheap global number says something changed; the person's own one says
            # whether it is theirs to see (a change to others' mail is not announced).
            last_any = app.mailbox.last_event_seq()
            last = views.last_event_seen(app, visibility)
            yield f"event: hello\ndata: {last}\n\n"
            waited = 0.0
            while not (closing is not None and closing.is_set()) and not await request.is_disconnected():
                await asyncio.sleep(POLL_S)
                waited += POLL_S
                seq_any = app.mailbox.last_event_seq()
                seq = last
                if seq_any != last_any:
                    last_any = seq_any
                    seq = views.last_event_seen(app, visibility)
                if seq != last:
                    last = seq
                    waited = 0.0
                    yield f"event: change\ndata: {seq}\n\n"
                elif waited >= TICK_S:
                    waited = 0.0
                    yield "event: tick\ndata: 0\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"X-Accel-Buffering": "no"})

    async def message_redirect(request: Request) -> Response:
        return _back(f"/c/{request.path_params['message_id']}")

    routes = [
        Route("/", overview),
        Route("/c/{message_id:str}", conversation_page),
        Route("/m/{message_id:str}", message_redirect),
        Route("/search", search_page),
        Route("/fragment/c/{message_id:str}", conversation_fragment),
        Route("/fragment/panel/{name:str}", panel_fragment),
        Route("/fragment/{name:str}", fragment),
        Route("/events", events),
        *_form_routes(app, config, visibility, overview_page, thread_page),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Guard(Starlette(routes=routes), config)


def _back(path: str, **params: str) -> RedirectResponse:
    """A 303 redirect to ``path`` with ``params`` as its query (after a form POST)."""
    return RedirectResponse(path + ("?" + urlencode(params) if params else ""), status_code=303)


def _form_routes(app: App, config: WebConfig, visibility: Visibility, overview_page: Callable[..., Awaitable[Response]],
                 thread_page: Callable[..., Awaitable[Response]]) -> list[Route]:
    """The page's form POSTs (send, answer, act for an agent, a panel's button), each checked
    for the page's CSRF token before it runs; ``visibility`` is the person's view
    (:func:`views.person_view`); ``overview_page(status, error=, to=, message=, anticipation=)``
    draws the overview with its send form filled, ``thread_page(message_id, status, error=,
    answer=)`` a conversation with an answer form filled."""

    def posted(handler: Callable[[dict[str, str]], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
        """A form POST endpoint: ``handler`` gets the form's text fields once its CSRF token
        checks out; a wrong or missing token is refused (403) before anything runs."""
        async def endpoint(request: Request) -> Response:
            try:
                values = await read_form(request)
            except forms.FormRefused as exc:
                return _plain(exc.status, exc.message)
            if not hmac.compare_digest(values.get("csrf", "").encode(), config.csrf.encode()):
                return _plain(403, "Refused: the form's CSRF token is missing or wrong. Reload the page.")
            return await handler(values)
        return endpoint

    @contextmanager
    def as_person() -> Iterator[Caller]:
        """The page's person as the caller, also for the hooks that ask who is at the page."""
        token = page_person.set(config.person)
        try:
            yield Caller(config.person, "web-page", "user")
        finally:
            page_person.reset(token)

    @posted
    async def send(values: dict[str, str]) -> Response:
        to, body, label = values.get("to", "").strip(), values.get("message", ""), values.get("anticipation", "")
        typed = {"to": values.get("to", ""), "message": body, "anticipation": label}
        if not to:
            return await overview_page(400, error="Say whom to write to in To: an address (team:bob), a role "
                                                  "(role:reviewer) or words of a session's title.", **typed)
        unfit = forms.unfit_message(body)
        if unfit is not None:
            return await overview_page(400, error=unfit, **typed)
        try:
            with as_person() as me:
                outcome = await app.send(caller=me, to=to, body=body, anticipation=label or None, tool=WEB_TOOL)
        except AgentLinkError as exc:
            # drawn again, not redirected: what the person typed (up to the form's limit) stays in the form
            return await overview_page(400, error=exc.message, **typed)
        if outcome.address_warning is not None:  # said as the CLI and message_agent say it
            return _back(f"/c/{outcome.message['id']}", notice=outcome.address_warning["message"])
        return _back(f"/c/{outcome.message['id']}")

    @posted
    async def answer(values: dict[str, str]) -> Response:
        message_id = values.get("messageId", "")
        kind = values.get("resolution", "reply")
        if kind not in ("reply", "decline", "done"):
            return _back(f"/c/{message_id}", error="Choose reply, decline or done.")
        try:  # first the message: an answer to none is refused as such, not for its text
            visibility.require(app.mailbox.require(message_id), f"message {message_id}")
        except AgentLinkError as exc:  # no conversation of the person's to draw: said on a page that shows nothing
            return _back(f"/c/{message_id}", error=exc.message)
        unfit = forms.unfit_message(values.get("message", ""), required=kind == "reply")
        try:
            if unfit is not None:  # refused as the mailbox refuses: the conversation drawn again with the typed answer
                raise AgentLinkError("invalid_arguments", unfit)
            with as_person() as me:
                await app.reply(caller=me, message_id=message_id, resolution=kind, message=values.get("message") or None)
        except AgentLinkError as exc:
            # drawn again with the typed answer, as a refused send is
            return await thread_page(message_id, 400, error=exc.message,
                                     answer={"messageId": message_id.upper(), "message": values.get("message", "")})
        return _back(f"/c/{message_id}")

    @posted
    async def act(values: dict[str, str]) -> Response:
        message_id = values.get("messageId", "")
        kind = values.get("resolution", "")
        try:
            row = app.mailbox.require(message_id)
            visibility.require(row, f"message {row['id']}")  # acting for an agent needs seeing its mail
        except AgentLinkError as exc:
            return _back("/", error=exc.message)
        if kind not in ("decline", "done"):
            return _back(f"/c/{row['id']}", error="On an agent's behalf the page can only decline or mark done.")
        if not views.may_act_for(config.act_for, row["recipient"]):
            return _back(f"/c/{row['id']}", error=f"The owner has not allowed resolving mail of {row['recipient']} here "
                                                 "(AGENT_LINK_WEB_ACT_FOR).")
        note = (values.get("message") or "").strip()
        if (unfit := forms.unfit_message(note, required=False)) is not None:
            return _back(f"/c/{row['id']}", error=unfit)
        text = f"{'Declined' if kind == 'decline' else 'Marked done'} by {config.person} on the agent-link web page, on behalf of {row['recipient']}."
        if note:
            text += f" {note}"
        try:
            await app.reply(caller=Caller(row["recipient"], "web-page", row["recipient"].split(":", 1)[0]),
                            message_id=row["id"], resolution=kind, message=text)
        except AgentLinkError as exc:
            return _back(f"/c/{row['id']}", error=exc.message)
        return _back(f"/c/{row['id']}")

    @posted
    async def panel_action(values: dict[str, str]) -> Response:
        """A plugin panel's button (:class:`agent_link_web.panels.PanelAction`): its ``act``
        runs as the page's person; what it says, or its refusal, is shown on the overview."""
        wanted, key = values.get("panel", ""), values.get("key", "")
        found = [p for p in panels(app) if p.name == wanted and p.act is not None]
        if not found or not key or len(key) > 200:
            return _back("/", error="No such button (the section may have changed): reload the page.")
        panel = found[0]
        try:
            with as_person() as me:  # the plugin's code, through the boundary as its render is
                said = await views.call_panel(app, panel, f"{views.panel_hook(panel)} act",
                                              lambda: panel.act(app, key, me.address),  # type: ignore[misc]
                                              passing=(AgentLinkError,))
        except AgentLinkError as exc:
            return _back("/", error=exc.message)
        if said is views.FAILED or not isinstance(said, str):
            plugin = views.panel_owner(app, panel)
            if said is not views.FAILED:
                app.hooks.boundary.fault(plugin, f"{views.panel_hook(panel)} act", f"returned {type(said).__name__}; expected a sentence (str)")
            return _back("/", error=f"That button failed (plugin {plugin}); agent-link health tells why. Fix or update the "
                                    f"plugin, or turn it off with AGENT_LINK_DISABLE_PLUGINS={plugin}.")
        return _back("/", notice=said)

    return [Route("/send", send, methods=["POST"]), Route("/answer", answer, methods=["POST"]),
            Route("/act", act, methods=["POST"]), Route("/panel-action", panel_action, methods=["POST"])]


async def read_form(request: Request) -> dict[str, str]:
    """The text fields of a form POST (:mod:`agent_link_web.forms`), read up to ``MAX_FORM_BYTES``.
    :raises forms.FormRefused: too large (413), not a form (415), not UTF-8 (400)."""
    content_type = request.headers.get("content-type", "")
    kind = content_type.split(";", 1)[0].strip().lower()
    if kind not in ("application/x-www-form-urlencoded", "multipart/form-data"):
        raise forms.FormRefused(415, "Refused: the page reads forms (application/x-www-form-urlencoded or multipart/form-data).")
    raw, size = bytearray(), 0
    async for chunk in request.stream():
        size += len(chunk)
        if size <= forms.MAX_FORM_BYTES:
            raw += chunk
        elif size > forms.MAX_DRAINED_BYTES:
            break  # read (and dropped) so far only so the browser, still sending, gets the answer
    if size > forms.MAX_FORM_BYTES:
        raise forms.too_large()
    if kind == "multipart/form-data":
        return forms.parse_multipart(content_type, bytes(raw))
    return forms.parse_urlencoded(bytes(raw))


def views_statuses() -> tuple[str, ...]:
    """The statuses the search form offers."""
    from agent_link_search.index import STATUSES

    return STATUSES


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port`` (0 picks a free port).

    :raises OSError: when the address is taken or cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(64)
    sock.setblocking(False)
    return sock


#: a signal ends the process within this many seconds, whatever holds its event loop
EXIT_BUDGET_S = 3.0


def exit_on_signal(server: Any, received: list[int] | None = None) -> None:
    """On SIGINT, SIGTERM or SIGHUP: the uvicorn ``server`` shuts down as it does (its own
    handler), and the process ends within :data:`EXIT_BUDGET_S` whatever holds the event loop
    (a plugin's code that does not return): Python runs a signal handler even then, and a
    daemon timer ends the process when the clean exit does not come. Main thread only (where
    signals are received); elsewhere nothing is changed. Each signal is appended to ``received``."""
    if threading.current_thread() is not threading.main_thread():
        return
    uvicorn_handler = server.handle_exit

    def leave(signum: int, frame: Any) -> None:
        if received is not None:
            received.append(signum)
        deadline = threading.Timer(EXIT_BUDGET_S, os._exit, (128 + signum,))
        deadline.daemon = True
        deadline.start()
        if signum == signal.SIGHUP:  # not one uvicorn handles (nor restores)
            server.should_exit = True
        else:
            uvicorn_handler(signum, frame)

    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, leave)


async def serve(app: App, config: WebConfig, sock: socket.socket, started: Callable[[], None] | None = None,
                stop: asyncio.Event | None = None) -> None:
    """Serve the page on ``sock`` until ``stop`` is set (or the process is interrupted). Shutting
    down ends the open ``/events`` streams at once (within :data:`POLL_S`), so none is cancelled.

    :param started: called once the server accepts connections.
    :raises KeyboardInterrupt: when Ctrl-C (SIGINT) stopped it.
    """
    import uvicorn

    closing = asyncio.Event()
    server = uvicorn.Server(uvicorn.Config(build_web_app(app, config, closing), log_level="warning", lifespan="off",
                                           timeout_graceful_shutdown=1))
    received: list[int] = []

    async def watch() -> None:
        while not server.started:
            await asyncio.sleep(0.05)
        exit_on_signal(server, received)
        if started is not None:
            started()
        while not server.should_exit and not (stop is not None and stop.is_set()):
            await asyncio.sleep(0.05)
        server.should_exit = True
        closing.set()

    watcher = asyncio.create_task(watch())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
    if signal.SIGINT in received:  # uvicorn may raise it again itself once it has shut down
        raise KeyboardInterrupt

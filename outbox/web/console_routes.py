"""The console's pages on Starlette's router, below ``/console``.

Each route names its page's handler for GET (and HEAD) and for POST; the
handler runs in a worker thread behind the console's gate
(:meth:`outbox.web.console.Console.handle`). A path the console does not
have, or a method its page does not take, is the gate's 404 once signed in,
as a page is: no answer tells a signed-out client which pages exist. A
trailing slash names the same page (``/console/emails/``).
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route, Router
from starlette.types import Receive, Scope, Send

from outbox.web.console import CSP, PREFIX, Answer, Asked, Console, OpenPage, Page
from outbox.web.console_actions import Actions
from outbox.web.console_pages import Pages
from outbox.web.console_sign_in import SignIn
from outbox.web.http_common import SECURITY_HEADERS, TOO_LARGE, bounded_body, starlette_response


class ConsoleApp:
    """The console as an ASGI app, for the paths ``/console`` and below."""

    def __init__(self, console: Console) -> None:
        self.console = console
        pages = Pages(console)
        actions = Actions(console, pages)
        sign_in = SignIn(console)
        page, open_page = self._page, self._open
        self.router = Router(
            routes=[
                open_page("/login", get=sign_in.form, post=sign_in.sign_in),
                page("/", get=pages.overview),
                page("/logout", post=sign_in.sign_out),
                page("/emails", get=pages.emails, post=pages.email_search),
                page("/emails/{outbox_id}", get=pages.email),
                page("/emails/{outbox_id}/{action}", post=actions.on_email),
                page("/requeue", post=actions.requeue_set),
                page("/suppressions", get=pages.suppressions, post=pages.suppression_search),
                page("/suppressions/{action}", post=actions.suppression_change),
                page("/audit", get=pages.audit),
                page("/sessions/{session_id}/revoke", post=actions.revoke_session),
                page("/{path:path}"),  # no such page
            ],
            redirect_slashes=False,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Routed below the prefix, without trailing slashes: "/console/emails/" is "/emails".
        root = scope.get("root_path", "")
        below = scope["path"].removeprefix(root).removeprefix(PREFIX).rstrip("/") or "/"
        routed = {**scope, "root_path": root + PREFIX, "path": root + PREFIX + below}
        await self.router(routed, receive, send)

    def _page(self, path: str, *, get: Page | None = None, post: Page | None = None) -> Route:
        """A page behind the gate; a method it does not take is None, not found."""
        return self._route(
            path, lambda asked: self.console.handle(asked, get if asked.method == "GET" else post)
        )

    def _open(self, path: str, *, get: OpenPage, post: OpenPage) -> Route:
        """A page before the gate: signing in."""
        return self._route(
            path,
            lambda asked: self.console.handle_open(asked, get if asked.method == "GET" else post),
        )

    def _route(self, path: str, answer: Callable[[Asked], Answer]) -> Route:
        """``path`` answered by ``answer`` in a worker thread, whatever the method:
        the server routes only GET, HEAD and POST here, and a page answers a
        method it does not take itself."""

        async def endpoint(request: Request) -> Response:
            asked = await _asked(request, self.console)
            if asked is None:
                return starlette_response(TOO_LARGE, head=False)
            answered = await run_in_threadpool(answer, asked)
            return _response(answered, head=request.method == "HEAD")

        return Route(path, endpoint, methods=["GET", "HEAD", "POST"])


async def _asked(request: Request, console: Console) -> Asked | None:
    """The request as the console's handlers take it; None when its body is too large."""
    body = b""
    if request.method == "POST":
        read = await bounded_body(request)
        if read is None:
            return None
        body = read
    return Asked(
        method="GET" if request.method == "HEAD" else request.method,
        path=request.url.path.removeprefix(PREFIX) or "/",
        query=_single(parse_qs(request.url.query)),
        form=_single(parse_qs(body.decode("utf-8", "replace"))),
        cookie=request.cookies.get(console.access.cookie_name),
        client=request.client.host if request.client else None,
        headers=dict(request.headers.items()),
        params=request.path_params,
    )


def _single(parsed: dict[str, list[str]]) -> dict[str, str]:
    """One value per field (the first): no console form repeats a name."""
    return {k: v[0] for k, v in parsed.items() if v}


def _response(answer: Answer, *, head: bool) -> Response:
    headers = dict(SECURITY_HEADERS)
    headers["Content-Security-Policy"] = CSP
    if answer.location:
        headers["Location"] = answer.location
    if answer.cookie:
        headers["Set-Cookie"] = answer.cookie
    return Response(
        b"" if head else answer.body.encode("utf-8"),
        status_code=int(answer.status),
        headers=headers,
        media_type="text/html; charset=utf-8",
    )

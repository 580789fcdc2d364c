"""A small HTTP client of a server behind a TLS proxy, as production runs it:
every request carries the public Host and `X-Forwarded-Proto: https`
(DJANGO_SECURE_PROXY_SSL_HEADER), and it keeps the session's cookies, which
are HTTPS-only there."""

from __future__ import annotations

import http.client
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode


@dataclass
class Reply:
    """One response: status, headers and the whole body."""

    status: int
    headers: http.client.HTTPMessage
    body: bytes

    def text(self) -> str:
        """The body as text."""
        return self.body.decode()


@dataclass
class Http:
    """Requests to 127.0.0.1:`port` as `https://<host>/...` behind a proxy."""

    address: str
    port: int
    host: str
    cookies: dict[str, str] = field(default_factory=dict)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Reply:
        """Send one request; cookies the reply sets are kept."""
        sent = {"Host": self.host, "X-Forwarded-Proto": "https", **(headers or {})}
        if self.cookies:
            sent["Cookie"] = "; ".join(f"{k}={v}" for k, v in self.cookies.items())
        conn = http.client.HTTPConnection(self.address, self.port, timeout=10)
        try:
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            reply = Reply(response.status, response.headers, response.read())
        finally:
            conn.close()
        for cookie in reply.headers.get_all("Set-Cookie") or []:
            name, _, value = cookie.split(";")[0].partition("=")
            self.cookies[name.strip()] = value
        return reply

    def get(self, path: str, headers: dict[str, str] | None = None) -> Reply:
        """GET `path`."""
        return self.request("GET", path, headers=headers)

    def login(self, username: str, password: str) -> None:
        """Log in through the login form (its CSRF token, Origin checked)."""
        form = self.get("/login/")
        assert form.status == 200, form.status
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text())
        assert token, form.text()[:1000]
        body = urlencode(
            {
                "csrfmiddlewaretoken": token[1],
                "username": username,
                "password": password,
            }
        ).encode()
        origin = f"https://{self.host}"
        done = self.request(
            "POST",
            "/login/",
            body,
            {
                "Content-Type": "application/x-www-form-urlencoded",
                "Origin": origin,
                "Referer": f"{origin}/login/",
            },
        )
        assert done.status == 302, (done.status, done.body[:1000])
        assert "sessionid" in self.cookies

"""Headless Chromium driven through the DevTools protocol over a pipe (no extra package).

``chromium --remote-debugging-pipe`` reads protocol commands from file descriptor 3 and writes
responses and events to descriptor 4, each message a JSON text ended by a NUL byte. A
:class:`Browser` starts it with those two pipes, sends commands (to the browser, or to a page
through the session of :meth:`Browser.open`) and keeps every event it reads, so a test can ask
which network requests a page made (``Network.requestWillBeSent``) and evaluate JavaScript in
the page or in one of its frames (:meth:`Page.evaluate`).
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import subprocess
import tempfile
import time
from typing import Any


class DevToolsError(RuntimeError):
    """A protocol command failed, timed out, or the browser exited."""


class Browser:
    """A headless Chromium controlled over ``--remote-debugging-pipe``; use it as a context manager."""

    def __init__(self, executable: str, *extra: str, timeout: float = 60.0) -> None:
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next = 0
        self._buffer = b""
        self._profile = tempfile.TemporaryDirectory()
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()
        # the child's descriptors 3 and 4 must be these pipes: move them above the low numbers
        # first, so that dup2 onto 3 and 4 cannot close one of them
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_child, from_child)]
        for fd in (to_child, from_child):
            os.close(fd)

        def pipes() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        cmd = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               "--disable-dev-shm-usage", f"--user-data-dir={self._profile.name}",
               "--remote-debugging-pipe", *extra, "about:blank"]
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, preexec_fn=pipes, pass_fds=(3, 4),
                                     env={**os.environ, "HOME": self._profile.name})
        for fd in high:
            os.close(fd)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        try:
            self._send("Browser.close")
        except DevToolsError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._write)
        os.close(self._read)
        self._profile.cleanup()

    # -------------------------------------------------------------------- protocol
    def _message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError("no answer from the browser in time")
            ready, _, _ = select.select([self._read], [], [], left)
            if ready:
                chunk = os.read(self._read, 1 << 20)
                if not chunk:
                    raise DevToolsError(f"the browser exited (code {self.proc.poll()})")
                self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(raw)

    def _send(self, method: str, params: dict | None = None, session: str | None = None,
              timeout: float | None = None) -> dict[str, Any]:
        self._next += 1
        msg: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            msg["sessionId"] = session
        os.write(self._write, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            answer = self._message(deadline)
            if answer.get("id") != self._next:
                self.events.append(answer)
                continue
            if "error" in answer:
                raise DevToolsError(f"{method}: {answer['error']}")
            return answer.get("result", {})

    def wait_for(self, method: str, session: str | None = None, timeout: float | None = None
                 ) -> dict[str, Any]:
        """The first event ``method`` (of ``session``), waiting for it if it has not come yet."""
        deadline = time.monotonic() + (timeout or self.timeout)
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event["params"]
            seen = len(self.events)
            self.events.append(self._message(deadline))

    def open(self, url: str) -> "Page":
        """A new tab with the network, page and runtime domains on, navigated to ``url`` and loaded."""
        target = self._send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self._send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        for domain in ("Network", "Page", "Runtime"):
            page.send(f"{domain}.enable")
        page.send("Page.navigate", {"url": url})
        self.wait_for("Page.loadEventFired", session)
        return page


class Page:
    """One tab of a :class:`Browser` (a flat protocol session)."""

    def __init__(self, browser: Browser, session: str) -> None:
        self.browser, self.session = browser, session

    def send(self, method: str, params: dict | None = None) -> dict[str, Any]:
        return self.browser._send(method, params, self.session)

    def requests(self) -> list[str]:
        """URLs of every request the page (and its same-process frames) has made so far."""
        return [e["params"]["request"]["url"] for e in self.browser.events
                if e.get("method") == "Network.requestWillBeSent" and e.get("sessionId") == self.session]

    def frame_context(self, url_suffix: str) -> int:
        """The id of the main-world JavaScript context of the frame whose URL ends with ``url_suffix``."""
        def frames(tree: dict) -> list[dict]:
            return [tree["frame"]] + [f for child in tree.get("childFrames", []) for f in frames(child)]

        found = [f for f in frames(self.send("Page.getFrameTree")["frameTree"])
                 if f["url"].endswith(url_suffix)]
        if len(found) != 1:
            raise DevToolsError(f"{len(found)} frames end with {url_suffix!r}")
        for event in self.browser.events:
            ctx = event.get("params", {}).get("context", {})
            aux = ctx.get("auxData", {})
            if (event.get("method") == "Runtime.executionContextCreated"
                    and event.get("sessionId") == self.session
                    and aux.get("frameId") == found[0]["id"] and aux.get("isDefault")):
                return ctx["id"]
        raise DevToolsError(f"no JavaScript context for the frame {found[0]['url']}")

    def evaluate(self, expression: str, context: int | None = None, timeout: float | None = None) -> Any:
        """The value of ``expression`` (awaited if it is a promise), in the page or in ``context``."""
        params: dict[str, Any] = {"expression": expression, "awaitPromise": True,
                                  "returnByValue": True}
        if context is not None:
            params["contextId"] = context
        result = self.browser._send("Runtime.evaluate", params, self.session, timeout)
        if "exceptionDetails" in result:
            raise DevToolsError(f"JavaScript raised: {result['exceptionDetails']}")
        return result["result"].get("value")

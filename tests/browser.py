"""Drive headless Chromium (Debian's ``chromium`` package) over the DevTools protocol, and run a
``megasolve serve`` app on an ephemeral localhost port, for the web tests and the screenshots in
``docs/web/``.

Regenerate the screenshots (look at every one before committing)::

    python tests/browser.py docs/web
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, Iterator

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


@contextlib.contextmanager
def running_server(config=None) -> Iterator[str]:
    """A uvicorn server for ``create_app(config)`` on 127.0.0.1 and a free port; yields its base URL and
    stops it (and its worker processes) on exit."""
    import uvicorn

    from megasolve.web.app import create_app

    server = uvicorn.Server(uvicorn.Config(create_app(config), host="127.0.0.1", port=0, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


class Browser:
    """One headless Chromium page, driven over the DevTools protocol (websocket-client)."""

    def __init__(self, executable: str, width: int = 1280, height: int = 900) -> None:
        import websocket

        self.profile = tempfile.mkdtemp(prefix="megasolve-chromium-")
        # --remote-debugging-port=0: Chromium picks a free port and writes it, with the browser target's
        # path, to DevToolsActivePort in the profile folder (content/browser/devtools/devtools_http_handler.cc);
        # /json/list then names each page's WebSocket (the DevTools protocol's HTTP endpoints).
        args = [executable, "--headless", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio",
                "--remote-debugging-port=0", f"--user-data-dir={self.profile}", f"--window-size={width},{height}",
                "--hide-scrollbars", "about:blank"]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to start its sandbox as root (CI runs as root)
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                        start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not port_file.exists() or len(port_file.read_text().splitlines()) < 2:
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port = int(port_file.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            page = next(t for t in json.load(answer) if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60, suppress_origin=True)
        self._next_id = 0
        self.call("Page.enable")
        self.call("Runtime.enable")
        self.console_errors: list[str] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self._next_id += 1
        self.ws.send(json.dumps({"id": self._next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("method") == "Runtime.exceptionThrown":
                self.console_errors.append(json.dumps(message["params"]["exceptionDetails"])[:500])
            if message.get("method") == "Runtime.consoleAPICalled" and message["params"]["type"] == "error":
                self.console_errors.append(json.dumps(message["params"]["args"])[:500])
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def js(self, expression: str) -> Any:
        """Evaluate ``expression`` in the page (promises awaited) and return its JSON value."""
        result = self.call("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails'].get('exception', {})}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout_s: float = 60.0) -> Any:
        """Poll until ``expression`` is truthy in the page (an element counts: it is tested with Boolean())."""
        deadline = time.monotonic() + timeout_s
        while True:
            value = self.js(f"Boolean({expression})")
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout_s:g} s for {expression}")
            time.sleep(0.1)

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && location.href !== 'about:blank'")

    def screenshot(self, path: str | Path) -> None:
        """The whole page as a PNG."""
        import base64

        height = int(self.js("Math.ceil(document.documentElement.scrollHeight)"))
        width = int(self.js("document.documentElement.clientWidth"))
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        try:
            shot = self.call("Page.captureScreenshot", format="png")
        finally:
            self.call("Emulation.clearDeviceMetricsOverride")
        Path(path).write_bytes(base64.b64decode(shot["data"]))
        _shrink_png(Path(path))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.ws.close()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def _shrink_png(path: Path) -> None:
    """Re-save as a 256-colour PNG (a flat page needs no more; about 4x smaller) where Pillow is installed."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(path) as image:
        small = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def fill(browser: Browser, form: str, values: dict[str, Any]) -> None:
    """Type ``values`` into the form's fields (checkboxes take booleans) as a user would."""
    browser.js(f"""(() => {{
      const form = document.querySelector({json.dumps(form)});
      for (const [name, value] of Object.entries({json.dumps(values)})) {{
        const input = form.elements[name];
        if (input.type === 'checkbox') input.checked = value; else input.value = value;
        input.dispatchEvent(new Event('input', {{bubbles: true}}));
        input.dispatchEvent(new Event('change', {{bubbles: true}}));
      }}
    }})()""")



def submit_malformed_upload(browser: Browser, base: str) -> None:
    """Paste a truncated config.json on the plan page, submit, and wait for the error next to the field."""
    browser.goto(f"{base}/?view=plan")
    browser.wait_for("document.querySelector('#form-solve')")
    fill(browser, "#form-solve", {"model": "", "model_text": '{"model_type": "llama", "hidden_size": 4096,',
                                  "gpus": "8", "gpu": "h100"})
    browser.js("document.querySelector('#submit').click()")
    browser.wait_for("document.querySelector('#err-model_text').textContent")

def screenshots(folder: str) -> None:
    """Every page of the site, solved for real, as PNGs in ``folder``."""
    from urllib.parse import urlencode

    out = Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    executable = find_chromium()
    if executable is None:
        sys.exit("chromium is not installed (apt-get install chromium)")
    with running_server() as base:
        browser = Browser(executable, width=1280, height=900)
        try:
            plan = {"model": "llama-3.1-70b", "gpus": 64, "gpu": "h100", "seq_len": 8192, "top_k": 5}
            browser.goto(f"{base}/?view=plan&{urlencode(plan)}")
            browser.wait_for("document.querySelectorAll('#ranked tbody tr').length > 0")
            browser.screenshot(out / "plan.png")
            browser.js("document.querySelector('#ranked a.details').click()")
            browser.wait_for("document.querySelector('pre.launch-megatron')")
            browser.screenshot(out / "layout.png")
            browser.goto(f"{base}/?view=plan&{urlencode(plan)}")
            browser.wait_for("document.querySelectorAll('#ranked tbody tr').length > 1")
            browser.js("const pins = document.querySelectorAll('.pin'); pins[0].click(); pins[pins.length - 1].click()")
            browser.js("document.querySelector('#compare-link').click()")
            browser.wait_for("document.querySelectorAll('.compare .memory-chart').length === 2")
            browser.screenshot(out / "compare.png")
            sweep = {"model": "llama-3.1-70b", "gpu": "h100,b200", "gpus": "32..512", "tokens": "1e12",
                     "gpu_hour_price": "2.5"}
            browser.goto(f"{base}/?view=whatif&{urlencode(sweep)}")
            browser.wait_for("document.querySelectorAll('#charts svg').length >= 4", timeout_s=300)
            browser.screenshot(out / "whatif.png")
            tight = {"model": "llama-3.1-405b", "gpus": 8, "gpu": "a100-80g"}
            browser.goto(f"{base}/?view=plan&{urlencode(tight)}")
            browser.wait_for("document.querySelector('#infeasible')")
            browser.screenshot(out / "infeasible.png")
            submit_malformed_upload(browser, base)
            browser.screenshot(out / "bad-upload.png")
        finally:
            browser.close()


if __name__ == "__main__":
    screenshots(sys.argv[1] if len(sys.argv) > 1 else "docs/web")

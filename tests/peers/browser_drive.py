"""Drive a real headless Chromium through chromedriver (Selenium), one JSON step per line.

Used by fleetgate's dashboard browser test and benchmark: the Rust side changes the fleet,
this side looks at the page. Reads one JSON object per line on stdin and answers one per
line on stdout:

  {"op": "open", "url": U}                      load a page (waits for the load event)
  {"op": "eval", "js": "return ..."}            run a script, answer its value
  {"op": "wait", "js": "return ...", "timeout": S}
                                                poll every 20 ms until the value is truthy (a page
                                                still navigating counts as falsy);
                                                answer it and the seconds it took (or ok: false)
  {"op": "screenshot", "path": P}               write a PNG of the viewport
  {"op": "viewport", "width": W, "height": H}   resize the viewport (a phone: 390 x 844)
  {"op": "color_scheme", "value": "dark"|"light"}  emulate prefers-color-scheme
  {"op": "requests"}                            every request the browser has made so far, as
                                                {"url", "document"} (the document that made it), from
                                                its DevTools network log: documents, assets, event
                                                streams, fetches, favicons, its own chrome:// pages
  {"op": "quit"}

Every answer is {"ok": true, ...} or {"ok": false, "error": ...}. The browser is Debian's
/usr/bin/chromium with its /usr/bin/chromedriver (never a downloaded one), on a fresh
profile, with every background service off: this closed network refuses those connections.
"""

import json
import os
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM = os.environ.get("FLEETGATE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("FLEETGATE_CHROMEDRIVER", "/usr/bin/chromedriver")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
]


def start(profile_dir):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile_dir}")
    # The DevTools network log: every request the browser makes, whatever started it.
    options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
    # An explicit driver path: Selenium Manager (which would download one) never runs.
    return webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)


REQUESTED = []


def requested(driver):
    """Drain the performance log into REQUESTED; answer every request made so far."""
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            params = message["params"]
            REQUESTED.append({"url": params["request"]["url"], "document": params.get("documentURL", "")})
    return REQUESTED


def step(driver, req):
    op = req["op"]
    if op == "open":
        started = time.monotonic()
        driver.get(req["url"])
        return {"seconds": time.monotonic() - started}
    if op == "eval":
        return {"value": driver.execute_script(req["js"])}
    if op == "wait":
        started = time.monotonic()
        deadline = started + float(req.get("timeout", 10))
        while True:
            try:
                value = driver.execute_script(req["js"])
            except Exception:  # noqa: BLE001 - a page between two navigations answers nothing yet
                value = None
            if value:
                return {"value": value, "seconds": time.monotonic() - started}
            if time.monotonic() > deadline:
                return {"ok": False, "error": f"timed out after {req.get('timeout', 10)} s", "value": value}
            time.sleep(0.02)
    if op == "screenshot":
        os.makedirs(os.path.dirname(req["path"]) or ".", exist_ok=True)
        if not driver.save_screenshot(req["path"]):
            return {"ok": False, "error": "the screenshot was not written"}
        return {"path": req["path"]}
    if op == "viewport":
        driver.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": req["width"], "height": req["height"], "deviceScaleFactor": 1, "mobile": req.get("mobile", True)},
        )
        return {}
    if op == "color_scheme":
        features = [{"name": "prefers-color-scheme", "value": req["value"]}]
        driver.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": features})
        return {}
    if op == "requests":
        return {"urls": requested(driver)}
    return {"ok": False, "error": f"unknown op {op!r}"}


def main():
    with tempfile.TemporaryDirectory(prefix="fleetgate-chromium-") as profile_dir:
        try:
            driver = start(profile_dir)
        except Exception as e:  # noqa: BLE001 - any start failure is reported, then we exit
            print(json.dumps({"ok": False, "error": f"cannot start Chromium: {e}"}), flush=True)
            return 1
        print(json.dumps({"ok": True, "browser": driver.capabilities.get("browserVersion")}), flush=True)
        try:
            for line in sys.stdin:
                if not line.strip():
                    continue
                req = json.loads(line)
                if req.get("op") == "quit":
                    break
                try:
                    answer = {"ok": True, **step(driver, req)}
                except Exception as e:  # noqa: BLE001 - the caller decides what a failure means
                    answer = {"ok": False, "error": f"{type(e).__name__}: {e}"}
                print(json.dumps(answer), flush=True)
        finally:
            driver.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main())

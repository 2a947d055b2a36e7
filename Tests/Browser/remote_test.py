#!/usr/bin/env python3
"""Drives the PartyCast remote page in headless Chromium, as a person on a phone would.

Loads the page, waits until it is live (WebSocket connected, a title shows), presses pause, moves a
listener's volume slider, checks both through the JSON API, checks the layout a phone shows (times on
one line, disabled buttons that look it, rows that say they can be tapped, durations clear of artists,
the library by title, a favicon, nothing in the console), and saves a screenshot.

A private party's page goes through a relay here that records every byte between the browser and
the control port: the page proves the key (SPAKE2) for a token, a wrong key first, and the key's
bytes must appear nowhere in that traffic.

Environment:
  PARTYCAST_REMOTE_URL         the remote's base URL, e.g. http://127.0.0.1:7361/ (required)
  PARTYCAST_SCREENSHOT         where to save the PNG (default: ./partycast-remote.png)
  PARTYCAST_KEY                a private party's key (typed into the page's key form; the remote must be on 127.0.0.1)
  PARTYCAST_EXPECT_LISTENERS   wait until at least this many listeners show (default 1; 0 skips the slider)
  PARTYCAST_EXPECT_TITLE       wait until the title contains this text
  PARTYCAST_WINDOW             WIDTHxHEIGHT of the window (default 360x740, a small phone)
  PARTYCAST_EXPECT_LIBRARY     JSON {path suffix: title}: wait until the library's row of each file shows that title
  PARTYCAST_EXPECT_END         1 to wait, after the rest, until the party ends (the caller stops it when the script
                               says "remote page: waiting for the party to end" on stderr): every control disabled
  PARTYCAST_RESUME             1 to press resume at the end, leaving the party playing (default 1)
  PARTYCAST_IDENTIFY           1 to press the first listener's Identify button (default: not; it plays a chime)
  PARTYCAST_TIMEOUT            seconds to wait for each step (default 20)
  CHROMEDRIVER                 the driver (default: chromedriver on PATH, else /usr/bin/chromedriver)
Exit status 0 when every step passed; 1 with the failed step on stderr.
"""
import base64
import json
import os
import shutil
import sys
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as EC
from selenium.webdriver.support.ui import WebDriverWait

from relay import Relay

DIRECT = os.environ["PARTYCAST_REMOTE_URL"].rstrip("/") + "/"
SHOT = os.environ.get("PARTYCAST_SCREENSHOT", "partycast-remote.png")
KEY = os.environ.get("PARTYCAST_KEY") or None
LISTENERS = int(os.environ.get("PARTYCAST_EXPECT_LISTENERS", "1"))
TITLE = os.environ.get("PARTYCAST_EXPECT_TITLE")
WIDTH, HEIGHT = (int(n) for n in os.environ.get("PARTYCAST_WINDOW", "360x740").split("x"))
LIBRARY = json.loads(os.environ.get("PARTYCAST_EXPECT_LIBRARY", "{}"))
EXPECT_END = os.environ.get("PARTYCAST_EXPECT_END") == "1"
RESUME = os.environ.get("PARTYCAST_RESUME", "1") == "1"
IDENTIFY = os.environ.get("PARTYCAST_IDENTIFY") == "1"
TIMEOUT = float(os.environ.get("PARTYCAST_TIMEOUT", "20"))


PAGE = None  # the driver, whose page holds a private party's session token


def status():
    """The party as the API tells it, for checking what the page did (straight to the party, with the
    page's own token on a private one)."""
    request = urllib.request.Request(DIRECT + "api/status")
    if KEY:
        request.add_header("Authorization", "Bearer " + PAGE.execute_script("return token"))
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def check_key_never_sent(relay):
    """The key in any form a page could send it (as typed, base64, URL-encoded) is in no stream; the
    handshake itself is."""
    streams = relay.recorded()
    forms = {KEY.encode(), base64.b64encode(KEY.encode()), urllib.parse.quote(KEY).encode(), json.dumps(KEY).encode()}
    check(any(b"POST /api/session " in stream for stream in streams) and any(b"POST /api/session/confirm " in stream for stream in streams),
          "the page ran no key handshake through the relay")
    leaks = [form for form in forms for stream in streams if form in stream]
    check(not leaks, f"the key crossed the network as {leaks}")
    print(f"relayed {len(streams)} streams, {sum(map(len, streams))} bytes: the key in none", flush=True)


def step(name):
    print("step:", name, flush=True)


def check(condition, message):
    if not condition:
        raise AssertionError(message)


# A box's geometry and computed style, as the page lays it out. Each check reads every box it needs
# in one script: the page redraws its rows whenever the party changes, so an element found in one
# call may be gone by the next.
BOX = """function box(e) {
  const s = getComputedStyle(e), r = e.getBoundingClientRect();
  return {lines: e.getClientRects().length, whiteSpace: s.whiteSpace, cursor: s.cursor, opacity: Number(s.opacity),
          disabled: e.matches(':disabled'), before: getComputedStyle(e, '::before').content, text: e.textContent,
          left: r.left, right: r.right, top: r.top, bottom: r.bottom};
}
"""


def check_times(driver):
    """The elapsed time and the duration ("--:--" for a live source) stay on one line each."""
    boxes = driver.execute_script(BOX + "return ['elapsed', 'duration'].map(id => [id, box(document.getElementById(id))]);")
    for name, b in boxes:
        check(b["whiteSpace"] == "nowrap" and b["lines"] == 1, f"#{name} {b['text']!r} is laid out on {b['lines']} lines ({b['whiteSpace']})")


def check_queue(driver):
    """Rows say they can be tapped; the first's ↑ and the last's ↓ look disabled; durations keep clear of artists."""
    seen = driver.execute_script(BOX + """return {
      enabled: box(document.getElementById('next')),
      rows: [...document.querySelectorAll('#queue li')].map(r => ({
        play: box(r.querySelector('.play')), artist: box(r.querySelector('.artist')), duration: box(r.querySelector('.duration')),
        up: box(r.querySelector('.up')), down: box(r.querySelector('.down'))}))};""")
    rows, enabled = seen["rows"], seen["enabled"]
    check(rows, "no queue rows")
    for row in rows:
        play, artist, duration = row["play"], row["artist"], row["duration"]
        check(play["cursor"] == "pointer" and "▶" in play["before"], f"row {play['text']!r}: cursor {play['cursor']}, before {play['before']}")
        if artist["text"] and duration["text"]:
            apart = artist["right"] <= duration["left"] or duration["bottom"] <= artist["top"] or artist["bottom"] <= duration["top"]
            check(apart, f"row {play['text']!r}: the duration {duration} overlaps the artist {artist}")
    for b in (rows[0]["up"], rows[-1]["down"]):
        check(b["disabled"] and b["opacity"] <= 0.5 * enabled["opacity"] and b["cursor"] == "not-allowed",
              f"a disabled {b['text']} looks enabled: opacity {b['opacity']} (enabled: {enabled['opacity']}), cursor {b['cursor']}")


def check_library(driver, wait):
    """Each file by its title (its file name without tags), its path as the tooltip."""
    driver.find_element(By.CSS_SELECTOR, "#library-panel summary").click()

    # Read in one go: loadLibrary() replaces the rows when its answer comes.
    rows_now = """return [...document.querySelectorAll('#library li')].map(r => [r.dataset.path, r.querySelector('.title').textContent, r.title]);"""

    def shown(d):
        d.execute_script("loadLibrary()")  # the broadcaster reads the tags in the background
        rows = d.execute_script(rows_now)
        return rows if rows and all(any(path.endswith(suffix) and title == wanted for path, title, _ in rows)
                                    for suffix, wanted in LIBRARY.items()) else None
    rows = wait.until(shown)
    for path, _, tooltip in rows:
        check(tooltip == path, f"the library row of {path} has the tooltip {tooltip!r}")
    print("library:", [(path, title) for path, title, _ in rows], flush=True)
    driver.find_element(By.CSS_SELECTOR, "#library-panel summary").click()


def check_favicon(driver):
    href = driver.find_element(By.CSS_SELECTOR, "link[rel=icon]").get_attribute("href")
    with urllib.request.urlopen(href, timeout=10) as response:
        check(response.status == 200 and response.headers["Content-Type"].startswith("image/"), f"{href}: {response.status} {response.headers['Content-Type']}")
    # A private party's first answer, 401, is how the page learns to ask for the key: not an error.
    errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE" and "status of 401" not in entry["message"]]
    check(not errors, f"the console has errors: {errors}")


def main():
    options = webdriver.ChromeOptions()
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver_path = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver") or "/usr/bin/chromedriver"
    global PAGE
    driver = PAGE = webdriver.Chrome(service=Service(driver_path), options=options)
    wait = WebDriverWait(driver, TIMEOUT)
    try:
        relay = Relay((urllib.parse.urlsplit(DIRECT).hostname, urllib.parse.urlsplit(DIRECT).port), timeout=TIMEOUT) if KEY else None
        base = f"http://127.0.0.1:{relay.port}/" if relay else DIRECT
        step("load " + base)
        driver.get(base)
        if KEY:
            step("type a wrong key: the broadcaster's proof fails, the page asks again")
            wait.until(EC.visibility_of_element_located((By.ID, "key"))).send_keys(KEY + " wrong")
            driver.find_element(By.ID, "key-submit").click()
            wait.until(lambda d: "wrong party key" in d.find_element(By.ID, "error").text)
            check(driver.find_element(By.ID, "key-form").is_displayed(), "the key form is gone after a wrong key")
            step("type the party key")
            driver.find_element(By.ID, "key").send_keys(KEY)
            started = time.monotonic()
            driver.find_element(By.ID, "key-submit").click()
            wait.until(lambda d: d.execute_script("return token"))
            print(f"login: {(time.monotonic() - started) * 1000:.0f} ms from the click to the token", flush=True)

        step("live: the WebSocket is connected and a title shows")
        wait.until(lambda d: "online" in d.find_element(By.ID, "connection").get_attribute("class"))
        wait.until(lambda d: d.find_element(By.ID, "title").text.strip() not in ("", "Nothing playing"))
        if TITLE:
            wait.until(lambda d: TITLE in d.find_element(By.ID, "title").text)
        print("title:", driver.find_element(By.ID, "title").text, flush=True)

        step("pause")
        if not driver.find_element(By.ID, "pause").is_displayed():
            driver.find_element(By.ID, "resume").click()
            wait.until(EC.visibility_of_element_located((By.ID, "pause")))
        # CLOCK_MONOTONIC, the clock a listener's recording is timed on: the caller can find the click in it.
        # Taken when click() returns: the page's handler has run and its request is on its way; what the
        # WebDriver round trip before that costs on a loaded machine is not the party's latency.
        driver.find_element(By.ID, "pause").click()
        print("clicked pause at", time.monotonic_ns(), flush=True)
        wait.until(EC.visibility_of_element_located((By.ID, "resume")))
        wait.until(lambda _: status()["paused"])

        if LISTENERS > 0:
            step(f"at least {LISTENERS} listener(s) show")
            wait.until(lambda d: len(d.find_elements(By.CSS_SELECTOR, ".listener[data-id]")) >= LISTENERS)
            listener = driver.find_elements(By.CSS_SELECTOR, ".listener[data-id]")[0]
            listener_id = listener.get_attribute("data-id")
            slider = listener.find_element(By.CSS_SELECTOR, ".volume")
            before = int(slider.get_attribute("value"))
            key = Keys.ARROW_LEFT if before >= 10 else Keys.ARROW_RIGHT
            step(f"move listener {listener_id}'s volume slider from {before}")
            driver.execute_script("arguments[0].focus()", slider)
            slider.send_keys(key * 10)
            slider.send_keys(Keys.TAB)  # blur, so pushed snapshots may update it again
            after = int(slider.get_attribute("value"))
            if after == before:
                raise AssertionError(f"the slider did not move from {before}")
            wait.until(lambda _: next(l for l in status()["listeners"] if l["id"] == listener_id)["volume"] == after)
            wait.until(lambda d: d.find_element(By.CSS_SELECTOR, f'.listener[data-id="{listener_id}"] .volume-value').text == str(after))
            print(f"volume: {before} -> {after}", flush=True)
            if IDENTIFY:
                step(f"identify listener {listener_id}")
                revision = status()["revision"]
                listener.find_element(By.CSS_SELECTOR, ".identify").click()
                wait.until(lambda _: status()["revision"] > revision)

        step("layout at a phone's width")
        check_times(driver)
        check_queue(driver)
        check_library(driver, wait)
        check_favicon(driver)
        live = [item["id"] for item in status()["queue"] if item.get("durationSeconds") is None]
        if live:
            step(f"tap the row of item {live[0]}, a live source")
            driver.find_element(By.CSS_SELECTOR, f'#queue li[data-id="{live[0]}"] .play').click()
            wait.until(lambda _: status()["current"] == live[0])
            wait.until(lambda d: d.find_element(By.ID, "duration").text == "--:--")
            check_times(driver)

        step("screenshot " + SHOT)
        # The whole page, top to bottom: now playing, queue and every listener in one picture.
        driver.execute_script("document.activeElement.blur(); window.scrollTo(0, 0)")
        height = driver.execute_script("return document.documentElement.scrollHeight")
        driver.set_window_size(WIDTH, max(HEIGHT, height + 150))
        if not driver.save_screenshot(SHOT):
            raise AssertionError("no screenshot saved")

        if RESUME:
            step("resume")
            driver.find_element(By.ID, "resume").click()
            print("clicked resume at", time.monotonic_ns(), flush=True)
            wait.until(lambda _: not status()["paused"])
        if EXPECT_END:
            step("the party ends")
            print("remote page: waiting for the party to end", file=sys.stderr, flush=True)
            wait.until(EC.visibility_of_element_located((By.ID, "ended")))
            for control in driver.find_elements(By.CSS_SELECTOR, "main button, main input, main select"):
                check(not control.is_enabled(), f"{control.get_attribute('outerHTML')[:80]} is still enabled after the party ended")
            print("connection:", driver.find_element(By.ID, "connection").text, flush=True)
            driver.save_screenshot(SHOT.replace(".png", "-ended.png"))
        if relay:
            step("the key never crossed the network")
            check_key_never_sent(relay)
        print("remote page: every step passed", flush=True)
        return 0
    except Exception as error:  # noqa: BLE001 — any failure is reported as the step it happened in
        print(f"remote page: failed: {type(error).__name__}: {error}", file=sys.stderr, flush=True)
        try:
            driver.save_screenshot(SHOT)
            print("browser log:", driver.get_log("browser"), file=sys.stderr)
        except Exception:  # noqa: BLE001
            pass
        return 1
    finally:
        driver.quit()


if __name__ == "__main__":
    sys.exit(main())

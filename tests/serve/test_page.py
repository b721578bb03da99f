#!/usr/bin/env python3
"""serve's page in a real browser: headless Chromium driven by Selenium.

Starts the serve binary on tiny untrained checkpoints, opens /, types a sentence, presses
Play, and checks that the page got the audio the API gives for that text (same sample count,
the <audio> element's duration, (frames - 1) * hop samples for Griffin-Lim), that the
alignment picture was drawn, that an empty text shows the server's message, and that a
multi-speaker model offers its speakers. Exits 77 (ctest's skip) only when chromium or
chromedriver is missing, unless MONOFLOW_REQUIRE_BROWSER=1 (CI's .ci/run), where that fails;
scripts/test.sh installs them.

  test_page.py --serve build/bin/serve --make-checkpoints build/bin/serve_tiny_checkpoint
"""
import argparse
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
import wave

SKIP = 77
SENTENCE = "The quick brown fox jumps over the lazy dog."


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return chromium, driver


class Serve:
    """The serve binary on a free port (--port 0), its URL read from its first line."""

    def __init__(self, binary, checkpoint):
        self.process = subprocess.Popen(
            [binary, "--checkpoint", checkpoint, "--port", "0", "--device", "cpu", "--griffin-lim-iters", "4"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.process.stdout.readline()
        match = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
        if not match:
            self.process.kill()
            raise SystemExit(f"serve did not start: {line!r} {self.process.stderr.read()}")
        self.url = f"http://127.0.0.1:{match.group(1)}/"

    def get(self, path, **params):
        with urllib.request.urlopen(self.url + path + "?" + urllib.parse.urlencode(params), timeout=120) as r:
            return r.read()

    def stop(self):
        """SIGTERM: the server stops cleanly, exit code 0."""
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=60)
        return self.process.returncode, err


def open_browser(chromium, driver):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--autoplay-policy=no-user-gesture-required", "--mute-audio"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(driver), options=options)


def wait_for(browser, script, timeout=120, what=""):
    """Polls a JavaScript expression until it is truthy; its value."""
    end = time.time() + timeout
    while time.time() < end:
        value = browser.execute_script("return " + script)
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or script}")


def say(browser, text):
    from selenium.webdriver.common.by import By

    box = browser.find_element(By.ID, "text")
    box.clear()
    if text:
        box.send_keys(text)
    browser.find_element(By.ID, "play").click()
    wait_for(browser, "document.body.dataset.state === 'done' || document.body.dataset.state === 'error'",
             what="the page to finish")
    return browser.execute_script("return document.body.dataset.state")


def check(condition, message):
    if not condition:
        raise AssertionError(message)


def single_speaker_page(browser, serve):
    from selenium.webdriver.common.by import By

    browser.get(serve.url)
    wait_for(browser, "document.body.dataset.ready === '1'", what="/api/info")
    check(not browser.find_element(By.ID, "speaker-row").is_displayed(), "a single-speaker model shows a speaker choice")
    state = say(browser, SENTENCE)
    check(state == "done", f"the page says: {browser.find_element(By.ID, 'status').text}")

    # The audio the page got is the API's audio for this text.
    with wave.open(io.BytesIO(serve.get("api/tts", text=SENTENCE))) as w:
        api_samples, api_rate = w.getnframes(), w.getframerate()
    durations = json.loads(serve.get("api/durations", text=SENTENCE))
    samples = int(browser.find_element(By.ID, "samples").text)
    rate = int(browser.find_element(By.ID, "rate").text)
    frames = int(browser.find_element(By.ID, "frames").text)
    check(samples == api_samples and rate == api_rate == 22050,
          f"page: {samples} samples at {rate} Hz; API: {api_samples} at {api_rate}")
    check(frames == durations["total_frames"] and samples == (frames - 1) * durations["hop_length"],
          f"{samples} samples for {frames} frames (Griffin-Lim gives (frames - 1) * hop)")
    check(sum(durations["frames"]) == frames and len(durations["tokens"]) == int(browser.find_element(By.ID, "tokens").text),
          "the durations do not add up to the frames")
    # The <audio> element decoded it: its duration is the wav's.
    duration = wait_for(browser, "(() => { const a = document.getElementById('audio');"
                                 " return a.readyState >= 1 && isFinite(a.duration) ? a.duration : 0; })()",
                        what="the audio element's metadata")
    check(abs(duration - samples / rate) < 0.005, f"<audio> plays {duration} s, the wav holds {samples / rate} s")
    href = browser.find_element(By.ID, "download").get_attribute("href")
    check(href.startswith("blob:") and browser.find_element(By.ID, "download").is_displayed(), "no download link")

    # The alignment picture: many colours over the mel, and the tokens' labels under it.
    colours = browser.execute_script("""
        const c = document.getElementById('alignment');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const seen = new Set();
        for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
        return seen.size;""")
    check(colours > 50, f"the alignment canvas holds {colours} colours: not drawn")

    # An empty text: the server's 400 message on the page.
    state = say(browser, "")
    status = browser.find_element(By.ID, "status").text
    check(state == "error" and "text: empty" in status, f"empty text: state {state}, status {status!r}")
    return samples, rate, duration, colours


def multi_speaker_page(browser, serve):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(serve.url)
    wait_for(browser, "document.body.dataset.ready === '1'", what="/api/info")
    check(browser.find_element(By.ID, "speaker-row").is_displayed(), "a multi-speaker model hides its speakers")
    select = Select(browser.find_element(By.ID, "speaker"))
    check([o.text for o in select.options] == ["0", "1", "2"], "three speakers expected")
    select.select_by_value("2")
    check(say(browser, "hello world.") == "done", browser.find_element(By.ID, "status").text)
    with wave.open(io.BytesIO(serve.get("api/tts", text="hello world.", speaker_id=2))) as w:
        check(int(browser.find_element(By.ID, "samples").text) == w.getnframes(), "speaker 2's audio differs")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", required=True)
    parser.add_argument("--make-checkpoints", required=True)
    args = parser.parse_args()
    chromium, driver = find_browser()
    if not chromium or not driver:
        # CI (.ci/run) sets MONOFLOW_REQUIRE_BROWSER=1: there a missing browser is a failure, so
        # that a failed install cannot turn the test into a silent skip.
        required = os.environ.get("MONOFLOW_REQUIRE_BROWSER") == "1"
        print(("FAILED" if required else "SKIPPED") + ": the browser test needs chromium and chromedriver "
              "(apt-get install chromium chromium-driver python3-selenium; scripts/test.sh installs them)")
        return 1 if required else SKIP
    try:
        import selenium  # noqa: F401
    except ImportError:
        print(f"FAILED: {sys.executable} cannot import selenium; apt-get install python3-selenium")
        return 1

    with tempfile.TemporaryDirectory(prefix="monoflow_serve_page_") as tmp:
        subprocess.run([args.make_checkpoints, tmp], check=True)
        start = time.time()
        browser = open_browser(chromium, driver)
        try:
            single = Serve(args.serve, os.path.join(tmp, "single.pt"))
            try:
                samples, rate, duration, colours = single_speaker_page(browser, single)
            finally:
                code, err = single.stop()
            check(code == 0 and "stopped by signal 15" in err, f"serve on SIGTERM: exit {code}, {err!r}")
            multi = Serve(args.serve, os.path.join(tmp, "multi.pt"))
            try:
                multi_speaker_page(browser, multi)
            finally:
                multi.stop()
        finally:
            browser.quit()
    print(f"ok: the page played {samples} samples at {rate} Hz ({duration:.3f} s), drew {colours} colours; "
          f"{time.time() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

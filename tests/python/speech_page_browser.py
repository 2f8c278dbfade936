"""Drives `voxlane serve`'s web page in headless Chromium (selenium +
Debian's chromium-driver): types a text, picks a voice, presses Play and
watches the <audio> element play the streamed answer. Prints one JSON line
for tests/tests/serve/speech.rs.
"""
import argparse
import json
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import Select, WebDriverWait


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--text", required=True)
    ap.add_argument("--voice", required=True)
    args = ap.parse_args()
    opts = webdriver.ChromeOptions()
    for flag in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--autoplay-policy=no-user-gesture-required",
                 # No sound card on a server: a fake sink whose clock runs in real time.
                 "--disable-audio-output"]:
        opts.add_argument(flag)
    opts.binary_location = "/usr/bin/chromium"
    driver = webdriver.Chrome(options=opts, service=Service("/usr/bin/chromedriver"))
    try:
        driver.get(args.url)
        wait = WebDriverWait(driver, 60)
        wait.until(lambda d: len(Select(d.find_element(By.ID, "voice")).options) > 0)
        voices = [o.get_attribute("value") for o in Select(driver.find_element(By.ID, "voice")).options]
        box = driver.find_element(By.ID, "text")
        box.clear()
        box.send_keys(args.text)
        Select(driver.find_element(By.ID, "voice")).select_by_value(args.voice)
        clicked = time.time()
        driver.find_element(By.ID, "play").click()
        WebDriverWait(driver, 120).until(
            lambda d: d.execute_script("return document.body.dataset.playing === '1'"))
        first_play_s = time.time() - clicked
        player = driver.find_element(By.ID, "player")
        # While it plays, the word being heard is highlighted: sample it
        # (word, its times, the audio clock) until everything has arrived.
        seen = []

        def sample(seconds: float) -> None:
            end = time.time() + seconds
            while time.time() < end:
                cur = driver.execute_script(
                    "const s = document.querySelector('#words span.current');"
                    "return s ? [s.textContent, Number(s.dataset.start), Number(s.dataset.end),"
                    " arguments[0].currentTime] : null", player)
                if cur:
                    seen.append(cur)
                time.sleep(0.05)
                if driver.execute_script("return document.body.dataset.done === '1'"):
                    return

        sample(120)
        WebDriverWait(driver, 120).until(
            lambda d: d.execute_script("return document.body.dataset.done === '1'"))
        # Playback may wait for later sentences on a slow machine: measure
        # the clock once everything has arrived.
        t0 = driver.execute_script("return arguments[0].currentTime", player)
        end = time.time() + 1.0
        while time.time() < end:
            cur = driver.execute_script(
                "const s = document.querySelector('#words span.current');"
                "return s ? [s.textContent, Number(s.dataset.start), Number(s.dataset.end),"
                " arguments[0].currentTime] : null", player)
            if cur:
                seen.append(cur)
            time.sleep(0.05)
        t1 = driver.execute_script("return arguments[0].currentTime", player)
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script("return arguments[0].ended", player))
        report = {
            "voices": voices,
            "first_play_s": first_play_s,
            "advanced_s": t1 - t0,
            "ended": driver.execute_script("return arguments[0].ended", player),
            "final_time_s": driver.execute_script("return arguments[0].currentTime", player),
            "paused": driver.execute_script("return arguments[0].paused", player),
            "received": int(driver.execute_script("return document.body.dataset.received")),
            "duration_s": driver.execute_script("return arguments[0].duration", player),
            "mse": driver.execute_script(
                "return 'MediaSource' in window && MediaSource.isTypeSupported('audio/mpeg')"),
            "status": driver.find_element(By.ID, "status").text,
            "buffered": driver.execute_script(
                "const b = arguments[0].buffered; return Array.from({length: b.length}, (_, i) => [b.start(i), b.end(i)])",
                player),
            "ready_state": driver.execute_script("return arguments[0].readyState", player),
            "words": [s.text for s in driver.find_elements(By.CSS_SELECTOR, "#words span")],
            "highlighted": int(driver.execute_script("return document.body.dataset.highlighted || '0'")),
            "seen": seen,
        }
        print(json.dumps(report))
    finally:
        driver.quit()


if __name__ == "__main__":
    main()

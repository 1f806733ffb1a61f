"""The page at ``/`` in a real headless browser (Debian's chromium through chromedriver, Selenium).

It types two sentences, waits for the translations in the DOM, hovers a target word and checks
the heatmap: one cell per source piece, the p_t centre and the ±D window of local-p attention.
``NMT_SCREENSHOT=docs/serve_page.png`` keeps the screenshot (the README's picture).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    if os.environ.get("NMT_REQUIRE_BROWSER") == "1":  # set by `make test` where it installs them (root, apt-get)
        pytest.fail("chromium and chromedriver are missing: apt-get install chromium chromium-driver", pytrace=False)
    pytest.skip("needs chromium and chromedriver (apt-get install chromium chromium-driver)", allow_module_level=True)

webdriver = pytest.importorskip("selenium.webdriver")


@pytest.fixture(scope="module")
def browser():
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must not look for drivers on the network
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1100,1000",
                "--lang=en-US", "--no-proxy-server"):
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def test_page_translates_and_shows_attention(server, http, browser, tmp_path):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    lines = ["图书馆在学校里边。", "老师，您好！"]
    _, expected = http.post(server + "/translate", {"text": lines, "attention": True})
    browser.get(server + "/")
    WebDriverWait(browser, 30).until(lambda d: d.find_elements(By.CSS_SELECTOR, "#model option"))
    browser.find_element(By.ID, "beam").clear()
    browser.find_element(By.ID, "beam").send_keys("2")
    browser.find_element(By.ID, "src").send_keys("\n".join(lines))
    browser.find_element(By.ID, "go").click()
    WebDriverWait(browser, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#out .line")) == 2)
    rows = browser.find_elements(By.CSS_SELECTOR, "#out .line")
    assert [r.get_attribute("data-tgt") for r in rows] == [t["tgt"] for t in expected["translations"]]
    att = expected["translations"][0]["attention"]
    words = rows[0].find_elements(By.CSS_SELECTOR, ".tok")
    assert len(words) == len(att["tgt_pieces"])
    j = min(1, len(words) - 1)
    ActionChains(browser).move_to_element(words[j]).perform()
    WebDriverWait(browser, 10).until(lambda d: "selected" in words[j].get_attribute("class"))
    cells = browser.find_elements(By.CSS_SELECTOR, "#strip-heat td.cell")
    assert len(cells) == len(att["src_pieces"]), att["src_pieces"]
    shown = [float(c.get_attribute("title")) for c in cells]
    assert shown == pytest.approx(att["weights"][j], abs=1e-3)
    assert all("rgb" in c.get_attribute("style") for c in cells)
    centre = int(att["p_t"][j] + 0.5)  # JavaScript's Math.round
    if centre < len(cells):
        assert "centre" in cells[centre].get_attribute("class")
    in_window = browser.find_elements(By.CSS_SELECTOR, "#strip-src td.in-window")
    assert 0 < len(in_window) <= 2 * att["window"] + 1
    assert "p_t" in browser.find_element(By.ID, "detail-note").text
    assert len(browser.find_elements(By.CSS_SELECTOR, "#matrix tr")) == len(att["tgt_pieces"]) + 1
    browser.execute_async_script("document.fonts.ready.then(arguments[arguments.length - 1])")
    shot = Path(os.environ.get("NMT_SCREENSHOT") or tmp_path / "page.png")
    shot.parent.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000

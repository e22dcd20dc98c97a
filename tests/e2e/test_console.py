"""The web console at /console, in a real headless Chromium (Debian's package, driven by
Selenium through Debian's chromedriver) against the API deployed on the emulator: no
mocks. The tests run in order, as one person's session: sign in, create a knowledge base
(a refusal first, shown as the API words it), upload (drag and drop, and the file picker)
until PROCESSED, search with debug scores, page through more documents than a page holds
(filters, sorts, a stale token), create an agent, browse and quick add, configure
a second tool, edit (the console's own checks, then the API's refusal, then a save), the agent's
MCP URL and client configuration, try a tool (the text the model reads), remove one, delete its knowledge base and see the warning; keyboard (Escape, focus
trapped) on the way; the phone size at the end. Screenshots of each page go to
.kb/console/ (docs/console-*.png are two of them)."""
import base64
import json
import secrets
import time
from pathlib import Path

import pytest
import requests

from tests.conftest import ROOT
from tests.e2e.conftest import Api, new_key

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SHOTS = ROOT / ".kb" / "console"
WAIT = 20  # seconds for the page to show what an API answer brings
MANUAL = """# Pump manual

## Troubleshooting

If the pump hums but does not turn, the impeller is jammed: switch it off and clear the intake.
A red blinking light means the thermal fuse tripped; let the pump cool for thirty minutes.
"""
WARRANTY = "Warranty\n\nThe pump is covered for two years. Keep the receipt; the serial number is under the lid.\n"


@pytest.fixture(scope="module")
def user(local_env):
    """A user of an organisation of its own: its lists hold what this test made (and
    other organisations' public knowledge bases)."""
    return Api(local_env["KB_API_URL"], new_key(local_env, f"console-{secrets.token_hex(4)}", "carla"))


@pytest.fixture(scope="module")
def driver():
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"{CHROMIUM} and {CHROMEDRIVER} are missing: `make test` installs Debian's chromium"
                    " and chromium-driver packages")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,800",
                "--lang=en-GB", "--disable-gpu"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # an explicit driver: Selenium Manager (which downloads drivers) is never asked
    browser = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    browser.set_window_size(1280, 800)
    SHOTS.mkdir(parents=True, exist_ok=True)
    yield browser
    browser.quit()


@pytest.fixture(scope="module")
def state():
    """What one step made for the next ones (the tests are one session, in order)."""
    return {}


def need(state, *names):
    missing = [n for n in names if n not in state]
    if missing:
        pytest.skip(f"an earlier step of the session failed (no {', '.join(missing)})")


# --- helpers -------------------------------------------------------------------------------
def wait_for(driver, condition, timeout=WAIT, what="the page"):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    def safe(d):
        try:
            return condition(d)
        except StaleElementReferenceException:
            return False
    return WebDriverWait(driver, timeout, poll_frequency=0.1).until(safe, message=f"waiting for {what}")


def css(driver, selector, timeout=WAIT):
    from selenium.webdriver.common.by import By

    return wait_for(driver, lambda d: next((e for e in d.find_elements(By.CSS_SELECTOR, selector) if e.is_displayed()),
                                           None), timeout, selector)


def button(scope, text, timeout=WAIT):
    from selenium.webdriver.common.by import By

    xpath = f".//button[normalize-space()='{text}']"
    return wait_for(scope if hasattr(scope, "get") else scope.parent,
                    lambda d: next((e for e in scope.find_elements(By.XPATH, xpath) if e.is_displayed()), None),
                    timeout, f"the button {text!r}")


def dialog(driver):
    return css(driver, "dialog[open]")


def no_dialog(driver):
    wait_for(driver, lambda d: not d.find_elements("css selector", "dialog[open]"), what="the dialog to close")


def fill(element, value):
    element.clear()
    element.send_keys(str(value))


def shot(driver, name):
    time.sleep(0.15)  # let a transition or a focus ring settle
    driver.save_screenshot(str(SHOTS / f"{name}.png"))


def active_in_dialog(driver) -> bool:
    return driver.execute_script("const d = document.querySelector('dialog[open]');"
                                 " return !!d && d.contains(document.activeElement);")


def unlabelled(driver) -> list[str]:
    """Controls on the page that a screen reader would announce without a name."""
    return driver.execute_script("""
        return [...document.querySelectorAll('input, select, textarea, button')]
          .filter((el) => !(el.labels && el.labels.length) && !el.getAttribute('aria-label')
                          && !(el.tagName === 'BUTTON' && el.textContent.trim()))
          .map((el) => el.outerHTML.slice(0, 80));""")


def api_error(answer) -> str:
    error = answer.json()["error"]
    return f"{error['code']}: {error['message']}"


def own_knowledge_bases(user) -> list[dict]:
    """This organisation's (the list also holds other organisations' public ones, which
    come without an organizationId)."""
    items, token = [], ""
    while token is not None:
        page = user.call("GET", f"/knowledge-bases?limit=100{'&nextToken=' + token if token else ''}").json()["data"]
        items += page["items"]
        token = page["nextToken"]
    return [kb for kb in items if "organizationId" in kb]


def tools_of(user, agent_id):
    return user.call("GET", f"/agents/{agent_id}/tools").json()["data"]["items"]


# --- the session -----------------------------------------------------------------------------
def test_assets_are_served_without_a_key_with_their_types(local_env):
    base = local_env["KB_API_URL"]
    page = requests.get(f"{base}/console", timeout=30)
    assert page.status_code == 200 and page.headers["Content-Type"] == "text/html; charset=utf-8"
    assert "console/app.js" in page.text and page.headers["X-Content-Type-Options"] == "nosniff"
    assert "script-src 'self'" in page.headers["Content-Security-Policy"]
    for name, kind in (("app.js", "text/javascript"), ("agents.js", "text/javascript"), ("console.css", "text/css")):
        answer = requests.get(f"{base}/console/{name}", timeout=30)
        assert answer.status_code == 200 and answer.headers["Content-Type"].startswith(kind), name
    missing = requests.get(f"{base}/console/secrets.py", timeout=30)
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "NOT_FOUND"
    slash = requests.get(f"{base}/console/", timeout=30, allow_redirects=False)
    assert slash.status_code == 308 and slash.headers["Location"] == "../console"
    # the local stack offers its demo key (never on AWS: infra/template.yaml)
    settings = requests.get(f"{base}/console/settings.json", timeout=30).json()
    assert settings["demoKey"] == local_env["KB_API_KEY"]


def test_sign_in_refuses_a_bad_key_as_the_api_words_it(driver, local_env, user):
    driver.get(local_env["KB_API_URL"] + "/console")
    key_input = css(driver, "input[name=apiKey]")
    assert css(driver, "#use-demo-key").text == "Use the local demo key"
    shot(driver, "sign-in")
    fill(key_input, "kbk_not-a-key")
    button(driver, "Use this key").click()
    refused = css(driver, "form .error")
    assert refused.text == api_error(requests.get(local_env["KB_API_URL"] + "/knowledge-bases",
                                                  headers={"Authorization": "Bearer kbk_not-a-key"}, timeout=30))
    fill(css(driver, "input[name=apiKey]"), user.key)
    button(driver, "Use this key").click()
    wait_for(driver, lambda d: d.find_element("css selector", "main h1").text == "Knowledge bases")
    assert driver.execute_script("return sessionStorage.getItem('kb-console-api-key')") == user.key


def test_create_knowledge_base_shows_the_api_refusal_then_creates(driver, user, state):
    button(driver, "New knowledge base").click()
    box = dialog(driver)
    fill(box.find_element("css selector", "input[name=name]"), "Pump manuals")
    fill(box.find_element("css selector", "input[name=chunkTokens]"), 100)
    fill(box.find_element("css selector", "input[name=chunkOverlap]"), 80)
    button(box, "Create").click()
    refused = css(driver, "dialog[open] .error")
    expected = api_error(user.call("POST", "/knowledge-bases",
                                   {"name": "x", "chunking": {"chunkTokens": 100, "chunkOverlap": 80}}))
    assert refused.text == expected and "chunkOverlap" in expected
    assert own_knowledge_bases(user) == []  # nothing was made
    fill(box.find_element("css selector", "input[name=chunkOverlap]"), 20)
    from selenium.webdriver.support.ui import Select
    Select(box.find_element("css selector", "select[name=strategy]")).select_by_value("semantic")
    shot(driver, "create-knowledge-base")
    button(box, "Create").click()
    no_dialog(driver)
    wait_for(driver, lambda d: d.find_element("css selector", "main h1").text == "Pump manuals")
    (kb,) = own_knowledge_bases(user)
    assert kb["name"] == "Pump manuals"
    assert kb["chunking"] == {"chunkTokens": 100, "chunkOverlap": 20, "strategy": "semantic"}
    assert driver.current_url.endswith(f"#/knowledge-bases/{kb['id']}")
    state["kb"] = kb


def test_uploads_by_drop_and_picker_reach_processed(driver, user, state, tmp_path):
    need(state, 'kb')
    kb = state["kb"]
    # drag and drop: a drop event carrying a File, as a browser sends it
    driver.execute_script("""
        const zone = document.querySelector('.dropzone');
        const data = new DataTransfer();
        data.items.add(new File([arguments[0]], 'pump-manual.md', {type: 'text/markdown'}));
        zone.dispatchEvent(new DragEvent('dragover', {dataTransfer: data, bubbles: true, cancelable: true}));
        zone.dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true, cancelable: true}));
    """, MANUAL)
    driver.execute_script("""
        const data = new DataTransfer();
        data.items.add(new File(['MZ'], 'setup.exe', {type: 'application/x-msdownload'}));
        document.querySelector('.dropzone').dispatchEvent(new DragEvent('drop', {dataTransfer: data, bubbles: true}));
    """)
    refused = css(driver, "li.upload .upload-state [role=alert]")
    assert refused.text == api_error(user.call("POST", f"/knowledge-bases/{kb['id']}/documents",
                                               {"path": "setup.exe", "contentType": "application/x-msdownload",
                                                "size": 2}))
    assert refused.text.startswith("UNSUPPORTED_TYPE: ")
    picked = tmp_path / "warranty.txt"
    picked.write_text(WARRANTY)
    driver.find_element("css selector", "input[type=file]").send_keys(str(picked))
    seen = set()

    def both_processed(d):
        states = {e.find_element("css selector", ".upload-name").text: e.find_element("css selector", ".upload-state").text
                  for e in d.find_elements("css selector", "li.upload")}
        seen.update(states.values())
        return [states.get("pump-manual.md"), states.get("warranty.txt")] == ["PROCESSED", "PROCESSED"]
    wait_for(driver, both_processed, timeout=120, what="both uploads to be PROCESSED")
    docs = user.call("GET", f"/knowledge-bases/{kb['id']}/documents").json()["data"]["items"]
    assert sorted((d["filename"], d["status"]) for d in docs) == [("pump-manual.md", "PROCESSED"),
                                                                  ("warranty.txt", "PROCESSED")]
    # the progress bars ran to the end, and the table shows both documents with their chunks
    bars = {e.find_element("css selector", ".upload-name").text: e.find_element("css selector", "progress")
            for e in driver.find_elements("css selector", "li.upload")}
    assert [float(bars[n].get_attribute("value")) for n in ("pump-manual.md", "warranty.txt")] == [1.0, 1.0]
    wait_for(driver, lambda d: "2" == d.find_element("css selector", ".stats div:first-child dd").text,
             what="the stats to count two documents")
    rows = driver.find_elements("css selector", "table tbody tr")
    assert len(rows) == 2 and all("PROCESSED" in r.text for r in rows)
    shot(driver, "knowledge-base")
    before = next(d for d in docs if d["filename"] == "warranty.txt")
    button(driver, "Reindex", timeout=5)  # the table is there
    driver.find_element("css selector", "button[aria-label='Reindex warranty.txt']").click()
    button(dialog(driver), "Reindex").click()
    no_dialog(driver)
    wait_for(driver, lambda d: (lambda doc: doc["updatedAt"] != before["updatedAt"] and doc["status"] == "PROCESSED")(
        next(x for x in user.call("GET", f"/knowledge-bases/{kb['id']}/documents").json()["data"]["items"]
             if x["filename"] == "warranty.txt")), timeout=60, what="the reindexed document to be PROCESSED again")


def test_search_playground_shows_the_three_scores_side_by_side(driver, user, state):
    need(state, 'kb')
    kb = state["kb"]
    fill(css(driver, "input[name=query]"), "the pump hums but does not turn")
    debug = css(driver, "input[name=debug]")
    assert not debug.is_selected()  # off by default: the answer as any client gets it, no scores
    button(driver, "Search").click()
    first = css(driver, "ol.passages li.passage")
    assert "impeller" in first.text and not first.find_elements("css selector", ".scores")
    assert not driver.find_elements("css selector", "details.debug-candidates")
    debug.click()
    button(driver, "Search").click()
    first = wait_for(driver, lambda d: (lambda e: e[0] if e else None)(
        d.find_elements("css selector", "ol.passages li.passage .scores")), what="the debug scores")
    first = first.find_element("xpath", "./ancestor::li[contains(@class, 'passage')]")
    scores = dict(zip([e.text for e in first.find_elements("css selector", ".scores dt")],
                      [e.text for e in first.find_elements("css selector", ".scores dd")]))
    answer = user.call("POST", f"/knowledge-bases/{kb['id']}/search",
                       {"query": "the pump hums but does not turn", "strategy": "hybrid", "topK": 5,
                        "debug": True}).json()["data"]
    top = answer["results"][0]
    assert top["source"] in first.text and "impeller" in first.text
    assert scores == {"Semantic": f"{top['scores']['vectorScore']:.3f}", "Keyword": f"{top['scores']['keywordScore']:.3f}",
                      "Fused": f"{top['scores']['fusedScore']:.3f}"}
    assert f"chunk {top['chunkIndex']} of {top['metadata']['totalChunks']}" in first.text
    candidates = css(driver, "details.debug-candidates")
    candidates.find_element("css selector", "summary").click()
    best = answer["metadata"]["debug"]["candidates"]["semantic"][0]["text"]
    assert " ".join(best.split()) in " ".join(candidates.text.split())  # as HTML lays the text out
    fill(css(driver, "textarea[name=filter]"), '{"between": {"key": "year", "value": 2020}}')
    button(driver, "Search").click()
    refused = css(driver, ".search-form .error")
    assert refused.text == api_error(user.call("POST", f"/knowledge-bases/{kb['id']}/search", {
        "query": "the pump hums but does not turn", "filter": {"between": {"key": "year", "value": 2020}}}))
    assert refused.text.startswith("INVALID_FILTER: filter.between: is not a filter operator")
    css(driver, "textarea[name=filter]").clear()
    button(driver, "Search").click()
    css(driver, "ol.passages li.passage")
    assert unlabelled(driver) == []
    driver.execute_script("document.querySelector('#search-heading').scrollIntoView()")
    shot(driver, "search-playground")


def doc_paths(driver) -> list[str]:
    """The path column of the documents table, top to bottom."""
    return [row.find_element("css selector", "td").text
            for row in driver.find_elements("css selector", ".doc-scroll tbody tr")]


def listed(user, path: str) -> list[dict]:
    answer = user.call("GET", path)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["items"]


def test_documents_page_by_page_with_filters(driver, user):
    """55 documents, more than a page (50): the first page in path order, Next to the rest,
    Previous back; a path prefix, a status filter and a sort, each as the API answers
    them; a token the API refuses starts again at the first page; the page stays short
    (60 documents once drew a 3,711 px page)."""
    kb = user.call("POST", "/knowledge-bases", {"name": "Paged folder"}).json()["data"]
    docs = f"/knowledge-bases/{kb['id']}/documents"
    paths = [f"guides/part-{i // 10}/note-{i:02}.md" for i in range(52)] + [f"api/ref-{i}.txt" for i in range(3)]
    try:
        for path in paths:  # small inline texts: stored by the API at once, no presigned PUT
            answer = user.call("POST", docs, {"path": path, "content": base64.b64encode(
                f"Note {path}\n\nA short text about {path.rsplit('/', 1)[-1]}.".encode()).decode()})
            assert answer.status_code == 202, answer.text
        ordered = sorted(paths)  # the path sort is byte order: api/ before guides/
        driver.execute_script("location.hash = arguments[0]", f"#/knowledge-bases/{kb['id']}")
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50], what="the first page in path order")
        pager = css(driver, "nav.pager")
        assert pager.find_element("css selector", ".pager-range").text == "1–50 of 55"
        previous, following = button(pager, "Previous"), button(pager, "Next")
        assert not previous.is_enabled() and following.is_enabled()
        # the rows are drawn again while the pipeline works through the documents: read them afresh
        wait_for(driver, lambda d: d.find_element("css selector", ".doc-scroll tbody tr td").text == "api/ref-0.txt",
                 what="api/ref-0.txt in the first row")
        box = driver.execute_script("return document.querySelector('.doc-scroll').getBoundingClientRect().height")
        page = driver.execute_script("return document.documentElement.scrollHeight")
        assert box <= 0.6 * 800 + 1 and page < 2000, (box, page)  # 50 rows scroll in a box of 60 % of the window
        shot(driver, "documents-pages")

        following.click()
        wait_for(driver, lambda d: doc_paths(d) == ordered[50:], what="the second page")
        assert pager.find_element("css selector", ".pager-range").text == "51–55 of 55"
        assert previous.is_enabled() and not following.is_enabled()
        wait_for(driver, lambda d: d.switch_to.active_element == previous,
                 what="the focus on Previous (Next went disabled: focus stays in the pager)")
        previous.click()
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50], what="the first page again")

        fill(css(driver, "input[name=prefix]"), "api/")
        wait_for(driver, lambda d: doc_paths(d) == ordered[:3], what="the documents under api/")
        assert not pager.is_displayed()  # one page: no pager
        css(driver, "input[name=prefix]").clear()
        css(driver, "input[name=prefix]").send_keys("\n")
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50], what="every document again")

        # the status filter and the updatedAt sort, once the pipeline has done with them all
        deadline = time.monotonic() + 300
        while {d["status"] for d in listed(user, f"{docs}?limit=100")} != {"PROCESSED"}:
            assert time.monotonic() < deadline, "the 55 documents were not PROCESSED within 300 s"
            time.sleep(1)
        from selenium.webdriver.support.ui import Select

        Select(css(driver, "select[name=status]")).select_by_value("FAILED")
        wait_for(driver, lambda d: "No documents match these filters." in d.find_element("css selector", ".doc-list").text,
                 what="no failed document")
        Select(css(driver, "select[name=status]")).select_by_value("PROCESSED")
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50] and "PROCESSED" in d.find_element(
            "css selector", ".doc-scroll tbody tr").text, what="the processed documents")
        assert pager.find_element("css selector", ".pager-range").text == "1–50 of 55"
        Select(css(driver, "select[name=sort]")).select_by_value("updatedAt")
        newest = [d["path"] for d in listed(user, f"{docs}?sort=updatedAt&status=PROCESSED&limit=50")]
        wait_for(driver, lambda d: doc_paths(d) == newest, what="the page sorted by update time")
        Select(css(driver, "select[name=status]")).select_by_value("")
        Select(css(driver, "select[name=sort]")).select_by_value("path")
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50], what="the path order again")

        # a token the API refuses (one from before a redeploy, say): the first page, with a word why
        driver.execute_script("""
            const original = window.fetch;
            window.fetch = (url, init) => {
              if (String(url).includes('nextToken=')) {
                window.fetch = original;
                url = String(url).replace(/nextToken=[^&]*/, 'nextToken=stale');
              }
              return original(url, init);
            };""")
        button(pager, "Next").click()
        notice = css(driver, "p.notice")
        refused = user.call("GET", f"{docs}?limit=50&sort=path&nextToken=stale")
        assert refused.status_code == 400 and refused.json()["error"]["message"] in notice.text
        assert "here is the first page" in notice.text
        wait_for(driver, lambda d: doc_paths(d) == ordered[:50], what="the first page after the refused token")
        assert pager.find_element("css selector", ".pager-range").text == "1–50 of 55"
        assert not driver.find_elements("css selector", "section .error:not([hidden])")
        assert unlabelled(driver) == []
    finally:
        user.call("DELETE", f"/knowledge-bases/{kb['id']}")


def test_agent_browse_quick_add_with_keyboard(driver, user, state):
    need(state, 'kb')
    from selenium.webdriver.common.keys import Keys

    second = user.call("POST", "/knowledge-bases", {"name": "Spare parts", "description": "Part numbers"}).json()["data"]
    state["second"] = second
    driver.find_element("css selector", "nav a[data-section=agents]").click()
    button(driver, "New agent").click()
    box = dialog(driver)
    fill(box.find_element("css selector", "input[name=name]"), "Support bot")
    button(box, "Create").click()
    no_dialog(driver)
    wait_for(driver, lambda d: d.find_element("css selector", "main h1").text == "Support bot")
    agent = user.call("GET", "/agents").json()["data"]["items"][0]
    state["agent"] = agent

    opener = button(driver, "Add Knowledge Base")  # seed 000's button, with its database icon
    assert opener.find_element("css selector", "svg[data-icon=database]").get_attribute("aria-hidden") == "true"
    opener.click()
    box = dialog(driver)
    choice = css(driver, f"li.kb-choice[data-kb-id='{state['kb']['id']}']")
    assert "2 documents" in choice.text and "processed" in choice.text
    # Escape closes the dialog, and focus goes back to the button that opened it
    box.send_keys(Keys.ESCAPE)
    no_dialog(driver)
    assert driver.switch_to.active_element == opener
    opener.click()
    dialog(driver)
    css(driver, "li.kb-choice button")
    for _ in range(12):  # past the last control and round again: focus never leaves the dialog
        driver.switch_to.active_element.send_keys(Keys.TAB)
        assert active_in_dialog(driver)
    for _ in range(5):
        driver.switch_to.active_element.send_keys(Keys.SHIFT, Keys.TAB)
        assert active_in_dialog(driver)
    quick = css(driver, f"button[data-kb-id='{state['kb']['id']}']")
    quick.click()
    wait_for(driver, lambda d: "Linked" in d.find_element(
        "css selector", f"li.kb-choice[data-kb-id='{state['kb']['id']}']").text, what="the linked badge")
    assert unlabelled(driver) == []
    shot(driver, "browse-knowledge-bases")
    (tool,) = tools_of(user, agent["id"])
    assert tool["name"] == "search_pump_manuals" and tool["config"]["knowledgeBaseId"] == state["kb"]["id"]
    # configure a tool for the second knowledge base from the same dialog; the configure
    # view goes back to the list (seed 000's onBack) and comes again
    button(css(driver, f"li.kb-choice[data-kb-id='{second['id']}']"), "Configure…").click()
    box = wait_for(driver, lambda d: next((b for b in d.find_elements("css selector", "dialog[open]")
                                           if "Configure a tool" in b.text), None), what="the configure dialog")
    button(box, "Back to the list").click()
    css(driver, f"li.kb-choice[data-kb-id='{state['kb']['id']}']")
    assert "Linked" in css(driver, f"li.kb-choice[data-kb-id='{state['kb']['id']}']").text
    button(css(driver, f"li.kb-choice[data-kb-id='{second['id']}']"), "Configure…").click()
    box = wait_for(driver, lambda d: next((b for b in d.find_elements("css selector", "dialog[open]")
                                           if "Configure a tool" in b.text), None), what="the configure dialog")
    assert box.find_element("css selector", "input[name=toolName]").get_attribute("value") == "search_spare_parts"
    fill(box.find_element("css selector", "input[name=defaultTopK]"), 3)
    button(box, "Add tool").click()
    no_dialog(driver)
    cards = wait_for(driver, lambda d: len(d.find_elements("css selector", "li.tool-card")) == 2
                     and d.find_elements("css selector", "li.tool-card"), what="two tool cards")
    first = next(c for c in cards if c.get_attribute("data-tool-id") == tool["id"])
    assert "Knowledge Base" in first.text and "Pump manuals" in first.text
    assert "topK 5 · minScore 0.3 · read-only" in first.text
    assert first.find_element("css selector", "h3 svg[data-icon=database]")  # seed 000's getToolIcon
    assert {t["name"]: t["config"]["defaultTopK"] for t in tools_of(user, agent["id"])} == {
        "search_pump_manuals": 5, "search_spare_parts": 3}
    state["tool"] = tool


def test_edit_tool_checks_then_api_refusal_then_saves(driver, user, state):
    need(state, 'agent', 'tool')
    agent, tool = state["agent"], state["tool"]
    card = css(driver, f"li.tool-card[data-tool-id='{tool['id']}']")
    button(card, "Edit").click()
    box = dialog(driver)
    top_k = box.find_element("css selector", "input[name=defaultTopK]")
    name = box.find_element("css selector", "input[name=toolName]")
    fill(top_k, 25)
    fill(name, "search pumps!")
    button(box, "Save").click()
    errors = [e.text for e in box.find_elements("css selector", ".field-error") if e.is_displayed()]
    assert errors == ["toolName: 1 to 64 letters, digits, '_' or '-' (the rule every major LLM tool API accepts)",
                      "defaultTopK: must be between 1 and 20"]
    assert driver.switch_to.active_element == name  # the first field in error has the focus
    assert name.get_attribute("aria-invalid") == "true"
    shot(driver, "edit-tool-validation")
    # the console's words are the API's own
    for body in ({"toolName": "search pumps!"}, {"defaultTopK": 25}):
        refused = user.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}", body)
        assert api_error(refused).split(": ", 1)[1] in errors
    assert tools_of(user, agent["id"])[0]["config"]["defaultTopK"] == 5  # nothing was sent
    # what only the API knows: the other tool's name is taken
    fill(top_k, 7)
    fill(name, "search_spare_parts")
    button(box, "Save").click()
    refused = css(driver, "dialog[open] .error")
    assert refused.text == api_error(user.call("PATCH", f"/agents/{agent['id']}/knowledge-base-tools/{tool['id']}",
                                               {"toolName": "search_spare_parts"}))
    assert refused.text.startswith("TOOL_NAME_TAKEN: ")
    fill(name, "pump_manuals")
    fill(box.find_element("css selector", "input[name=defaultMinScore]"), 0.45)
    button(box, "Save").click()
    no_dialog(driver)
    wait_for(driver, lambda d: "pump_manuals" in d.find_element("css selector",
                                                                f"li.tool-card[data-tool-id='{tool['id']}']").text)
    saved = next(t for t in tools_of(user, agent["id"]) if t["id"] == tool["id"])
    assert (saved["name"], saved["config"]["defaultTopK"], saved["config"]["defaultMinScore"]) == ("pump_manuals", 7, 0.45)
    assert "topK 7 · minScore 0.45" in css(driver, f"li.tool-card[data-tool-id='{tool['id']}']").text


def test_agent_page_shows_its_mcp_url_and_a_configuration_to_paste(driver, user, local_env, state):
    need(state, 'agent')
    agent = state["agent"]
    url = css(driver, "section.connect code.mcp-url").text
    assert url == f"{local_env['KB_API_URL']}/agents/{agent['id']}/mcp"
    config = css(driver, "section.connect pre.mcp-config")
    server = json.loads(config.text)["mcpServers"]["kb-support-bot"]
    assert server == {"type": "http", "url": url, "headers": {"Authorization": "Bearer YOUR_API_KEY"}}
    css(driver, "section.connect input[name=withKey]").click()
    server = json.loads(config.text)["mcpServers"]["kb-support-bot"]
    assert server["headers"]["Authorization"] == f"Bearer {user.key}"
    # What was pasted works: the endpoint answers an MCP client's first request with that header.
    hello = requests.post(url, headers={**server["headers"], "Accept": "application/json, text/event-stream"},
                          json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                              "protocolVersion": "2025-06-18", "capabilities": {},
                              "clientInfo": {"name": "console-test", "version": "1"}}}, timeout=60)
    assert hello.status_code == 200 and "serverInfo" in hello.text, hello.text[:500]
    assert unlabelled(driver) == []


def test_try_it_shows_what_the_model_reads(driver, user, state):
    need(state, 'agent', 'tool')
    tool_id = state["tool"]["id"]
    card = css(driver, f"li.tool-card[data-tool-id='{tool_id}']")
    card.find_element("css selector", "details.try summary").click()
    fill(card.find_element("css selector", "input[name=query]"), "the pump hums but does not turn")
    button(card, "Invoke").click()
    output = wait_for(driver, lambda d: (lambda e: e if e.is_displayed() and e.text else None)(
        d.find_element("css selector", f"li.tool-card[data-tool-id='{tool_id}'] pre.tool-result")))
    # The MCP text block, as the MCP endpoint renders it, not JSON with escaped newlines.
    mcp = user.call("POST", f"/agents/{state['agent']['id']}/tools/{tool_id}/invoke?format=mcp",
                    {"query": "the pump hums but does not turn"}).json()
    assert output.get_attribute("textContent") == mcp["content"][0]["text"]
    assert output.text.startswith("Pump manuals: ") and "\n[1] " in output.text and "impeller" in output.text
    # The JSON behind a toggle.
    toggle = card.find_element("css selector", "details.tool-json-toggle")
    raw = toggle.find_element("css selector", "pre.tool-json")
    assert not raw.is_displayed()
    toggle.find_element("css selector", "summary").click()
    result = json.loads(wait_for(driver, lambda d: raw.is_displayed() and raw.text, what="the JSON"))
    assert result["success"] is True and "impeller" in result["results"][0]["content"]
    assert result["results"] == mcp["structuredContent"]["results"]
    shot(driver, "agent-tools")


def test_remove_tool_after_confirmation(driver, user, state):
    need(state, 'agent')
    agent = state["agent"]
    spare = next(t for t in tools_of(user, agent["id"]) if t["name"] == "search_spare_parts")
    card = css(driver, f"li.tool-card[data-tool-id='{spare['id']}']")
    button(card, "Remove").click()
    box = dialog(driver)
    assert "Remove the tool search_spare_parts" in box.text
    button(box, "Cancel").click()  # cancelled: nothing happens
    no_dialog(driver)
    assert len(tools_of(user, agent["id"])) == 2
    button(card, "Remove").click()
    button(dialog(driver), "Remove tool").click()
    no_dialog(driver)
    wait_for(driver, lambda d: not d.find_elements("css selector", f"li.tool-card[data-tool-id='{spare['id']}']"),
             what="the removed tool's card to go")
    assert [t["name"] for t in tools_of(user, agent["id"])] == ["pump_manuals"]


def test_deleted_knowledge_base_warns_on_the_tool(driver, user, state):
    need(state, 'kb', 'agent', 'tool')
    kb, agent, tool = state["kb"], state["agent"], state["tool"]
    driver.find_element("css selector", "nav a[data-section=knowledge-bases]").click()
    css(driver, f"a[href='#/knowledge-bases/{kb['id']}']").click()
    button(driver, "Delete knowledge base").click()
    box = dialog(driver)
    assert "Pump manuals" in box.text and "2 documents" in box.text
    button(box, "Delete knowledge base").click()
    wait_for(driver, lambda d: d.find_element("css selector", "main h1").text == "Knowledge bases")
    assert user.call("GET", f"/knowledge-bases/{kb['id']}").status_code == 404
    driver.find_element("css selector", "nav a[data-section=agents]").click()
    css(driver, f"a[href='#/agents/{agent['id']}']").click()
    card = css(driver, f"li.tool-card[data-tool-id='{tool['id']}']")
    warning = card.find_element("css selector", ".warning")
    assert warning.text.startswith("Warning: Knowledge base not found. It may have been deleted.")
    assert "Knowledge Base" in card.text
    card.find_element("css selector", "details.try summary").click()
    fill(card.find_element("css selector", "input[name=query]"), "pump")
    button(card, "Invoke").click()
    output = wait_for(driver, lambda d: (lambda e: e if e.is_displayed() and e.text else None)(
        d.find_element("css selector", f"li.tool-card[data-tool-id='{tool['id']}'] pre.tool-result")))
    assert output.get_attribute("textContent") == "Knowledge base not found. It may have been deleted."
    toggle = card.find_element("css selector", "details.tool-json-toggle")
    toggle.find_element("css selector", "summary").click()
    assert json.loads(toggle.find_element("css selector", "pre.tool-json").text) == {
        "success": False, "error": True, "message": "Knowledge base not found. It may have been deleted."}
    shot(driver, "agent-deleted-knowledge-base")


def test_readable_at_phone_size(driver, user, state):
    """390x844: no sideways scrolling on the pages, tables become labelled cards."""
    need(state, 'agent')
    user.call("POST", "/knowledge-bases", {"name": "Field notes"})
    agent = user.call("GET", f"/agents/{state['agent']['id']}").json()["data"]
    function_tool = {"name": "open_ticket", "type": "function", "description": "Opens a support ticket",
                     "schema": {"type": "object", "properties": {"title": {"type": "string"}}}}
    answer = user.call("PATCH", f"/agents/{agent['id']}", {"availableTools": agent["availableTools"] + [function_tool]})
    assert answer.status_code == 200, answer.text
    try:
        driver.set_window_size(390, 844)
        for name, hash_ in (("phone-knowledge-bases", "#/knowledge-bases"), ("phone-agent", f"#/agents/{state['agent']['id']}")):
            driver.execute_script("location.hash = arguments[0]", hash_)
            css(driver, "li.tool-card, table")
            if name == "phone-knowledge-bases":
                cell = css(driver, "table.cards td")
                assert driver.execute_script("return getComputedStyle(arguments[0], '::before').content", cell) == '"Name"'
            else:
                ticket = wait_for(driver, lambda d: next((c for c in d.find_elements("css selector", "li.tool-card")
                                                          if "open_ticket" in c.text), None), what="the function tool")
                assert "Function tool" in ticket.text and not ticket.find_elements("css selector", "svg[data-icon=database]")
            assert unlabelled(driver) == []
            wide = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
            assert wide <= 0, f"{name} scrolls sideways by {wide}px"
            shot(driver, name)
    finally:
        driver.set_window_size(1280, 800)


def test_no_script_errors(driver):
    """Whatever the page logged: no exception, nothing refused by the content policy."""
    entries = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    # a 401 for the refused key and 4xx answers the tests provoked are the network's, not the script's
    errors = [e["message"] for e in entries if "Failed to load resource" not in e["message"]]
    assert errors == []


def test_screenshots_of_each_page(state):
    names = {p.stem for p in SHOTS.glob("*.png")}
    assert {"sign-in", "knowledge-base", "search-playground", "browse-knowledge-bases", "agent-tools",
            "agent-deleted-knowledge-base", "edit-tool-validation", "phone-knowledge-bases", "phone-agent"} <= names

"""The console's assets as the API serves them (chalicelib/console), without a stack."""
import pytest

from chalicelib import console
from chalicelib.errors import NotFound


def test_every_source_file_is_served_with_its_type():
    served = {name: console.asset(name)[1] for name in ("index.html", "app.js", "api.js", "ui.js", "kbs.js",
                                                         "agents.js", "console.css")}
    assert served["index.html"] == "text/html; charset=utf-8"
    assert served["console.css"] == "text/css; charset=utf-8"
    assert {served[n] for n in served if n.endswith(".js")} == {"text/javascript; charset=utf-8"}
    assert console.page() == console.asset("index.html")


@pytest.mark.parametrize("name", ["../app.py", "__init__.py", "settings.json", "", "index.htm", "..%2Fapp.py"])
def test_a_name_outside_the_listing_is_not_found(name):
    with pytest.raises(NotFound):
        console.asset(name)


def test_the_page_loads_only_its_own_files():
    page, _ = console.page()
    assert "http://" not in page and "https://" not in page  # no CDN
    policy = console.SECURITY_HEADERS["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "frame-ancestors 'none'" in policy


def test_demo_key_only_when_the_stack_names_its_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CONSOLE_DEMO_KEY_FILE", raising=False)
    assert console.settings() == {}
    env = tmp_path / "local.env"
    env.write_text("KB_API_URL=http://x\nKB_API_KEY=kbk_demo\n")
    monkeypatch.setenv("CONSOLE_DEMO_KEY_FILE", str(env))
    assert console.settings() == {"demoKey": "kbk_demo"}
    # as `make up` writes it: exported, quoted for a shell
    env.write_text("# the local stack\nexport KB_API_URL=http://x\nexport KB_API_KEY='kbk_demo'\"'\"'s'\n")
    assert console.settings() == {"demoKey": "kbk_demo's"}
    monkeypatch.setenv("CONSOLE_DEMO_KEY_FILE", str(tmp_path / "missing.env"))
    assert console.settings() == {}

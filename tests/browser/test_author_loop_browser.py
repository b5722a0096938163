"""In a real browser, the plugin author's loop: a new draft opens in the code editor filled with the live
source; a type error is marked at its line and refused; a draft is tried on a sample before it is
deployed; a run-time error in a TypeScript plugin is shown at its .ts line; Enter works after a starter;
`tools.` completes `cancel`."""

import pytest

from accounts import services
from accounts.models import Account, ApiKey
from plugins_app.models import PluginVersion
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.versions import releases as versions

from .conftest import PASSWORD, execute, log_in, set_editor, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

PROMPT = {"sessionId": "1", "agentId": "2", "sessionKind": "direct", "systemPrompt": "base"}
LIVE = """// Keeps answers short.
globalThis.middleware.systemPrompt = async (c, tools) => {
  const rule: string = "Be terse.";
  return c.systemPrompt + " " + rule;
};
"""
THROWS = """interface Limits {
  words: number;
}

const limits: Limits = { words: 3 };

globalThis.middleware.systemPrompt = async (c) => {
  const words = c.systemPrompt.split(" ");
  const last = (words as any)[limits.words].trim();
  return c.systemPrompt + last;
};
"""


@pytest.fixture
def author(page, live_server):
    account = Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    _, raw_key = ApiKey.issue(account, name="platform")
    installation = plugins.install_plugin(account, name="Terse", source=LIVE, language="typescript")
    log_in(page, live_server, "alice")
    return account, installation, raw_key


def versions_page(page, live_server, installation, query=""):
    page.goto(f"{live_server.url}/admin/plugins_app/pluginversion/installation/{installation.pk}/{query}")
    page.locator(".hub-editor").wait_for()


def test_a_new_draft_opens_in_the_editor_filled_with_the_live_source(page, live_server, author, tmp_path):
    _, installation, _ = author
    versions_page(page, live_server, installation)
    assert not page.locator("#id_source").is_visible()   # the editor stands in for the textarea
    assert page.evaluate("window.hubEditor.state.doc.toString()") == LIVE
    assert page.locator("#id_typecheck").is_checked()
    # Edit a line, then one click shows the line diff against live.
    page.locator(".cm-line").filter(has_text='const rule: string = "Be terse.";').click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")
    # Inserted whole: typed key by key, a loaded machine once saw completion's popup take the "o"
    # of "const" and put it at the end of the line. Completion has its own test.
    page.keyboard.insert_text("const extra = 1;")
    page.click("#hub-diff-live")
    diff = page.locator("#hub-live-diff")
    assert diff.locator(".hub-add").all_inner_texts() == ["+    4 |   const extra = 1;"]
    assert diff.locator(".hub-del").count() == 0
    shoot(page, tmp_path, "draft-editor")


def test_a_type_error_is_marked_at_its_line_and_refused(page, live_server, author, tmp_path):
    _, installation, _ = author
    versions_page(page, live_server, installation)
    set_editor(page, LIVE.replace("c.systemPrompt +", "c.txet +"))
    page.click("#hub-draft input[type=submit]")
    marker = page.locator(".cm-lintRange-error")
    marker.wait_for()
    line = page.locator(".cm-line").filter(has=marker)
    assert line.inner_text() == '  return c.txet + " " + rule;'
    assert marker.inner_text() == "t"                        # the t of txet: line 4, column 12
    assert "line 4, column 12" in page.locator(".errorlist").inner_text()
    assert "Property 'txet' does not exist on type 'SystemPromptContext'" in page.locator(".errorlist").inner_text()
    assert PluginVersion.objects.filter(installation=installation).count() == 1
    page.locator(".cm-gutter-lint .cm-lint-marker-error").first.hover()
    shoot(page, tmp_path, "draft-type-error")


def test_a_draft_is_tried_before_it_is_deployed(page, live_server, author, tmp_path):
    account, installation, raw_key = author
    versions.create_draft(account, installation.pk, source=LIVE.replace("Be terse.", "Be very terse."),
                          language="typescript")
    versions_page(page, live_server, installation)
    page.click("#version-2 a:has-text('Try this draft')")
    page.wait_for_selector("#tryit_form")
    assert page.locator(f"#id_version_{installation.pk}").input_value() == "2"
    sample = page.input_value("#id_ctx_systemPrompt")
    page.click("#tryit_form input[type=submit]")
    page.wait_for_selector("#tryit-result")
    assert page.locator("#tryit-after").inner_text() == sample + " Be very terse."
    assert "version 2 (tried)" in page.locator(".hub-step-version").inner_text()
    shoot(page, tmp_path, "try-draft")
    status, body = execute(live_server, raw_key, "systemPrompt", PROMPT)
    assert status == 200 and body["value"] == "base Be terse."   # live is unchanged


def test_a_run_time_error_is_shown_at_its_ts_line(page, live_server, author, tmp_path):
    account, installation, _ = author
    versions.create_draft(account, installation.pk, source=THROWS, language="typescript")
    page.goto(f"{live_server.url}/admin/plugins_app/chainentry/try/?account={account.pk}&hook=systemPrompt"
              f"&version_{installation.pk}=2")
    page.fill("#id_ctx_systemPrompt", "one two")
    page.click("#tryit_form input[type=submit]")
    page.wait_for_selector(".hub-at")
    column = THROWS.splitlines()[8].index("trim") + 1
    assert page.locator(".hub-at").inner_text().startswith(f"At line 9, column {column}")
    excerpt = page.locator(".hub-at-excerpt").inner_text()
    assert excerpt.splitlines()[0] == "9 |   const last = (words as any)[limits.words].trim();"
    assert excerpt.splitlines()[1].index("^") == len("9 | ") + column - 1
    assert f"(at line 9, column {column})" in page.locator(".hub-warning").inner_text()
    shoot(page, tmp_path, "try-error-line")
    # The position opens that version as a new draft in the editor, the cursor at the failing column.
    page.click(".hub-at-link")
    page.locator(".hub-editor").wait_for()
    assert page.evaluate("window.hubEditor.state.doc.toString()") == THROWS
    head = page.evaluate("(() => { const v = window.hubEditor, at = v.state.selection.main.head,"
                         " l = v.state.doc.lineAt(at); return [l.number, at - l.from + 1]; })()")
    assert head == [9, column]


def test_enter_after_a_starter_and_tools_completion(page, live_server, author):
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    page.select_option("#hub-starter", "todoAdded")
    page.locator(".cm-line").filter(has_text="return c.texts;").click()
    page.keyboard.press("End")
    page.keyboard.press("Enter")                               # threw a TypeError before issue 30
    page.keyboard.type("if (c.texts.length > 9) return tools.ca")
    completions = page.locator(".cm-tooltip-autocomplete li")
    completions.first.wait_for()
    assert completions.locator(".cm-completionLabel").all_inner_texts() == ["cancel"]
    assert completions.locator(".cm-completionDetail").all_inner_texts() == ["cancel(reason?: string): CancelToken"]
    page.keyboard.press("Escape")
    page.keyboard.type("ncel('too many'); cryp")
    completions.first.wait_for()
    assert "crypto" in completions.locator(".cm-completionLabel").all_inner_texts()
    assert "return tools.cancel('too many'); cryp" in page.evaluate("window.hubEditor.state.doc.toString()")

"""In a real browser: the install page's code editor (CodeMirror, bundled in static/) highlights
TypeScript, numbers lines, starts from a hook's template, and marks a compile error at its place."""

import pytest

from accounts import services
from accounts.models import Account
from plugins_app.models import Installation

from .conftest import PASSWORD, log_in, set_editor, shoot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_editor_marks_a_compile_error_at_its_line_and_column(page, live_server, tmp_path):
    Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    assert not page.locator("#id_source").is_visible()          # the editor stands in for the textarea
    page.fill("#id_name", "Todo tidy")
    page.select_option("#hub-starter", "todoAdded")
    editor = page.locator(".hub-editor")
    assert "globalThis.middleware.todoAdded = async (c: TodoAddedContext, tools: Tools) => {" in editor.inner_text()
    assert page.locator(".cm-lineNumbers .cm-gutterElement").filter(has_text="5").count() == 1
    assert editor.locator("span[class^='ͼ']").count() > 5       # highlighted tokens
    page.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text("\nconst broken = ;\n")
    line_number = page.evaluate("window.hubEditor.state.doc.toString().split('\\n').indexOf('const broken = ;') + 1")
    assert line_number > 5
    page.click("input[name=_check]")

    marker = page.locator(".cm-lintRange-error")
    marker.wait_for()
    assert marker.inner_text() == ";"                            # column 16, where the ; is
    line = page.locator(".cm-line").filter(has=marker)
    assert line.inner_text() == "const broken = ;"
    assert page.locator(".cm-gutter-lint .cm-lint-marker-error").count() == 1
    assert f"Line {line_number}, column 16" in page.locator(".hub-compile-errors").inner_text()
    head = page.evaluate("(() => { const v = window.hubEditor, at = v.state.selection.main.head,"
                         " l = v.state.doc.lineAt(at); return [l.number, at - l.from + 1]; })()")
    assert head == [line_number, 16]                                       # the cursor waits at the error
    shoot(page, tmp_path, "install-compile-error")
    assert not Installation.objects.exists()

    # Fixed in the editor, checked again, installed.
    page.locator(".cm-content").click()
    page.keyboard.press("Control+End")
    for _ in range(len("const broken = ;\n")):
        page.keyboard.press("Backspace")
    page.click("input[name=_check]")
    page.wait_for_selector(".hub-review")
    page.click("input[name=_install]")
    page.wait_for_selector(".messagelist .success")
    assert Installation.objects.get().plugin.hooks == ["todoAdded"]


def test_the_editor_completes_hooks_context_fields_and_host_members(page, live_server):
    Account.objects.create(name="acme")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    log_in(page, live_server, "alice")
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    page.locator(".cm-content").click()
    completions = page.locator(".cm-tooltip-autocomplete li")

    page.keyboard.type("globalThis.middleware.todo")
    completions.first.wait_for()
    assert completions.locator(".cm-completionLabel").all_inner_texts() == ["todoAdded"]
    # CodeMirror ignores Enter for the first 75 ms a completion list is open (its interactionDelay,
    # so a key pressed before a person sees the list is not taken as a choice); press after it.
    page.wait_for_timeout(150)
    page.keyboard.press("Enter")
    assert "globalThis.middleware.todoAdded" in page.locator(".cm-content").inner_text()
    page.keyboard.type(" = async (c) => c.te")
    completions.first.wait_for()
    labels = completions.locator(".cm-completionLabel")
    assert labels.all_inner_texts() == ["texts"]
    assert completions.locator(".cm-completionDetail").all_inner_texts() == ["string[]"]
    page.keyboard.press("Escape")
    page.keyboard.type("xts; host.work")
    completions.first.wait_for()
    assert completions.locator(".cm-completionLabel").all_inner_texts() == ["workspace"]
    assert "globalThis.middleware.todoAdded = async (c) => c.texts; host.work" in page.locator(".cm-content").inner_text()


def test_code_installed_from_the_editor_is_stored_as_the_api_stores_it(page, live_server):
    """The browser posts the editor's text with CRLF line endings: the hub keeps LF and one final newline,
    so the same code installed through the API has the same source and code hash."""
    from plugins_app.services.plugins import installations as plugin_services

    acme = Account.objects.create(name="acme")
    other = Account.objects.create(name="other")
    services.add_member("acme", "alice", "admin", password=PASSWORD)
    log_in(page, live_server, "alice")
    page.set_default_timeout(60_000)   # the check compiles the plugin on a machine other tests load too
    page.goto(f"{live_server.url}/admin/plugins_app/installation/add/")
    page.select_option("#id_account", label="acme")
    page.fill("#id_name", "Shout")
    code = "globalThis.middleware.todoAdded = async (c: TodoAddedContext) => {\n  return c.texts;\n};"
    set_editor(page, code)   # no final newline, as typed
    page.uncheck("#id_typecheck")   # line endings are the point here; a loaded machine can take 10 s to type-check
    page.click("input[name=_check]")
    page.wait_for_selector(".hub-review")
    page.click("input[name=_install]")
    page.wait_for_selector(".messagelist .success")

    from_editor = Installation.objects.get(account=acme).plugin
    assert from_editor.source == code + "\n"
    from_api = plugin_services.install_plugin(other, name="Shout", source=code.replace("\n", "\r\n") + "\r\n",
                                              language="typescript").plugin
    assert "\r" not in from_api.source
    assert from_api.code_hash == from_editor.code_hash
    assert Installation.objects.get(account=acme).versions.get().code_hash == from_editor.code_hash

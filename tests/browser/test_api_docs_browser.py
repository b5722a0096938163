"""In a real browser: /api/docs's execute operation keeps the path's hook in step with the example chosen."""

import pytest

from accounts.models import Account, ApiKey

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_choosing_a_hooks_example_sends_it_to_that_hook(page, live_server):
    # Issue 33: the path stayed on systemPrompt whatever example was chosen, and the hub answered 400.
    _, key = ApiKey.issue(Account.objects.create(name="acme"), name="docs")
    page.goto(f"{live_server.url}/api/docs/")
    page.get_by_role("button", name="Authorize").click()
    page.locator(".auth-container input").first.fill(key)
    page.locator(".auth-btn-wrapper button.authorize").click()
    page.locator(".auth-btn-wrapper button.btn-done").click()
    operation = page.locator("#operations-hooks-v1_hooks_execute_create")
    operation.locator(".opblock-summary").click()
    assert "Fail-open" in operation.locator(".opblock-description-wrapper").first.inner_text()
    operation.get_by_role("button", name="Try it out").click()
    operation.locator("select.examples-select-element").select_option("userMessageInbound")
    hook = operation.locator('tr[data-param-name="hook"] select')
    assert hook.input_value() == "userMessageInbound"
    operation.get_by_role("button", name="Execute", exact=True).click()
    operation.locator(".request-url").wait_for()
    assert "/api/v1/hooks/userMessageInbound/execute" in operation.locator(".request-url").inner_text()
    status = operation.locator(".live-responses-table tbody .response-col_status").first
    status.wait_for()
    assert status.inner_text().strip() == "200"

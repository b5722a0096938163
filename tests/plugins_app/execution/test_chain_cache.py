"""The per-process chain cache: what a load reads, and when it reads again."""

from plugins_app.models import Installation
from plugins_app.services.execution.chain_cache import ChainCache, load_chains
from plugins_app.services.plugins import installations as plugins

from ..conftest import appender


def test_loading_an_accounts_chains_is_one_query_with_everything_a_handler_needs(account, django_assert_num_queries):
    first = plugins.install_plugin(account, name="First", source=appender(" [1]"), language="javascript")
    Installation.objects.filter(pk=first.pk).update(settings={"tone": "dry"})
    plugins.install_plugin(account, name="Second", source=appender(" [2]"), language="javascript")
    with django_assert_num_queries(1):   # no field is read lazily, row by row, afterwards
        chain = load_chains(account.pk)["systemPrompt"]
        described = [(h.installation_id, h.plugin, h.config, h.version, bool(h.code), len(h.code_hash))
                     for h in chain]
    assert described == [(str(first.pk), "first", {"tone": "dry"}, 1, True, 24),
                         (str(first.pk + 1), "second", {}, 1, True, 24)]


def test_a_cached_account_is_read_again_only_after_its_change_marker_moves(account, django_assert_num_queries):
    plugins.install_plugin(account, name="First", source=appender(" [1]"), language="javascript")
    account.refresh_from_db()
    cache = ChainCache()
    cache.handlers(account, "systemPrompt")
    with django_assert_num_queries(0):
        assert len(cache.handlers(account, "systemPrompt")) == 1
    plugins.install_plugin(account, name="Second", source=appender(" [2]"), language="javascript")
    account.refresh_from_db()
    with django_assert_num_queries(1):
        assert len(cache.handlers(account, "systemPrompt")) == 2

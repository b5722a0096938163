"""API key use is noted by the request and written later, in batches, off the request."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.key_use import KeyUseRecorder
from accounts.models import Account, ApiKey

from .test_authentication import _get

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.accounts.test_authentication")]


def test_a_request_notes_its_keys_use_without_writing_and_the_flush_writes_it(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600   # no flush until asked
    from accounts.key_use import recorder
    recorder.flush()   # what other tests' requests left noted
    api_key, raw = ApiKey.issue(account)
    with CaptureQueriesContext(connection) as queries:
        assert _get(f"Bearer {raw}").status_code == 200
    assert not [q for q in queries.captured_queries if q["sql"].startswith("UPDATE")]
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at is None
    assert recorder.flush() == 1
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at is not None


def test_a_flush_writes_the_latest_use_noted_of_each_key(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    recorder = KeyUseRecorder()
    keys = [ApiKey.issue(Account.objects.create(name=f"key-use-{i}"))[0] for i in range(3)]
    start = timezone.now()
    for i, key in enumerate(keys):
        recorder.note(key, now=start)
        recorder.note(key, now=start + timedelta(seconds=i + 1))   # the later note wins
    with CaptureQueriesContext(connection) as queries:
        assert recorder.flush() == 3
    writes = [q["sql"] for q in queries.captured_queries if "UPDATE" in q["sql"]]
    assert len(writes) == 1 and writes[0].startswith("3 times: UPDATE")   # one statement for the batch
    for i, key in enumerate(keys):
        assert ApiKey.objects.get(pk=key.pk).last_used_at == start + timedelta(seconds=i + 1)
    assert recorder.flush() == 0


def test_a_late_flush_does_not_write_over_a_more_recent_use(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    recorder = KeyUseRecorder()
    api_key, _ = ApiKey.issue(account)
    now = timezone.now()
    recorder.note(api_key, now=now)
    ApiKey.write_uses([(api_key.pk, now + timedelta(seconds=30))])   # another process wrote a later use meanwhile
    recorder.flush()
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == now + timedelta(seconds=30)


def test_a_key_used_within_the_minute_is_not_noted_again(account, settings):
    settings.HUB_METERING_FLUSH_SECONDS = 3600
    recorder = KeyUseRecorder()
    api_key, _ = ApiKey.issue(account)
    api_key.last_used_at = timezone.now()
    recorder.note(api_key)
    assert recorder.flush() == 0


def test_a_key_use_is_written_at_most_once_a_minute(account):
    recorder = KeyUseRecorder()   # the tests' settings write each note at once
    api_key, _ = ApiKey.issue(account)
    start = timezone.now()

    recorder.note(api_key, now=start)
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == start

    recorder.note(api_key, now=start + timedelta(seconds=30))
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == start

    later = start + timedelta(seconds=61)
    recorder.note(api_key, now=later)
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == later


def test_a_use_noted_from_a_stale_copy_does_not_write_over_a_recent_use(account):
    recorder = KeyUseRecorder()
    api_key, _ = ApiKey.issue(account)
    stale_copy = ApiKey.objects.get(pk=api_key.pk)
    now = timezone.now()
    recorder.note(api_key, now=now)

    recorder.note(stale_copy, now=now + timedelta(seconds=5))
    assert ApiKey.objects.get(pk=api_key.pk).last_used_at == now

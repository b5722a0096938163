"""SQLite as the default database: two connections that read, then write, must both succeed."""

import threading
import time

import pytest
from django.db import connection, connections, transaction

from accounts.models import Account

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.skipif(connection.vendor != "sqlite", reason="SQLite's locking only")
def test_a_transaction_that_reads_then_writes_is_not_refused_by_a_concurrent_writer():
    # In WAL mode a deferred transaction that read before another connection committed cannot
    # upgrade to a write ("database is locked", at once, whatever the timeout). The metering
    # thread writing while a request reorders a chain hit exactly this.
    account = Account.objects.create(name="locks")
    read_done, errors = threading.Event(), []

    def reader_then_writer():
        try:
            with transaction.atomic():
                Account.objects.get(pk=account.pk)
                read_done.set()
                time.sleep(0.3)   # the other connection writes meanwhile
                Account.objects.filter(pk=account.pk).update(name="first")
        except Exception as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(exc)
        finally:
            read_done.set()
            connections.close_all()

    def writer():
        try:
            read_done.wait(5)
            Account.objects.filter(pk=account.pk).update(hooks_version=7)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=reader_then_writer), threading.Thread(target=writer)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    account.refresh_from_db()
    assert (account.name, account.hooks_version) == ("first", 7)

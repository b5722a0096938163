"""Chain positions unique per account and hook (issue 40, item 5): existing chains are renumbered
0..n-1 in their order (position, id) first, which also removes the duplicates concurrent installs made."""

from django.db import migrations, models


def renumber(apps, schema_editor):
    ChainEntry = apps.get_model("plugins_app", "ChainEntry")
    chains = ChainEntry.objects.values_list("account_id", "hook").distinct()
    for account_id, hook in set(chains):
        entries = list(ChainEntry.objects.filter(account_id=account_id, hook=hook).order_by("position", "id"))
        moving = [(position, e) for position, e in enumerate(entries) if e.position != position]
        if not moving:
            continue
        past_end = 1 + max(e.position for e in entries)   # no unique constraint yet, but one order of writes
        for offset, (_, entry) in enumerate(moving):
            entry.position = past_end + offset
        ChainEntry.objects.bulk_update([e for _, e in moving], ["position"])
        for position, entry in moving:
            entry.position = position
        ChainEntry.objects.bulk_update([e for _, e in moving], ["position"])


class Migration(migrations.Migration):

    dependencies = [
        ('plugins_app', '0010_secrets'),
    ]

    operations = [
        migrations.RunPython(renumber, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name='chainentry',
            constraint=models.UniqueConstraint(fields=('account', 'hook', 'position'), name='one_entry_per_position'),
        ),
    ]

"""The chain pages (one per hook per account, reordered by drag and drop) and the try-it page."""

from __future__ import annotations

import json

from adminsortable2.admin import SortableAdminMixin
from django import forms
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, HttpResponseBadRequest, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html, format_html_join

from plugins_app.admin.plugins.forms import TryItForm
from plugins_app.admin.scoping import AccountScopedAdmin, editable_accounts
from plugins_app.admin.versions.diff import as_text, diff_html
from plugins_app.errors import HubError, InvalidInput, NotFound
from plugins_app.models import ChainEntry, Installation, PluginVersion
from plugins_app.runtime.matching import words
from plugins_app.runtime.tables.hooks import HOOK_NAMES, HOOKS
from plugins_app.services.execution import explain, quarantine, tryit
from plugins_app.services.plugins import admin_ops


class _RequiredChoiceFilter(admin.SimpleListFilter):
    """A filter without "All": the chain page always shows exactly one account's one hook."""

    parameter_name: str

    def choices(self, changelist):
        for value, title in self.lookup_choices:
            yield {"selected": self.value() == str(value), "display": title,
                   "query_string": changelist.get_query_string({self.parameter_name: value})}

    def queryset(self, request, queryset):
        value = self.value()
        return queryset.filter(**{self.parameter_name: value}) if value else queryset.none()


class AccountFilter(_RequiredChoiceFilter):
    title = "account"
    parameter_name = "account"

    def lookups(self, request, model_admin):
        return [(a.pk, a.name) for a in editable_accounts(request)]


class HookFilter(_RequiredChoiceFilter):
    title = "hook"
    parameter_name = "hook"

    def lookups(self, request, model_admin):
        counts: dict[str, int] = {}
        account = request.GET.get("account")
        if account and account.isdigit():
            for hook in ChainEntry.objects.filter(account_id=int(account)).values_list("hook", flat=True):
                counts[hook] = counts.get(hook, 0) + 1
        return [(name, f"{name} ({counts[name]})" if name in counts else name) for name in HOOK_NAMES]


PLAIN = "text/plain; charset=utf-8"   # the drag's answers are read by script, never rendered as HTML

# What the chain page says of each installation's part in the chain (a quarantined one is never "enabled").
STATE_WORDS = {"enabled": "enabled", "disabled": "disabled (skipped, keeps its place)",
               "shadow": "in shadow (runs after the chain on a copy; never applied)",
               "slow lane": "enabled, in the slow lane"}


@admin.register(ChainEntry)
class ChainEntryAdmin(SortableAdminMixin, AccountScopedAdmin):
    """Entries are created by installing and removed by uninstalling; here they are only moved."""

    auditor_visible = False
    list_display = ["place", "plugin_name", "move", "kind", "state", "runs_when", "granted"]
    list_filter = [AccountFilter, HookFilter]
    list_select_related = ["installation__plugin", "account"]
    list_per_page = 1000   # the drag-and-drop page must hold the whole chain
    readonly_fields = ["account", "hook", "installation", "position"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._reorder_.__func__.short_description = "Move"

    @property
    def media(self):
        # No actions on this page: sortable2's patched actions script would look for the missing
        # select-all box and throw on every load. chain.js numbers the rows and confirms each drop.
        media = super().media
        media_js, media_css = media._js, media._css  # type: ignore[attr-defined]  # Media's merged lists: private, so django-stubs leave them out
        js = [j for j in media_js if "actions" not in str(j)] + ["hub_admin/chain.js"]
        return forms.Media(css=media_css, js=js)

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [path("try/", self.admin_site.admin_view(self.try_view), name="{}_{}_try".format(*info)),
                *super().get_urls()]

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def get_actions(self, request):
        # sortable2's move-to-page actions reorder across the whole table; one page holds a chain.
        return {}

    def get_list_display_links(self, request, list_display):
        return None

    def changelist_view(self, request, extra_context=None):
        accounts = editable_accounts(request)
        account_param, hook = request.GET.get("account", ""), request.GET.get("hook", "")
        account = accounts.filter(pk=int(account_param)).first() if account_param.isdigit() else None
        if account is None or hook not in HOOKS:
            return self._redirect_to_a_chain(request, accounts, account, hook)
        spec = HOOKS[hook]
        extra_context = {
            "title": f"{hook} chain of {account}",
            "spec": spec,
            "try_url": f"{reverse('admin:plugins_app_chainentry_try')}?account={account.pk}&hook={hook}",
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    def _redirect_to_a_chain(self, request, accounts, account, hook):
        account = account or accounts.first()
        if account is None:
            raise PermissionDenied
        if hook not in HOOKS:
            used = set(ChainEntry.objects.filter(account=account).values_list("hook", flat=True))
            hook = next((name for name in HOOK_NAMES if name in used), HOOK_NAMES[0])
        changelist = reverse("admin:plugins_app_chainentry_changelist")
        return HttpResponseRedirect(f"{changelist}?account={account.pk}&hook={hook}")

    def update_order(self, request):
        """sortable2 posts {"updatedItems": [[entry id, position], ...]} after a drag; the service
        applies it under a lock, renumbers, and marks the account changed for the next execute."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not self.has_change_permission(request):
            raise PermissionDenied
        try:
            items = json.loads(request.body)["updatedItems"]
            positions = {int(pk): int(position) for pk, position in items}
        except (ValueError, KeyError, TypeError):
            return HttpResponseBadRequest("expected {\"updatedItems\": [[id, position], ...]}", content_type=PLAIN)
        entries = list(self.get_queryset(request).filter(pk__in=positions).select_related("account"))
        chains_hit = {(e.account_id, e.hook) for e in entries}
        if len(entries) != len(positions) or len(chains_hit) != 1:
            return HttpResponseBadRequest("the moved entries must all be in one chain you can see", content_type=PLAIN)
        if not self.has_change_permission(request, entries[0]):
            raise PermissionDenied
        try:
            admin_ops.apply_positions(entries[0].account, entries[0].hook, positions)
        except HubError as exc:
            return HttpResponseBadRequest(str(exc.detail), content_type=PLAIN)
        return HttpResponse(f"Updated {len(positions)} items", content_type=PLAIN)

    @admin.display(description="#")
    def place(self, obj):
        return format_html('<span class="hub-place">{}</span>', obj.position + 1)

    @admin.display(description="move")
    def move(self, obj):
        """The keyboard's way to reorder (drag is the mouse's): chain.js moves the row and saves the whole
        order through the same update view, service and row lock as a drop."""
        name = obj.installation.plugin.name
        return format_html('<span class="hub-move-buttons"><button type="button" class="button hub-move" data-move="-1" '
                           'aria-label="Move {} up">↑ Up</button> <button type="button" class="button hub-move" '
                           'data-move="1" aria-label="Move {} down">↓ Down</button></span>', name, name)

    @admin.display(description="plugin")
    def plugin_name(self, obj):
        url = reverse("admin:plugins_app_installation_change", args=[obj.installation_id])
        return format_html('<a href="{}" class="hub-plugin-name">{}</a>', url, obj.installation.plugin.name)

    @admin.display(description="kind")
    def kind(self, obj):
        return "official" if obj.installation.plugin.is_official else "custom"

    @admin.display(description="state")
    def state(self, obj):
        installation = obj.installation
        state = quarantine.run_state(installation)
        if state == "quarantined":
            until = timezone.localtime(installation.quarantined_until)
            return format_html('<span class="hub-state-quarantined" title="{}">quarantined until {} '
                               '(skipped, keeps its place)</span>', installation.quarantine_reason,
                               date_format(until, "DATETIME_FORMAT"))
        return STATE_WORDS[state]

    @admin.display(description="runs when")
    def runs_when(self, obj):
        matcher = (obj.installation.plugin.matchers or {}).get(obj.hook)
        if not matcher:
            return "on every call"
        return format_html('<code class="hub-matcher">{}</code>', words.matcher(matcher))

    @admin.display(description="granted")
    def granted(self, obj):
        granted = obj.installation.granted_permissions
        return format_html_join(" ", '<code class="hub-tag">{}</code>', ((p,) for p in granted)) or "—"

    # --- try it -------------------------------------------------------------------------------

    def try_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        source = request.POST if request.method == "POST" else request.GET
        hook = source.get("hook") if source.get("hook") in HOOKS else HOOK_NAMES[0]
        initial = {"hook": hook}
        if request.GET.get("account", "").isdigit():
            initial["account"] = int(request.GET["account"])
        # "Try this draft" on the Versions page links here with version_<installation id>=<n>.
        initial.update({k: v for k, v in request.GET.items() if k.startswith("version_") and v.isdigit()})
        form = TryItForm(request.POST or None, initial=initial, request=request, hook=hook)
        run, explained = None, None
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                context = tryit.parse_context(data["context"]) if form.uses_json() else form.context_value()
                # Explain runs nothing, so it is shown beside every run (and alone with "Explain only").
                explained = explain.explain(data["account"], data["hook"], context)
                if "explain_only" not in request.POST:
                    run = tryit.try_chain(data["account"], data["hook"], context, form.chosen_versions())
            except InvalidInput as exc:
                form.add_context_error(exc)
            except NotFound as exc:   # a version deleted meanwhile
                form.add_error(None, str(exc.detail))
        names = _installation_names(run)
        context = {
            **self.admin_site.each_context(request),
            "title": "Try a chain",
            "opts": self.opts,
            "form": form,
            "run": run,
            "explained": explained,
            "explained_runs": sum(1 for step in explained if step.runs) if explained is not None else 0,
            "spec": HOOKS[run.hook] if run else None,
            "steps": [_step_view(step, names, run.versions) for step in run.steps] if run else [],
            "cancelled_by_name": names.get(_cancelling_installation(run)) if run else None,
            "show_total": run is not None and sum(1 for step in run.steps if step.trace.changed) > 1,
            "total": diff_html(run.before, run.after) if run else "",
            "after_text": as_text(run.after) if run else "",
            "chain_url": self._chain_url(form),
        }
        return TemplateResponse(request, "admin/plugins_app/chainentry/tryit.html", context)

    @staticmethod
    def _chain_url(form):
        account, hook = form["account"].value(), form["hook"].value()
        if not account or hook not in HOOKS:
            return None
        return f"{reverse('admin:plugins_app_chainentry_changelist')}?account={account}&hook={hook}"


def _installation_names(run) -> dict:
    if run is None:
        return {}
    ids = [step.trace.installation_id for step in run.steps]
    return {str(pk): name for pk, name in Installation.objects.filter(pk__in=ids).values_list("pk", "plugin__name")}


def _cancelling_installation(run):
    return next((str(s.trace.installation_id) for s in run.steps if s.trace.status == "cancelled"), None)


def _step_view(step: tryit.Step, names: dict, tried: dict) -> dict:
    trace = step.trace
    return {
        "plugin": trace.plugin, "name": names.get(str(trace.installation_id), trace.plugin),
        "installation_id": trace.installation_id, "status": trace.status,
        "duration_ms": trace.duration_ms, "changed": trace.changed, "warning": trace.warning,
        "logs": trace.logs, "cancel_reason": step.cancel_reason, "reason": trace.reason,
        "diff": diff_html(step.before, step.after),
        "version": step.version, "drafted": str(trace.installation_id) in tried,
        **_position_view(trace, step.version),
    }


def _position_view(trace, version: int | None) -> dict:
    """Where in its author's source a handler failed: the line, with a caret under the column."""
    if not trace.at or version is None:
        return {}
    source = (PluginVersion.objects.filter(installation_id=int(trace.installation_id), number=version)
              .values_list("source", flat=True).first()) or ""
    lines = source.splitlines()
    line, column = trace.at["line"], trace.at["column"]
    text = lines[line - 1] if 0 < line <= len(lines) else ""
    gutter = f"{line} | "
    pad = "".join(c if c == "\t" else " " for c in text[:column - 1]).ljust(column - 1)
    return {"at": trace.at, "excerpt": f"{gutter}{text}\n{' ' * len(gutter)}{pad}^",
            "source_url": reverse("admin:plugins_app_pluginversion_installation", args=[trace.installation_id])
            + f"?from={version}&line={line}&column={column}#hub-draft"}

"""Admin pages for versions: an installation's history with a line diff, drafts, deploy and rollback."""

from __future__ import annotations

import json

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.dateparse import parse_datetime
from django.utils.html import format_html

from plugins_app.admin.plugins.starters import completions, starters
from plugins_app.admin.scoping import ReadOnlyAccountScopedAdmin, admin_account_ids, is_operator
from plugins_app.admin.versions.diff import diff_html, side_by_side
from plugins_app.admin.versions.forms import DraftForm
from plugins_app.errors import CompileFailed, HubError
from plugins_app.models import CancelLog, Installation, PluginVersion
from plugins_app.runtime.matching import words
from plugins_app.services.versions import check as checks
from plugins_app.services.versions import releases as versions
from plugins_app.services.versions import shadow

REPLAY_LINKS = 5   # recorded cancels linked beside each draft (the cancel log has the rest)


def may_deploy(request, installation: Installation) -> bool:
    return is_operator(request) or installation.account_id in admin_account_ids(request)


def history_url(installation_id) -> str:
    return reverse("admin:plugins_app_pluginversion_installation", args=[installation_id])


def line_diff(older: PluginVersion, newer: PluginVersion):
    """A side-by-side line diff of two versions' sources, escaped, in bounded work; None when one is too
    large to diff here (the page offers both sources to download instead)."""
    return side_by_side(older.source, newer.source, f"version {older.number}", f"version {newer.number}")


def matcher_diff(older: PluginVersion, newer: PluginVersion) -> dict:
    """When each version's handlers run, in words, and the word diff between them when they differ."""
    old = "\n".join(words.lines(older.hooks, older.matchers or {}))
    new = "\n".join(words.lines(newer.hooks, newer.matchers or {}))
    return {"matchers_old": old, "matchers_new": new, "matcher_diff": diff_html(old, new) if old != new else None}


def replayable_cancels(installation: Installation, rows) -> list[CancelLog]:
    """The account's latest recorded cancels on the hooks these versions define: what a draft can be
    replayed on before it is deployed."""
    hooks = sorted({hook for row in rows for hook in row.hooks})
    return list(CancelLog.objects.filter(account_id=installation.account_id, hook__in=hooks)
                .order_by("-created_at", "-id")[:REPLAY_LINKS * max(len(hooks), 1)])


@admin.register(PluginVersion)
class PluginVersionAdmin(ReadOnlyAccountScopedAdmin):
    """Versions are read here by admins and auditors; deploying and drafting are on the history page."""

    account_field = "installation__account"
    list_display = ["plugin", "number", "live", "note", "created_by_name", "created_at", "history"]
    list_filter = ["installation"]
    list_select_related = ["installation__plugin", "installation__account"]
    search_fields = ["note", "installation__plugin__slug"]
    fields = ("installation", "number", "language", "note", "created_by_name", "created_at", "hooks",
              "matchers", "permissions", "code_hash", "source")
    readonly_fields = fields

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        view = self.admin_site.admin_view
        return [
            path("installation/<str:installation_id>/", view(self.installation_view), name="{}_{}_installation".format(*info)),
            path("installation/<str:installation_id>/draft/", view(self.draft_view), name="{}_{}_draft".format(*info)),
            path("installation/<str:installation_id>/deploy/<str:number>/", view(self.deploy_view),
                 name="{}_{}_deploy".format(*info)),
            path("installation/<str:installation_id>/rollback/", view(self.rollback_view),
                 name="{}_{}_rollback".format(*info)),
            path("installation/<str:installation_id>/shadow/", view(self.shadow_view), name="{}_{}_shadow".format(*info)),
            path("installation/<str:installation_id>/promote/", view(self.promote_view),
                 name="{}_{}_promote".format(*info)),
            path("installation/<str:installation_id>/source/<str:number>/", view(self.source_view),
                 name="{}_{}_source".format(*info)),
            *super().get_urls(),
        ]

    @admin.display(description="plugin", ordering="installation__plugin__name")
    def plugin(self, obj):
        return f"{obj.installation.plugin.name} ({obj.installation.account})"

    @admin.display(description="live", boolean=True)
    def live(self, obj):
        return obj.installation.live_version == obj.number

    @admin.display(description="history")
    def history(self, obj):
        return format_html('<a href="{}">history, diff, deploy</a>', history_url(obj.installation_id))

    # --- the history page ---------------------------------------------------------------------

    def _installation(self, request, installation_id) -> Installation:
        scoped = self.scope(request, Installation.objects.select_related("plugin", "account"), path="account")
        installation = scoped.filter(pk=installation_id).first() if str(installation_id).isdigit() else None
        if installation is None:
            raise Http404("no such installation")
        return installation

    def installation_view(self, request, installation_id, draft_form=None):
        installation = self._installation(request, installation_id)
        rows = list(installation.versions.order_by("-number"))
        was_live = versions.was_live(installation)
        cancels = replayable_cancels(installation, rows)
        for row in rows:
            row.not_granted = versions.not_granted(installation, row)  # type: ignore[attr-defined]  # for the template beside the row; not a model field
            row.was_live = row.number in was_live and row.number != installation.live_version  # type: ignore[attr-defined]  # as above
            row.cancels = [c for c in cancels if c.hook in row.hooks][:REPLAY_LINKS]  # type: ignore[attr-defined]  # as above
        report = shadow.report(installation.account, installation.pk)
        deployer = may_deploy(request, installation) and not installation.plugin.is_official
        context = {
            **self.admin_site.each_context(request),
            "title": f"Versions of {installation.plugin.name} in {installation.account}",
            "opts": self.opts,
            "installation": installation,
            "versions": rows,
            "may_deploy": may_deploy(request, installation) and not installation.plugin.is_official,
            "draft_form": draft_form or self._draft_form(request, installation, rows),
            "draft_base": self._draft_base(request, installation, rows),
            "live_source": next((v.source for v in rows if v.number == installation.live_version), ""),
            "starters": starters(),
            "completions": completions(),
            "deploys": versions.deploy_history(installation)[:50],
            "rollback_to": versions.rollback_target(installation),
            "shadow": report,
            "shadow_since": parse_datetime(report["since"]) if report["since"] else None,
            "check_calls": checks.DEFAULT_CALLS,
            "check": self._check(request, installation) if deployer else None,
            **self._diff_context(request, rows),
        }
        return TemplateResponse(request, "admin/plugins_app/pluginversion/history.html", context)

    @staticmethod
    def _check(request, installation: Installation) -> dict | None:
        """?check=<n>: version n run against the newest recorded calls, shown above its Deploy button."""
        number = request.GET.get("check", "")
        if not number:
            return None
        try:
            return checks.check(installation.account, installation.pk, number).as_dict()
        except HubError as exc:
            messages.error(request, str(exc.detail))
            return None

    @staticmethod
    def _draft_base(request, installation: Installation, rows) -> PluginVersion | None:
        """The version a new draft starts from: ?from=<n>, else the live one."""
        wanted = request.GET.get("from", "")
        by_number = {str(v.number): v for v in rows}
        return by_number.get(wanted) or by_number.get(str(installation.live_version)) or (rows[0] if rows else None)

    def _draft_form(self, request, installation: Installation, rows) -> DraftForm:
        base = self._draft_base(request, installation, rows)
        if base is None:
            return DraftForm(initial={"language": installation.plugin.language})
        form = DraftForm(initial={"language": base.language, "source": base.source})
        line, column = request.GET.get("line", ""), request.GET.get("column", "")
        if line.isdigit():   # from a failed handler's position on the Try page: the editor opens there
            form.fields["source"].widget.attrs["data-goto"] = json.dumps(
                {"line": int(line), "column": int(column) if column.isdigit() else 1})
        return form

    @staticmethod
    def _diff_context(request, rows) -> dict:
        by_number = {str(v.number): v for v in rows}
        default_new = rows[0] if rows else None
        default_old = rows[1] if len(rows) > 1 else default_new
        old = by_number.get(request.GET.get("a", ""), default_old)
        new = by_number.get(request.GET.get("b", ""), default_new)
        if old is None or new is None:
            return {}
        matchers = matcher_diff(old, new)
        if old.source == new.source:
            return {"diff_old": old, "diff_new": new, "diff": None, **matchers}
        table = line_diff(old, new)
        lines = max(len(old.source.splitlines()), len(new.source.splitlines()))
        return {"diff_old": old, "diff_new": new, "diff": table, "diff_too_large": lines if table is None else None,
                **matchers}

    def source_view(self, request, installation_id, number):
        """One version's source as a file to download (what the page offers when a diff is too large)."""
        installation = self._installation(request, installation_id)
        version = installation.versions.filter(number=number).first() if str(number).isdigit() else None
        if version is None:
            raise Http404("no such version")
        extension = "ts" if version.language == "typescript" else "js"
        response = HttpResponse(version.source, content_type="text/plain; charset=utf-8")
        response["Content-Disposition"] = (f'attachment; filename="{installation.plugin.slug}-v{version.number}'
                                           f'.{extension}"')
        return response

    def draft_view(self, request, installation_id):
        installation = self._installation(request, installation_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not may_deploy(request, installation):
            raise PermissionDenied
        form = DraftForm(request.POST, request.FILES)
        if form.is_valid():
            data = form.cleaned_data
            try:
                version = versions.create_draft(installation.account, installation.pk, source=data["source"],
                                                language=data["language"], note=data["note"],
                                                typecheck=data["typecheck"])
            except CompileFailed as exc:
                form.add_compile_errors(exc.extra["errors"])
            except HubError as exc:
                form.add_error(None, str(exc.detail))
            else:
                messages.success(request, f"Saved version {version.number} as a draft: nothing that runs has "
                                          "changed until you deploy it.")
                return HttpResponseRedirect(history_url(installation.pk))
        return self.installation_view(request, installation_id, draft_form=form)

    def deploy_view(self, request, installation_id, number):
        installation = self._installation(request, installation_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not may_deploy(request, installation):
            raise PermissionDenied
        grant = request.POST.getlist("grant") or None
        return self._deploy(request, installation, lambda: versions.deploy(installation.account, installation.pk,
                                                                           number, grant=grant))

    def rollback_view(self, request, installation_id):
        installation = self._installation(request, installation_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not may_deploy(request, installation):
            raise PermissionDenied
        return self._deploy(request, installation, lambda: versions.rollback(installation.account, installation.pk))

    def shadow_view(self, request, installation_id):
        """POST mode=shadow|live, or shadow_version=<n> ("" stops shadowing a draft)."""
        installation = self._installation(request, installation_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not may_deploy(request, installation):
            raise PermissionDenied
        mode = request.POST.get("mode") or None
        number = request.POST.get("shadow_version", ...)
        if number is not ...:
            number = int(number) if number.isdigit() else (None if number == "" else number)
        try:
            shadow.set_mode(installation.account, installation.pk, mode, number)
        except HubError as exc:
            messages.error(request, str(exc.detail))
        else:
            messages.success(request, "Shadow mode changed: counts start again from the next call.")
        return HttpResponseRedirect(history_url(installation.pk))

    def promote_view(self, request, installation_id):
        installation = self._installation(request, installation_id)
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        if not may_deploy(request, installation):
            raise PermissionDenied
        try:
            promoted = shadow.promote(installation.account, installation.pk)
        except HubError as exc:
            messages.error(request, str(exc.detail))
        else:
            messages.success(request, f"{promoted.plugin.name} is live (version {promoted.live_version}): the next "
                                      "call runs it in the chain.")
        return HttpResponseRedirect(history_url(installation.pk))

    def _deploy(self, request, installation, action):
        try:
            _, version = action()
        except HubError as exc:
            messages.error(request, str(exc.detail))
        else:
            messages.success(request, f"Version {version.number} of {installation.plugin.name} is live: the next "
                                      "call runs it.")
        return HttpResponseRedirect(history_url(installation.pk))

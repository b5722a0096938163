"""Admin pages for plugins and installations: install from source or the catalog, enable, grant."""

from __future__ import annotations

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Q
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.template.loader import render_to_string
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from plugins_app.admin.audit.latency import installation_latency_link
from plugins_app.admin.plugins.catalog import catalog_detail, catalog_page, schema_rows
from plugins_app.admin.plugins.forms import InstallationChangeForm, InstallForm
from plugins_app.admin.plugins.grants import installed_message
from plugins_app.admin.plugins.starters import completions, starters
from plugins_app.admin.scoping import AccountScopedAdmin, admin_account_ids, is_operator, per_object_action
from plugins_app.errors import CompileFailed, Conflict, HubError, InvalidInput
from plugins_app.models import ChainEntry, Installation, Plugin, PluginVersion
from plugins_app.runtime.matching import words
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.services.execution import quarantine
from plugins_app.services.plugins import admin_ops
from plugins_app.services.plugins import installations as plugins
from plugins_app.services.plugins import settings as plugin_settings


def _code(text: str):
    return format_html('<pre class="hub-code">{}</pre>', text)


def _tags(items):
    if not items:
        return "—"
    return format_html_join(" ", '<code class="hub-tag">{}</code>', ((i,) for i in items))


class KindFilter(admin.SimpleListFilter):
    """Official catalog plugins or the account's own."""

    title = "kind"
    parameter_name = "kind"
    path = "account"

    def lookups(self, request, model_admin):
        return [("official", "official"), ("custom", "custom")]

    def queryset(self, request, queryset):
        if self.value() in ("official", "custom"):
            return queryset.filter(**{f"{self.path}__isnull": self.value() == "official"})
        return queryset


class InstallationKindFilter(KindFilter):
    path = "plugin__account"


class QuarantineFilter(admin.SimpleListFilter):
    """Installations skipped for a cool-down now, or running in the slow lane now."""

    title = "quarantine"
    parameter_name = "quarantine"

    def lookups(self, request, model_admin):
        return [("quarantined", "quarantined now"), ("slow_lane", "in the slow lane")]

    def queryset(self, request, queryset):
        now = timezone.now()
        if self.value() == "quarantined":
            return queryset.filter(quarantined_until__gt=now)
        if self.value() == "slow_lane":
            return queryset.filter(slow_lane_until__gt=now)
        return queryset


@admin.register(Plugin)
class PluginAdmin(AccountScopedAdmin):
    """Read-only: a plugin's code changes by installing a new one; official plugins come from the
    catalog. Account admins see their accounts' plugins and the official ones."""

    auditor_visible = False
    list_display = ["name", "slug", "owner", "language", "version", "hook_list", "permission_list"]
    list_filter = [KindFilter, "language"]
    search_fields = ["name", "slug", "description"]
    fields = ("name", "slug", "owner", "description", "version", "language", "hook_list",
              "host_member_list", "permission_list", "code_hash", "source_code", "created_at", "updated_at")
    readonly_fields = fields

    def get_queryset(self, request):
        qs = admin.ModelAdmin.get_queryset(self, request).select_related("account")
        if is_operator(request):
            return qs
        return qs.filter(Q(account__in=admin_account_ids(request)) | Q(account__isnull=True))

    def has_view_permission(self, request, obj=None):
        if obj is not None and obj.account_id is None and not is_operator(request):
            return bool(admin_account_ids(request))
        return super().has_view_permission(request, obj)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    @admin.display(description="owner", ordering="account__name")
    def owner(self, obj):
        return obj.account or "official"

    @admin.display(description="hooks")
    def hook_list(self, obj):
        return _tags(obj.hooks)

    @admin.display(description="host members it calls")
    def host_member_list(self, obj):
        return _tags(obj.host_members)

    @admin.display(description="permissions")
    def permission_list(self, obj):
        return _tags(obj.permissions)

    @admin.display(description="source")
    def source_code(self, obj):
        return _code(obj.source)


@admin.register(Installation)
class InstallationAdmin(AccountScopedAdmin):
    auditor_visible = False

    class Media:
        js = ["hub_admin/settings.js"]

    form = InstallationChangeForm
    list_display = ["plugin_name", "account", "enabled", "lane_status", "kind", "hook_list", "granted_list"]
    list_display_links = ["plugin_name"]
    list_filter = ["enabled", QuarantineFilter, InstallationKindFilter, "account"]
    list_select_related = ["plugin", "account"]
    search_fields = ["plugin__name", "plugin__slug"]
    actions = ["enable_selected", "disable_selected", "release_selected"]
    readonly_fields = ["account", "plugin_link", "quarantine_status", "hook_list", "matcher_list", "asked_list",
                       "chain_places",
                       "latency_link", "settings_taken", "version_history", "source_code", "created_at",
                       "updated_at"]
    fieldsets = [
        (None, {"fields": ["account", "plugin_link", "enabled"]}),
        ("Quarantine", {"fields": ["quarantine_status"]}),
        ("What it does", {"fields": ["hook_list", "matcher_list", "chain_places", "latency_link", "asked_list",
                                     "version_history"]}),
        ("What it may do", {"fields": ["granted_permissions"]}),
        ("Settings", {"fields": ["settings_taken"]}),   # then a field per setting: see get_fieldsets
        ("Source", {"fields": ["source_code"], "classes": ["collapse"]}),
        (None, {"fields": ["created_at", "updated_at"]}),
    ]

    def render_change_form(self, request, context, add=False, change=False, form_url="", obj=None):
        # An installation is added by the install pages (review, grants), never by a blank form:
        # "Save and add another" would open one (issue 33).
        context["show_save_and_add_another"] = False
        return super().render_change_form(request, context, add, change, form_url, obj)

    def get_form(self, request, obj=None, change=False, **kwargs):
        # The settings fields are the plugin's own, added by the form itself.
        kwargs["fields"] = ["enabled", "granted_permissions"]
        return super().get_form(request, obj, change, **kwargs)

    def get_fieldsets(self, request, obj=None):
        fieldsets = [(name, {**options, "fields": list(options["fields"])}) for name, options in self.fieldsets]
        if obj is not None:
            keys = [key for key in obj.plugin.settings_schema
                    if key not in plugin_settings.computed_keys(obj.plugin.settings_schema)]
            settings = next(options for name, options in fieldsets if name == "Settings")
            settings["fields"] = ([f"setting_{key}" for key in keys] if keys else ["settings_taken"]) + [
                "settings_json", "settings_mode"]
        return fieldsets

    def get_urls(self):
        info = self.opts.app_label, self.opts.model_name
        return [
            path("catalog/", self.admin_site.admin_view(self.catalog_view), name="{}_{}_catalog".format(*info)),
            path("catalog/<slug:slug>/", self.admin_site.admin_view(self.catalog_detail_view),
                 name="{}_{}_catalog_detail".format(*info)),
            path("<path:object_id>/release/", self.admin_site.admin_view(self.release_view),
                 name="{}_{}_release".format(*info)),
            *super().get_urls(),
        ]

    # --- installing ---------------------------------------------------------------------------

    def changelist_view(self, request, extra_context=None):
        return super().changelist_view(request, {"title": "Installations", **(extra_context or {})})

    def add_view(self, request, form_url="", extra_context=None):
        if not self.has_add_permission(request):
            raise PermissionDenied
        form = InstallForm(request.POST or None, request.FILES or None, request=request)
        compiled = None
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            try:
                if "_install" in request.POST and form.was_reviewed():
                    installation = plugins.install_plugin(
                        data["account"], name=data["name"], source=data["source"], language=data["language"],
                        description=data["description"], grant=data["grant"], typecheck=data["typecheck"])
                    self.log_addition(request, installation, [{"added": {}}])
                    messages.add_message(request, *installed_message(installation))
                    return HttpResponseRedirect(reverse("admin:plugins_app_installation_change",
                                                        args=[installation.pk]))
                compiled = plugins.compile_source(data["source"], data["language"], typecheck=data["typecheck"],
                                                 account=data["account"])
                form.show_compiled(compiled)
                if "_install" in request.POST:
                    messages.warning(request, "The source changed since it was checked: review the hooks and "
                                              "permissions below, then install.")
            except CompileFailed as exc:
                form.add_compile_errors(exc.extra["errors"])
            except Conflict as exc:
                form.add_error("name", str(exc.detail))
            except InvalidInput as exc:
                field = exc.extra.get("field")
                form.add_error(field if field in form.fields else None, str(exc.detail))
        context = {
            **self.admin_site.each_context(request),
            "title": "Install a plugin",
            "opts": self.opts,
            "form": form,
            "media": self.media + form.media,
            "compiled": compiled,
            "hooks": [HOOKS[h] for h in compiled["hooks"]] if compiled else [],
            "compile_errors": getattr(form, "compile_errors", []),
            "starters": starters(),
            "completions": completions(),
            **(extra_context or {}),
        }
        return TemplateResponse(request, "admin/plugins_app/installation/install.html", context)

    def catalog_view(self, request):
        if not self.has_add_permission(request):
            raise PermissionDenied
        return catalog_page(self, request)

    def catalog_detail_view(self, request, slug):
        if not self.has_add_permission(request):
            raise PermissionDenied
        return catalog_detail(self, request, slug)

    # --- changing -----------------------------------------------------------------------------

    def save_model(self, request, obj, form, change):
        if not change:
            raise PermissionDenied   # installs go through add_view
        data = form.cleaned_data
        updated = admin_ops.update_installation(obj.account, obj.pk, enabled=data["enabled"],
                                                grant=data["granted_permissions"], settings=data["settings"])
        obj.refresh_from_db()
        return updated

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Chain entries and versions can't be deleted on their own, but they go with their installation.
        perms_needed.discard(ChainEntry._meta.verbose_name)
        perms_needed.discard(PluginVersion._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    def delete_model(self, request, obj):
        plugins.uninstall(obj.account, obj.pk)

    def delete_queryset(self, request, queryset):
        for installation in queryset.select_related("account"):
            plugins.uninstall(installation.account, installation.pk)

    def change_view(self, request, object_id, form_url="", extra_context=None):
        obj = self.get_object(request, object_id)
        if self._may_release(request, obj) and self._is_held(obj):
            extra_context = {"release_url": reverse("admin:plugins_app_installation_release", args=[obj.pk]),
                             **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra_context)

    def release_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        installation = self.get_object(request, object_id)
        if not self._may_release(request, installation):
            raise PermissionDenied
        self._release(request, installation)
        return HttpResponseRedirect(reverse("admin:plugins_app_installation_change", args=[installation.pk]))

    @per_object_action("change", description="Release selected installations from quarantine and the slow lane now")
    def release_selected(self, request, queryset):
        released = 0
        for installation in queryset.select_related("account", "plugin"):
            self._release(request, installation, quietly=True)
            released += 1
        self.message_user(request, f"Released {released} installation(s).", messages.SUCCESS)

    def _may_release(self, request, installation) -> bool:
        return installation is not None and self.has_change_permission(request, installation)

    @staticmethod
    def _is_held(installation) -> bool:
        return quarantine.is_quarantined(installation) or quarantine.in_slow_lane(installation)

    def _release(self, request, installation, quietly=False):
        quarantine.release(installation.account, installation.pk)
        self.log_change(request, installation, "Released from quarantine and the slow lane.")
        if not quietly:
            self.message_user(request, f"Released {installation.plugin.name}: it runs again on the next call.",
                              messages.SUCCESS)

    @per_object_action("change", description="Enable selected installations")
    def enable_selected(self, request, queryset):
        self._set_enabled(request, queryset, True)

    @per_object_action("change", description="Disable selected installations (they keep their places in the chains)")
    def disable_selected(self, request, queryset):
        self._set_enabled(request, queryset, False)

    def _set_enabled(self, request, queryset, enabled):
        count = 0
        for installation in queryset.select_related("account"):
            try:
                plugins.set_enabled(installation.account, installation.pk, enabled)
                count += 1
            except HubError as exc:
                self.message_user(request, str(exc.detail), messages.ERROR)
        self.message_user(request, f"{'Enabled' if enabled else 'Disabled'} {count} installation(s).",
                          messages.SUCCESS)

    # --- display ------------------------------------------------------------------------------

    @admin.display(description="plugin", ordering="plugin__name")
    def plugin_name(self, obj):
        return obj.plugin.name

    @admin.display(description="quarantine")
    def lane_status(self, obj):
        if quarantine.is_quarantined(obj):
            return "Quarantined"
        return "Slow lane" if quarantine.in_slow_lane(obj) else "—"

    @admin.display(description="status")
    def quarantine_status(self, obj):
        policy = settings.HUB_QUARANTINE
        return render_to_string("admin/plugins_app/installation/quarantine_status.html",
                                {"status": quarantine.status(obj), "installation": obj,
                                 "strikes_to_quarantine": policy.strikes,
                                 "window": quarantine.duration_words(policy.window_seconds)})

    @admin.display(description="kind")
    def kind(self, obj):
        return "official" if obj.plugin.is_official else "custom"

    @admin.display(description="plugin")
    def plugin_link(self, obj):
        url = reverse("admin:plugins_app_plugin_change", args=[obj.plugin_id])
        return format_html('<a href="{}">{}</a> <span class="quiet">{} {}</span>', url, obj.plugin.name,
                           obj.plugin.slug, obj.plugin.version)

    @admin.display(description="hooks")
    def hook_list(self, obj):
        return _tags(obj.plugin.hooks)

    @admin.display(description="when it runs")
    def matcher_list(self, obj):
        return format_html_join("", '<div class="hub-matcher"><code>{}</code></div>',
                                ((line,) for line in words.lines(obj.plugin.hooks, obj.plugin.matchers or {}))) or "—"

    @admin.display(description="permissions it asks for")
    def asked_list(self, obj):
        return _tags(obj.plugin.permissions)

    @admin.display(description="granted")
    def granted_list(self, obj):
        return _tags(obj.granted_permissions)

    @admin.display(description="places in the chains")
    def chain_places(self, obj):
        changelist = reverse("admin:plugins_app_chainentry_changelist")
        rows = ((f"{changelist}?account={obj.account_id}&hook={entry.hook}", entry.hook, entry.position + 1)
                for entry in obj.chain_entries.order_by("hook"))
        return format_html_join(" ", '<a class="hub-tag" href="{}">{} #{}</a>', rows) or "—"

    @admin.display(description="latency")
    def latency_link(self, obj):
        return installation_latency_link(obj)

    @admin.display(description="settings it takes")
    def settings_taken(self, obj):
        rows = schema_rows(obj.plugin)
        if not rows:
            return "none"
        return render_to_string("admin/hub/settings_schema.html", {"rows": rows})

    @admin.display(description="versions")
    def version_history(self, obj):
        url = reverse("admin:plugins_app_pluginversion_installation", args=[obj.pk])
        return format_html('<a href="{}">Version {} is live: history, diff, new draft, deploy, roll back</a>', url,
                           obj.live_version or "—")

    @admin.display(description="source")
    def source_code(self, obj):
        return _code(obj.plugin.source)

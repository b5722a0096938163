"""The catalog: official plugins as cards, and a page per plugin to read about it and install it."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.http import Http404, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from accounts.models import Account
from plugins_app.admin.plugins.forms import AccountChoiceMixin
from plugins_app.admin.plugins.grants import GRANT_HELP, GRANT_LABEL, grant_choices, installed_message
from plugins_app.admin.plugins.settings_form import SchemaSettingsMixin
from plugins_app.admin.scoping import editable_accounts
from plugins_app.errors import Conflict, HubError, InvalidInput
from plugins_app.models import Installation, Plugin
from plugins_app.runtime.tables.hooks import HOOKS
from plugins_app.services.plugins import catalog
from plugins_app.services.plugins import settings as plugin_settings


class OfficialInstallForm(SchemaSettingsMixin, AccountChoiceMixin, forms.Form):
    account: forms.ModelChoiceField[Account] = forms.ModelChoiceField(queryset=None, empty_label="Choose an account…")
    grant = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                      label=GRANT_LABEL)

    def __init__(self, *args, request, plugin, **kwargs):
        super().__init__(*args, **kwargs)
        self.plugin = plugin
        self.limit_accounts(request)
        # Accounts that already have it can't install it twice.
        field, grant = self.fields["account"], self.fields["grant"]
        assert isinstance(field, forms.ModelChoiceField) and isinstance(grant, forms.MultipleChoiceField)
        assert field.queryset is not None   # limit_accounts set it
        field.queryset = accounts = field.queryset.exclude(installations__plugin=plugin)
        if accounts.count() == 1 and (only := accounts.first()) is not None:
            field.initial = only.pk
        grant.choices = grant_choices(plugin.permissions, plugin.host_members)
        grant.initial = list(plugin.permissions)   # ticked: installing is the consent; untick to leave one out
        grant.help_text = GRANT_HELP
        self.add_settings_fields(plugin.settings_schema, plugin_settings.defaults(plugin.settings_schema))


def schema_rows(plugin) -> list[dict]:
    computed = plugin_settings.computed_keys(plugin.settings_schema)
    return [{"key": key, "type": spec["type"] + (f" ({spec['format']})" if "format" in spec else ""),
             "choices": spec.get("choices"), "required": spec.get("required", False),
             "default": json.dumps(spec["default"]) if "default" in spec else None,
             "description": spec.get("description", "")}
            for key, spec in plugin.settings_schema.items() if key not in computed]


def _installed(plugin, accounts) -> list[Installation]:
    return list(Installation.objects.filter(plugin=plugin, account__in=accounts).select_related("account")
                .order_by("account__name"))


def catalog_page(model_admin, request):
    accounts = editable_accounts(request)
    cards = []
    for plugin in Plugin.objects.filter(account__isnull=True).order_by("name"):
        installed = _installed(plugin, accounts)
        cards.append({"plugin": plugin, "hooks": plugin.hooks, "installed": installed,
                      "installable": len(installed) < accounts.count(),
                      "url": reverse("admin:plugins_app_installation_catalog_detail", args=[plugin.slug])})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Install from the catalog",
        "opts": model_admin.opts,
        "cards": cards,
    }
    return TemplateResponse(request, "admin/plugins_app/installation/catalog.html", context)


def catalog_detail(model_admin, request, slug):
    plugin = Plugin.objects.filter(account__isnull=True, slug=slug).first()
    if plugin is None:
        raise Http404(f"no official plugin {slug!r}")
    form = OfficialInstallForm(request.POST or None, request=request, plugin=plugin)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            installation = catalog.install_official(data["account"], plugin.slug, settings=form.settings_value(),
                                                    grant=data["grant"])
        except Conflict as exc:
            form.add_error("account", str(exc.detail))
        except InvalidInput as exc:
            if str(exc.extra.get("field", "")).startswith("grant"):
                form.add_error("grant", str(exc.detail))
            else:
                form.add_settings_error(exc)
        except HubError as exc:
            form.add_error(None, str(exc.detail))
        else:
            model_admin.log_addition(request, installation, [{"added": {}}])
            messages.add_message(request, *installed_message(installation))
            return HttpResponseRedirect(reverse("admin:plugins_app_installation_change", args=[installation.pk]))
    context = {
        **model_admin.admin_site.each_context(request),
        "title": plugin.name,
        "subtitle": "Install from the catalog",
        "opts": model_admin.opts,
        "plugin": plugin,
        "form": form,
        "hooks": [HOOKS[h] for h in plugin.hooks],
        "installed": _installed(plugin, editable_accounts(request)),
        "media": model_admin.media + form.media,
    }
    return TemplateResponse(request, "admin/plugins_app/installation/catalog_detail.html", context)

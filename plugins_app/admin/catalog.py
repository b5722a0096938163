"""The catalog page: install an official plugin with approved permissions and its settings."""

from __future__ import annotations

import json

from django import forms
from django.contrib import messages
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse

from plugins_app.errors import Conflict, HubError, InvalidInput
from plugins_app.models import Plugin
from plugins_app.runtime.hooks import HOOKS
from plugins_app.services import catalog, plugin_settings

from .forms import AccountChoiceMixin, PrettyJSONField


class OfficialInstallForm(AccountChoiceMixin, forms.Form):
    account = forms.ModelChoiceField(queryset=None)
    grant = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple,
                                      label="Grant permissions")
    settings = PrettyJSONField(required=False, widget=forms.Textarea(attrs={"rows": 6, "class": "hub-code"}))

    def __init__(self, *args, request, plugin, **kwargs):
        super().__init__(*args, prefix=plugin.slug, **kwargs)
        self.plugin = plugin
        self.limit_accounts(request)
        self.fields["grant"].choices = [(p, p) for p in plugin.permissions]
        schema = plugin.settings_schema
        computed = plugin_settings.computed_keys(schema)
        self.fields["settings"].initial = {k: v for k, v in plugin_settings.defaults(schema).items()
                                           if k not in computed}

    def clean_settings(self):
        value = self.cleaned_data.get("settings")
        return {} if value in (None, "") else value


def schema_rows(plugin) -> list[dict]:
    computed = plugin_settings.computed_keys(plugin.settings_schema)
    return [{"key": key, "type": spec["type"] + (f" ({spec['format']})" if "format" in spec else ""),
             "choices": spec.get("choices"), "required": spec.get("required", False),
             "default": json.dumps(spec["default"]) if "default" in spec else None,
             "description": spec.get("description", "")}
            for key, spec in plugin.settings_schema.items() if key not in computed]


def catalog_page(model_admin, request):
    forms_ = []
    for plugin in Plugin.objects.filter(account__isnull=True).order_by("name"):
        bound = request.method == "POST" and request.POST.get("plugin") == plugin.slug
        form = OfficialInstallForm(request.POST if bound else None, request=request, plugin=plugin)
        if bound and form.is_valid():
            data = form.cleaned_data
            try:
                installation = catalog.install_official(data["account"], plugin.slug, settings=data["settings"],
                                                        grant=data["grant"])
            except Conflict as exc:
                form.add_error("account", str(exc.detail))
            except InvalidInput as exc:
                field = exc.extra.get("field", "")
                form.add_error("grant" if field == "grant" else "settings", str(exc.detail))
            except HubError as exc:
                form.add_error(None, str(exc.detail))
            else:
                model_admin.log_addition(request, installation, [{"added": {}}])
                messages.success(request, f"Installed {plugin.name} in {installation.account}.")
                return HttpResponseRedirect(reverse("admin:plugins_app_installation_change",
                                                    args=[installation.pk]))
        forms_.append({"plugin": plugin, "form": form, "hooks": [HOOKS[h] for h in plugin.hooks],
                       "schema": schema_rows(plugin), "installed_in": _installed_in(plugin, form)})
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Install from the catalog",
        "opts": model_admin.opts,
        "entries": forms_,
    }
    return TemplateResponse(request, "admin/plugins_app/installation/catalog.html", context)


def _installed_in(plugin, form) -> list[str]:
    accounts = form.fields["account"].queryset
    return list(accounts.filter(installations__plugin=plugin).values_list("name", flat=True))

"""The API's layout (issue 37): every endpoint builds on api/base.py's AccountView, and endpoint packages
share code through base.py or each other's serializers, never through each other's views."""

from django.urls import URLPattern

from plugins_app.api import urls as api_urls
from plugins_app.api.base import AccountView
from tests.middleware_hub import test_dependencies
from tests.middleware_hub.test_dependencies import imported_modules


def test_every_api_endpoint_is_an_account_view():
    # AccountView scopes a view to its key's account and runs the edge checks before it (edge.py):
    # an endpoint built on a bare APIView would skip both.
    bare = [pattern.name for pattern in api_urls.urlpatterns
            if isinstance(pattern, URLPattern) and not issubclass(pattern.callback.cls, AccountView)]
    assert bare == []


def _views_imported(folder: str) -> dict[str, list[str]]:
    """Each module under `folder` (but the URL table) that imports another package's views module, and
    which (a package's own views may build on each other: the async execute view on the sync one)."""
    package = folder.replace("/", ".") + "."
    found = {path: sorted(n for n in names if n.startswith(package) and
                          (n.rsplit(".", 1)[-1] == "views" or n.endswith("_views"))
                          and n.rsplit(".", 1)[0] != path.rsplit("/", 1)[0].replace("/", "."))
             for path, names in imported_modules(folder).items() if not path.endswith("/urls.py")}
    return {path: names for path, names in found.items() if names}


def test_only_the_url_table_imports_views():
    assert _views_imported("plugins_app/api") == {}


def test_the_views_check_sees_a_view_imported_from_another_package(tmp_path, monkeypatch):
    api = tmp_path / "api"
    for folder, text in {"plugins": "class AccountView: ...\n",
                         "ssh": "from api.plugins.views import AccountView\n"}.items():
        (api / folder).mkdir(parents=True)
        (api / folder / "__init__.py").write_text("")
        (api / folder / "views.py").write_text(text)
    (api / "urls.py").write_text("from api.plugins import views\nfrom api.ssh import views as ssh_views\n")
    monkeypatch.setattr(test_dependencies, "ROOT", tmp_path)
    assert _views_imported("api") == {"api/ssh/views.py": ["api.plugins.views"]}

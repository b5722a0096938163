"""Django settings for Middleware Hub; everything deployment-specific comes from the environment."""
import os
from pathlib import Path

import dj_database_url

from middleware_hub.database import DatabaseConfig
from plugins_app.runtime.config import EngineConfig
from plugins_app.runtime.environment import Env
from plugins_app.services.engine.config import AdmissionConfig
from plugins_app.services.execution.config import QuarantineConfig
from plugins_app.services.host.config import HostConfig
from plugins_app.services.kv.config import KvConfig
from plugins_app.services.observability.config import MetricsConfig, TailConfig
from plugins_app.services.scheduling.config import SchedulingConfig
from plugins_app.services.secrets.config import SecretsConfig
from plugins_app.services.ssh.config import SshConfig
from plugins_app.services.versions.config import RecordingConfig

BASE_DIR = Path(__file__).resolve().parent.parent
# Every variable is read through this one typed reader (plugins_app/runtime/environment.py), as the
# configs below read theirs: a value it cannot use (a flag that is not 1/0, true/false, yes/no, on/off,
# a number that is not one) stops the start with the variable's name.
_env = Env(os.environ)
# HUB_VAR_DIR moves the SQLite file and the file-system broker (tests run a whole dev hub in a temp dir).
VAR_DIR = Path(_env.text("HUB_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)

SECRET_KEY = _env.text("DJANGO_SECRET_KEY", "django-insecure-dev-only-change-me-in-production")
DEBUG = _env.flag("DJANGO_DEBUG", True)
ALLOWED_HOSTS = list(_env.items("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"]))

# HTTPS (docs/production.md, "Production settings"): on by default when DEBUG is off, off for development.
_PRODUCTION = not DEBUG
SESSION_COOKIE_SECURE = _env.flag("DJANGO_SESSION_COOKIE_SECURE", _PRODUCTION)
CSRF_COOKIE_SECURE = _env.flag("DJANGO_CSRF_COOKIE_SECURE", _PRODUCTION)
# Sent only on HTTPS responses; a year once the site is HTTPS-only. Subdomains and preloading
# commit the whole domain, which only its owner can decide.
SECURE_HSTS_SECONDS = _env.integer("DJANGO_SECURE_HSTS_SECONDS", 365 * 24 * 3600 if _PRODUCTION else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = _env.flag("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = _env.flag("DJANGO_SECURE_HSTS_PRELOAD", False)
# Off unless asked: the TLS-terminating proxy in front usually redirects, and an API client that
# sent its key over plain HTTP has already leaked it (a redirect would hide the mistake).
SECURE_SSL_REDIRECT = _env.flag("DJANGO_SECURE_SSL_REDIRECT", False)
# Behind a proxy that terminates TLS and sets (overwriting any client value) X-Forwarded-Proto.
if _env.flag("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = list(_env.items("DJANGO_CSRF_TRUSTED_ORIGINS", []))

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "django_celery_beat",
    "adminsortable2",
    "accounts",
    "plugins_app",
]

MIDDLEWARE = [
    "plugins_app.api.admission.FairAdmissionMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "plugins_app.services.audit.changes.ChangeActorMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "middleware_hub.urls"
WSGI_APPLICATION = "middleware_hub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# SQLite by default; DATABASE_URL (e.g. postgresql://user:pass@host:5432/db) switches.
DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}",
        conn_max_age=_env.integer("DATABASE_CONN_MAX_AGE", 60),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The dev server, the Celery worker and beat share one file: wait for locks
    # instead of failing, and let readers proceed while one process writes. Transactions take
    # the write lock when they begin: one that read first could not upgrade later while
    # another connection had committed (SQLite refuses at once, whatever the timeout).
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }
    # A file rather than memory, so the Celery workers an integration test starts share the test
    # database; one per test process, so concurrent runs in one checkout don't collide.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}
# Timeouts on every connection (docs/configuration.md): a hung or locked database fails a request
# within seconds, which the API answers as its JSON 503 (plugins_app/api/errors.py).
HUB_DATABASE = DatabaseConfig.from_env(os.environ)
DATABASES["default"]["OPTIONS"] = HUB_DATABASE.options(DATABASES["default"]["ENGINE"],
                                                       DATABASES["default"].get("OPTIONS") or {})
# PostgreSQL through the backend that puts a deadline on every round trip (middleware_hub/query_deadline.py).
DATABASES["default"]["ENGINE"] = HUB_DATABASE.engine(DATABASES["default"]["ENGINE"])

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "var" / "static"

HUB_API_MAX_BODY_BYTES = 1024 * 1024   # an API body (execute included); the API's JSON parser holds it
# The largest body Django reads at all: installing a plugin (up to 2 MiB of source, as a JSON string).
DATA_UPLOAD_MAX_MEMORY_SIZE = 6 * 1024 * 1024

_renderers = ["rest_framework.renderers.JSONRenderer"]
if DEBUG:
    _renderers.append("rest_framework.renderers.BrowsableAPIRenderer")

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["accounts.permissions.HasAccountKey"],
    "EXCEPTION_HANDLER": "plugins_app.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_RENDERER_CLASSES": _renderers,
    "DEFAULT_PARSER_CLASSES": ["plugins_app.api.parsers.LimitedJSONParser"],
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Middleware Hub API",
    "DESCRIPTION": "Accounts' installed plugins and the hook engine that runs them.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # The API's own prefix, not one computed from every URL: /healthz and /metrics would shorten it
    # and so rename every operationId.
    "SCHEMA_PATH_PREFIX": "/api/",
    # Swagger UI served from this hub (drf-spectacular-sidecar), not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "plugins_app.api.schema.add_hook_contexts",
        "plugins_app.api.dry_run.document_dry_runs",
        "plugins_app.api.schema.document_errors",
        "plugins_app.api.schema_links.add_links",
        "plugins_app.api.schema.drop_echoed_choice_labels",
        "plugins_app.api.schema.describe_api",
    ],
    "ENUM_NAME_OVERRIDES": {"SshOperationKindEnum": "plugins_app.runtime.tables.hooks.SSH_KINDS"},
}

# Celery. The default filesystem broker needs no service; both directions use
# one folder because producers and consumers share this configuration.
CELERY_BROKER_URL = _env.text("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL.startswith("filesystem://"):
    _broker_dir = VAR_DIR / "broker"
    _broker_folders = {
        "data_folder_in": _broker_dir / "queue",
        "data_folder_out": _broker_dir / "queue",
        "processed_folder": _broker_dir / "processed",
        "control_folder": _broker_dir / "control",
    }
    for _folder in _broker_folders.values():
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS: dict[str, object] = {key: str(path) for key, path in _broker_folders.items()}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = _env.flag("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
# django-celery-beat's, naming each cron slot by when it was sent (two beats fire a slot once).
CELERY_BEAT_SCHEDULER = "plugins_app.services.scheduling.beat:SlotScheduler"
CELERY_TIMEZONE = TIME_ZONE

# Each concern's settings as one typed, validated value (its class says what each field does and
# which variable sets it); a bad value stops the start with the variable's name.
HUB_SCHEDULING = SchedulingConfig.from_env(os.environ)   # missions, timers, platform deliveries
if CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Bounded waits on a Redis that hangs (kombu's default is forever): a worker, beat or readyz gives
    # up and reconnects instead of hanging with it. Web processes publish through the outbox's thread.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"socket_timeout": HUB_SCHEDULING.broker_timeout_seconds,
                                       "socket_connect_timeout": HUB_SCHEDULING.broker_timeout_seconds}
HUB_HOST = HostConfig.from_env(os.environ, debug=DEBUG)    # host.fetch, the platform bridge, host.llm, logs
HUB_SSH = SshConfig.from_env(os.environ)
HUB_SECRETS = SecretsConfig.from_env(os.environ)   # account secrets' encryption keys
HUB_KV = KvConfig.from_env(os.environ)   # host.kv's per-account quotas and its expiry sweep
HUB_QUARANTINE = QuarantineConfig.from_env(os.environ)
HUB_RECORDING = RecordingConfig.from_env(os.environ)     # recorded execute calls (checks run on them)
HUB_ADMISSION = AdmissionConfig.from_env(os.environ)      # fair admission of execute calls
HUB_METRICS = MetricsConfig.from_env(os.environ)          # GET /metrics
HUB_TAIL = TailConfig.from_env(os.environ, broker_url=CELERY_BROKER_URL, var_dir=str(VAR_DIR))   # GET /api/v1/tail

# The hook engine's (plugins_app.runtime.config.EngineConfig, shared with gunicorn.conf.py and the
# engine supervisor, which read it the same way): its engines, their heap, a handler's budgets.
HUB_ENGINE = EngineConfig.from_env(os.environ)
# Usage metering and API key use are buffered and written every N seconds (0 writes on every call).
HUB_METERING_FLUSH_SECONDS = _env.number("HUB_METERING_FLUSH_SECONDS", 2.0)
# Threads of a gthread worker; under the ASGI worker, the threads the async execute path's short
# sync steps (and the other, sync, endpoints) run on (plugins_app/api/execution/async_views.py).
HUB_WORKER_THREADS = _env.integer("HUB_WORKER_THREADS", 16, minimum=1)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "filters": {
        "quiet_routine": {"()": "middleware_hub.log_filters.QuietRoutine"},
        "client_errors_without_traceback": {"()": "middleware_hub.log_filters.ClientErrorsWithoutTraceback"},
        "one_line_per_request": {"()": "middleware_hub.log_filters.OneLinePerRequest"},
        "outage_answers_once": {"()": "middleware_hub.log_filters.OutageAnswersOnce"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain",
                    "filters": ["quiet_routine", "client_errors_without_traceback", "one_line_per_request",
                                "outage_answers_once"]},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        # Django's own console handler would print each of its records a second time.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.utils.autoreload": {"level": "WARNING"},
        "accounts": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "plugins_app": {"handlers": ["console"], "level": "INFO", "propagate": False},
        # The async host.fetch's HTTP client logs each request's and answer's headers at DEBUG (and its
        # URL at INFO): with granted secrets put in, never (docs/secrets.md: no output holds a value).
        "httpcore": {"level": "WARNING"},
        "httpx": {"level": "WARNING"},
    },
}

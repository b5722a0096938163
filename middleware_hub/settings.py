"""Django settings for Middleware Hub; everything deployment-specific comes from the environment."""
import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from plugins_app.runtime.config import EngineConfig

BASE_DIR = Path(__file__).resolve().parent.parent
# HUB_VAR_DIR moves the SQLite file and the file-system broker (tests run a whole dev hub in a temp dir).
VAR_DIR = Path(os.environ.get("HUB_VAR_DIR") or BASE_DIR / "var")
VAR_DIR.mkdir(parents=True, exist_ok=True)


def env(name, default=None):
    return os.environ.get(name, default)


def env_bool(name, default):
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_list(name, default):
    value = os.environ.get(name)
    if value is None:
        return list(default)
    return [item.strip() for item in value.split(",") if item.strip()]


SECRET_KEY = env("DJANGO_SECRET_KEY", "django-insecure-dev-only-change-me-in-production")
DEBUG = env_bool("DJANGO_DEBUG", True)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])

# HTTPS (README "Production settings"): on by default when DEBUG is off, off for development.
_PRODUCTION = not DEBUG
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", _PRODUCTION)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", _PRODUCTION)
# Sent only on HTTPS responses; a year once the site is HTTPS-only. Subdomains and preloading
# commit the whole domain, which only its owner can decide.
SECURE_HSTS_SECONDS = int(env("DJANGO_SECURE_HSTS_SECONDS", 365 * 24 * 3600 if _PRODUCTION else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# Off unless asked: the TLS-terminating proxy in front usually redirects, and an API client that
# sent its key over plain HTTP has already leaked it (a redirect would hide the mistake).
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
# Behind a proxy that terminates TLS and sets (overwriting any client value) X-Forwarded-Proto.
if env_bool("DJANGO_SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

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
        conn_max_age=int(env("DATABASE_CONN_MAX_AGE", 60)),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The dev server, the Celery worker and beat share one file: wait for locks
    # instead of failing, and let readers proceed while one process writes. Transactions take
    # the write lock when they begin: one that read first could not upgrade later while
    # another connection had committed (SQLite refuses at once, whatever the timeout).
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "init_command": "PRAGMA journal_mode=WAL;",
        "transaction_mode": "IMMEDIATE",
    }
    # A file rather than memory, so the Celery workers an integration test starts share the test
    # database; one per test process, so concurrent runs in one checkout don't collide.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-{os.getpid()}.sqlite3")}

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
        "plugins_app.api.schema.document_errors",
    ],
    "ENUM_NAME_OVERRIDES": {"SshOperationKindEnum": "plugins_app.runtime.tables.hooks.SSH_KINDS"},
}

# Celery. The default filesystem broker needs no service; both directions use
# one folder because producers and consumers share this configuration.
CELERY_BROKER_URL = env("CELERY_BROKER_URL", "filesystem://")
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
    CELERY_BROKER_TRANSPORT_OPTIONS = {key: str(path) for key, path in _broker_folders.items()}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = TIME_ZONE

# Scheduled missions and timers (plugins_app.services.scheduling.cron / notifications, plugins_app.tasks).
HUB_CRON_MIN_INTERVAL_SECONDS = int(env("HUB_CRON_MIN_INTERVAL_SECONDS", 60))
# A slot no worker started within this long (or one interval) is dropped; the next one is due.
HUB_CRON_SLOT_GRACE_SECONDS = int(env("HUB_CRON_SLOT_GRACE_SECONDS", 300))
# A run the platform has not closed after this long stops blocking its job's next slots.
HUB_CRON_RUN_EXPIRY_SECONDS = int(env("HUB_CRON_RUN_EXPIRY_SECONDS", 24 * 3600))
HUB_NOTIFY_MAX_DELAY_SECONDS = int(env("HUB_NOTIFY_MAX_DELAY_SECONDS", 365 * 24 * 3600))
# Beat's sweep hands due timers to the workers this often (the timers' precision).
HUB_NOTIFY_SWEEP_SECONDS = max(1, int(env("HUB_NOTIFY_SWEEP_SECONDS", 2)))
HUB_NOTIFY_SWEEP_BATCH = int(env("HUB_NOTIFY_SWEEP_BATCH", 500))
HUB_NOTIFY_REQUEUE_SECONDS = int(env("HUB_NOTIFY_REQUEUE_SECONDS", 60))
HUB_NOTIFY_RECLAIM_SECONDS = int(env("HUB_NOTIFY_RECLAIM_SECONDS", 3600))
# Platform deliveries (missions, timers) retry with exponential backoff: 1 s, 2 s, 4 s ... capped.
HUB_DELIVERY_MAX_RETRIES = int(env("HUB_DELIVERY_MAX_RETRIES", 8))
HUB_DELIVERY_BACKOFF_MAX_SECONDS = int(env("HUB_DELIVERY_BACKOFF_MAX_SECONDS", 300))
# The platform bridge (plugins_app.services.host.platform) connects only to these: host names
# (".example.com" also matches subdomains), addresses and CIDR networks. Empty allows none; a
# development server (DEBUG) allows loopback unless the variable is set.
HUB_PLATFORM_ALLOWED_HOSTS = env_list("HUB_PLATFORM_ALLOWED_HOSTS", ["127.0.0.0/8", "::1"] if DEBUG else [])

# Hook engine: plugins_app.runtime.config.EngineConfig reads and checks its variables (each field
# says what it does), as gunicorn.conf.py and the engine supervisor do. Code reads these four
# settings, which tests override; the config itself is not a setting, so nothing reads a stale copy.
_engine = EngineConfig.from_env(os.environ)
HUB_ENGINE_PROCESSES = _engine.processes          # a process's own engines (gunicorn's tier: one per core)
HUB_LANE_PROCESSES = _engine.lane_processes
HUB_ISOLATE_MEMORY_MB = _engine.isolate_memory_mb
HUB_BUDGET_MS = _engine.budget_ms
# Usage metering is buffered and written every N seconds (0 writes on every call).
HUB_METERING_FLUSH_SECONDS = float(env("HUB_METERING_FLUSH_SECONDS", 2))

# GET /metrics: with a token set, callers must send it as a bearer token; without one, loopback only.
HUB_METRICS_TOKEN = env("HUB_METRICS_TOKEN", "")
HUB_METRICS_MAX_PLUGINS = int(env("HUB_METRICS_MAX_PLUGINS", 200))   # distinct plugin labels per process
HUB_METRICS_FLUSH_SECONDS = float(env("HUB_METRICS_FLUSH_SECONDS", 1))   # how often a process applies its observations
# An installation that times out, wedges or runs out of memory this many times within the window is
# skipped for the cool-down; any such misbehaviour also moves it to the slow lane for a while.
HUB_QUARANTINE_STRIKES = int(env("HUB_QUARANTINE_STRIKES", 3))
HUB_QUARANTINE_WINDOW_SECONDS = int(env("HUB_QUARANTINE_WINDOW_SECONDS", 600))
HUB_QUARANTINE_SECONDS = int(env("HUB_QUARANTINE_SECONDS", 600))
HUB_SLOW_LANE_SECONDS = int(env("HUB_SLOW_LANE_SECONDS", 600))
# Fair admission in each web process: one account runs Python for at most this many execute calls
# at once (its other calls wait their turn; a call waiting on an engine or a host call doesn't
# count), and at most HUB_EXECUTE_CONCURRENCY calls run at all. 0 = no such limit.
HUB_EXECUTE_CONCURRENCY = int(env("HUB_EXECUTE_CONCURRENCY", 0))
HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT = int(env("HUB_EXECUTE_CONCURRENCY_PER_ACCOUNT", 1))
# "machine": the web processes sharing an engine tier (gunicorn's workers) also share
# HUB_EXECUTE_MACHINE_PLACES places (0 = one per CPU) by fair share: an account may run Python for
# that many calls at once divided by the accounts running, and always one. A lone tenant can use
# the machine; beside others, a tenant's many callers can't take a place in each worker.
# "process": each web process only counts its own.
HUB_EXECUTE_PER_ACCOUNT_SCOPE = env("HUB_EXECUTE_PER_ACCOUNT_SCOPE", "machine")
HUB_EXECUTE_MACHINE_PLACES = int(env("HUB_EXECUTE_MACHINE_PLACES", 0))
# Beside other accounts, a call that found its account's machine place taken keeps it resting this
# many times as long as it held it (at most HUB_EXECUTE_MAX_REST_MS): a tenant calling from many
# connections then gets about one caller's share of calls per second. 0 = no rest.
HUB_EXECUTE_REST_FACTOR = float(env("HUB_EXECUTE_REST_FACTOR", 2))
HUB_EXECUTE_MAX_REST_MS = float(env("HUB_EXECUTE_MAX_REST_MS", 100))
for _name in ("HUB_EXECUTE_REST_FACTOR", "HUB_EXECUTE_MAX_REST_MS"):
    if not 0 <= globals()[_name] < float("inf"):   # (NaN fails too)
        raise ImproperlyConfigured(f"{_name} must be a finite number, 0 or more")
if HUB_EXECUTE_PER_ACCOUNT_SCOPE not in ("machine", "process"):
    raise ImproperlyConfigured("HUB_EXECUTE_PER_ACCOUNT_SCOPE must be 'machine' or 'process'")

# SSH (plugins_app.services.ssh.client). Private keys are encrypted with a key derived from
# HUB_SSH_KEY_SECRET, or from SECRET_KEY when that is empty.
HUB_SSH_KEY_SECRET = env("HUB_SSH_KEY_SECRET", "")
HUB_SSH_MAX_OUTPUT_BYTES = int(env("HUB_SSH_MAX_OUTPUT_BYTES", 1024 * 1024))
HUB_SSH_CONNECT_TIMEOUT_SECONDS = float(env("HUB_SSH_CONNECT_TIMEOUT_SECONDS", 10))
HUB_SSH_COMMAND_TIMEOUT_SECONDS = float(env("HUB_SSH_COMMAND_TIMEOUT_SECONDS", 300))
HUB_SSH_TURN_TTL_SECONDS = int(env("HUB_SSH_TURN_TTL_SECONDS", 24 * 3600))

# Host surface (plugins_app.services.host.registry): what plugins may reach through host.*.
# host.fetch refuses loopback, private, link-local and metadata addresses unless this is on.
HUB_FETCH_ALLOW_PRIVATE = env_bool("HUB_FETCH_ALLOW_PRIVATE", False)
HUB_FETCH_MAX_BYTES = int(env("HUB_FETCH_MAX_BYTES", 1024 * 1024))
HUB_FETCH_TIMEOUT_SECONDS = float(env("HUB_FETCH_TIMEOUT_SECONDS", 5))
# host.llm / host.decide: an OpenAI-compatible chat completions endpoint (OpenAI, Ollama, vLLM).
LLM_BASE_URL = env("LLM_BASE_URL", "")
LLM_API_KEY = env("LLM_API_KEY", "")
LLM_MODEL = env("LLM_MODEL", "")
LLM_TIMEOUT_SECONDS = float(env("LLM_TIMEOUT_SECONDS", 5))
HUB_PLUGIN_LOG_LIMIT = int(env("HUB_PLUGIN_LOG_LIMIT", 1000))
HUB_WORKSPACE_QUOTA_BYTES = int(env("HUB_WORKSPACE_QUOTA_BYTES", 5 * 1024 * 1024))

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
    },
    "filters": {
        "quiet_routine": {"()": "middleware_hub.log_filters.QuietRoutine"},
        "client_errors_without_traceback": {"()": "middleware_hub.log_filters.ClientErrorsWithoutTraceback"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain",
                    "filters": ["quiet_routine", "client_errors_without_traceback"]},
    },
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        # Django's own console handler would print each of its records a second time.
        "django": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "django.utils.autoreload": {"level": "WARNING"},
        "accounts": {"handlers": ["console"], "level": "INFO", "propagate": False},
        "plugins_app": {"handlers": ["console"], "level": "INFO", "propagate": False},
    },
}

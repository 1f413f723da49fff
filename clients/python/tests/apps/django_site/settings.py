"""A Django project made idempotent by the middleware and one namespace (the two settings marked)."""

import os

SECRET_KEY = "idempotency-tests"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "django_site.urls"
INSTALLED_APPS = ["django_site"]
USE_TZ = True
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("APP_DATABASE", "postgres"),
        "HOST": os.environ.get("PGHOST", ""),
        "PORT": os.environ.get("PGPORT", ""),
        "USER": os.environ.get("PGUSER", ""),
    }
}
MIDDLEWARE = ["idempotency.django.IdempotencyMiddleware"]  # the one line
IDEMPOTENCY = {"namespace": "py-django"}                   # and the namespace
DATA_UPLOAD_MAX_MEMORY_SIZE = 65536  # the body limit the middleware answers 413 for
LOGGING = {"version": 1, "disable_existing_loggers": False}

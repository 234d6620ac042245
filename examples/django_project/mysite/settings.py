"""Settings of the example project: SQLite, one app (blog), FastWorker."""

import os
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent

SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-this-example")
DEBUG = True
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "fastworker.integration.django",
    "blog",
]

MIDDLEWARE = ["django.middleware.common.CommonMiddleware"]
ROOT_URLCONF = "mysite.urls"
WSGI_APPLICATION = "mysite.wsgi.application"

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": BASE_DIR / "db.sqlite3",
        # A subworker writes while the web process reads: wait for SQLite's lock.
        "OPTIONS": {"timeout": 20},
    }
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True

# The control plane's discovery address; without it, FASTWORKER_DISCOVERY_ADDRESS or
# tcp://127.0.0.1:5550 (what `manage.py fastworker dev` listens on).
FASTWORKER = {
    "TIMEOUT": 10,
}
if "FASTWORKER_DISCOVERY_ADDRESS" in os.environ:
    FASTWORKER["DISCOVERY_ADDRESS"] = os.environ["FASTWORKER_DISCOVERY_ADDRESS"]

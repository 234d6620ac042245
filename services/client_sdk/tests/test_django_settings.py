"""The ``FASTWORKER`` Django setting, read by ``fastworker.integration.django.conf``:
client options in Django's spelling, the integration's own keys, and a clear
``ImproperlyConfigured`` for anything else."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured  # type: ignore[import-untyped]

from fastworker import TLS
from fastworker.integration.django.conf import KEYS, FastWorkerSettings, read_settings


def test_no_setting_means_the_sdks_defaults() -> None:
    assert read_settings(None) == FastWorkerSettings()
    assert read_settings({}) == FastWorkerSettings()


def test_client_keys_become_the_keywords_of_configure() -> None:
    tls = TLS(ca_file="ca.pem")

    settings = read_settings(
        {
            "DISCOVERY_ADDRESS": "tcp://10.0.0.5:5550",
            "ADDRESS": "tcp://10.0.0.5:5555",
            "TIMEOUT": 12.5,
            "RETRIES": 1,
            "CONNECT_TIMEOUT": 2,
            "AUTH_TOKEN": "secret",
            "TLS": tls,
            "MAX_MESSAGE_SIZE": 1 << 20,
        }
    )

    assert settings.client_options == {
        "discovery_address": "tcp://10.0.0.5:5550",
        "address": "tcp://10.0.0.5:5555",
        "timeout": 12.5,
        "retries": 1,
        "connect_timeout": 2,
        "auth_token": "secret",
        "tls": tls,
        "max_message_size": 1 << 20,
    }


def test_a_key_set_to_none_is_left_to_the_sdk_and_its_environment_variables() -> None:
    settings = read_settings({"DISCOVERY_ADDRESS": None, "AUTH_TOKEN": None, "TIMEOUT": 5})

    assert settings.client_options == {"timeout": 5}


def test_eager_and_task_modules_are_the_integrations_own() -> None:
    settings = read_settings({"EAGER": True, "TASK_MODULES": ["shop.jobs", "mail.jobs"]})

    assert settings.eager is True
    assert settings.task_modules == ("shop.jobs", "mail.jobs")
    assert settings.client_options == {}


def test_an_unknown_key_is_refused_with_the_key_it_probably_meant() -> None:
    meant = r"unknown key 'DISCOVERY_ADRESS': did you mean 'DISCOVERY_ADDRESS'\?"
    with pytest.raises(ImproperlyConfigured, match=meant):
        read_settings({"DISCOVERY_ADRESS": "tcp://10.0.0.5:5550"})


def test_an_unknown_key_like_none_of_them_lists_them_all() -> None:
    with pytest.raises(ImproperlyConfigured, match="unknown key 'BROKER_URL'") as raised:
        read_settings({"BROKER_URL": "redis://"})

    for key in KEYS:
        assert key in str(raised.value)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ([("TIMEOUT", 5)], "must be a dict"),
        ({"TIMEOUT": "5"}, r"FASTWORKER\['TIMEOUT'\] must be int or float, not str"),
        ({"RETRIES": True}, r"FASTWORKER\['RETRIES'\] must be int, not bool"),
        ({"TLS": {"CA": "ca.pem"}}, r"FASTWORKER\['TLS'\] must be TLS"),
        ({"EAGER": "yes"}, r"FASTWORKER\['EAGER'\] must be True or False"),
        ({"TASK_MODULES": "shop.jobs"}, "must be a list of module names"),
        ({"TASK_MODULES": ["shop.jobs", 3]}, "give dotted module names"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_saying_which_key(value: Any, problem: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=problem):
        read_settings(value)


def test_the_integrations_public_names_are_curated() -> None:
    import fastworker.integration.django as integration

    assert sorted(integration.__all__) == [
        "apply_async_on_commit",
        "db_task",
        "delay_on_commit",
        "eager_runner",
    ]
    assert all(hasattr(integration, name) for name in integration.__all__)

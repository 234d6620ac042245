"""Test settings: every task runs inline, in the test's own transaction."""

from mysite.settings import *  # noqa: F403

FASTWORKER = {"EAGER": True}

"""Run with the eager settings: `uv run python manage.py test --settings mysite.settings_test`."""

# ruff: noqa: PT009  (Django's TestCase idiom: self.assertEqual and friends)

from django.db import transaction
from django.test import TestCase

from blog.models import Post
from blog.tasks import count_words
from fastworker.integration.django import eager_runner


class CreatePostTests(TestCase):
    def setUp(self) -> None:
        eager_runner().clear()

    def test_a_new_post_has_its_words_counted_once_committed(self) -> None:
        # TestCase wraps each test in a transaction that never commits: run the
        # on_commit callbacks as a commit would.
        with self.captureOnCommitCallbacks(execute=True):
            reply = self.client.post("/posts/", {"title": "Hi", "body": "one two three"})

        self.assertEqual(reply.status_code, 201)
        post = Post.objects.get(pk=reply.json()["id"])
        self.assertEqual(post.word_count, 3)
        [submission] = eager_runner().submitted(count_words)
        self.assertEqual(submission.args, [post.pk])
        self.assertEqual(submission.result.result, 3)

    def test_nothing_is_queued_before_the_commit(self) -> None:
        with self.captureOnCommitCallbacks(execute=False) as callbacks:
            self.client.post("/posts/", {"title": "Hi", "body": "one two"})

        self.assertEqual(len(callbacks), 1)
        self.assertEqual(eager_runner().submissions, [])

    def test_nothing_is_queued_when_the_transaction_rolls_back(self) -> None:
        with self.captureOnCommitCallbacks(execute=True):
            try:
                with transaction.atomic():
                    post = Post.objects.create(title="Draft", body="never saved")
                    count_words.delay_on_commit(post.pk)
                    raise RuntimeError("rolled back")
            except RuntimeError:
                pass

        self.assertEqual(eager_runner().submissions, [])
        self.assertFalse(Post.objects.exists())

    def test_a_task_called_directly_runs_here(self) -> None:
        post = Post.objects.create(title="Direct", body="a b c d")

        self.assertEqual(count_words(post.pk), 4)
        self.assertEqual(eager_runner().submissions, [])

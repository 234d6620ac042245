"""The blog's tasks: imported by FastWorker's app at start, run by the subworkers."""

from blog.models import Post
from fastworker.integration.django import db_task


@db_task
def count_words(post_id: int) -> int:
    """Count the post's words and store the count."""
    post = Post.objects.get(pk=post_id)
    post.word_count = len(post.body.split())
    post.save(update_fields=["word_count"])
    return post.word_count

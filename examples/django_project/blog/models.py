from django.db import models


class Post(models.Model):
    title = models.CharField(max_length=200)
    body = models.TextField()
    word_count = models.PositiveIntegerField(null=True)  # set by the count_words task

    def __str__(self) -> str:
        return self.title

from django.db import transaction
from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST

from blog.models import Post
from blog.tasks import count_words


@csrf_exempt  # an example API; a real one keeps CSRF or authenticates its callers
@require_POST
def create_post(request: HttpRequest) -> JsonResponse:
    with transaction.atomic():
        post = Post.objects.create(title=request.POST["title"], body=request.POST["body"])
        # Queued once the post is committed, so the task always finds it; never queued
        # if the transaction rolls back.
        count_words.delay_on_commit(post.pk)
    return JsonResponse({"id": post.pk}, status=201)


@require_GET
def show_post(request: HttpRequest, pk: int) -> JsonResponse:
    post = get_object_or_404(Post, pk=pk)
    return JsonResponse({"id": post.pk, "title": post.title, "word_count": post.word_count})

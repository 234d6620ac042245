from blog import views
from django.urls import path

urlpatterns = [
    path("posts/", views.create_post, name="create-post"),
    path("posts/<int:pk>/", views.show_post, name="show-post"),
]

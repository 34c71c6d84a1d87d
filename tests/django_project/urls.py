"""Django's own password reset view, as ``django.contrib.auth.urls`` routes it."""

from __future__ import annotations

from django.contrib.auth import views
from django.urls import path

urlpatterns = [
    path("password_reset/", views.PasswordResetView.as_view(), name="password_reset"),
    path("password_reset/done/", views.PasswordResetDoneView.as_view(), name="password_reset_done"),
    path(
        "reset/<uidb64>/<token>/",
        views.PasswordResetConfirmView.as_view(),
        name="password_reset_confirm",
    ),
]

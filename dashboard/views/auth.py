"""Login and logout pages (Django's auth views with our templates)."""

from __future__ import annotations

from django.contrib.auth import views as auth_views

login = auth_views.LoginView.as_view(
    template_name="dashboard/login.html", redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view()

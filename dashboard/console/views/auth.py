"""Login and logout pages (Django's auth views with our templates); a login
refused by the login throttle (dashboard/console/login_throttle.py, the backend every
login goes through) is answered 429 with its message."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import views as auth_views
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError
from django.http import HttpResponse
from django.urls import reverse, reverse_lazy

from ..login_throttle import refusal_of

#: The error code of a refused (throttled) login.
THROTTLED = "throttled"


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, saying so when the login throttle refused it."""

    def clean(self) -> dict[str, Any]:
        """Django's checks; a refusal as its own error (code THROTTLED)."""
        try:
            return super().clean()
        except ValidationError:
            refusal = refusal_of(self.request)
            if refusal is None:
                raise
            raise ValidationError(refusal.message, code=THROTTLED) from None


class LoginView(auth_views.LoginView):
    """The login page; a throttled attempt is answered 429."""

    form_class = ThrottledAuthenticationForm
    template_name = "dashboard/login.html"
    redirect_authenticated_user = True

    def get_default_redirect_url(self) -> str:
        """Without a `next`, the dashboard's overview (not a host's
        LOGIN_REDIRECT_URL)."""
        return reverse("bullpen:overview")

    def form_invalid(self, form: AuthenticationForm) -> HttpResponse:
        """The form again, with 429 when the attempt was throttled."""
        response = super().form_invalid(form)
        refusal = refusal_of(self.request)
        if refusal is not None and form.has_error(NON_FIELD_ERRORS, THROTTLED):
            response.status_code = 429
            response["Retry-After"] = str(refusal.wait_s)
        return response


login = LoginView.as_view()
logout = auth_views.LogoutView.as_view(next_page=reverse_lazy("bullpen:login"))

"""Bullpen's operator dashboard: the Django project and app."""

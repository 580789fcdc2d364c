"""Managed GPU worker processes (VRAM admission, supervision, health).

Built on `queues`; never imports Django. See docs in the README.
"""

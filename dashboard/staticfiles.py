"""The static files' storage: WhiteNoise's hashed, compressed files once
`collectstatic` has written them (and their manifest) to STATIC_ROOT; the
plain names before that, or where there is no STATIC_ROOT (a checkout, the
tests), which WhiteNoise serves from the app's own directory
(WHITENOISE_USE_FINDERS).

A page then never fails for want of a collect step, and after one it refers
to names that change with the content (`dashboard.0c1d2e3f4a5b.css`), served
with a year-long, immutable Cache-Control.
"""

from __future__ import annotations

from whitenoise.storage import CompressedManifestStaticFilesStorage


class StaticFilesStorage(CompressedManifestStaticFilesStorage):  # type: ignore[misc]
    """Hashed names from the manifest when `collectstatic` wrote one, else
    the plain names."""

    def read_manifest(self) -> str | None:
        """The manifest's text; None without STATIC_ROOT or before a collect."""
        if not self.location:
            return None
        manifest: str | None = super().read_manifest()
        return manifest

    def stored_name(self, name: str) -> str:
        """The hashed name of `name`, or `name` itself while nothing is collected."""
        if not self.hashed_files:
            return name
        stored: str = super().stored_name(name)
        return stored

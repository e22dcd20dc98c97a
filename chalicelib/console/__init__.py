"""The web console's files, as the API serves them (assets.py)."""
from chalicelib.console.assets import CONTENT_TYPES, INDEX, SECURITY_HEADERS, asset, assets_dir, page, settings

__all__ = ["CONTENT_TYPES", "INDEX", "SECURITY_HEADERS", "assets_dir", "asset", "page", "settings"]

"""API keys: issuing them, and turning a presented key into the tenant it names."""
from chalicelib.auth.keys import Principal, authenticate, bearer_token, issue_key

__all__ = ["Principal", "authenticate", "bearer_token", "issue_key"]

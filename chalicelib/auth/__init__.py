"""Who is calling (API keys), what they may do (access), and how often (throttle)."""
from chalicelib.auth.keys import Principal, authenticate, bearer_token, issue_key

__all__ = ["Principal", "authenticate", "bearer_token", "issue_key"]

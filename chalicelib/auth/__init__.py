"""Who is calling (API keys), what they may do (access), and how often (throttle)."""
from chalicelib.auth.keys import authenticate, bearer_token, issue_key
from chalicelib.auth.principal import Principal

__all__ = ["Principal", "authenticate", "bearer_token", "issue_key"]

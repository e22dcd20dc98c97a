"""Who is calling: what a presented key resolves to, and what every service receives."""
from dataclasses import dataclass
from typing import Optional


@dataclass(frozen=True)
class Principal:
    """A user in an organisation, with a role there, through a key."""
    user_id: str
    org_id: str
    role: str = "viewer"  # admin | editor | viewer (users.role)
    key_id: Optional[str] = None
    rate_per_second: Optional[int] = None  # the key's own rate; None is the deployment's

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"

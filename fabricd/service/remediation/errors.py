"""What a request of people to remediation or maintenance can be refused with (the API's 4xx, the CLI's exit 2)."""

from __future__ import annotations

from topology.errors import FabricdError

from .context import StandbyError as StandbyError


class ActionError(FabricdError):
    """An approve/resolve request that cannot be carried out now (the action is in the wrong state)."""


class UnknownIdError(ActionError):
    """No action or ticket has that id."""

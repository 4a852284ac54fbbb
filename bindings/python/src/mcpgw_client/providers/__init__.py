"""Cloud sandboxes as backends, through each provider's own SDK (installed by the caller; none
is a dependency of this package):

- :func:`e2b` -- an E2B ``AsyncSandbox`` or ``Sandbox`` (PyPI ``e2b``);
- :func:`opensandbox` -- an OpenSandbox ``Sandbox`` (PyPI ``opensandbox``);
- :func:`daytona` -- a Daytona ``AsyncSandbox`` (PyPI ``daytona``).

Each runs one-shot commands through the SDK's command API, the session channel through its
streaming process API, a command's stdin through its file API, and hands what the SDK raises to
the library, whose rules for that provider tell the sandbox's failures from the command's.
"""

from .daytona import daytona
from .e2b import e2b
from .opensandbox import opensandbox

__all__ = ["daytona", "e2b", "opensandbox"]

"""emco-rs from Python.

Two ways in, one API (`Emco`):

    import emco
    with emco.Orchestrator.in_memory() as orch:          # no server: all in this process
        ...
    client = emco.Client("http://localhost:9015")          # an emco-server or EMCO over REST

Every method is a request of EMCO's REST API; errors raise the subclass of `EmcoError` for the
server's error kind.
"""

from typing import Any, Dict, List, Mapping, Optional, Union

from ._api import (
    ActionController,
    Client,
    Controller,
    ControllerServer,
    Orchestrator,
    PlacementController,
    Watch,
    controller_arguments,
    run_controller,
    serve_controller,
)
from ._base import DigRef, LogicalCloudRef, Principal, Target
from ._emco import Context, __version__
from ._errors import (
    AlreadyExists,
    Conflict,
    EmcoError,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from ._objects import (
    App,
    Cluster,
    ClusterProvider,
    CompositeApp,
    CompositeProfile,
    ControllerRegistration,
    DeploymentIntentGroup,
    Intent,
    KvPairs,
    LogicalCloud,
    Network,
    Project,
    Resource,
)
from ._status import AppStatus, ClusterStatus, DriftedField, ResourceStatus, Status
from ._workflows import HOOK_TYPES

Emco = Union[Client, Orchestrator]
"""Either way in: both have the same methods."""


def apply_file(target: Emco, path: str, values: Optional[Mapping[str, Any]] = None,
               command: str = "apply", wait: float = 0.0) -> List[Dict[str, Any]]:
    """Runs an emcoctl file against a client or an embedded orchestrator (see
    `Client.apply_file`)."""
    return target.apply_file(path, values=values, command=command, wait=wait)


__all__ = [
    "ActionController",
    "AlreadyExists",
    "App",
    "AppStatus",
    "Client",
    "Cluster",
    "ClusterProvider",
    "ClusterStatus",
    "CompositeApp",
    "CompositeProfile",
    "Conflict",
    "Context",
    "Controller",
    "ControllerRegistration",
    "ControllerServer",
    "DeploymentIntentGroup",
    "DigRef",
    "Emco",
    "EmcoError",
    "FailedPrecondition",
    "HOOK_TYPES",
    "Intent",
    "Internal",
    "InvalidArgument",
    "KvPairs",
    "LogicalCloud",
    "LogicalCloudRef",
    "Network",
    "NotFound",
    "Orchestrator",
    "PlacementController",
    "Principal",
    "Project",
    "Resource",
    "ResourceStatus",
    "DriftedField",
    "Status",
    "Target",
    "PermissionDenied",
    "Unauthenticated",
    "Unavailable",
    "Watch",
    "__version__",
    "apply_file",
    "controller_arguments",
    "run_controller",
    "serve_controller",
]

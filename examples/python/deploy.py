"""Deploys the project's example composite app (examples/charts: http-server and http-client) to
every cluster whose kubeconfig is in a directory, follows it to Ready, and removes it again.

    python examples/python/deploy.py /tmp/kc                   # orchestrator in this process
    python examples/python/deploy.py /tmp/kc --server http://127.0.0.1:9015

`kubesim serve --clusters 3 --kubeconfig-dir /tmp/kc` makes such a directory.
"""

import argparse
import sys
from pathlib import Path

import emco

EXAMPLES = Path(__file__).resolve().parents[1]
APPS = ("http-server", "http-client")


def deploy(target: emco.Emco, kubeconfigs: Path, keep: bool) -> emco.Status:
    clusters = sorted(p.stem for p in kubeconfigs.glob("*.kubeconfig"))
    if not clusters:
        raise SystemExit(f"no *.kubeconfig in {kubeconfigs}")
    target.create_cluster_provider("fleet")
    for name in clusters:
        target.create_cluster("fleet", name, kubeconfigs / f"{name}.kubeconfig",
                              labels=["edge"])

    target.create_project("demo")
    cloud = target.create_logical_cloud("demo", "admin", [("fleet", c) for c in clusters])
    target.instantiate(cloud)
    target.create_composite_app("demo", "web", "v1")
    target.create_composite_profile("demo", "web", "v1", "default")
    for app in APPS:
        target.create_app("demo", "web", "v1", app, EXAMPLES / "charts" / app)
        target.create_app_profile("demo", "web", "v1", "default", f"{app}-profile", app,
                                  EXAMPLES / "profiles" / "default")
    edge = [{"clusterProvider": "fleet", "clusterLabel": "edge"}]
    dig = target.create_deployment_intent_group(
        "demo", "web", "v1", "web-dig", composite_profile="default", logical_cloud="admin",
        placement={app: edge for app in APPS})
    target.approve(dig)
    target.instantiate(dig)

    final = target.wait(dig, timeout=180)
    print(final)
    if not keep:
        target.terminate(dig)
        gone = target.wait(dig, ready=False, timeout=180)
        print(f"{dig.name}: {gone.state}")
        target.terminate(cloud)
    return final


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kubeconfigs", type=Path, help="a directory of <cluster>.kubeconfig")
    parser.add_argument("--server", help="an emco-server's REST URL (default: embedded)")
    parser.add_argument("--keep", action="store_true", help="leave the deployment running")
    args = parser.parse_args()
    if args.server:
        with emco.Client(args.server) as client:
            status = deploy(client, args.kubeconfigs, args.keep)
    else:
        with emco.Orchestrator.in_memory() as orch:
            status = deploy(orch, args.kubeconfigs, args.keep)
    return 0 if status.ready else 1


if __name__ == "__main__":
    sys.exit(main())

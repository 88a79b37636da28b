"""An action controller in Python, served over EMCO's gRPC protocol so that an emco-server (or
EMCO) calls it: every Deployment of a group whose intents name it gets the label
`owner: <intent name>`.

    python examples/python/controller.py --server http://127.0.0.1:9015 \\
        --appcontext http://127.0.0.1:9016 --port 9037

It registers itself as controller `owner` and serves until Ctrl-C. A deployment intent group
then names it in its intents: `{"genericPlacementIntent": ..., "owner": "team-a"}`.
"""

import emco


class Owner:
    """Labels the Deployments of every app on every cluster with the intent's name."""

    def update(self, ctx: emco.Context) -> None:
        for app in ctx.apps():
            for cluster in ctx.clusters(app):
                for name, obj in ctx.resources(app, cluster):
                    if obj.get("kind") == "Deployment":
                        labels = obj.setdefault("metadata", {}).setdefault("labels", {})
                        labels["owner"] = ctx.intent_name or "unknown"
                        ctx.put_resource(app, cluster, name, obj)


if __name__ == "__main__":
    emco.run_controller(Owner(), emco.controller_arguments(__doc__, "owner", 9037).parse_args())

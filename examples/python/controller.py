"""An action controller in Python, served over EMCO's gRPC protocol so that an emco-server (or
EMCO) calls it: every Deployment of a group whose intents name it gets the label
`owner: <intent name>`.

    python examples/python/controller.py --server http://127.0.0.1:9015 \\
        --appcontext http://127.0.0.1:9016 --port 9037

It registers itself as controller `owner` and serves until Ctrl-C. A deployment intent group
then names it in its intents: `{"genericPlacementIntent": ..., "owner": "team-a"}`.
"""

import argparse

import emco


class Owner:
    """Labels the Deployments of every app on every cluster with the intent's name."""

    def update(self, ctx: emco.Context) -> None:
        owner = ctx.intent_name or "unknown"
        for app in ctx.apps():
            for cluster in ctx.clusters(app):
                for name, obj in ctx.resources(app, cluster):
                    if obj.get("kind") != "Deployment":
                        continue
                    obj.setdefault("metadata", {}).setdefault("labels", {})["owner"] = owner
                    ctx.put_resource(app, cluster, name, obj)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", default="http://127.0.0.1:9015",
                        help="the emco-server to register with (REST)")
    parser.add_argument("--appcontext", default="http://127.0.0.1:9016",
                        help="its gRPC URL, where the AppContexts are")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=9037)
    parser.add_argument("--name", default="owner")
    args = parser.parse_args()

    with emco.ControllerServer(Owner(), args.name, appcontext=args.appcontext,
                               host=args.host, port=args.port) as server:
        client = emco.Client(args.server)
        try:
            client.register_controller(args.name, args.host, server.port)
        except emco.AlreadyExists:
            pass
        print(f"controller {args.name} serving on {args.host}:{server.port}", flush=True)
        try:
            server.wait()
        except KeyboardInterrupt:
            print("stopped", flush=True)


if __name__ == "__main__":
    main()

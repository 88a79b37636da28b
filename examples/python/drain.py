"""A placement controller in Python: keeps the apps of every group whose intents name it off
the clusters being drained (for maintenance), whatever the group's placement chose.

    python examples/python/drain.py --cluster kubesim+c2 --server http://127.0.0.1:9015 \\
        --appcontext http://127.0.0.1:9016 --port 9038

It registers itself as placement controller `drain` and serves until Ctrl-C. A deployment
intent group then names it in its intents: `{"genericPlacementIntent": ..., "drain": "on"}`.
An app left with no cluster fails the group's instantiate, saying so.
"""

import emco


class Drain:
    """Removes the drained clusters (`provider+cluster`) from every app's placement."""

    def __init__(self, drained: set[str]) -> None:
        self.drained = drained

    def filter_clusters(self, ctx: emco.Context) -> None:
        for app in ctx.apps():
            clusters = ctx.clusters(app)
            if all(c in self.drained for c in clusters):
                raise ValueError(f"every cluster of app {app} is drained: {clusters}")
            for cluster in self.drained.intersection(clusters):
                ctx.remove_cluster(app, cluster)


if __name__ == "__main__":
    parser = emco.controller_arguments(__doc__, "drain", 9038)
    parser.add_argument("--cluster", action="append", default=[], help="a cluster to drain")
    args = parser.parse_args()
    emco.run_controller(Drain(set(args.cluster)), args, type="placement")

#!/usr/bin/env python3
"""Writes kubesim's compact type table of the built-in kinds from a real API server's OpenAPI v3.

Usage: builtin_schema.py URL > tests/kubesim/data/builtin-schema.json
where URL reaches a kube-apiserver without authentication (for example `kubectl proxy`).
Only what kubesim checks is kept: each field's type, list types with their keys and key
defaults, and the kind each root definition serves.
"""
import json
import sys
import urllib.request


def fetch(base, path):
    with urllib.request.urlopen(base + path) as r:
        return json.load(r)


def main():
    base = sys.argv[1].rstrip("/")
    schemas = {}
    for path, entry in fetch(base, "/openapi/v3")["paths"].items():
        if path == "api/v1" or (path.startswith("apis/") and path.count("/") == 2):
            schemas.update(fetch(base, entry["serverRelativeURL"])["components"]["schemas"])

    def ref_of(s):
        if "$ref" in s:
            return s["$ref"].rsplit("/", 1)[1]
        for part in s.get("allOf", []):
            if "$ref" in part:
                return part["$ref"].rsplit("/", 1)[1]
        return None

    special = {
        "io.k8s.apimachinery.pkg.api.resource.Quantity": "quantity",
        "io.k8s.apimachinery.pkg.util.intstr.IntOrString": "int-or-string",
        "io.k8s.apimachinery.pkg.apis.meta.v1.Time": "time",
        "io.k8s.apimachinery.pkg.apis.meta.v1.MicroTime": "time",
    }

    def type_of(s):
        r = ref_of(s)
        if r is not None:
            if r in special:
                return special[r]
            d = schemas[r]
            if not d.get("properties"):
                return "any"
            return "@" + r
        t = s.get("type")
        if t == "string":
            return "bytes" if s.get("format") == "byte" else (
                "time" if s.get("format") == "date-time" else "string")
        if t == "boolean":
            return "bool"
        if t == "integer":
            return "int64" if s.get("format") == "int64" else "int32"
        if t == "number":
            return "float64"
        if t == "array":
            kind = s.get("x-kubernetes-list-type", "atomic")
            out = {"list": kind, "of": type_of(s["items"])}
            keys = s.get("x-kubernetes-list-map-keys")
            if kind == "map" and keys:
                out["keys"] = keys
                elem = schemas.get(ref_of(s["items"]) or "", {}).get("properties", {})
                defaults = {k: elem[k]["default"] for k in keys if "default" in elem.get(k, {})}
                if defaults:
                    out["defaults"] = defaults
            return out
        if t == "object":
            if "additionalProperties" in s:
                return {"map": type_of(s["additionalProperties"])}
            return "any"
        return "any"

    types, kinds = {}, {}
    for name, d in sorted(schemas.items()):
        if name in special or not d.get("properties"):
            continue
        types[name] = {f: type_of(s) for f, s in sorted(d["properties"].items())}
        for gvk in d.get("x-kubernetes-group-version-kind", []):
            if gvk["kind"].endswith("List") or gvk["kind"] in ("Status", "WatchEvent", "DeleteOptions"):
                continue
            gv = f"{gvk['group']}/{gvk['version']}" if gvk["group"] else gvk["version"]
            if schemas[name]["properties"].get("metadata"):
                kinds[f"{gv}/{gvk['kind']}"] = name
    json.dump({"kinds": kinds, "types": types}, sys.stdout, separators=(",", ":"), sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()

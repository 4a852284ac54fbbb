"""Requests generated from the gateway's own OpenAPI document (hypothesis-jsonschema).

usage: examples.py OPENAPI_JSON COUNT

Prints one JSON object a line, {"op", "method", "route", "query", "body"}: for each operation
with a request body or query parameters, COUNT requests that the document allows. Path
parameters are left for the caller to fill in (it knows which MCPs exist). The one rule of the
registration validator that no JSON Schema can state (enable_tools and disable_tools must not
name the same tool; the document says so in words) is applied here as a filter.
"""

import json
import sys
import warnings

from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema


def resolve(node, components):
    """The schema with every `#/components/schemas/X` reference replaced by X itself."""
    if isinstance(node, dict):
        ref = node.get("$ref")
        if ref is not None:
            target = resolve(components[ref.rsplit("/", 1)[1]], components)
            rest = {k: resolve(v, components) for k, v in node.items() if k != "$ref"}
            return {"allOf": [target, rest]} if rest else target
        # OpenAPI annotations JSON Schema does not know.
        return {
            k: resolve(v, components)
            for k, v in node.items()
            if k not in ("discriminator", "format", "example")
        }
    if isinstance(node, list):
        return [resolve(v, components) for v in node]
    return node


def query_strategy(params, components):
    """A strategy for the query parameters: a dict of name to value (strings or numbers)."""
    fields = {}
    for p in params:
        if p.get("in") != "query":
            continue
        schema = resolve(p.get("schema", {}), components)
        strategy = from_schema(schema)
        fields[p["name"]] = strategy if p.get("required") else st.none() | strategy
    return st.fixed_dictionaries(fields)


def disjoint_filters(body):
    enable, disable = body.get("enable_tools"), body.get("disable_tools")
    return not (isinstance(enable, list) and isinstance(disable, list) and set(enable) & set(disable))


def collect(strategy, count):
    out = []

    @seed(20261201)
    @settings(
        max_examples=count,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def run(example):
        out.append(example)

    run()
    return out


def main():
    doc = json.load(open(sys.argv[1]))
    count = int(sys.argv[2])
    components = doc["components"]["schemas"]
    warnings.simplefilter("ignore")
    for route, item in doc["paths"].items():
        for method, op in item.items():
            params = op.get("parameters", [])
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is None and not any(p.get("in") == "query" for p in params):
                continue
            body_strategy = (
                from_schema(resolve(body["schema"], components)).filter(
                    lambda b: not isinstance(b, dict) or disjoint_filters(b)
                )
                if body
                else st.none()
            )
            pairs = st.tuples(query_strategy(params, components), body_strategy)
            for query, body_value in collect(pairs, count):
                line = {
                    "op": f"{method.upper()} {route}",
                    "method": method.upper(),
                    "route": route,
                    "query": {k: v for k, v in query.items() if v is not None},
                    "body": body_value,
                }
                print(json.dumps(line))


if __name__ == "__main__":
    main()

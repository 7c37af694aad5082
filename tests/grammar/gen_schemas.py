#!/usr/bin/env python3
"""Writes COUNT seeded random JSON Schemas into OUT_DIR (gen-0000.json, ...).

Every keyword the converter serves appears, alone and nested: type (and lists
of types), properties/required/additionalProperties (absent, false, true, a
schema), items/prefixItems/minItems/maxItems/uniqueItems, enum/const,
minLength/maxLength, pattern (the served regex subset), format, integer and
number bounds (inclusive and exclusive), anyOf, oneOf (disjoint branches),
allOf (object parts), $ref into $defs/definitions (recursive ones too) and
annotations. The same seed writes the same files.

usage: gen_schemas.py [--seed N] [--count N] OUT_DIR
"""
import argparse
import json
import os
import random

PATTERNS = [r"^[a-z]+$", r"^\d{3}-\d{4}$", r"^(foo|bar)+$", r"[A-Z]", r"^a.c$",
            r"^\w+@\w+\.com$", r"^[^\s]{2,5}$", r"^(?:ab)*c?$", r"x$", r"^[-+]?\d+(\.\d+)?$",
            r'^"q"$', r"^\\$", r"^[^a-z]$", r"^#[0-9a-fA-F]{6}$", r"^(a|b|)z$", r"^\S+\s\S+$",
            r"^[\u00e9-\u00ff]{1,3}$", r"^.{0,4}$", r"^[A-Z]{2}\d{2}[A-Z0-9]{4,8}$", r"^v\d+\.\d+$"]
FORMATS = ["date", "time", "date-time", "uuid", "email"]
WORDS = ["id", "name", "value", "items", "tags", "kind", "next", "count", "ok", "meta", "a b",
         "é", "root", "string", "x-y", "\"q\""]
ANNOTATIONS = {"title": "T", "description": "d", "examples": [1], "default": None,
               "$comment": "c"}


class Gen:
    def __init__(self, rng):
        self.r = rng
        self.defs = {}

    def leaf(self):
        r = self.r
        k = r.choice(["string", "strlen", "pattern", "format", "integer", "intrange", "number",
                      "numrange", "boolean", "null", "enum", "const"])
        if k == "string":
            return {"type": "string"}
        if k == "strlen":
            lo = r.randint(0, 5)
            return {"type": "string", "minLength": lo, "maxLength": lo + r.randint(0, 6)}
        if k == "pattern":
            return {"type": "string", "pattern": r.choice(PATTERNS)}
        if k == "format":
            return {"type": "string", "format": r.choice(FORMATS)}
        if k == "integer":
            return {"type": "integer"}
        if k == "intrange":
            return self.bounds("integer", r.randint(-10**6, 10**6))
        if k == "number":
            return {"type": "number"}
        if k == "numrange":
            return self.bounds("number", r.randint(-1000, 1000))
        if k in ("boolean", "null"):
            return {"type": k}
        vals = [r.choice(["a", "b c", "é", 1, 2.5, -3, True, None, [1], {"k": "v"}])
                for _ in range(r.randint(1, 4))]
        if k == "enum":
            return {"enum": vals}
        return {"const": vals[0]}

    def bounds(self, t, base):
        r = self.r
        s = {"type": t}
        for key in r.sample(["minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"],
                            r.randint(1, 2)):
            s[key] = base if "in" in key.lower() and "max" not in key.lower() \
                else base + r.randint(2, 10**r.randint(1, 6))
        return s

    def obj(self, depth):
        r = self.r
        names = r.sample(WORDS, r.randint(0, 5))
        s = {"type": "object", "properties": {n: self.any(depth + 1) for n in names}}
        if names:
            s["required"] = r.sample(names, r.randint(0, len(names)))
        ap = r.choice(["absent", "absent", False, True, "schema"])
        if ap == "schema":
            s["additionalProperties"] = self.leaf()
        elif ap != "absent":
            s["additionalProperties"] = ap
        return s

    def arr(self, depth):
        r = self.r
        k = r.choice(["items", "items", "prefix", "unique"])
        if k == "prefix":
            n = r.randint(1, 3)
            s = {"type": "array", "prefixItems": [self.any(depth + 1) for _ in range(n)]}
            if r.random() < 0.5:
                s["items"] = r.choice([False, self.leaf()])
            return s
        s = {"type": "array", "items": self.any(depth + 1)}
        lo = r.randint(0, 2)
        if r.random() < 0.6:
            s["minItems"] = lo
        if r.random() < 0.6:
            s["maxItems"] = lo + r.randint(0, 4)
        if k == "unique":
            s["uniqueItems"] = True
            s.pop("minItems", None)
        return s

    def combo(self, depth):
        r = self.r
        k = r.choice(["anyOf", "oneOf", "allOf", "types", "ref", "recursive"])
        if k == "anyOf":
            return {"anyOf": [self.any(depth + 1) for _ in range(r.randint(1, 3))]}
        if k == "oneOf":  # branches of different types: disjoint
            types = r.sample(["string", "boolean", "null", "array", "object"], r.randint(2, 3))
            return {"oneOf": [{"type": t} for t in types]}
        if k == "allOf":
            a, b = self.obj(depth + 1), self.obj(depth + 1)
            a.pop("additionalProperties", None)
            b.pop("additionalProperties", None)
            b.pop("type")
            return {"allOf": [a, b]}
        if k == "types":
            return {"type": r.sample(["string", "integer", "boolean", "null"], 2)}
        name = "d%d" % len(self.defs)
        if k == "ref":
            self.defs[name] = self.any(depth + 1)
            return {"$ref": "#/$defs/" + name}
        self.defs[name] = {"type": "object", "properties": {
            "v": {"type": "integer"}, "kids": {"type": "array", "maxItems": 2,
                                               "items": {"$ref": "#/$defs/" + name}}},
            "required": ["v"]}
        return {"$ref": "#/$defs/" + name}

    def any(self, depth=0):
        r = self.r
        roll = r.random()
        if depth >= 3 or roll < 0.45:
            s = self.leaf()
        elif roll < 0.65:
            s = self.obj(depth)
        elif roll < 0.8:
            s = self.arr(depth)
        else:
            s = self.combo(depth)
        if r.random() < 0.1:
            s.update(r.sample(sorted(ANNOTATIONS.items()), 1))
        return s


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=240)
    ap.add_argument("out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rng = random.Random(a.seed)
    for i in range(a.count):
        g = Gen(rng)
        s = g.obj(0) if i % 2 == 0 else g.any(0)
        if g.defs:
            s["$defs"] = g.defs
        if i % 7 == 0:
            s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
        with open(os.path.join(a.out, "gen-%04d.json" % i), "w") as f:
            json.dump(s, f, indent=1)


if __name__ == "__main__":
    main()

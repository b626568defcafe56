#!/usr/bin/env python3
"""Validate pScheduler throughput results against throughput-result.schema.json (beside this
file): with Python's jsonschema module where it is importable (Debian: python3-jsonschema),
else with the small checker below, which knows the part of JSON Schema that schema uses
(type, properties, additionalProperties, required, items, minimum, $ref to #/definitions/).

    validate_result.py [--structural] RESULT.json...

Prints one line per file naming the validator; exits 1 at the first invalid result.
"""

import json
import os
import sys

SCHEMA_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "throughput-result.schema.json")

_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}

_KNOWN = {"$schema", "$comment", "title", "description", "definitions", "type", "properties",
          "additionalProperties", "required", "items", "minimum", "$ref"}


def structural_errors(value, schema, root, path=""):
    """The ways `value` breaks `schema` (the subset above); refuses schemas beyond it."""
    unknown = set(schema) - _KNOWN
    if unknown:
        raise ValueError("the structural checker does not know %s (at %s)" % (sorted(unknown), path))
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/definitions/"):
            raise ValueError("the structural checker resolves #/definitions/ only, not %s" % ref)
        return structural_errors(value, root["definitions"][ref[len("#/definitions/"):]], root, path)
    errors = []
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_TYPES[t](value) for t in types):
            return ["%s: %s is not of type %s" % (path or "/", _short(value), " or ".join(types))]
    if "minimum" in schema and _TYPES["number"](value) and value < schema["minimum"]:
        errors.append("%s: %r is less than %r" % (path or "/", value, schema["minimum"]))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: %r is a required property" % (path or "/", key))
        for key, item in value.items():
            if key in properties:
                errors.extend(structural_errors(item, properties[key], root, path + "/" + key))
            elif schema.get("additionalProperties", True) is False:
                errors.append("%s: additional property %r is not allowed" % (path or "/", key))
    if isinstance(value, list) and "items" in schema:
        for index, item in enumerate(value):
            errors.extend(structural_errors(item, schema["items"], root, "%s/%d" % (path, index)))
    return errors


def _short(value):
    text = json.dumps(value)
    return text if len(text) < 60 else text[:57] + "..."


def validate(result, schema, structural=False):
    """(validator name, errors)."""
    if not structural:
        try:
            import jsonschema
        except ImportError:
            jsonschema = None
        if jsonschema is not None:
            validator = jsonschema.Draft7Validator(schema)
            errors = ["/%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
                      for e in validator.iter_errors(result)]
            try:
                from importlib.metadata import version
                name = "jsonschema %s" % version("jsonschema")
            except Exception:  # Python < 3.8, or no metadata
                name = "jsonschema"
            return name, errors
    return "structural checker", structural_errors(result, schema, schema)


def main(argv):
    structural = "--structural" in argv
    paths = [a for a in argv if a != "--structural"]
    if not paths:
        sys.stderr.write(__doc__)
        return 2
    with open(SCHEMA_PATH) as handle:
        schema = json.load(handle)
    for path in paths:
        with open(path) as handle:
            result = json.load(handle)
        name, errors = validate(result, schema, structural)
        if errors:
            print("%s: INVALID against the throughput result schema (%s):" % (path, name))
            for error in errors[:20]:
                print("  " + error)
            return 1
        print("%s: valid against the throughput result schema (%s)" % (path, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

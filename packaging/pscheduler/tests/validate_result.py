#!/usr/bin/env python3
"""Validate pScheduler results against the vendored result schemas beside this file
(throughput-result.schema.json, rtt-result.schema.json,
latency-result.schema.json): with Python's jsonschema module where
it is importable (Debian: python3-jsonschema; with its draft 7 format checker, as pScheduler
validates), else with the small checker below, which knows the part of JSON Schema those
schemas use (type, properties, patternProperties, additionalProperties, required, items, minimum, maximum, enum,
pattern, format ipv4/ipv6, oneOf, $ref to #/definitions/).

    validate_result.py [--structural] [--test throughput|rtt|latency] RESULT.json...

Prints one line per file naming the validator; exits 1 at the first invalid result.
"""

import ipaddress
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = {
    "throughput": os.path.join(HERE, "throughput-result.schema.json"),
    "rtt": os.path.join(HERE, "rtt-result.schema.json"),
    "latency": os.path.join(HERE, "latency-result.schema.json"),
}
SCHEMA_PATH = SCHEMAS["throughput"]

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
          "patternProperties", "additionalProperties", "required", "items", "minimum",
          "maximum", "enum", "pattern", "format", "oneOf", "$ref"}


def _is_address(value, version):
    try:
        return ipaddress.ip_address(value).version == version
    except ValueError:
        return False


_FORMATS = {
    "ipv4": lambda v: _is_address(v, 4) and "%" not in v,
    "ipv6": lambda v: _is_address(v, 6),
}


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
    if "oneOf" in schema:
        matched = [i for i, option in enumerate(schema["oneOf"])
                   if not structural_errors(value, option, root, path)]
        if len(matched) != 1:
            errors.append("%s: %s matches %d of oneOf's schemas, not exactly one"
                          % (path or "/", _short(value), len(matched)))
    if "enum" in schema and value not in schema["enum"]:
        errors.append("%s: %s is not one of %s" % (path or "/", _short(value), schema["enum"]))
    if "minimum" in schema and _TYPES["number"](value) and value < schema["minimum"]:
        errors.append("%s: %r is less than %r" % (path or "/", value, schema["minimum"]))
    if "maximum" in schema and _TYPES["number"](value) and value > schema["maximum"]:
        errors.append("%s: %r is more than %r" % (path or "/", value, schema["maximum"]))
    if "pattern" in schema and isinstance(value, str) \
            and re.search(schema["pattern"], value) is None:
        errors.append("%s: %s does not match %s" % (path or "/", _short(value), schema["pattern"]))
    if "format" in schema and isinstance(value, str):
        check = _FORMATS.get(schema["format"])
        if check is None:
            raise ValueError("the structural checker does not know format %s" % schema["format"])
        if not check(value):
            errors.append("%s: %s is not an %s" % (path or "/", _short(value), schema["format"]))
    if isinstance(value, dict):
        properties = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                errors.append("%s: %r is a required property" % (path or "/", key))
        patterns = schema.get("patternProperties", {})
        for key, item in value.items():
            matching = [p for p in patterns if re.search(p, key)]
            for pattern in matching:
                errors.extend(structural_errors(item, patterns[pattern], root, path + "/" + key))
            if key in properties:
                errors.extend(structural_errors(item, properties[key], root, path + "/" + key))
            elif not matching and schema.get("additionalProperties", True) is False:
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
            validator = jsonschema.Draft7Validator(
                schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER
                if hasattr(jsonschema.Draft7Validator, "FORMAT_CHECKER")
                else jsonschema.draft7_format_checker)
            errors = ["/%s: %s" % ("/".join(str(p) for p in e.absolute_path), e.message)
                      for e in validator.iter_errors(result)]
            try:
                from importlib.metadata import version
                name = "jsonschema %s" % version("jsonschema")
            except Exception:  # Python < 3.8, or no metadata
                name = "jsonschema"
            return name, errors
    return "structural checker", structural_errors(result, schema, schema)


def load_schema(test="throughput"):
    with open(SCHEMAS[test]) as handle:
        return json.load(handle)


def main(argv):
    args = list(argv)
    structural = "--structural" in args
    args = [a for a in args if a != "--structural"]
    test = "throughput"
    if "--test" in args:
        at = args.index("--test")
        test = args[at + 1] if at + 1 < len(args) else ""
        del args[at:at + 2]
    if not args or test not in SCHEMAS:
        sys.stderr.write(__doc__)
        return 2
    schema = load_schema(test)
    for path in args:
        with open(path) as handle:
            result = json.load(handle)
        name, errors = validate(result, schema, structural)
        if errors:
            print("%s: INVALID against the %s result schema (%s):" % (path, test, name))
            for error in errors[:20]:
                print("  " + error)
            return 1
        print("%s: valid against the %s result schema (%s)" % (path, test, name))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

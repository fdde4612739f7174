#!/usr/bin/python3
"""Validates a twister hardware map against twister's schema, as twister does.

    twister_hwmap_check.py SCHEMA MAP   exit 0 and print the map as JSON when
                                        it validates; exit 1 with pykwalify's
                                        errors otherwise

Twister loads hardware maps with yaml.safe_load and validates them with
pykwalify (scripts/pylib/twister/scl.py); this does the same, so a map that
passes here loads in twister.
"""
import json
import logging
import sys

import yaml
from pykwalify.core import Core
from pykwalify.errors import SchemaError


def main():
    schema_path, map_path = sys.argv[1], sys.argv[2]
    logging.disable(logging.CRITICAL)  # pykwalify logs every error it raises
    with open(schema_path) as f:
        schema = yaml.safe_load(f)
    with open(map_path) as f:
        data = yaml.safe_load(f)
    try:
        Core(source_data=data, schema_data=schema).validate(raise_exception=True)
    except SchemaError as e:
        print("schema error: %s" % e.msg, file=sys.stderr)
        return 1
    json.dump(data, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())

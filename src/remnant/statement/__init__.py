"""The conformance statement (K4-K7): schema, builder, example, validator, canonical JSON and DSSE signing."""

"""An example remnant plugin: one field metric, registered through the ``remnant.metrics`` entry point."""

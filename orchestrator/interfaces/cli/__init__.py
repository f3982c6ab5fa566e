"""The ``sqlgate`` command line, one module per command group (``main`` assembles them)."""

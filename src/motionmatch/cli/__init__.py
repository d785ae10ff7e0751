"""The ``motionmatch`` command line."""

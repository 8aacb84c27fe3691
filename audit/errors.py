"""The audit's bad-input error (also exported as audit.layout.LayoutError)."""


class LayoutError(Exception):
    """Bad input: a directory that is not a node's metadata log, a URI no file system reads.
    str() is one line."""

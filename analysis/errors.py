"""The one error the analysis raises on bad input; the CLI turns it into a one-line message."""


class TraceError(Exception):
    """A trace or option the analysis cannot use; the message says what is wrong and what to do."""

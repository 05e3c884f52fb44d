"""User-facing errors.

Every error that a user can cause (a bad file, a bad option, a mismatch between data and model) is raised as
:class:`LitebertError` with a message that names the file, line or field and says what was expected. The CLI
prints such errors as one line (``error: ...``) and exits with status 2, never with a traceback.
"""


class LitebertError(Exception):
    """An error caused by the user's input, with a message meant to be read by that user."""

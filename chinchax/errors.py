"""The one exception type for a user's mistake.

The CLI prints a `UserError` as a single line and exits with status 2; anything else is a bug
and keeps its traceback.
"""


class UserError(ValueError):
  """Bad input from the user: the message says what is wrong and what to do."""

"""One module a chapter: every number and table a chapter's prose quotes, computed and tested.

A chapter imports its own module (``from normlab.chapters import ch06``) and glues what that
module returns; no chapter computes a statistic or builds a table in its own cells. Each
module is presentation: it reads saved sets through :mod:`normlab.results`, verdicts through
:mod:`normlab.claims` and tables through :mod:`normlab.analysis`, and returns plain values.
"""

__all__: list[str] = []

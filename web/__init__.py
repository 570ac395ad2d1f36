"""``megasolve serve``: a web page and an HTTP API over the same commands as the CLI.

Optional: ``pip install 'megasolve[web]'`` (Starlette + uvicorn). Nothing outside this package
imports it except the ``serve`` command, lazily.
"""

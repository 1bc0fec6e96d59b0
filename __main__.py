"""``python -m bytewright``: the same as the ``bytewright`` command."""

from bytewright.cli.main import entry

entry()

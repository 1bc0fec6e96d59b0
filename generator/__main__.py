"""``python -m bytewright.generator`` regenerates ``generated/`` (same as ``bytewright generate``)."""

from bytewright.cli.main import main

raise SystemExit(main(["generate"]))

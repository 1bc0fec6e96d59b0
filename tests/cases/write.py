"""Write every fixture case to fixtures/<family>/<name>.hex (run after changing a case).

The same as ``bytewright fixtures write --project <package>``: families come from the
package's own project file, and existing fixture bytes never change without ``--bless``.

Usage: python tests/cases/write.py [--family NAME] [--bless] [--dry-run]
"""

from __future__ import annotations

import sys

from bytewright.cli.main import main
from bytewright.generator.project import PACKAGE_PROJECT_FILE


def run(argv: list[str]) -> int:
    return main(["fixtures", "write", "--project", str(PACKAGE_PROJECT_FILE), *argv])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

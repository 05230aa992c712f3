"""The `datavo` console script of the installed package: runs the CLI binary shipped in datavo_sdk/bin/."""

import os
import sys


def binary():
    """The path of the bundled `datavo` binary, or None when this installation has none (a build tree)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin", "datavo")
    return path if os.access(path, os.X_OK) else None


def main():
    path = binary()
    if path is None:
        sys.exit("datavo_sdk: this installation has no datavo binary (datavo_sdk/bin/datavo)")
    os.execv(path, [path] + sys.argv[1:])


if __name__ == "__main__":
    main()

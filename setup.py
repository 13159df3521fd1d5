"""Build hook: copy the top-level catalogs (models/, instances/) into the package, so wheels carry them.

The repository's ``models/`` and ``instances/`` stay the single source of truth; ``build_py`` copies them to
``roofline_opt/_data`` in the build tree only (never into the checkout), where ``roofline_opt.catalog`` finds them
in an installed package. MANIFEST.in puts the same folders (and ``examples/``) into the sdist.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

CATALOG_FOLDERS = ("models", "instances", "examples")


class BuildPyWithCatalog(build_py):
    """build_py that also copies the catalog folders into ``<build>/roofline_opt/_data``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        root = Path(__file__).resolve().parent
        target = Path(self.build_lib) / "roofline_opt" / "_data"
        for folder in CATALOG_FOLDERS:
            if (root / folder).is_dir():
                shutil.copytree(root / folder, target / folder, dirs_exist_ok=True)


setup(cmdclass={"build_py": BuildPyWithCatalog})

"""`pip install ./python` with no registry: the package builds with its own backend
(nothing to download, build isolation or not), installs, and the installed copy finds
libtileRT and runs a kernel. Skipped where pip is missing (python3-pip)."""
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

PYTHON_DIR = Path(__file__).resolve().parent.parent
ROOT = PYTHON_DIR.parent

CHECK = """
import numpy as np, tile, sys
assert tile.__file__.startswith(sys.argv[1]), tile.__file__
k = tile.load(sys.argv[2]).vector_add
a = np.arange(100, dtype=np.float32)
c = np.zeros(100, np.float32)
k(c, a, a, 100)
assert (c == 2 * a).all()
print(tile.library_path)
"""


def has_pip():
    return subprocess.run([sys.executable, "-m", "pip", "--version"],
                          capture_output=True).returncode == 0


@unittest.skipUnless(has_pip(), "pip is not installed (python3-pip)")
class PipInstall(unittest.TestCase):
    def install(self, target, *flags):
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-index", "--no-deps",
                            "--quiet", "--disable-pip-version-check", "--target", target,
                            *flags, str(PYTHON_DIR)], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)

    def run_check(self, target, env):
        r = subprocess.run([sys.executable, "-c", CHECK, target, str(ROOT / "examples" / "vector_add.tile")],
                           capture_output=True, text=True, cwd=target,
                           env=dict(env, PYTHONPATH=target))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        return r.stdout.strip()

    def test_install_and_run(self):
        for flags in ((), ("--no-build-isolation",)):
            with tempfile.TemporaryDirectory() as target:
                self.install(target, *flags)
                self.assertTrue((Path(target) / "tile" / "_paths.py").is_file())
                self.run_check(target, os.environ)

    def test_installed_copy_finds_the_build_tree(self):
        lib = os.environ.get("TILE_LIB")
        if not lib or not Path(lib).resolve().is_relative_to(ROOT.resolve()) or \
                not Path(lib).resolve().parent.parent.name.startswith("build"):
            self.skipTest("the library under test is not in a build tree of this checkout")
        with tempfile.TemporaryDirectory() as target:
            self.install(target)
            env = {k: v for k, v in os.environ.items() if k != "TILE_LIB"}
            found = self.run_check(target, env)
            self.assertTrue(found.endswith("/runtime/libtileRT.so"), found)


if __name__ == "__main__":
    unittest.main()

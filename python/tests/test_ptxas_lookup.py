"""How the package finds a ptxas for libtileRT (tile/_lib.py): the one in Triton's
wheel, found without importing Triton, is used only when TILE_PTXAS is unset and no CUDA
toolkit's ptxas is there."""
import os
import stat
import sys
import tempfile
import unittest
from pathlib import Path
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tile import _lib  # noqa: E402


class PtxasLookup(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        root = Path(self.tmp.name)
        pkg = root / "site" / "triton"
        (pkg / "backends" / "nvidia" / "bin").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('imported: the lookup must not import triton')\n")
        self.ptxas = pkg / "backends" / "nvidia" / "bin" / "ptxas"
        self.ptxas.write_text("#!/bin/sh\n")
        self.ptxas.chmod(self.ptxas.stat().st_mode | stat.S_IXUSR)
        self.site = str(root / "site")
        sys.path.insert(0, self.site)

    def tearDown(self):
        sys.path.remove(self.site)
        sys.modules.pop("triton", None)
        self.tmp.cleanup()

    def test_triton_ptxas_found_without_import(self):
        self.assertEqual(_lib._triton_ptxas(), str(self.ptxas))
        self.assertNotIn("triton", sys.modules)

    def test_not_executable_is_not_found(self):
        self.ptxas.chmod(0o644)
        self.assertIsNone(_lib._triton_ptxas())

    def test_toolkit_lookup_follows_cuda_home_and_path(self):
        empty = tempfile.mkdtemp(dir=self.tmp.name)
        with mock.patch.dict(os.environ, {"CUDA_HOME": empty, "CUDA_PATH": empty, "PATH": empty}):
            found = _lib._toolkit_ptxas()
            self.assertEqual(found, os.access("/usr/local/cuda/bin/ptxas", os.X_OK))
        bindir = Path(empty) / "bin"
        bindir.mkdir()
        (bindir / "ptxas").write_text("#!/bin/sh\n")
        (bindir / "ptxas").chmod(0o755)
        with mock.patch.dict(os.environ, {"CUDA_HOME": empty}):
            self.assertTrue(_lib._toolkit_ptxas())


if __name__ == "__main__":
    unittest.main()

"""A PEP 517 build backend for the tile package, in the standard library only.

It writes a pure-Python wheel of tile/ (and an editable one that points at it), plus
tile/_paths.py naming the source checkout the package was built from, so that an
installed package still finds libtileRT in that checkout's build trees (tile/_lib.py).
No registry is needed: pyproject.toml requires nothing."""
import base64
import hashlib
import os
import zipfile
from pathlib import Path

NAME, VERSION = "tile", "0.1.0"
HERE = Path(__file__).resolve().parent.parent          # python/
DIST = "%s-%s" % (NAME, VERSION)
TAG = "py3-none-any"

METADATA = """Metadata-Version: 2.1
Name: %s
Version: %s
Summary: Python bindings of libtileRT, the tile kernel runtime
Requires-Python: >=3.8
""" % (NAME, VERSION)
WHEEL = """Wheel-Version: 1.0
Generator: tile_build
Root-Is-Purelib: true
Tag: %s
""" % TAG


def _paths_module():
    root = HERE.parent
    return ('"""Written by the build backend: the checkout this package was built from."""\n'
            "SOURCE_ROOTS = [%r]\n" % str(root))


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(directory, files):
    path = Path(directory) / ("%s-%s.whl" % (DIST, TAG))
    files = dict(files)
    files["%s.dist-info/METADATA" % DIST] = METADATA.encode()
    files["%s.dist-info/WHEEL" % DIST] = WHEEL.encode()
    record = "%s.dist-info/RECORD" % DIST
    lines = [_record_line(n, d) for n, d in files.items()] + [record + ",,"]
    files[record] = ("\n".join(lines) + "\n").encode()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(zipfile.ZipInfo(name, (1980, 1, 1, 0, 0, 0)), data)
    return path.name


def _package_files():
    files = {}
    for f in sorted((HERE / "tile").glob("*.py")):
        if f.name != "_paths.py":
            files["tile/" + f.name] = f.read_bytes()
    files["tile/_paths.py"] = _paths_module().encode()
    return files


def get_requires_for_build_wheel(config_settings=None):
    return []


get_requires_for_build_editable = get_requires_for_build_wheel
get_requires_for_build_sdist = get_requires_for_build_wheel


def prepare_metadata_for_build_wheel(directory, config_settings=None):
    d = Path(directory) / ("%s.dist-info" % DIST)
    d.mkdir(parents=True, exist_ok=True)
    (d / "METADATA").write_text(METADATA)
    (d / "WHEEL").write_text(WHEEL)
    return d.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, _package_files())


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A .pth file that puts python/ on sys.path: edits take effect without reinstalling."""
    return _write_wheel(wheel_directory, {"tile_editable.pth": (str(HERE) + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    import tarfile
    name = "%s.tar.gz" % DIST
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz") as t:
        for rel in ["pyproject.toml", "_build/tile_build.py"] + sorted(
                "tile/" + f.name for f in (HERE / "tile").glob("*.py") if f.name != "_paths.py"):
            t.add(str(HERE / rel), arcname="%s/%s" % (DIST, rel))
        info = tarfile.TarInfo("%s/PKG-INFO" % DIST)
        data = METADATA.encode()
        info.size = len(data)
        import io
        t.addfile(info, io.BytesIO(data))
    return name

"""`pip install .` gives a working gapscope: the wheel holds every sub-package of the library (and
not the project's own study), installs into a fresh venv, and its CLI and library work from
another directory, even with a user's own `analysis/` and `harness/` packages first on the path."""

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
STATIC = ROOT / "tests" / "data" / "runs" / "static"


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's bin directory, the wheel's file names)."""
    tmp = tmp_path_factory.mktemp("wheel")
    # Built from a copy of what the wheel is made of: setuptools leaves build/ in the source
    # tree, and a stale one would be packed too.
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for name in ("analysis", "harness"):
        shutil.copytree(ROOT / name, source / name,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
         "-w", str(tmp / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    if built.returncode != 0 and "No module named setuptools" in built.stderr:
        pytest.skip("setuptools is not installed here: `make test` installs it")
    assert built.returncode == 0, built.stderr
    (wheel,) = (tmp / "dist").glob("gapscope-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True,
                   capture_output=True, timeout=300)
    return venv / "bin", zipfile.ZipFile(wheel).namelist()


def shadowed_env(tmp_path: Path) -> dict:
    """The dependencies from this interpreter's site-packages (not its gapscope), behind a
    user's own `analysis` and `harness` packages that fail on import."""
    for name in ("analysis", "harness"):
        (tmp_path / "mine" / name).mkdir(parents=True)
        (tmp_path / "mine" / name / "__init__.py").write_text(
            f"raise ImportError('the user\\'s own {name}')\n")
    deps = sysconfig.get_paths()["purelib"]
    return os.environ | {"PYTHONPATH": f"{tmp_path / 'mine'}{os.pathsep}{deps}"}


def test_the_wheel_holds_every_package_under_its_own_name(installed):
    _, names = installed
    packages = sorted({n.rsplit("/", 1)[0] for n in names if n.endswith("/__init__.py")})
    assert packages == ["gapscope/analysis", "gapscope/analysis/capture", "gapscope/analysis/cli",
                        "gapscope/analysis/measures", "gapscope/analysis/readers",
                        "gapscope/analysis/render", "gapscope/analysis/store", "gapscope/harness",
                        # package data: the hook's own package, imported as gapscope_hook
                        "gapscope/harness/inject/gapscope_hook"]
    assert "gapscope/harness/inject/sitecustomize.py" in names
    assert "gapscope/harness/inject/gapscope_hook/start.py" in names
    assert not [n for n in names if n.startswith(("analysis/", "harness/", "tests/"))]
    # the project's own study (study/) stays in the source tree: the library ships without it
    assert not [n for n in names if "study" in n.split("/")]


def test_the_installed_cli_analyses_a_capture_from_another_directory(installed, tmp_path):
    bin_dir, _ = installed
    done = subprocess.run([str(bin_dir / "gapscope"), "analyze", str(STATIC)], cwd=tmp_path,
                          env=shadowed_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0] == "static: device 0, 20 steps, nsys export schema 3.20.3"


def test_the_installed_library_analyses_a_capture(installed, tmp_path):
    bin_dir, _ = installed
    code = (f"from gapscope.analysis import analyze_trace; (r,) = analyze_trace({str(STATIC)!r}); "
            "print(len(r.steps), r.summary['steps_from'])")
    done = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path,
                          env=shadowed_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["20", "nvtx"]


def test_the_installed_gapscope_says_its_version_and_hints_at_what_a_wheel_has(installed,
                                                                                tmp_path):
    bin_dir, _ = installed
    run = tmp_path / "run"
    run.mkdir()
    (run / "capture.nsys-rep").write_bytes(b"NVIDIA Tegra Profiler Report")
    code = ("from gapscope.analysis import install, TraceError; print(install.version()); "
            "from gapscope.analysis.readers.runs import find_trace; import pathlib\n"
            f"try: find_trace(pathlib.Path({str(run)!r}))\n"
            "except TraceError as e: print(e)")
    done = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path,
                          env=shadowed_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    site = next(bin_dir.parent.glob("lib/python*/site-packages"))
    version, message = done.stdout.splitlines()
    assert version == f"gapscope 0.1.0 (installed in {site / 'gapscope'})"
    assert message == (f"{run}: holds capture.nsys-rep but no capture.sqlite: export it with the "
                       f"nsys that captured it, `nsys export --type sqlite -o "
                       f"{run / 'capture.sqlite'} {run / 'capture.nsys-rep'}`")

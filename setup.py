"""Builds datavo_sdk: the pure-Python package in python/datavo_sdk/ plus its extension module _datavo and the datavo
CLI, both built by CMake from this source tree (python/CMakeLists.txt, cli/), against Debian's libraries.

    python3 -m pip install --no-build-isolation .        # or: python3 -m pip wheel --no-build-isolation -w dist .

Needs the Debian packages of scripts/install-deps.sh (cmake, g++, pybind11-dev, python3-dev, libcurl4-openssl-dev,
libssl-dev, libyaml-cpp-dev, libexpat1-dev, libcpp-httplib-dev, nlohmann-json3-dev, libcli11-dev) and nothing from
PyPI. The version is the CMake project's (CMakeLists.txt), so a tree without .git (an sdist, an archive) builds
the same package.

Environment:
  DATAVO_CMAKE_BUILD_DIR   reuse this CMake build directory (e.g. build/, configured with -DDATAVO_PYTHON=ON)
                           instead of a fresh one under build/pip/
  DATAVO_JOBS              build parallelism (default: the number of cores)
  DATAVO_BUILD_PROGRESS=0  no progress line on the terminal (by default, under pip, which hides the build's output
                           without -v, the build's "[n/m]" goes to /dev/tty: python/build_progress.py)
"""
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(ROOT, "python"))
import build_progress  # noqa: E402  (python/build_progress.py: the build's progress on the terminal under pip)


def cmake_version():
    with open(os.path.join(ROOT, "CMakeLists.txt"), encoding="utf-8") as f:
        match = re.search(r"project\(\s*datavo\s+VERSION\s+([0-9][0-9.]*)", f.read())
    if not match:
        raise RuntimeError("CMakeLists.txt: no `project(datavo VERSION x.y.z)` to take the version from")
    return match.group(1)


class CMakeBuild(build_ext):
    """Builds the CMake targets datavo_python (the extension) and datavo (the CLI), and puts both in the package."""

    def build_extension(self, ext):
        build_dir = os.environ.get("DATAVO_CMAKE_BUILD_DIR") or os.path.join(ROOT, "build", "pip", "cmake")
        build_dir = os.path.abspath(build_dir)
        configure = ["cmake", "-S", ROOT, "-B", build_dir, "-DDATAVO_PYTHON=ON", "-DPython_EXECUTABLE=" + sys.executable]
        if not os.environ.get("DATAVO_CMAKE_BUILD_DIR"):
            configure += ["-DCMAKE_BUILD_TYPE=Release", "-DDATAVO_BUILD_TESTS=OFF", "-DDATAVO_BUILD_BENCH=OFF"]
        jobs = os.environ.get("DATAVO_JOBS") or str(os.cpu_count() or 1)
        subprocess.check_call(configure)
        build_progress.run(["cmake", "--build", build_dir, "-j", jobs, "--target", "datavo_python", "datavo"],
                           "datavo_sdk: building the extension and the CLI")

        module_dir = os.path.join(build_dir, "python", "datavo_sdk")
        built = [f for f in os.listdir(module_dir) if f.startswith("_datavo") and f.endswith(".so")]
        if len(built) != 1:
            raise RuntimeError("expected one _datavo*.so in %s, found %s" % (module_dir, built))
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copyfile(os.path.join(module_dir, built[0]), target)
        # The CLI ships inside the package (datavo_sdk/bin/datavo); the `datavo` console script runs it.
        bin_dir = os.path.join(os.path.dirname(target), "bin")
        os.makedirs(bin_dir, exist_ok=True)
        shutil.copy2(os.path.join(build_dir, "cli", "datavo"), os.path.join(bin_dir, "datavo"))


setup(
    version=cmake_version(),
    ext_modules=[Extension("datavo_sdk._datavo", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own scratch space stays out of the CMake build tree build/.
    options={"build": {"build_base": os.path.join("build", "pip")}},
)

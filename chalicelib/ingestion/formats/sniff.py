"""What a file is: sniffed from its bytes; the name only tells text formats apart.

A file is ingested when a format of the registry (formats/registry.py) recognises it, or it
is text (UTF-8, UTF-16 with a byte order mark, or 8-bit text read as Latin-1); anything
else is refused naming what it is, from a small table of magic numbers. refused_by_name and refused_by_content let the
upload API refuse up front, from the name and from the first bytes."""
import io
import re
import zipfile
from typing import Optional

from chalicelib.ingestion.errors import IngestionError
from chalicelib.ingestion.formats.registry import (BINARY, DEFAULT, FILE_NAMES, FORMATS, INTERPRETERS,
                                                   TEXT_EXTENSIONS, ZIP_MEMBERS)

# How many first bytes refused_by_content wants: tar's "ustar" sits at 257.
HEAD_BYTES = 4096

# (offset, magic, what it is). Checked in order; the registry's binary formats and ZIP are
# handled before.
_MAGIC = [
    (0, b"\x89PNG\r\n\x1a\n", "PNG image"), (0, b"\xff\xd8\xff", "JPEG image"),
    (0, b"GIF87a", "GIF image"), (0, b"GIF89a", "GIF image"), (0, b"BM", None),  # BMP: checked below
    (0, b"II*\x00", "TIFF image"), (0, b"MM\x00*", "TIFF image"), (0, b"\x00\x00\x01\x00", "ICO image"),
    (0, b"8BPS", "Photoshop image"), (4, b"ftypheic", "HEIC image"), (4, b"ftypavif", "AVIF image"),
    (4, b"ftypqt", "QuickTime video"), (4, b"ftyp", "MP4 video"),
    (0, b"\x1a\x45\xdf\xa3", "Matroska/WebM video"), (0, b"OggS", "Ogg audio"), (0, b"fLaC", "FLAC audio"),
    (0, b"ID3", "MP3 audio"), (0, b"\xff\xfb", "MP3 audio"), (0, b"\xff\xf3", "MP3 audio"),
    (0, b"MThd", "MIDI audio"), (0, b"\x1f\x8b", "gzip archive"), (0, b"BZh", "bzip2 archive"),
    (0, b"\xfd7zXZ\x00", "xz archive"), (0, b"(\xb5/\xfd", "zstd archive"), (0, b"\x04\x22\x4d\x18", "LZ4 archive"),
    (0, b"7z\xbc\xaf\x27\x1c", "7-Zip archive"), (0, b"Rar!\x1a\x07", "RAR archive"),
    (257, b"ustar", "tar archive"), (0, b"!<arch>\n", "ar archive (.deb, .a)"),
    (0, b"\xed\xab\xee\xdb", "RPM package"), (0, b"MSCF", "Microsoft cabinet archive"),
    (0, b"\x7fELF", "ELF executable"), (0, b"MZ", "Windows executable"),
    (0, b"\xcf\xfa\xed\xfe", "Mach-O executable"), (0, b"\xce\xfa\xed\xfe", "Mach-O executable"),
    (0, b"\xca\xfe\xba\xbe", "Java class or Mach-O universal binary"), (0, b"\x00asm", "WebAssembly module"),
    (0, b"dex\n", "Android DEX bytecode"), (0, b"SQLite format 3\x00", "SQLite database"),
    (0, b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "legacy Microsoft Office document (.doc, .xls, .ppt)"),
    (0, b"{\\rtf", None),  # RTF is 7-bit text: ingested as text
    (0, b"wOFF", "WOFF font"), (0, b"wOF2", "WOFF2 font"), (0, b"OTTO", "OpenType font"),
    (0, b"\x00\x01\x00\x00\x00", "TrueType font"), (0, b"PAR1", "Parquet file"),
    (0, b"\x93NUMPY", "NumPy array"), (0, b"\x89HDF\r\n\x1a\n", "HDF5 file"),
    (0, b"AT&TFORM", "DjVu document"), (0, b"%!PS", None), (0, b"\x80\x04\x95", "Python pickle"),
]

# Extensions that are never text: refused from the name alone, before any upload.
BINARY_EXTENSIONS = {
    **dict.fromkeys((".png",), "PNG image"), **dict.fromkeys((".jpg", ".jpeg", ".jfif"), "JPEG image"),
    ".gif": "GIF image", ".bmp": "BMP image", **dict.fromkeys((".tif", ".tiff"), "TIFF image"),
    ".webp": "WebP image", ".ico": "ICO image", ".heic": "HEIC image", ".avif": "AVIF image",
    ".psd": "Photoshop image", ".mp3": "MP3 audio", ".wav": "WAV audio", ".flac": "FLAC audio",
    ".ogg": "Ogg audio", ".oga": "Ogg audio", ".m4a": "MP4 audio", ".aac": "AAC audio", ".mid": "MIDI audio",
    ".mp4": "MP4 video", ".m4v": "MP4 video", ".mov": "QuickTime video", ".avi": "AVI video",
    ".mkv": "Matroska video", ".webm": "WebM video", ".zip": "ZIP archive", ".gz": "gzip archive",
    ".tgz": "gzip archive", ".bz2": "bzip2 archive", ".xz": "xz archive", ".zst": "zstd archive",
    ".7z": "7-Zip archive", ".rar": "RAR archive", ".tar": "tar archive", ".deb": "Debian package",
    ".rpm": "RPM package", ".jar": "Java archive (JAR)", ".war": "Java archive (WAR)", ".apk": "Android package",
    ".exe": "Windows executable", ".dll": "Windows library", ".msi": "Windows installer",
    ".so": "shared library", ".dylib": "shared library", ".o": "object file", ".a": "static library",
    ".class": "Java class", ".pyc": "Python bytecode", ".wasm": "WebAssembly module",
    ".sqlite": "SQLite database", ".db": "database file", ".doc": "legacy Word document (.doc)",
    ".xls": "legacy Excel workbook (.xls)", ".ppt": "legacy PowerPoint presentation (.ppt)",
    ".pptx": "PowerPoint presentation (PPTX)", ".odt": "OpenDocument text", ".ods": "OpenDocument spreadsheet",
    ".odp": "OpenDocument presentation", ".epub": "EPUB e-book", ".woff": "WOFF font", ".woff2": "WOFF2 font",
    ".ttf": "TrueType font", ".otf": "OpenType font", ".parquet": "Parquet file", ".npy": "NumPy array",
    ".pkl": "Python pickle", ".iso": "disk image", ".dmg": "disk image", ".bin": None,
}
BINARY_EXTENSIONS = {k: v for k, v in BINARY_EXTENSIONS.items() if v}

_ZIP_MEMBERS = [*ZIP_MEMBERS.items(), ("ppt/presentation.xml", "PowerPoint presentation (PPTX)"),
                ("AndroidManifest.xml", "Android package (APK)"), ("META-INF/MANIFEST.MF", "Java archive (JAR)")]
_OPENDOCUMENT = {b"application/vnd.oasis.opendocument.text": "OpenDocument text",
                 b"application/vnd.oasis.opendocument.spreadsheet": "OpenDocument spreadsheet",
                 b"application/vnd.oasis.opendocument.presentation": "OpenDocument presentation",
                 b"application/epub+zip": "EPUB e-book"}
# C0 controls that do not occur in text (tab, newlines, form feed and escape do).
_CONTROL = re.compile(rb"[\x00-\x08\x0b\x0e-\x1a\x1c-\x1f\x7f]")


def _extension(filename: str) -> str:
    name = filename.replace("\\", "/").rsplit("/", 1)[-1].lower()
    return "." + name.rsplit(".", 1)[-1] if "." in name.strip(".") else ""


def refused_by_name(filename: str) -> Optional[str]:
    """What a file is when its extension says it can never be text ("PNG image"), else None."""
    return BINARY_EXTENSIONS.get(_extension(filename))


def _magic(head: bytes) -> Optional[str]:
    for offset, magic, name in _MAGIC:
        if head[offset:offset + len(magic)] == magic:
            if magic == b"BM":
                return "BMP image" if len(head) > 14 and _CONTROL.search(head[:14]) else None
            if magic == b"MZ":
                return "Windows executable" if _CONTROL.search(head[2:64]) else None
            return name
    if head[:4] == b"RIFF":
        return {b"WEBP": "WebP image", b"WAVE": "WAV audio", b"AVI ": "AVI video"}.get(head[8:12], "RIFF media file")
    return None


def _is_text(sample: bytes) -> bool:
    if sample.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True  # UTF-16 with a byte order mark
    if b"\x00" in sample:
        return False
    # A few stray control bytes (a form feed's cousins in old text) are tolerated.
    return len(_CONTROL.findall(sample)) <= max(2, len(sample) // 1000)


def refused_by_content(head: bytes) -> Optional[str]:
    """What a file is, from its first bytes (HEAD_BYTES is enough), when it is a binary
    type that is not ingested; None when it may be (text, PDF, or a ZIP that may be a DOCX
    or an XLSX: only its directory, at the end, tells)."""
    if _magic_format(head) is not None or head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return None
    named = _magic(head)
    if named:
        return named
    return None if _is_text(head[:HEAD_BYTES]) else "binary data of an unknown type"


def _zip_type(data: bytes) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            for member, kind in _ZIP_MEMBERS:
                if member in names:
                    return kind
            if "mimetype" in names:
                return _OPENDOCUMENT.get(zf.read("mimetype").strip(), "ZIP archive")
    except (zipfile.BadZipFile, OSError, KeyError):
        pass
    return "ZIP archive"


def _magic_format(head: bytes) -> Optional[str]:
    """The content type of the registry's format whose magic the first bytes are, if any."""
    return next((f.content_types[0] for f in BINARY if f.magic is not None and f.magic(head)), None)


def _text_type(data: bytes, filename: str) -> str:
    found = next((f.content_types[0] for f in FORMATS if f.looks_like is not None and f.looks_like(data)), None)
    if found:
        return found
    base = filename.replace("\\", "/").rsplit("/", 1)[-1].lower()
    if base in FILE_NAMES:
        return FILE_NAMES[base]
    by_extension = TEXT_EXTENSIONS.get(_extension(filename))
    if by_extension:
        return by_extension
    if data.startswith(b"#!"):
        return INTERPRETERS.get(_interpreter(data[2:200].split(b"\n", 1)[0]), DEFAULT.content_types[0])
    return DEFAULT.content_types[0]


def _interpreter(shebang: bytes) -> str:
    """python from "/usr/bin/env python3", sh from "/bin/sh -e"."""
    words = shebang.decode("latin-1").split()
    if words and words[0].rsplit("/", 1)[-1] == "env":
        words = [w for w in words[1:] if not w.startswith("-")]
    return re.sub(r"[\d.]+$", "", words[0].rsplit("/", 1)[-1]) if words else ""


def sniff_type(data: bytes, filename: str) -> str:
    """The content type to read the file as; IngestionError UNSUPPORTED_TYPE naming what
    it is when it is not one that can be ingested."""
    found = _magic_format(data)
    if found:
        return found
    if data.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        kind = _zip_type(data)
        if kind in ZIP_MEMBERS.values():
            return kind
        raise IngestionError("UNSUPPORTED_TYPE", f"{filename}: {_article(kind)} {kind}, which is not a supported type")
    named = refused_by_content(data[:HEAD_BYTES])
    if named:
        raise IngestionError("UNSUPPORTED_TYPE", f"{filename}: {_article(named)} {named}, which is not a supported type")
    return _text_type(data, filename)


def _article(name: str) -> str:
    return "an" if name[0].lower() in "aeiou" else "a"

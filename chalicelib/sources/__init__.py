"""Where a knowledge base's documents come from besides its own bucket prefix (seed 003's
FilesAdapter: upload, download, list). A source is mirrored into the prefix by a sync
(sources/mirror.py): new and changed objects are copied in, and copies whose original is
gone are deleted; the bucket's events then run the pipeline as for any upload. Copies carry
the source's version of the object (SOURCE_VERSION metadata), so an unchanged object is not
copied again and a file put into the prefix by other means is never deleted by a mirror.

Two adapters: another S3-compatible bucket and prefix, and a folder on the machine that runs
the functions. A source reads only what its owner may read (SourceRules, checked when it is
written and again at every sync):
- a folder only below the roots the deployment lists (FOLDER_SOURCE_ROOTS; none on AWS),
  links resolved: a link out of them, a broken link or anything but a file is skipped;
- a bucket at a caller's endpointUrl only at public https addresses (on the local stack:
  only the emulator's own endpoint), read with the secret's credentials or anonymously,
  never with the functions' own;
- every name copied in is cleaned as a document path the API takes (no '..', nothing
  absolute), or skipped with its reason."""
from chalicelib.sources.adapters import FolderFiles, S3Files, adapter_for
from chalicelib.sources.config import (KINDS, SOURCE_VERSION, FilesAdapter, Skipped, SourceConfig, SourceObject,
                                       SourceRules, TooLargeObject, Unreadable, check_endpoint, check_secret_arn,
                                       parse_source)

__all__ = ["KINDS", "SOURCE_VERSION", "FilesAdapter", "FolderFiles", "S3Files", "Skipped", "SourceConfig",
           "SourceObject", "SourceRules", "TooLargeObject", "Unreadable", "adapter_for", "check_endpoint",
           "check_secret_arn", "parse_source"]
